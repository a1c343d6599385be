/**
 * Names and contents an API client chooses never run as code in the console: a real chromium signs
 * in and opens every console page that shows such values after they were set, through the SDKs and
 * raw HTTP, to markup payloads (`<script>`, `"><img onerror=...>`, `<svg onload=...>`): message
 * bodies, forwarded headers, labels, flow-control keys, response bodies in the logs and the DLQ,
 * schedule bodies and headers, workflow labels and failed responses, vector namespace names,
 * record ids and data, kv keys. On every page no payload ran (a window flag stays unset, no
 * dialog opened, no element of the payloads is in the DOM) and the values are shown as text.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { Client } from '@upstash/qstash';
import { Redis } from '@upstash/redis';
import { Index } from '@upstash/vector';
import { startTestSvc } from '../helpers/env.js';
import { waitFor } from '../helpers/wait.js';
import { startSink, type Sink } from '../queue/helpers.js';
import { launchBrowser, signIn, type ConsoleBrowser } from './browser.js';
import { XSS } from './helpers.js';

type Svc = Awaited<ReturnType<typeof startTestSvc>>;

/** Every payload sets `window.__xss` and opens a dialog if it runs. */
const PAYLOADS = [...XSS, `<svg onload="window.__xss='svg';alert(1)"></svg>`, `<img src=x onerror=alert(2)>`];
/** One value carrying every payload (attribute and element context alike). */
const EVIL = PAYLOADS.join(' ');
/** The same, for a header value or a label (no comma: a label list splits on it). */
const EVIL_HEADER = PAYLOADS.join(' ').replaceAll(',', ';');

describe('console: client-chosen values are text on every page', () => {
  let svc: Svc;
  let sink: Sink;
  let b: ConsoleBrowser;
  const dialogs: string[] = [];
  let messageId = '';
  let dlqMessageId = '';
  let runId = '';
  const namespace = `ns ${EVIL}`;
  const raw = (p: string, headers: Record<string, string>, body: string) =>
    fetch(`${svc.urls.queue}${p}`, { method: 'POST', headers: { authorization: `Bearer ${svc.ctx.credentials.get('queue.token')}`, ...headers }, body });

  before(async () => {
    svc = await startTestSvc(['queue', 'kv', 'vector', 'mgmt'], { env: { SVC_VECTOR_DIMENSION: '3' } });
    sink = await startSink((r) => (r.url.startsWith('/fail') ? { status: 500, body: `failed ${EVIL}` } : { status: 200, body: `ok ${EVIL}` }));
    const client = new Client({ baseUrl: svc.urls.queue!, token: svc.ctx.credentials.get('queue.token'), retry: false });
    // a delivered message: body, forwarded header, label, flow-control key and response body
    const ok = await raw(
      `/v2/publish/${sink.url}/ok`,
      { 'content-type': 'text/plain', 'upstash-forward-x-note': EVIL_HEADER, 'upstash-label': EVIL_HEADER, 'upstash-flow-control-key': `fc ${EVIL_HEADER}`, 'upstash-flow-control-value': 'parallelism=1' },
      EVIL,
    );
    assert.equal(ok.status, 200, await ok.clone().text());
    messageId = ((await ok.json()) as { messageId: string }).messageId;
    // a message that fails for good: the DLQ with its response body
    const failed = await raw(`/v2/publish/${sink.url}/fail`, { 'content-type': 'text/plain', 'upstash-retries': '0', 'upstash-forward-x-note': EVIL_HEADER }, EVIL);
    assert.equal(failed.status, 200, await failed.clone().text());
    dlqMessageId = ((await failed.json()) as { messageId: string }).messageId;
    // a schedule with a body and a forwarded header
    await client.schedules.create({ destination: `${sink.url}/scheduled`, cron: '0 0 1 1 *', body: EVIL, headers: { 'x-note': EVIL_HEADER }, scheduleId: 'xss-schedule' });
    // a workflow run whose first step fails: failed runs with its label and response
    const t = await raw(`/v2/trigger/${sink.url}/fail-wf`, { 'content-type': 'application/json', 'upstash-retries': '0', 'upstash-label': EVIL_HEADER }, JSON.stringify({ note: EVIL }));
    assert.equal(t.status, 200, await t.clone().text());
    runId = ((await t.json()) as { workflowRunId: string }).workflowRunId;
    // vector: a namespace, record id, data and metadata
    const index = new Index({ url: svc.urls.vector!, token: svc.ctx.credentials.get('vector.default.token') });
    // (the SDK's type has data only with an embedder; svc keeps it beside a vector too)
    await index.upsert([{ id: `id ${EVIL}`, vector: [1, 0, 0], data: EVIL, metadata: { note: EVIL } }] as never, { namespace });
    // kv: a key and its value
    await new Redis({ url: svc.urls.kv!, token: svc.ctx.credentials.get('kv.token') }).set(`key ${EVIL}`, EVIL);
    await waitFor('the DLQ entry and the failed run', async () => {
      const dlq = await client.dlq.listMessages();
      const runs = (await (await fetch(`${svc.urls.queue}/v2/workflows/logs?workflowRunId=${runId}`, { headers: { authorization: `Bearer ${svc.ctx.credentials.get('queue.token')}` } })).json()) as { runs: { workflowState: string }[] };
      return dlq.messages.some((m) => m.messageId === dlqMessageId) && runs.runs[0]?.workflowState === 'RUN_FAILED';
    }, 60_000);
    b = await launchBrowser();
    b.page.on('dialog', (d) => {
      dialogs.push(d.message());
      void d.dismiss();
    });
    await signIn(b.page, svc);
  });
  after(async () => {
    await b?.close();
    await sink?.close();
    await svc?.close();
  });

  test('no payload runs on any page that shows them; they are shown as text', async () => {
    const { page } = b;
    /** Page (hash route) -> a part of the payloads it must show as text. */
    const pages: [string, string | undefined][] = [
      ['#/overview', undefined],
      ['#/queue/logs', undefined],
      [`#/queue/message/${encodeURIComponent(messageId)}`, PAYLOADS[1]],
      ['#/queue/dlq', 'failed'],
      [`#/queue/dlq?messageId=${encodeURIComponent(dlqMessageId)}`, PAYLOADS[0]],
      ['#/queue/schedules', 'xss-schedule'],
      ['#/queue/queues', undefined],
      ['#/queue/url-groups', undefined],
      ['#/queue/flow-control', PAYLOADS[2]],
      ['#/workflows/runs', undefined],
      ['#/workflows/failed', undefined],
      [`#/workflows/run/${encodeURIComponent(runId)}`, PAYLOADS[0]],
      ['#/kv/keys', PAYLOADS[1]],
      [`#/kv/key/${encodeURIComponent(`key ${EVIL}`)}`, PAYLOADS[3]],
      ['#/vector', undefined],
      [`#/vector?${new URLSearchParams({ ns: namespace })}`, PAYLOADS[2]],
    ];
    const shownSomewhere = new Set<string>();
    for (const [route, expected] of pages) {
      await page.goto(`${svc.urls.mgmt}/console/${route}`);
      await page.waitForLoadState('networkidle');
      if (expected !== undefined) {
        await waitFor(`${route} to show ${expected.slice(0, 30)}`, async () => ((await page.textContent('main')) ?? '').includes(expected), 30_000);
      }
      const text = (await page.textContent('main')) ?? '';
      for (const p of PAYLOADS) if (text.includes(p)) shownSomewhere.add(p);
      assert.equal(await page.evaluate(() => (window as unknown as { __xss?: string }).__xss), undefined, `${route}: a payload ran`);
      assert.equal(await page.locator('main img[src=x], main svg[onload], main script').count(), 0, `${route}: a payload element is in the DOM`);
      assert.deepEqual(dialogs, [], `${route}: a dialog opened`);
    }
    assert.deepEqual([...shownSomewhere].sort(), [...PAYLOADS].sort(), 'every payload was shown as text somewhere');
    // a namespace name in the vector page's namespace list is text too
    assert.ok(((await page.textContent('table[data-table=namespaces]')) ?? '').includes(namespace));
    assert.deepEqual(b.errors.filter((e) => !/Failed to load resource/.test(e)), []);
  });
});
