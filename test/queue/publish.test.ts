/**
 * End-to-end publish and delivery with the official `@upstash/qstash` Client and Receiver against
 * a real svc and real local destinations: forwarded headers, signature, raw URL + query, binary
 * bodies, batch, messages get/cancel, dedup, key rotation, auth and malformed input.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { Receiver } from '@upstash/qstash';
import { loadConfig } from '../../src/config.js';
import { startQueue, startSink, waitFor, type Sink } from './helpers.js';

describe('queue publish and delivery (SDK end-to-end)', () => {
  let q: Awaited<ReturnType<typeof startQueue>>;
  let sink: Sink;
  before(async () => {
    q = await startQueue({ SVC_QUEUE_DEDUP_WINDOW_MS: '60000', SVC_QUEUE_MAX_MESSAGE_BYTES: '4096' });
    sink = await startSink();
  });
  after(async () => {
    await q.close();
    await sink.close();
  });

  test('delivery carries forwarded headers, delivery headers and a signature the Receiver accepts', async () => {
    const dest = `${sink.url}/hook//deep?x=1&y=two`;
    const res = await q.client.publishJSON({
      url: dest,
      body: { hello: 'world' },
      headers: { 'X-Custom': 'v1', Authorization: 'Bearer user-secret' },
      retries: 2,
      label: ['l-a', 'l-b'],
    });
    assert.match(res.messageId, /^msg_/);
    const r = await waitFor('delivery', () => sink.at('/hook//deep?x=1&y=two')[0]);
    assert.equal(r.method, 'POST');
    assert.equal(r.headers['x-custom'], 'v1');
    assert.equal(r.headers['authorization'], 'Bearer user-secret');
    assert.equal(r.headers['content-type'], 'application/json');
    assert.equal(r.headers['upstash-forward-x-custom'], undefined, 'prefix stripped');
    assert.equal(r.headers['upstash-message-id'], res.messageId);
    assert.equal(r.headers['svc-message-id'], res.messageId);
    assert.equal(r.headers['upstash-retried'], '0');
    assert.equal(r.headers['upstash-max-retries'], '2');
    assert.equal(r.headers['upstash-caller-ip'], '127.0.0.1');
    assert.equal(r.headers['upstash-region'], 'EU-CENTRAL-1');
    assert.equal(r.headers['user-agent'], 'Upstash-QStash');
    assert.equal(r.body.toString(), '{"hello":"world"}');
    const signature = r.headers['upstash-signature'] as string;
    assert.equal(r.headers['svc-signature'], signature);
    assert.equal(await q.receiver().verify({ signature, body: r.body.toString(), url: dest }), true);
    await assert.rejects(new Receiver({ currentSigningKey: 'sig_x', nextSigningKey: 'sig_y' }).verify({ signature, body: r.body.toString() }));
  });

  test('a forwarded header spelled like one svc sets is replaced by svc\'s, not sent twice', async () => {
    const dest = `${sink.url}/own-names`;
    const pub = await fetch(`${q.url}/v2/publish/${dest}`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${q.token}`,
        'content-type': 'text/plain',
        'Upstash-Forward-Upstash-Signature': 'forged',
        'Upstash-Forward-Svc-Message-Id': 'forged-id',
        'Upstash-Forward-User-Agent': 'forged-agent',
        'Upstash-Forward-X-Kept': 'kept',
      },
      body: 'own',
    });
    assert.equal(pub.status, 200);
    const { messageId } = (await pub.json()) as { messageId: string };
    const r = await waitFor('delivery', () => sink.at('/own-names')[0]);
    const signature = r.headers['upstash-signature'] as string;
    assert.equal(await q.receiver().verify({ signature, body: 'own', url: dest }), true);
    assert.equal(r.headers['svc-message-id'], messageId);
    assert.equal(r.headers['user-agent'], 'Upstash-QStash');
    assert.equal(r.headers['x-kept'], 'kept');
  });

  test('methods, delay and binary bodies; GET /v2/messages while pending; cancel', async () => {
    const bytes = Buffer.from([0, 1, 2, 250, 255]);
    const pub = await fetch(`${q.url}/v2/publish/${sink.url}/bin`, {
      method: 'POST',
      headers: { authorization: `Bearer ${q.token}`, 'content-type': 'application/octet-stream', 'Upstash-Method': 'PUT' },
      body: bytes,
    });
    assert.equal(pub.status, 200);
    const r = await waitFor('binary delivery', () => sink.at('/bin')[0]);
    assert.equal(r.method, 'PUT');
    assert.deepEqual(r.body, bytes);

    const delayed = await q.client.publish({ url: `${sink.url}/later`, body: 'b', delay: 60, callback: `${sink.url}/cb`, failureCallback: `${sink.url}/fcb`, retryDelay: '1000' });
    const m = await q.client.messages.get(delayed.messageId);
    assert.equal(m.messageId, delayed.messageId);
    assert.equal(m.url, `${sink.url}/later`);
    assert.ok(m.notBefore! >= Date.now() + 50_000, 'notBefore in ms');
    assert.equal(m.callback, `${sink.url}/cb`);
    assert.equal(m.failureCallback, `${sink.url}/fcb`);
    assert.equal(m.retryDelayExpression, '1000');
    assert.equal(m.body, 'b');
    const binMsg = await q.client.publish({ url: `${sink.url}/later2`, body: new Uint8Array([255, 254]) as unknown as string, delay: 60 });
    const raw = (await (await q.api(`/v2/messages/${binMsg.messageId}`)).json()) as Record<string, unknown>;
    assert.equal(raw.bodyBase64, Buffer.from([255, 254]).toString('base64'));
    assert.equal(raw.body, undefined);

    const cancelled = await q.client.messages.cancel(delayed.messageId);
    assert.deepEqual(cancelled, { cancelled: 1 });
    await assert.rejects(q.client.messages.get(delayed.messageId), /not found/);
    const again = await q.api(`/v2/messages/${delayed.messageId}`, { method: 'DELETE' });
    assert.equal(again.status, 404);
    assert.deepEqual(await again.json(), { error: `message ${delayed.messageId} not found` });

    // Bulk cancel: by ids (query), by filter, and the old JSON body form.
    const ids = await Promise.all([1, 2, 3].map((i) => q.client.publish({ url: `${sink.url}/bulk${i}`, body: 'x', delay: 60, label: 'bulk' })));
    assert.deepEqual(await q.client.messages.cancel([ids[0].messageId]), { cancelled: 1 });
    assert.deepEqual(await q.client.messages.cancel({ filter: { label: 'bulk' } } as never), { cancelled: 2 });
    const old = await q.client.publish({ url: `${sink.url}/old`, body: 'x', delay: 60 });
    const res = await q.api('/v2/messages', { method: 'DELETE', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ messageIds: [old.messageId, binMsg.messageId] }) });
    assert.deepEqual(await res.json(), { cancelled: 2 });
    const logs = await q.client.logs({ filter: { messageId: delayed.messageId } } as never);
    assert.deepEqual(logs.logs.map((l) => l.state), ['CANCELLED', 'CANCEL_REQUESTED', 'CREATED']);
  });

  test('redact fields: hidden in the API and logs, delivered as is', async () => {
    const res = await q.client.publish({
      url: `${sink.url}/redact`,
      body: 'secret-body',
      headers: { 'X-Api-Key': 'k-123', 'X-Plain': 'visible' },
      redact: { body: true, header: ['X-Api-Key'] },
      delay: 1,
    });
    const m = (await (await q.api(`/v2/messages/${res.messageId}`)).json()) as Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any
    assert.match(m.body, /^REDACTED:[0-9a-f]{64}$/);
    assert.match(m.header['X-Api-Key'][0], /^REDACTED:/);
    assert.deepEqual(m.header['X-Plain'], ['visible']);
    const r = await waitFor('redacted message delivered', () => sink.at('/redact')[0]);
    assert.equal(r.body.toString(), 'secret-body');
    assert.equal(r.headers['x-api-key'], 'k-123');
    const logs = await q.client.logs({ filter: { messageId: res.messageId } } as never);
    assert.ok(logs.logs.every((l) => Buffer.from(l.body ?? '', 'base64').toString().startsWith('REDACTED:')));
  });

  test('batch publishes several messages in one request', async () => {
    const res = await q.client.batchJSON([
      { url: `${sink.url}/b1`, body: { n: 1 } },
      { url: `${sink.url}/b2?k=v`, body: { n: 2 }, headers: { 'X-B': 'two' } },
    ]);
    assert.equal(res.length, 2);
    const b2 = await waitFor('batch delivery', () => sink.at('/b2?k=v')[0]);
    await waitFor('batch delivery 1', () => sink.at('/b1')[0]);
    assert.equal(b2.headers['x-b'], 'two');
    assert.equal(b2.body.toString(), '{"n":2}');
    assert.equal(b2.headers['upstash-message-id'], (res[1] as { messageId: string }).messageId);
  });

  test('deduplication by id and by content within the window', async () => {
    const a = await q.client.publish({ url: `${sink.url}/dd`, body: 'one', deduplicationId: 'dedup-1', delay: 60 });
    const raw = await fetch(`${q.url}/v2/publish/${sink.url}/dd`, {
      method: 'POST',
      headers: { authorization: `Bearer ${q.token}`, 'Upstash-Deduplication-Id': 'dedup-1' },
      body: 'two',
    });
    assert.equal(raw.status, 202);
    assert.deepEqual(await raw.json(), { messageId: a.messageId, url: `${sink.url}/dd`, deduplicated: true });
    const c1 = await q.client.publish({ url: `${sink.url}/cd`, body: 'same', contentBasedDeduplication: true, delay: 60 });
    const c2 = await q.client.publish({ url: `${sink.url}/cd`, body: 'same', contentBasedDeduplication: true, delay: 60 });
    const c3 = await q.client.publish({ url: `${sink.url}/cd`, body: 'different', contentBasedDeduplication: true, delay: 60 });
    assert.equal(c2.messageId, c1.messageId);
    assert.equal((c2 as { deduplicated?: boolean }).deduplicated, true);
    assert.notEqual(c3.messageId, c1.messageId);
  });

  test('signing keys: GET /v2/keys, rotation, deliveries signed with the new current key', async () => {
    const before = (await (await q.api('/v2/keys')).json()) as { current: string; next: string };
    assert.deepEqual(before, { current: q.keys().currentSigningKey, next: q.keys().nextSigningKey });
    assert.match(before.current, /^sig_/);
    const rotated = (await (await q.api('/v2/keys/rotate', { method: 'POST' })).json()) as { current: string; next: string };
    assert.equal(rotated.current, before.next);
    assert.notEqual(rotated.next, before.next);
    assert.deepEqual((await (await q.api('/v2/keys')).json()), rotated);
    await q.client.publish({ url: `${sink.url}/rotated`, body: 'r' });
    const r = await waitFor('delivery after rotation', () => sink.at('/rotated')[0]);
    const signature = r.headers['upstash-signature'] as string;
    // Signed with the new current key: a receiver knowing only the new pair verifies it...
    assert.equal(await new Receiver({ currentSigningKey: rotated.current, nextSigningKey: rotated.next }).verify({ signature, body: 'r' }), true);
    // ... and so does one still configured with the old pair (the old next is the new current).
    assert.equal(await new Receiver({ currentSigningKey: before.current, nextSigningKey: before.next }).verify({ signature, body: 'r' }), true);
    await assert.rejects(new Receiver({ currentSigningKey: before.current, nextSigningKey: rotated.next }).verify({ signature, body: 'r' }));
  });

  test('auth: Bearer, svc_token and qstash_token query; wrong or missing token is 401 JSON', async () => {
    assert.equal((await fetch(`${q.url}/v2/keys?svc_token=${encodeURIComponent(q.token)}`)).status, 200);
    assert.equal((await fetch(`${q.url}/v2/keys?qstash_token=${encodeURIComponent(q.token)}`)).status, 200);
    for (const init of [{}, { headers: { authorization: 'Bearer wrong' } }, { headers: { authorization: `Basic ${q.token}` } }]) {
      const res = await fetch(`${q.url}/v2/keys`, init);
      assert.equal(res.status, 401);
      assert.deepEqual(await res.json(), { error: 'unauthorized' });
    }
    const pub = await fetch(`${q.url}/v2/publish/${sink.url}/tok?a=1&qstash_token=${encodeURIComponent(q.token)}`, { method: 'POST', body: 'q' });
    assert.equal(pub.status, 200);
    assert.equal(((await pub.json()) as { url: string }).url, `${sink.url}/tok?a=1`, 'token parameter not forwarded');
  });

  test('publish front: a token that is a prefix, an extension or one character off is 401; the exact one publishes', async () => {
    const t = q.token;
    const last = t.charCodeAt(t.length - 1);
    const offByOne = t.slice(0, -1) + String.fromCharCode(last === 65 ? 66 : 65);
    for (const wrong of [t.slice(0, -1), `${t}x`, offByOne, t.slice(1), '', `${t}${t}`]) {
      for (const body of ['q', undefined]) {
        const res = await fetch(`${q.url}/v2/publish/${sink.url}/wrong-token`, { method: 'POST', headers: { authorization: `Bearer ${wrong}` }, body });
        assert.equal(res.status, 401, `token ${JSON.stringify(wrong)}, body ${body}`);
        assert.deepEqual(await res.json(), { error: 'unauthorized' });
      }
    }
    const ok = await fetch(`${q.url}/v2/publish/${sink.url}/right-token`, { method: 'POST', headers: { authorization: `Bearer ${t}` }, body: 'q' });
    assert.equal(ok.status, 200);
    assert.equal(sink.at('/wrong-token').length, 0);
  });

  test('publish front: plain requests on the fast path, chunked ones handed to Fastify, same answers', async () => {
    const net = await import('node:net');
    const port = Number(new URL(q.url).port);
    // one connection: a plain publish (fast path), then a chunked one (handed over), then a plain one
    const sock = net.connect(port, '127.0.0.1');
    await new Promise((r) => sock.once('connect', r));
    let got = '';
    sock.on('data', (d: Buffer) => (got += d.toString('latin1')));
    const auth = `authorization: Bearer ${q.token}\r\nhost: x\r\n`;
    const plain = (i: number) => `POST /v2/publish/${sink.url}/front?i=${i} HTTP/1.1\r\n${auth}content-type: text/plain\r\ncontent-length: 5\r\n\r\nplain`;
    const answers = () => got.split('HTTP/1.1 ').length - 1;
    sock.write(plain(1));
    await waitFor('fast-path answer', () => answers() === 1);
    sock.write(`POST /v2/publish/${sink.url}/front?i=2 HTTP/1.1\r\n${auth}content-type: text/plain\r\ntransfer-encoding: chunked\r\n\r\n3\r\nchu\r\n4\r\nnked\r\n0\r\n\r\n`);
    await waitFor('chunked answer', () => answers() === 2);
    sock.write(plain(3));
    await waitFor('third answer', () => answers() === 3);
    sock.destroy();
    const statuses = got.match(/HTTP\/1\.1 \d{3}/g) ?? [];
    assert.deepEqual(statuses, ['HTTP/1.1 200', 'HTTP/1.1 200', 'HTTP/1.1 200'], got);
    assert.equal((got.match(/"messageId":"msg_[A-Za-z0-9_-]{27}"/g) ?? []).length, 3, got);
    const r = await waitFor('3 deliveries', () => (sink.requests.filter((x) => x.url.startsWith('/front')).length === 3 ? sink.requests.filter((x) => x.url.startsWith('/front')) : undefined));
    const byUrl = Object.fromEntries(r.map((x) => [x.url, x.body.toString()]));
    assert.deepEqual(byUrl, { '/front?i=1': 'plain', '/front?i=2': 'chunked', '/front?i=3': 'plain' });
    for (const x of r) assert.equal(x.headers['upstash-caller-ip'] !== undefined || x.headers['svc-caller-ip'] !== undefined, true, 'caller ip forwarded');
  });

  test('malformed input gets JSON errors with fitting statuses and changes nothing', async () => {
    const post = (path: string, headers: Record<string, string> = {}, body = 'x') =>
      fetch(`${q.url}${path}`, { method: 'POST', headers: { authorization: `Bearer ${q.token}`, ...headers }, body });
    const cases: [Promise<Response>, number, RegExp][] = [
      [post(`/v2/publish/${sink.url}/m`, { 'Upstash-Delay': 'soon' }), 400, /Upstash-Delay/],
      [post(`/v2/publish/${sink.url}/m`, { 'Upstash-Retries': '-1' }), 400, /Upstash-Retries/],
      [post(`/v2/publish/${sink.url}/m`, { 'Upstash-Retry-Delay': 'process.exit(1)' }), 400, /Upstash-Retry-Delay/],
      [post(`/v2/publish/${sink.url}/m`, { 'Upstash-Method': 'BREW' }), 400, /Upstash-Method/],
      [post(`/v2/publish/${sink.url}/m`, { 'Upstash-Timeout': '0s' }), 400, /Upstash-Timeout/],
      [post(`/v2/publish/${sink.url}/m`, { 'Upstash-Callback': 'not a url' }), 400, /Upstash-Callback/],
      [post(`/v2/publish/${sink.url}/m`, { 'Upstash-Flow-Control-Key': 'k', 'Upstash-Flow-Control-Value': 'fast' }), 400, /Flow-Control-Value/],
      [post('/v2/publish/ftp://example.com/x'), 400, /only http and https/],
      [post('/v2/publish/no-such-group'), 400, /invalid destination/],
      [post(`/v2/publish/${sink.url}/m`, {}, 'x'.repeat(5000)), 413, /exceeds the limit/],
      [post('/v2/batch', { 'content-type': 'application/json' }, '{"not":"array"'), 400, /invalid JSON/],
      [post('/v2/batch', { 'content-type': 'application/json' }, '{"a":1}'), 400, /JSON array/],
      [post('/v2/batch', { 'content-type': 'application/json' }, '[{"destination":5}]'), 400, /destination/],
      [q.api('/v2/events?count=abc'), 400, /count/],
      [q.api('/v2/events?state=SLEEPING'), 400, /state/],
      [q.api('/v2/dlq?order=sideways'), 400, /order/],
      [q.api('/v2/nothing-here'), 404, /not found/],
      [q.api('/v2/dlq/nope'), 404, /not found/],
    ];
    for (const [p, status, msg] of cases) {
      const res = await p;
      const body = (await res.json()) as { error: string };
      assert.equal(res.status, status, body.error);
      assert.match(body.error, msg);
    }
    await new Promise((r) => setTimeout(r, 100));
    assert.equal(sink.at('/m').length, 0, 'nothing was enqueued');
  });

  test('region: SVC_QUEUE_REGION is sent on deliveries; an unknown region stops start-up', async () => {
    const q3 = await startQueue({ SVC_QUEUE_REGION: 'us-east-1' });
    try {
      await q3.client.publish({ url: `${sink.url}/region`, body: 'r' });
      const r = await waitFor('delivery with region', () => sink.at('/region')[0]);
      assert.equal(r.headers['upstash-region'], 'US-EAST-1');
      assert.equal(r.headers['svc-region'], 'US-EAST-1');
    } finally {
      await q3.close();
    }
    assert.throws(() => loadConfig({ SVC_QUEUE_REGION: 'mars-1' }), /SVC_QUEUE_REGION/);
  });

  test('SSRF switch refuses loopback destinations when enabled', async () => {
    const q2 = await startQueue({ SVC_QUEUE_BLOCK_PRIVATE_DESTINATIONS: 'true' });
    try {
      const res = await fetch(`${q2.url}/v2/publish/${sink.url}/ssrf`, { method: 'POST', headers: { authorization: `Bearer ${q2.token}` }, body: 'x' });
      assert.equal(res.status, 400);
      assert.match(((await res.json()) as { error: string }).error, /private/);
      const res2 = await fetch(`${q2.url}/v2/publish/http://localhost:1/ssrf`, { method: 'POST', headers: { authorization: `Bearer ${q2.token}` }, body: 'x' });
      assert.equal(res2.status, 400);
    } finally {
      await q2.close();
    }
  });
});
