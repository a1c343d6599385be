/**
 * Following a message end to end with W3C Trace Context and OpenTelemetry (`src/tracing.ts`,
 * `src/queue/delivery/trace.ts`).
 *
 * Tracing on: svc runs as a real child process (`node bin/svc.js serve`, queue + kv with its own
 * redis-server) with `OTEL_EXPORTER_OTLP_ENDPOINT` pointing at an OTLP/HTTP receiver this test
 * starts (a node:http server that accepts `POST /v1/traces` with OTLP JSON bodies, as a collector
 * does, and keeps every span). A message published with the official SDK and a `traceparent`
 * (forwarded with the SDK's `headers` option; and on the request itself, as an instrumented HTTP
 * client sends it, over raw HTTP) to a destination that fails once then succeeds
 * gives one trace: the publish span (child of the publisher's span), two delivery-attempt spans
 * (retry 0 answered 500, retry 1 answered 200), the callback's attempt span, and the destination's
 * own span (made from the `traceparent` it received) is a child of the attempt that reached it.
 * Also: a DLQ move is a span under the last attempt, every delivery of a workflow run's steps is a
 * `workflow step` span of the trigger's trace, a schedule firing is a trace whose deliveries are
 * its children, kv and vector requests have server spans.
 *
 * Tracing off (svc in this process, no endpoint): the `traceparent`/`tracestate` a publish brings
 * (its own header, `Upstash-Forward-Traceparent`, a batch entry's header, `/v2/enqueue`) reach the
 * destination unchanged on every attempt and on callbacks.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import type { AddressInfo } from 'node:net';
import { test } from 'node:test';
import { Client } from '@upstash/qstash';
import { Redis } from '@upstash/redis';
import { Index } from '@upstash/vector';
import { Client as WorkflowClient } from '@upstash/workflow';
import { tempDir } from '../helpers/env.js';
import { spawnQueueSvc, startQueue, startSink, waitFor, type SinkRequest } from './helpers.js';
import { startWorkflowApp } from './workflow-helpers.js';

interface OtlpSpan {
  traceId: string;
  spanId: string;
  parentSpanId: string;
  name: string;
  kind: number;
  status: { code?: number };
  attributes: Record<string, unknown>;
  service: string;
}

/** OTLP JSON ids are hex (OTLP/HTTP JSON encoding); base64 is accepted too. */
function hexId(v: string | undefined): string {
  if (!v) return '';
  return /^[0-9a-f]+$/i.test(v) ? v.toLowerCase() : Buffer.from(v, 'base64').toString('hex');
}

/** An OTLP AnyValue as a plain value. */
function anyValue(v: Record<string, unknown>): unknown {
  if ('stringValue' in v) return v.stringValue;
  if ('intValue' in v) return Number(v.intValue);
  if ('doubleValue' in v) return v.doubleValue;
  if ('boolValue' in v) return v.boolValue;
  return v;
}

const attrs = (list: { key: string; value: Record<string, unknown> }[] | undefined) =>
  Object.fromEntries((list ?? []).map((a) => [a.key, anyValue(a.value)]));

/** An OTLP/HTTP trace receiver (JSON bodies) on port 0: every exported span, flattened. */
async function startOtlpReceiver() {
  const spans: OtlpSpan[] = [];
  const contentTypes = new Set<string>();
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      if (req.method !== 'POST' || req.url !== '/v1/traces') {
        res.writeHead(404).end();
        return;
      }
      contentTypes.add(String(req.headers['content-type']));
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
      for (const rs of body.resourceSpans ?? []) {
        const service = String(attrs(rs.resource?.attributes)['service.name']);
        for (const ss of rs.scopeSpans ?? []) {
          for (const s of ss.spans ?? []) {
            spans.push({
              traceId: hexId(s.traceId),
              spanId: hexId(s.spanId),
              parentSpanId: hexId(s.parentSpanId),
              name: s.name,
              kind: s.kind,
              status: s.status ?? {},
              attributes: attrs(s.attributes),
              service,
            });
          }
        }
      }
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    url,
    spans,
    contentTypes,
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

const hex = (bytes: number) => randomBytes(bytes).toString('hex');

/** A W3C `traceparent`'s fields. */
function parseTraceparent(v: string | string[] | undefined): { traceId: string; parentId: string } {
  const m = /^00-([0-9a-f]{32})-([0-9a-f]{16})-[0-9a-f]{2}$/.exec(String(v));
  assert.ok(m, `a valid traceparent, got ${String(v)}`);
  return { traceId: m[1], parentId: m[2] };
}

/**
 * What an instrumented destination does with a request: continues the trace of its `traceparent`
 * with a span of its own (a new span id whose parent is the `traceparent`'s parent id).
 */
function destinationSpan(r: SinkRequest): { traceId: string; spanId: string; parentSpanId: string } {
  const { traceId, parentId } = parseTraceparent(r.headers.traceparent);
  return { traceId, spanId: hex(8), parentSpanId: parentId };
}

/**
 * `POST /v2/publish/<url>` over raw HTTP with `traceparent` (and `tracestate`) on the request
 * itself, as an OpenTelemetry-instrumented HTTP client sends them for the span it is in (the SDK
 * has no call for that: its `headers` option forwards them, `Upstash-Forward-*`). `headers` adds
 * publish headers. Resolves to the message id.
 */
async function rawPublish(queueUrl: string, token: string, url: string, trace: { traceparent: string; tracestate?: string }, headers: Record<string, string> = {}): Promise<string> {
  const res = await fetch(`${queueUrl}/v2/publish/${url}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', ...trace, ...headers },
    body: '{}',
  });
  const text = await res.text();
  assert.equal(res.status, 200, text);
  return (JSON.parse(text) as { messageId: string }).messageId;
}

/** A workflow endpoint (the SDK's `serve`) at `/three` running three steps, against the queue at `url`. */
function threeStepApp(url: string, token: string, keys: { currentSigningKey: string; nextSigningKey: string }) {
  return startWorkflowApp(
    { QSTASH_URL: url, QSTASH_TOKEN: token, QSTASH_CURRENT_SIGNING_KEY: keys.currentSigningKey, QSTASH_NEXT_SIGNING_KEY: keys.nextSigningKey },
    {
      '/three': [
        async (ctx) => {
          const a = await ctx.run('s1', () => 1);
          const b = await ctx.run('s2', () => a + 1);
          return { result: await ctx.run('s3', () => b + 1) };
        },
        {},
      ],
    },
  );
}

/** Resolves when workflow run `runId` of the queue at `url` has ended RUN_SUCCESS. */
function runSucceeded(url: string, token: string, runId: string): Promise<boolean> {
  return waitFor(
    `run ${runId} to succeed`,
    async () => {
      const res = await fetch(`${url}/v2/workflows/logs?workflowRunId=${runId}`, { headers: { authorization: `Bearer ${token}` } });
      const body = (await res.json()) as { runs: { workflowState: string }[] };
      return body.runs[0]?.workflowState === 'RUN_SUCCESS';
    },
    120_000,
  );
}

/** The `.env` block values printed in svc's banner. */
const envValue = (out: string, key: string) => new RegExp(`^${key}=(\\S+)$`, 'm').exec(out)?.[1];

test('tracing on: publish, both attempts, the callbacks and the destination are one trace; DLQ moves, failure callbacks, workflow steps, schedule firings, kv and vector requests have spans', { timeout: 240_000 }, async () => {
  const otlp = await startOtlpReceiver();
  const sink = await startSink((r, nth) => (r.url === '/dead' || (r.url === '/hook' && nth === 1) ? { status: 500, body: 'not yet' } : undefined));
  const tmp = tempDir('svc-tracing-');
  const svc = await spawnQueueSvc(tmp.dir, {
    SVC_AREAS: 'queue,kv,vector',
    SVC_KV_PORT: '0',
    SVC_VECTOR_PORT: '0',
    SVC_VECTOR_DIMENSION: '3',
    SVC_KV_WORKERS: '0',
    OTEL_EXPORTER_OTLP_ENDPOINT: otlp.url,
    OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
    OTEL_SERVICE_NAME: 'svc-under-test',
    OTEL_BSP_SCHEDULE_DELAY: '100',
  });
  try {
    const kvUrl = await waitFor('kv url in the banner', () => envValue(svc.output(), 'UPSTASH_REDIS_REST_URL'), 60_000);
    const creds = JSON.parse(fs.readFileSync(path.join(tmp.dir, 'credentials.json'), 'utf8')) as Record<string, string>;

    // the publisher's own trace, forwarded with the SDK's `headers` option
    const traceId = hex(16);
    const publisherSpan = hex(8);
    const client = new Client({ baseUrl: svc.url, token: creds['queue.token'], retry: false });
    // fires at the next minute boundary: checked last, while the rest runs
    const { scheduleId } = await client.schedules.create({ destination: `${sink.url}/scheduled`, cron: '* * * * *', body: '{}' });
    const { messageId } = await client.publishJSON({
      url: `${sink.url}/hook`,
      body: { hello: 'trace' },
      retries: 1,
      retryDelay: '50',
      callback: `${sink.url}/cb`,
      headers: { traceparent: `00-${traceId}-${publisherSpan}-01`, tracestate: 'vendor=abc' },
    });

    // a callback follows each attempt (the failed one's reports the 500)
    await waitFor('two attempts and their callbacks at the destination', () => sink.at('/hook').length >= 2 && sink.at('/cb').length >= 2, 120_000);
    const inTrace = () => otlp.spans.filter((s) => s.traceId === traceId);
    await waitFor(
      'publish, two attempt spans and the callback attempt exported',
      () => inTrace().some((s) => s.name === 'publish') && inTrace().filter((s) => s.name === 'deliver').length >= 2 && inTrace().filter((s) => s.name === 'deliver callback').length >= 2,
      120_000,
    );
    assert.ok([...otlp.contentTypes].every((t) => t.startsWith('application/json')), `OTLP/HTTP JSON, got ${[...otlp.contentTypes]}`);

    const publish = inTrace().find((s) => s.name === 'publish')!;
    assert.equal(publish.parentSpanId, publisherSpan, 'the publish span is a child of the publisher span');
    assert.equal(publish.kind, 4, 'PRODUCER');
    assert.equal(publish.service, 'svc-under-test');
    assert.equal(publish.attributes['messaging.message.id'], messageId);

    const attempts = inTrace()
      .filter((s) => s.name === 'deliver')
      .sort((a, b) => Number(a.attributes['svc.queue.retry']) - Number(b.attributes['svc.queue.retry']));
    assert.equal(attempts.length, 2);
    assert.deepEqual(attempts.map((s) => s.attributes['svc.queue.retry']), [0, 1]);
    assert.deepEqual(attempts.map((s) => s.attributes['http.response.status_code']), [500, 200]);
    assert.deepEqual(attempts.map((s) => s.attributes['svc.queue.outcome']), ['retry', 'delivered']);
    assert.deepEqual(attempts.map((s) => s.status.code ?? 0), [2, 0], 'the failed attempt has status ERROR');
    for (const a of attempts) {
      assert.equal(a.parentSpanId, publish.spanId, 'each attempt is a child of the publish span');
      assert.equal(a.kind, 3, 'CLIENT');
      assert.equal(a.attributes['messaging.message.id'], messageId);
      assert.equal(a.attributes['url.full'], `${sink.url}/hook`);
    }

    // the destination continues the trace: its span's parent is the attempt that reached it
    const received = sink.at('/hook').sort((a, b) => Number(a.headers['upstash-retried']) - Number(b.headers['upstash-retried']));
    for (const [i, r] of received.entries()) {
      const own = destinationSpan(r);
      assert.equal(own.traceId, traceId, 'the destination joins the publisher trace');
      assert.equal(own.parentSpanId, attempts[i].spanId, `attempt ${i}'s span is the destination span's parent`);
      assert.equal(r.headers.tracestate, 'vendor=abc', 'tracestate travels with it');
    }

    // the callbacks: each one's attempt is a child of the attempt whose outcome it reports, and
    // its traceparent names that callback attempt
    const cbSpans = inTrace().filter((s) => s.name === 'deliver callback');
    assert.deepEqual(new Set(cbSpans.map((s) => s.parentSpanId)), new Set(attempts.map((a) => a.spanId)));
    assert.deepEqual(new Set(sink.at('/cb').map((r) => parseTraceparent(r.headers.traceparent).parentId)), new Set(cbSpans.map((s) => s.spanId)));

    // retries used up: the last attempt's span says so and the DLQ move is its child
    const deadTrace = hex(16);
    const dead = await client.publishJSON({
      url: `${sink.url}/dead`,
      body: {},
      retries: 0,
      failureCallback: `${sink.url}/dead-fcb`,
      headers: { traceparent: `00-${deadTrace}-${hex(8)}-01` },
    });
    const move = await waitFor('dead-letter span', () => otlp.spans.find((s) => s.name === 'dead-letter' && s.traceId === deadTrace), 120_000);
    const lastAttempt = otlp.spans.find((s) => s.spanId === move.parentSpanId)!;
    assert.equal(lastAttempt.name, 'deliver');
    assert.equal(lastAttempt.attributes['svc.queue.outcome'], 'dead-letter');
    assert.equal(move.attributes['messaging.message.id'], dead.messageId);
    assert.match(String(move.attributes['svc.queue.dlq_id']), /^\d+-\d+$/);
    // the failure callback continues the attempt that failed for good
    const fcbSpan = await waitFor('failure callback attempt span', () => otlp.spans.find((s) => s.name === 'deliver failure_callback' && s.traceId === deadTrace), 120_000);
    assert.equal(fcbSpan.parentSpanId, lastAttempt.spanId);
    const fcbReq = await waitFor('failure callback at the destination', () => sink.at('/dead-fcb')[0], 60_000);
    assert.equal(parseTraceparent(fcbReq.headers.traceparent).parentId, fcbSpan.spanId);

    // the request's own traceparent (an instrumented client's): the publish span is its child
    const rawTrace = hex(16);
    const rawParent = hex(8);
    const rawId = await rawPublish(svc.url, creds['queue.token'], `${sink.url}/raw`, { traceparent: `00-${rawTrace}-${rawParent}-01` });
    const rawDelivery = await waitFor('the raw publish delivered', () => sink.at('/raw')[0], 60_000);
    const rawPublishSpan = await waitFor('its publish span', () => otlp.spans.find((s) => s.name === 'publish' && s.traceId === rawTrace), 60_000);
    assert.equal(rawPublishSpan.parentSpanId, rawParent);
    assert.equal(rawPublishSpan.attributes['messaging.message.id'], rawId);
    const rawAttempt = await waitFor('its attempt span', () => otlp.spans.find((s) => s.name === 'deliver' && s.traceId === rawTrace), 60_000);
    assert.equal(rawAttempt.parentSpanId, rawPublishSpan.spanId);
    assert.equal(parseTraceparent(rawDelivery.headers.traceparent).parentId, rawAttempt.spanId);

    // a workflow run: every step's delivery is a `workflow step` span of the trigger's trace
    // (the endpoint's own step publishes carry no context: they continue the run's)
    const app = await threeStepApp(svc.url, creds['queue.token'], { currentSigningKey: creds['queue.currentSigningKey'], nextSigningKey: creds['queue.nextSigningKey'] });
    try {
      const wfTrace = hex(16);
      const wf = new WorkflowClient({ baseUrl: svc.url, token: creds['queue.token'] });
      const { workflowRunId } = await wf.trigger({ url: `${app.url}/three`, body: {}, headers: { traceparent: `00-${wfTrace}-${hex(8)}-01` } });
      const done = () => app.requests.filter((r) => r.path === '/three' && r.status === 200);
      await runSucceeded(svc.url, creds['queue.token'], workflowRunId);
      // the run ends inside the last step's request (the SDK reports it before answering): its answer is recorded just after
      await waitFor('the trigger and three steps delivered', () => done().length >= 4, 30_000);
      const steps = await waitFor(
        'a workflow step span per delivery to the endpoint',
        () => {
          const s = otlp.spans.filter((x) => x.name === 'workflow step' && x.attributes['svc.workflow.run_id'] === workflowRunId);
          return s.length >= done().length ? s : undefined;
        },
        60_000,
      );
      assert.ok(done().length >= 4, `trigger and three steps delivered, got ${done().length}`);
      for (const st of steps) assert.equal(st.traceId, wfTrace, 'every step is in the trigger trace');
      const stepIds = new Set(steps.map((x) => x.spanId));
      for (const r of done()) {
        const own = destinationSpan({ headers: r.headers } as SinkRequest);
        assert.equal(own.traceId, wfTrace);
        assert.ok(stepIds.has(own.parentSpanId), 'the endpoint continues the step span that reached it');
      }
    } finally {
      await app.close();
    }

    // kv: a span per request, named after the command, child of the request's traceparent
    const redis = new Redis({ url: kvUrl, token: envValue(svc.output(), 'UPSTASH_REDIS_REST_TOKEN')!, enableTelemetry: false, enableAutoPipelining: false });
    assert.equal(await redis.set('traced-key', 'v'), 'OK');
    const kvTrace = hex(16);
    const kvParent = hex(8);
    const res = await fetch(kvUrl, {
      method: 'POST',
      headers: { authorization: `Bearer ${envValue(svc.output(), 'UPSTASH_REDIS_REST_TOKEN')}`, traceparent: `00-${kvTrace}-${kvParent}-01` },
      body: JSON.stringify(['GET', 'traced-key']),
    });
    assert.deepEqual(await res.json(), { result: 'v' });
    const set = await waitFor('kv SET span', () => otlp.spans.find((s) => s.name === 'kv SET'), 60_000).catch((err: Error) => {
      throw new Error(`${err.message}; spans: ${otlp.spans.map((s) => s.name).join(', ')}\n${svc.output()}`);
    });
    assert.equal(set.attributes['db.system.name'], 'redis');
    assert.equal(set.attributes['db.operation.name'], 'SET');
    assert.equal(set.attributes['http.response.status_code'], 200);
    assert.ok(!JSON.stringify(set.attributes).includes('traced-key'), 'no key in the span');
    const get = await waitFor('kv GET span', () => otlp.spans.find((s) => s.name === 'kv GET'), 60_000);
    assert.equal(get.traceId, kvTrace);
    assert.equal(get.parentSpanId, kvParent);
    assert.equal(get.kind, 2, 'SERVER');
    // an SSE stream's span ends when the stream closes
    const abort = new AbortController();
    const stream = await fetch(`${kvUrl}/subscribe/traced-channel`, {
      headers: { authorization: `Bearer ${envValue(svc.output(), 'UPSTASH_REDIS_REST_TOKEN')}`, accept: 'text/event-stream' },
      signal: abort.signal,
    });
    assert.equal(stream.status, 200);
    const reader = stream.body!.getReader();
    assert.match(Buffer.from((await reader.read()).value!).toString('utf8'), /subscribe/);
    assert.equal(otlp.spans.find((s) => s.name === 'kv subscribe'), undefined, 'no span before the stream closes');
    abort.abort();
    await reader.closed.catch(() => {});
    const subscribe = await waitFor('kv subscribe span', () => otlp.spans.find((s) => s.name === 'kv subscribe'), 60_000);
    assert.equal(subscribe.attributes['http.response.status_code'], 200);

    // a schedule firing: a trace of its own, whose deliveries are its children
    const fire = await waitFor('schedule fire span', () => otlp.spans.find((s) => s.name === 'schedule fire' && s.attributes['svc.schedule.id'] === scheduleId), 120_000);
    assert.equal(fire.parentSpanId, '', 'a root span');
    const fired = await waitFor('the fired message delivered', () => otlp.spans.find((s) => s.name === 'deliver' && s.parentSpanId === fire.spanId), 60_000);
    assert.equal(fired.attributes['svc.schedule.id'], scheduleId);
    const scheduled = await waitFor('scheduled delivery at the destination', () => sink.at('/scheduled')[0], 60_000);
    assert.equal(parseTraceparent(scheduled.headers.traceparent).parentId, fired.spanId);
    await client.schedules.delete(scheduleId);

    // vector: a span per request, named after the endpoint, with the index
    const index = new Index({ url: envValue(svc.output(), 'UPSTASH_VECTOR_REST_URL')!, token: envValue(svc.output(), 'UPSTASH_VECTOR_REST_TOKEN')! });
    await index.upsert({ id: 'a', vector: [1, 0, 0] });
    const upsert = await waitFor('vector upsert span', () => otlp.spans.find((s) => s.name === 'vector upsert'), 60_000);
    assert.equal(upsert.attributes['db.collection.name'], 'default');
    assert.equal(upsert.attributes['http.response.status_code'], 200);
  } finally {
    svc.child.kill('SIGTERM');
    await new Promise((r) => svc.child.once('exit', r));
    await sink.close();
    await otlp.close();
    tmp.cleanup();
  }
});

test('tracing off: the publisher traceparent reaches the destination unchanged on every attempt, callback and failure callback', { timeout: 240_000 }, async () => {
  const sink = await startSink((r, nth) => (r.url === '/failing' || (r.url.startsWith('/flaky') && nth === 1) ? { status: 503 } : undefined));
  const q = await startQueue();
  try {
    const tp = (id: string) => `00-${id}-${hex(8)}-01`;
    const direct = tp(hex(16));
    const forwarded = tp(hex(16));
    const batched = tp(hex(16));
    const enqueued = tp(hex(16));

    // 1. the publish request's own header (an instrumented client), with tracestate; fails once, has a callback
    await rawPublish(q.url, q.token, `${sink.url}/flaky-direct`, { traceparent: direct, tracestate: 'a=1' }, {
      'upstash-retries': '2',
      'upstash-retry-delay': '50',
      'upstash-callback': `${sink.url}/cb-direct`,
    });
    // 1b. retries used up: the failure callback carries it too
    const failing = tp(hex(16));
    await rawPublish(q.url, q.token, `${sink.url}/failing`, { traceparent: failing }, { 'upstash-retries': '0', 'upstash-failure-callback': `${sink.url}/failure-cb` });
    // 2. forwarded by the publisher (`Upstash-Forward-Traceparent`), per message and client-wide
    await q.client.publishJSON({ url: `${sink.url}/forwarded`, body: {}, headers: { traceparent: forwarded } });
    const forwarding = new Client({ baseUrl: q.url, token: q.token, retry: false, headers: { traceparent: forwarded, tracestate: 'b=2' } });
    await forwarding.publishJSON({ url: `${sink.url}/forwarded-all`, body: {} });
    // 3. a batch entry's own headers
    await q.client.batchJSON([
      { url: `${sink.url}/batched`, body: {}, headers: { traceparent: batched } },
      { url: `${sink.url}/untraced`, body: {} },
    ]);
    // 4. /v2/enqueue into a queue, header on the request
    const res = await q.api(`/v2/enqueue/traced-queue/${sink.url}/enqueued`, { method: 'POST', headers: { traceparent: enqueued, 'content-type': 'text/plain' }, body: 'x' });
    assert.equal(res.status, 200, await res.clone().text());

    await waitFor(
      'every delivery',
      () => ['/flaky-direct', '/cb-direct', '/failure-cb', '/forwarded', '/forwarded-all', '/batched', '/untraced', '/enqueued'].every((p) => sink.at(p).length >= (p === '/flaky-direct' ? 2 : 1)),
      120_000,
    );
    const attempts = sink.at('/flaky-direct');
    assert.equal(attempts.length, 2);
    for (const r of attempts) {
      assert.equal(r.headers.traceparent, direct, 'every attempt carries the publisher traceparent');
      assert.equal(r.headers.tracestate, 'a=1');
    }
    assert.ok(sink.at('/cb-direct').every((r) => r.headers.traceparent === direct), 'so do the callbacks');
    assert.equal(sink.at('/failing')[0].headers.traceparent, failing);
    assert.equal(sink.at('/failure-cb')[0].headers.traceparent, failing, 'and the failure callback');
    assert.equal(sink.at('/forwarded')[0].headers.traceparent, forwarded);
    assert.equal(sink.at('/forwarded-all')[0].headers.traceparent, forwarded);
    assert.equal(sink.at('/forwarded-all')[0].headers.tracestate, 'b=2');
    assert.equal(sink.at('/batched')[0].headers.traceparent, batched);
    assert.equal(sink.at('/untraced')[0].headers.traceparent, undefined, 'no context, none invented');
    assert.equal(sink.at('/enqueued')[0].headers.traceparent, enqueued);
    // one traceparent header, not the forwarded one beside the request's
    for (const r of sink.requests) {
      const raw = r.headers.traceparent;
      assert.ok(raw === undefined || !raw.includes(','), `one traceparent, got ${raw}`);
    }
  } finally {
    await q.close();
    await sink.close();
  }
});

test('tracing off: every step of a workflow run carries the trigger traceparent (SDK trigger and /v2/trigger)', { timeout: 240_000 }, async () => {
  const q = await startQueue();
  const app = await threeStepApp(q.url, q.token, q.keys());
  try {
    const traceparent = `00-${hex(16)}-${hex(8)}-01`;
    const wf = new WorkflowClient({ baseUrl: q.url, token: q.token });
    const first = await wf.trigger({ url: `${app.url}/three`, body: {}, headers: { traceparent, tracestate: 'wf=1' } });
    await runSucceeded(q.url, q.token, first.workflowRunId);
    const delivered = () => app.requests.filter((r) => r.path === '/three');
    await waitFor('the trigger and three steps delivered', () => delivered().filter((r) => r.status === 200).length >= 4, 30_000);
    for (const r of delivered()) {
      assert.equal(r.headers.traceparent, traceparent);
      assert.equal(r.headers.tracestate, 'wf=1');
    }

    // a run started over plain HTTP (`/v2/trigger`), which the endpoint's SDK then triggers itself
    const raw = `00-${hex(16)}-${hex(8)}-01`;
    const res = await q.api(`/v2/trigger/${app.url}/three`, { method: 'POST', headers: { traceparent: raw, 'content-type': 'application/json' }, body: '{}' });
    assert.equal(res.status, 200, await res.clone().text());
    const { workflowRunId } = (await res.json()) as { workflowRunId: string };
    const ofRun = () => app.requests.filter((r) => r.path === '/three' && r.headers['upstash-workflow-runid'] === workflowRunId);
    await runSucceeded(q.url, q.token, workflowRunId);
    await waitFor('the trigger and three steps of the /v2/trigger run delivered', () => ofRun().filter((r) => r.status === 200).length >= 4, 30_000);
    for (const r of ofRun()) assert.equal(r.headers.traceparent, raw);
  } finally {
    await app.close();
    await q.close();
  }
});

test('tracing off: a malformed traceparent is not forwarded as trace context', { timeout: 120_000 }, async () => {
  const sink = await startSink();
  const q = await startQueue();
  try {
    const good = `00-${hex(16)}-${hex(8)}-01`;
    const malformed = [
      '00-zz-not-a-trace',
      good.toUpperCase(), // hex must be lower-case
      `${good}-extra`, // version 00 has exactly four fields
      `00-${'0'.repeat(32)}-${hex(8)}-01`, // all-zero trace id
      `ff-${hex(16)}-${hex(8)}-01`, // version ff is invalid
    ];
    for (const [i, traceparent] of malformed.entries()) {
      await rawPublish(q.url, q.token, `${sink.url}/bad-${i}`, { traceparent });
    }
    await waitFor('every delivery', () => malformed.every((_, i) => sink.at(`/bad-${i}`).length >= 1), 60_000);
    for (const [i, traceparent] of malformed.entries()) assert.equal(sink.at(`/bad-${i}`)[0].headers.traceparent, undefined, traceparent);
  } finally {
    await q.close();
    await sink.close();
  }
});
