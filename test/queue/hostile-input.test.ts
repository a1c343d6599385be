/**
 * Hostile input to the queue API: malformed percent-encoding and deeply nested JSON answer 400
 * (never 500), and hop-by-hop / framing headers given as `Upstash-Forward-*` / `Svc-Forward-*`
 * are not forwarded, so the message is still delivered; a header inside a batch (or batch
 * trigger) body that HTTP cannot carry (CR/LF, NUL, a character above U+00FF, a name that is not a
 * token) is refused at publish instead of failing every delivery attempt; a destination that
 * answers 200 with a body past the message limit and never ends it has taken the message (the
 * attempt ends at the limit, not at the timeout); delays, not-before times, flow-control numbers
 * and periods and workflow wait timeouts past their bounds are 400, never a deadline of `Infinity`
 * (shown as null) or past PostgreSQL's columns; a page of workflow logs of large runs stops at
 * `SVC_QUEUE_MAX_PAGE_BYTES` and its cursor continues; a batch of more than MAX_BATCH_ENTRIES
 * entries is 400 and stores nothing. Through @upstash/qstash and raw HTTP.
 */
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { MAX_BATCH_ENTRIES } from '../../src/queue/api/publish.js';
import { startQueue, startSink, waitFor, type Sink } from './helpers.js';

describe('hostile input', () => {
  let sink: Sink;
  let q: Awaited<ReturnType<typeof startQueue>>;
  before(async () => {
    sink = await startSink();
    q = await startQueue();
  });
  after(async () => {
    await q.close();
    await sink.close();
  });
  const raw = (method: string, p: string, headers: Record<string, string> = {}, body?: string) =>
    fetch(`${q.url}${p}`, { method, headers: { authorization: `Bearer ${q.token}`, ...headers }, body });

  test('a batch (or batch trigger) of more than MAX_BATCH_ENTRIES entries is 400 and stores nothing; MAX_BATCH_ENTRIES are taken', async () => {
    const entries = (n: number, tag: string) => Array.from({ length: n }, (_, i) => ({ url: `${sink.url}/${tag}/${i}`, body: { i }, delay: '1d' as const }));
    await assert.rejects(q.client.batchJSON(entries(MAX_BATCH_ENTRIES + 1, 'over')), new RegExp(`${MAX_BATCH_ENTRIES + 1} entries; at most ${MAX_BATCH_ENTRIES}`));
    // 200 000 minimal entries fit the default body limit (11 MiB): refused before any is planned
    const many = '[' + Array.from({ length: 200_000 }, () => `{"destination":"${sink.url}/m"}`).join(',') + ']';
    const res = await raw('POST', '/v2/batch', { 'content-type': 'application/json' }, many);
    assert.equal(res.status, 400);
    assert.match(((await res.json()) as { error: string }).error, /200000 entries; at most 1000/);
    const ok = await q.client.batchJSON(entries(MAX_BATCH_ENTRIES, 'at'));
    assert.equal(ok.length, MAX_BATCH_ENTRIES);
    const ids = new Set(ok.map((r) => (r as { messageId: string }).messageId));
    assert.equal(ids.size, MAX_BATCH_ENTRIES);
    assert.match((await q.client.messages.get([...ids][0])).url, /\/at\/\d+$/);
    // the refused batches left no message: the logs know the accepted entries only
    const logs = async (url: string) => ((await (await raw('GET', `/v2/logs?url=${encodeURIComponent(url)}`)).json()) as { logs: unknown[] }).logs.length;
    assert.equal(await logs(`${sink.url}/at/0`), 1);
    assert.equal(await logs(`${sink.url}/over/0`), 0);
    assert.equal(await logs(`${sink.url}/m`), 0);
    // the batch trigger of workflow runs has the same bound: no run is started
    const runs = JSON.stringify(Array.from({ length: MAX_BATCH_ENTRIES + 1 }, (_, i) => ({ destination: `${sink.url}/wf-over/${i}` })));
    const trig = await raw('POST', '/v2/batch/trigger', { 'content-type': 'application/json' }, runs);
    assert.equal(trig.status, 400);
    assert.match(((await trig.json()) as { error: string }).error, new RegExp(`${MAX_BATCH_ENTRIES + 1} entries; at most ${MAX_BATCH_ENTRIES}`));
    assert.equal(await logs(`${sink.url}/wf-over/0`), 0);
  });

  test('a malformed queue name is 400, through raw HTTP and the SDK', async () => {
    const res = await raw('POST', '/v2/enqueue/?%:9:/x', {}, 'b');
    assert.equal(res.status, 400, await res.clone().text());
    assert.match(((await res.json()) as { error: string }).error, /queue name/);
    const res2 = await raw('POST', `/v2/enqueue/a%E0%A4/${sink.url}/x`, {}, 'b');
    assert.equal(res2.status, 400);
    assert.match(((await res2.json()) as { error: string }).error, /not a valid url/, 'the queue area\'s {error} shape');
    for (const p of ['/v2/messages/%zz', '/v2/dlq/%E0%A4%A', '/v2/topics/%zz']) {
      const r = await raw('GET', p);
      assert.equal(r.status, 400, p);
      assert.equal(typeof ((await r.json()) as { error?: unknown }).error, 'string', p);
    }
    await assert.rejects(q.client.queue({ queueName: '?%:9:' }).enqueueJSON({ url: `${sink.url}/q`, body: {} }), /queue name/);
    await assert.rejects(q.client.queue({ queueName: 'bad%zz' }).enqueueJSON({ url: `${sink.url}/q`, body: {} }), /not a valid url/);
  });

  test('a destination query with a malformed escape is kept as sent, not a 500', async () => {
    const res = await raw('POST', `/v2/publish/${sink.url}/esc?%zz=1&a=%E0`, {}, 'b');
    assert.equal(res.status, 200, await res.clone().text());
    await waitFor('delivery with the raw query', () => sink.at('/esc?%zz=1&a=%E0')[0]);
  });

  test('a workflow wait body nested 20,000 levels deep is 400', async () => {
    const deep = '{"a":'.repeat(20_000) + '1' + '}'.repeat(20_000);
    const res = await raw('POST', '/v2/wait/ev1', { 'content-type': 'application/json', 'upstash-workflow-runid': 'wfr_none' }, `{"url":"${sink.url}/w","step":${deep}}`);
    assert.equal(res.status, 400);
    assert.match(((await res.json()) as { error: string }).error, /nests deeper than 64/);
  });

  test('hop-by-hop and framing headers given to forward are dropped and the message is delivered', async () => {
    const hostile = {
      'Content-Length': '3',
      'Transfer-Encoding': 'chunked',
      Connection: 'close',
      'Keep-Alive': 'timeout=1',
      Upgrade: 'websocket',
      Expect: '100-continue',
      Host: 'evil.example',
      TE: 'trailers',
      Trailer: 'X-Foo',
      'X-Kept': 'yes',
    };
    const body = 'the whole body';
    const res = await q.client.publish({ url: `${sink.url}/hop`, body, headers: hostile, retries: 0, callback: `${sink.url}/hop-cb` });
    const got = await waitFor('delivery', () => sink.at('/hop')[0], 30_000);
    assert.equal(got.body.toString(), body);
    assert.equal(got.headers['x-kept'], 'yes');
    assert.equal(got.headers['content-length'], String(Buffer.byteLength(body)));
    assert.equal(got.headers['transfer-encoding'], undefined);
    assert.equal(got.headers.upgrade, undefined);
    assert.equal(got.headers.expect, undefined);
    assert.equal(got.headers.te, undefined);
    assert.equal(got.headers.trailer, undefined);
    assert.notEqual(got.headers.host, 'evil.example');
    // the stored message does not carry them either
    await waitFor('callback', () => sink.at('/hop-cb')[0], 30_000);
    const logs = await q.client.logs({ filter: { messageId: res.messageId } } as never);
    const headers = (logs.logs[0] as { header?: Record<string, string[]> }).header ?? {};
    assert.ok(!Object.keys(headers).some((k) => /^(content-length|transfer-encoding|connection|host)$/i.test(k)), JSON.stringify(headers));

    // Svc-Forward- prefix and callback forward headers, raw HTTP
    const r2 = await raw('POST', `/v2/publish/${sink.url}/hop2`, {
      'Svc-Forward-Content-Length': '1',
      'Svc-Forward-Connection': 'upgrade',
      'Svc-Forward-Host': 'evil.example',
      'Upstash-Callback': `${sink.url}/hop2-cb`,
      'Upstash-Callback-Forward-Transfer-Encoding': 'chunked',
      'Upstash-Callback-Forward-Content-Length': '2',
      'Upstash-Retries': '0',
    }, 'abcdef');
    assert.equal(r2.status, 200);
    assert.equal((await waitFor('delivery 2', () => sink.at('/hop2')[0], 30_000)).body.toString(), 'abcdef');
    const cb = await waitFor('callback 2', () => sink.at('/hop2-cb')[0], 30_000);
    assert.equal(cb.headers['transfer-encoding'], undefined);
  });
  test('a batch or batch trigger entry header HTTP cannot carry is 400 naming it; obs-text and HTAB are delivered', async () => {
    const post = (p: string, entries: unknown) => raw('POST', p, { 'content-type': 'application/json' }, JSON.stringify(entries));
    const bad: [string, string][] = [
      ['Upstash-Forward-X', 'a\r\nInjected: 1'],
      ['Upstash-Forward-X', 'a\nb'],
      ['Upstash-Forward-X', 'a\u0000b'],
      ['Upstash-Forward-X', 'snow \u2603'],
      ['Content-Type', 'text/plain\r\nX-Evil: 1'],
      ['Upstash-Forward-X\r\nY', 'v'],
      ['Upstash-Forward-X Y', 'v'],
      ['', 'v'],
    ];
    for (const [name, value] of bad) {
      const res = await post('/v2/batch', [{ destination: `${sink.url}/ok`, body: 'x' }, { destination: `${sink.url}/bad`, headers: { [name]: value }, body: 'x' }]);
      assert.equal(res.status, 400, `${JSON.stringify(name)}: ${JSON.stringify(value)} -> ${await res.clone().text()}`);
      assert.match(((await res.json()) as { error: string }).error, /is not a valid HTTP header/);
      const trig = await post('/v2/batch/trigger', [{ destination: `${sink.url}/wf-bad`, headers: { [name]: value } }]);
      assert.equal(trig.status, 400, `trigger ${JSON.stringify(name)}: ${await trig.clone().text()}`);
      assert.match(((await trig.json()) as { error: string }).error, /is not a valid HTTP header/);
    }
    // nothing of a refused batch was enqueued
    const res = await post('/v2/batch', [{ destination: `${sink.url}/fine`, headers: { 'Upstash-Forward-X-Latin': 'caf\u00e9\tok', 'Upstash-Retries': '0' }, body: 'x' }]);
    assert.equal(res.status, 200, await res.clone().text());
    const got = await waitFor('delivery with an obs-text header', () => sink.at('/fine')[0], 30_000);
    assert.equal(got.headers['x-latin'], 'caf\u00e9\tok');
    assert.equal(sink.at('/ok').length + sink.at('/bad').length, 0);
  });
  test('a 200 whose body passes the message limit and never ends is a delivery, ended at the limit (not a timeout)', async () => {
    const chunk = Buffer.alloc(64 * 1024, 120);
    const endless = http.createServer((req, res) => {
      req.resume();
      res.writeHead(200, { 'content-type': 'text/plain' });
      // 2 MiB (twice SVC_QUEUE_MAX_MESSAGE_BYTES), then the answer stays open
      for (let i = 0; i < 32; i++) res.write(chunk);
    });
    await new Promise<void>((r) => endless.listen(0, '127.0.0.1', r));
    try {
      const url = `http://127.0.0.1:${(endless.address() as AddressInfo).port}/endless`;
      const res = await q.client.publish({ url, body: 'x', retries: 0, timeout: 15, callback: `${sink.url}/endless-cb` });
      const cb = await waitFor('the callback of the attempt', () => sink.at('/endless-cb')[0], 60_000);
      const payload = JSON.parse(cb.body.toString()) as { status: number; body: string };
      assert.equal(payload.status, 200);
      // the kept part of the answer: the first 1 MiB
      assert.equal(Buffer.from(payload.body, 'base64').length, 1024 * 1024);
      const logs = await q.client.logs({ filter: { messageId: res.messageId } } as never);
      const states = (logs.logs as { state: string }[]).map((l) => l.state);
      assert.ok(states.includes('DELIVERED'), states.join(','));
      assert.ok(!states.includes('FAILED') && !states.includes('ERROR'), states.join(','));
    } finally {
      endless.closeAllConnections();
      endless.close();
    }
  });

  test('delays, not-before, flow control and wait timeouts past their bounds are 400; at the bound they are taken', async () => {
    const publish = (headers: Record<string, string>) => raw('POST', `/v2/publish/${sink.url}/bounds`, headers, 'b');
    const huge = '9'.repeat(400);
    const refused: Record<string, string>[] = [
      { 'upstash-delay': `${huge}d` },
      { 'upstash-delay': '99999999999999999999' },
      { 'upstash-delay': '36501d' },
      { 'upstash-not-before': '9'.repeat(30) },
      { 'upstash-not-before': '253402300800' },
      { 'upstash-flow-control-key': 'fb', 'upstash-flow-control-value': `parallelism=1, period=${huge}d` },
      { 'upstash-flow-control-key': 'fb', 'upstash-flow-control-value': 'rate=1, period=2147483648' },
      { 'upstash-flow-control-key': 'fb', 'upstash-flow-control-value': 'rate=2147483648' },
      { 'upstash-flow-control-key': 'fb', 'upstash-flow-control-value': `parallelism=${'9'.repeat(30)}` },
    ];
    for (const h of refused) {
      const r = await publish(h);
      assert.equal(r.status, 400, `${JSON.stringify(h).slice(0, 80)}: ${await r.clone().text()}`);
      assert.match(((await r.json()) as { error: string }).error, /at most|from 1|to 2147483647/);
    }
    const taken: Record<string, string>[] = [
      { 'upstash-delay': '36500d' },
      { 'upstash-not-before': '253402300799' },
      { 'upstash-flow-control-key': 'fb', 'upstash-flow-control-value': 'parallelism=2147483647, rate=2147483647, period=2147483647' },
    ];
    for (const h of taken) {
      const r = await publish(h);
      assert.equal(r.status, 200, `${JSON.stringify(h)}: ${await r.clone().text()}`);
      const { messageId } = (await r.json()) as { messageId: string };
      const m = (await (await raw('GET', `/v2/messages/${messageId}`)).json()) as { notBefore: number };
      assert.ok(Number.isSafeInteger(m.notBefore), `notBefore ${m.notBefore}`);
    }
    const pin = await raw('POST', '/v2/flowControl/fb/pin?rate=2147483648');
    assert.equal(pin.status, 400, await pin.text());
    const pinPeriod = await raw('POST', `/v2/flowControl/fb/pin?rate=1&period=${huge}`);
    assert.equal(pinPeriod.status, 400, await pinPeriod.text());
    const keys = (await (await raw('GET', '/v2/flowControl')).json()) as { flowControlKey: string; ratePeriod: number }[];
    assert.equal(keys.find((k) => k.flowControlKey === 'fb')?.ratePeriod, 2147483647);

    // a workflow run held at its first step (its endpoint never answers) waits for events
    const hang = await startSink(() => ({ delayMs: 120_000 }));
    try {
      const t = await raw('POST', `/v2/trigger/${hang.url}/wf`, { 'content-type': 'application/json', 'upstash-workflow-runid': 'wfr_bounds' }, '{}');
      assert.equal(t.status, 200, await t.clone().text());
      const wait = (timeout: unknown) =>
        raw('POST', '/v2/wait/ev-bounds', { 'content-type': 'application/json', 'upstash-workflow-runid': 'wfr_bounds' }, JSON.stringify({ url: `${sink.url}/w`, timeout, step: { stepId: 1, stepName: 'w', stepType: 'Wait', concurrent: 1 } }));
      for (const timeout of ['99999999999999999999', `${huge}d`, '36501d', -1, '1e20']) {
        const r = await wait(timeout);
        assert.equal(r.status, 400, `${String(timeout).slice(0, 30)}: ${await r.clone().text()}`);
        assert.match(((await r.json()) as { error: string }).error, /invalid wait timeout/);
      }
      for (const timeout of ['36500d', 0, '1h']) {
        const r = await wait(timeout);
        assert.equal(r.status, 200, `${timeout}: ${await r.clone().text()}`);
      }
      const waiters = (await (await raw('GET', '/v2/waiters/ev-bounds')).json()) as { deadline: number }[];
      assert.ok(waiters.length >= 1);
      for (const w of waiters) assert.ok(Number.isSafeInteger(w.deadline) && w.deadline < 253402300800, `deadline ${w.deadline}`);
    } finally {
      await hang.close();
    }
  });

  test('a page of workflow logs stops at SVC_QUEUE_MAX_PAGE_BYTES (1 MiB) of runs; the cursor reaches every run once', async () => {
    const payload = JSON.stringify({ pad: 'p'.repeat(600 * 1024) });
    const url = `${sink.url}/big-runs`;
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) {
      const t = await raw('POST', `/v2/trigger/${url}`, { 'content-type': 'application/json' }, payload);
      assert.equal(t.status, 200, await t.clone().text());
      ids.push(((await t.json()) as { workflowRunId: string }).workflowRunId);
    }
    const seen: string[] = [];
    let cursor: string | undefined;
    let pages = 0;
    do {
      const r = await raw('GET', `/v2/workflows/logs?count=100&workflowUrl=${encodeURIComponent(url)}${cursor ? `&cursor=${cursor}` : ''}`);
      assert.equal(r.status, 200);
      const text = await r.text();
      const body = JSON.parse(text) as { runs: { workflowRunId: string }[]; cursor?: string };
      assert.ok(body.runs.length >= 1);
      // at most one run past the bound: 600 KB runs come two to a page, never three
      assert.ok(body.runs.length <= 2, `${body.runs.length} runs, ${text.length} bytes in one page`);
      seen.push(...body.runs.map((x) => x.workflowRunId));
      cursor = body.cursor;
      pages++;
    } while (cursor && pages < 10);
    assert.deepEqual([...seen].sort(), [...ids].sort());
  });

  test('one run of many large steps is cut to SVC_QUEUE_MAX_PAGE_BYTES in the logs (oldest steps left out, stepsOmitted); the SDK\'s step list is whole', async () => {
    // the run's endpoint never answers: the run stays active while its steps are stored
    const hang = await startSink(() => ({ delayMs: 120_000 }));
    const url = `${hang.url}/long-run`;
    const runId = 'wfr_long-run';
    try {
      const t = await raw('POST', `/v2/trigger/${url}`, { 'content-type': 'application/json', 'upstash-workflow-runid': runId }, '{"start":1}');
      assert.equal(t.status, 200, await t.clone().text());
      const steps = Array.from({ length: 12 }, (_, i) => ({
        destination: url,
        headers: { 'content-type': 'application/json', 'upstash-workflow-runid': runId, 'upstash-workflow-init': 'false' },
        body: JSON.stringify({ stepId: i + 1, stepName: `s${i + 1}`, stepType: 'Run', out: JSON.stringify('o'.repeat(200 * 1024)), concurrent: 1 }),
      }));
      for (const entry of steps) {
        const r = await raw('POST', '/v2/batch', { 'content-type': 'application/json' }, JSON.stringify([entry]));
        assert.equal(r.status, 200, await r.clone().text());
      }
      const r = await raw('GET', `/v2/workflows/logs?workflowRunId=${runId}`);
      assert.equal(r.status, 200);
      const text = await r.text();
      assert.ok(text.length < 1024 * 1024 + 256 * 1024, `${text.length} bytes for one run (1 MiB bound + one group)`);
      const [log] = (JSON.parse(text) as { runs: { steps: { type: string; steps: { stepId: number; stepName: string }[] }[]; stepsOmitted?: number }[] }).runs;
      assert.equal(log.steps[0].steps[0].stepName, 'init', 'the initial group stays');
      const kept = log.steps.slice(1).flatMap((g) => g.steps.map((s) => s.stepId));
      assert.ok((log.stepsOmitted ?? 0) >= 1, `stepsOmitted ${log.stepsOmitted}`);
      assert.equal(kept.length + log.stepsOmitted!, 12, 'every step is shown or counted');
      assert.deepEqual(kept, Array.from({ length: kept.length }, (_, i) => 13 - kept.length + i), 'the newest steps, in order');
      // the lazy-fetch list the SDK replays from is never cut
      const all = (await (await raw('GET', `/v2/workflows/runs/${runId}`)).json()) as unknown[];
      assert.equal(all.length, 13);
    } finally {
      await hang.close();
    }
  });
});
