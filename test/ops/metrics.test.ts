/**
 * `GET /metrics` on the management port (src/metrics.ts and each area's metrics.ts): a whole svc
 * (every area, one kv worker process) is put under load through the official SDKs while
 * `/metrics` is scraped; every family is present in the Prometheus text format, counters move
 * between scrapes, the kv worker's counts are merged into the primary's scrape, gauges read the
 * live state (vectors per namespace, open SSE streams, DLQ size, backend up). Also: the optional
 * bearer token (`SVC_METRICS_TOKEN`) and the off switch (`SVC_METRICS=false`); the Grafana
 * dashboard in docs/ queries only exported families.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { Client } from '@upstash/qstash';
import { Redis } from '@upstash/redis';
import { Index } from '@upstash/vector';
import type { KvServer } from '../../src/kv/index.js';
import type { SupervisedBackend } from '../../src/kv/redis/supervisor.js';
import type { VectorServer } from '../../src/vector/index.js';
import { MAX_NAMESPACE_SERIES } from '../../src/vector/metrics.js';
import { startTestSvc } from '../helpers/env.js';
import { startSink, waitFor } from '../queue/helpers.js';

const ROOT = path.resolve(import.meta.dirname, '../..');

/** One sample line of the text format. */
interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

/** Parses the Prometheus text exposition: samples and the `# TYPE` of each family. */
function parse(text: string): { samples: Sample[]; types: Map<string, string> } {
  const samples: Sample[] = [];
  const types = new Map<string, string>();
  for (const line of text.split('\n')) {
    const t = /^# TYPE (\S+) (\S+)$/.exec(line);
    if (t) types.set(t[1], t[2]);
    if (line === '' || line.startsWith('#')) continue;
    const m = /^([a-zA-Z_:][\w:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    assert.ok(m, `not a sample line: ${line}`);
    const labels: Record<string, string> = {};
    for (const l of (m[2] ?? '').matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)) labels[l[1]] = l[2];
    samples.push({ name: m[1], labels, value: Number(m[3]) });
  }
  return { samples, types };
}

/** Sum of the samples of `name` whose labels include `labels`. */
function value(samples: Sample[], name: string, labels: Record<string, string> = {}): number {
  return samples
    .filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v))
    .reduce((a, s) => a + s.value, 0);
}

const FAMILIES: Record<string, string> = {
  // default Node.js process metrics (prom-client)
  process_cpu_seconds_total: 'counter',
  process_resident_memory_bytes: 'gauge',
  nodejs_eventloop_lag_seconds: 'gauge',
  nodejs_heap_size_used_bytes: 'gauge',
  // every area
  svc_http_requests_total: 'counter',
  svc_http_request_duration_seconds: 'histogram',
  // queue
  svc_queue_messages: 'gauge',
  svc_queue_flow_control_waiting: 'gauge',
  svc_queue_dlq_messages: 'gauge',
  svc_queue_inflight_deliveries: 'gauge',
  svc_queue_published_messages_total: 'counter',
  svc_queue_deliveries_total: 'counter',
  svc_queue_retries_total: 'counter',
  svc_queue_dead_lettered_total: 'counter',
  svc_queue_delivery_duration_seconds: 'histogram',
  svc_queue_fsync_duration_seconds: 'histogram',
  svc_queue_schedule_fires_total: 'counter',
  // kv
  svc_kv_commands_total: 'counter',
  svc_kv_backend_duration_seconds: 'histogram',
  svc_kv_backend_up: 'gauge',
  svc_kv_redis_restarts_total: 'counter',
  svc_kv_sse_streams: 'gauge',
  // vector
  svc_vector_vectors: 'gauge',
  svc_vector_namespaces: 'gauge',
  svc_vector_namespace_vectors: 'gauge',
  svc_vector_query_duration_seconds: 'histogram',
  svc_vector_upsert_duration_seconds: 'histogram',
  svc_vector_snapshot_duration_seconds: 'histogram',
  // mgmt
  svc_mgmt_sign_in_failures_total: 'counter',
};

test('/metrics under load: every family, counters move, kv worker merged, gauges live', async () => {
  const svc = await startTestSvc(['queue', 'kv', 'vector', 'mgmt'], { env: { SVC_KV_WORKERS: '1', SVC_METRICS_TOKEN: 'scrape-secret' } });
  const sink = await startSink((req) => (req.url.startsWith('/fail') ? { status: 500 } : undefined));
  const mgmt = svc.urls.mgmt!;
  const scrape = async () => {
    const r = await fetch(`${mgmt}/metrics`, { headers: { authorization: 'Bearer scrape-secret' } });
    assert.equal(r.status, 200);
    assert.match(r.headers.get('content-type') ?? '', /^text\/plain; version=0\.0\.4/);
    return parse(await r.text());
  };
  const kvToken = svc.ctx.credentials.get('kv.token');
  const redis = new Redis({ url: svc.urls.kv!, token: kvToken });
  const qstash = new Client({ baseUrl: svc.urls.queue!, token: svc.ctx.credentials.get('queue.token'), retry: false });
  const index = new Index({ url: svc.urls.vector!, token: svc.ctx.credentials.get('vector.default.token') });
  await index.upsert(Array.from({ length: 20 }, (_, i) => ({ id: `v${i}`, vector: [i, 1, 2, 3] })));
  await index.upsert([{ id: 'n1', vector: [1, 1, 1, 1] }], { namespace: 'other' });
  let stop = false;
  const load = (async () => {
    let i = 0;
    while (!stop) {
      // errors while redis-server is killed below are expected: the load goes on
      await Promise.allSettled([
        redis.set(`k${i % 50}`, i),
        // the SDK sends its commands as pipelines (auto-pipelining): one plain command too
        fetch(`${svc.urls.kv}/incr/plain`, { headers: { authorization: `Bearer ${kvToken}` } }).then((r) => r.arrayBuffer()),
        redis.get(`k${i % 50}`),
        qstash.publishJSON({ url: `${sink.url}/ok`, body: { i } }),
        index.query({ vector: [0.1, 0.2, 0.3, (i % 10) / 10], topK: 3 }),
      ]);
      i++;
    }
  })();
  let sse: AbortController | undefined;
  try {
    // bearer token required when SVC_METRICS_TOKEN is set
    assert.equal((await fetch(`${mgmt}/metrics`)).status, 401);
    assert.equal((await fetch(`${mgmt}/metrics`, { headers: { authorization: 'Bearer wrong' } })).status, 401);

    // a schedule firing every minute (the first fire comes at the next minute boundary)
    await qstash.schedules.create({ destination: `${sink.url}/scheduled`, cron: '* * * * *' });

    const first = await scrape();
    for (const [name, type] of Object.entries(FAMILIES)) assert.equal(first.types.get(name), type, `family ${name} (${type})`);
    // the Grafana dashboard in docs/ queries only families svc exports
    const dashboard = fs.readFileSync(path.join(ROOT, 'docs/grafana-dashboard.json'), 'utf8');
    const queried = new Set([...dashboard.matchAll(/\b((?:svc|process|nodejs)_[a-z0-9_]+)/g)].map((m) => m[1].replace(/_(bucket|sum|count)$/, '')));
    assert.ok(queried.size >= 20, `dashboard queries ${queried.size} families`);
    for (const name of queried) assert.ok(first.types.has(name), `dashboard queries ${name}, which /metrics does not export`);

    // error paths: a Redis error reply, a refused command, a bad sign-in, failing deliveries
    await redis.set('a-string', 'x');
    await assert.rejects(redis.hset('a-string', { a: 1 }), /WRONGTYPE/);
    const refused = await fetch(`${svc.urls.kv}/debug/sleep/0`, { headers: { authorization: `Bearer ${svc.ctx.credentials.get('kv.token')}` } });
    assert.equal(refused.status, 400);
    assert.equal((await fetch(`${mgmt}/v2/mq/ipv4`, { headers: { authorization: `Basic ${Buffer.from('admin:wrong').toString('base64')}` } })).status, 401);
    await qstash.publishJSON({ url: `${sink.url}/fail-now`, body: {}, retries: 0 });
    await qstash.publishJSON({ url: `${sink.url}/fail-later`, body: {}, retries: 1 });
    await redis.pipeline().set('p', 1).get('p').exec();
    await redis.multi().incr('m').incr('m').exec();
    // an open SSE stream (served by the worker process)
    sse = new AbortController();
    const stream = await fetch(`${svc.urls.kv}/subscribe/metrics-test`, { headers: { authorization: `Bearer ${svc.ctx.credentials.get('kv.token')}` }, signal: sse.signal });
    assert.equal(stream.status, 200);
    // a graph snapshot of the default index
    await (svc.servers.vector as VectorServer).indexes.get('default')!.maintain(1);

    // (the store counts are cached for 5 s between scrapes)
    const later = await waitFor('counters to move and the failing deliveries to reach the DLQ', async () => {
      const s = (await scrape()).samples;
      const ok =
        value(s, 'svc_queue_dead_lettered_total') >= 1 && value(s, 'svc_queue_retries_total') >= 1 &&
        value(s, 'svc_queue_dlq_messages') >= 1 && value(s, 'svc_kv_sse_streams') === 1;
      return ok ? s : undefined;
    }, 60_000);
    const a = first.samples;
    const b = later;
    const moved = (name: string, labels: Record<string, string> = {}) =>
      assert.ok(value(b, name, labels) > value(a, name, labels), `${name}${JSON.stringify(labels)}: ${value(a, name, labels)} -> ${value(b, name, labels)}`);
    moved('svc_http_requests_total', { area: 'kv', route: 'command', status_class: '2xx' });
    moved('svc_http_requests_total', { area: 'kv', route: 'pipeline', status_class: '2xx' });
    moved('svc_http_requests_total', { area: 'kv', route: 'multi-exec', status_class: '2xx' });
    moved('svc_http_requests_total', { area: 'kv', route: 'command', status_class: '4xx' });
    moved('svc_http_requests_total', { area: 'queue', route: '/v2/publish/*', status_class: '2xx' });
    moved('svc_http_requests_total', { area: 'vector', route: 'query', status_class: '2xx' });
    moved('svc_http_requests_total', { area: 'mgmt', route: '/metrics', status_class: '2xx' });
    moved('svc_http_request_duration_seconds_count', { area: 'kv', route: 'command' });
    moved('svc_kv_commands_total', { outcome: 'ok' });
    moved('svc_kv_commands_total', { outcome: 'error' });
    moved('svc_kv_commands_total', { outcome: 'rejected' });
    moved('svc_kv_backend_duration_seconds_count');
    moved('svc_queue_published_messages_total');
    moved('svc_queue_deliveries_total', { outcome: 'success' });
    moved('svc_queue_deliveries_total', { outcome: 'failure' });
    moved('svc_queue_delivery_duration_seconds_count');
    // the SQLite store's own WAL fsync; the PostgreSQL store leaves WAL flushing to the server
    if (!process.env.SVC_QUEUE_DATABASE_URL) moved('svc_queue_fsync_duration_seconds_count');
    moved('svc_vector_query_duration_seconds_count', { index: 'default' });
    moved('svc_vector_snapshot_duration_seconds_count', { index: 'default' });
    moved('svc_mgmt_sign_in_failures_total', { reason: 'invalid' });
    assert.ok(value(b, 'svc_vector_upsert_duration_seconds_count', { index: 'default' }) >= 2, 'upserts timed');
    assert.equal(value(b, 'svc_vector_vectors', { index: 'default' }), 21);
    assert.equal(value(b, 'svc_vector_namespaces', { index: 'default' }), 2);
    assert.equal(value(b, 'svc_vector_namespace_vectors', { index: 'default', namespace: '' }), 20);
    assert.equal(value(b, 'svc_vector_namespace_vectors', { index: 'default', namespace: 'other' }), 1);
    assert.ok(value(b, 'svc_queue_dlq_messages') >= 1, 'DLQ size');
    assert.equal(value(b, 'svc_kv_backend_up'), 1);
    for (const state of ['ready', 'delayed', 'held', 'in_flight']) assert.ok(b.some((s) => s.name === 'svc_queue_messages' && s.labels.state === state), state);
    // histogram series are cumulative and end in +Inf = count
    const inf = value(b, 'svc_http_request_duration_seconds_bucket', { area: 'kv', route: 'command', le: '+Inf' });
    assert.equal(inf, value(b, 'svc_http_request_duration_seconds_count', { area: 'kv', route: 'command' }));
    assert.ok(value(b, 'svc_http_request_duration_seconds_bucket', { area: 'kv', route: 'command', le: '0.0001' }) <= inf, 'cumulative buckets');

    // with one kv worker every client connection is served by the worker: its counts are merged
    // into the primary's scrape (the primary alone served none of the SDK's commands)
    assert.equal((svc.servers.kv as KvServer).workerPids().length, 1);
    const own = (await svc.ctx.metrics.snapshot()).find((f) => f.name === 'svc_kv_commands_total')!;
    const primaryOk = own.values.filter((v) => v.labels.outcome === 'ok').reduce((x, v) => x + v.value, 0);
    assert.ok(value(b, 'svc_kv_commands_total', { outcome: 'ok' }) > primaryOk, `scraped ${value(b, 'svc_kv_commands_total', { outcome: 'ok' })} ok commands, the primary alone counted ${primaryOk}`);

    // supervised redis-server restart: counted, and the backend is up again
    const backend = (svc.servers.kv as KvServer).backend as SupervisedBackend;
    const oldPid = backend.pid!;
    process.kill(oldPid, 'SIGKILL');
    await waitFor('redis-server restart counted and back up', async () => {
      const s = (await scrape()).samples;
      return value(s, 'svc_kv_redis_restarts_total') === 1 && value(s, 'svc_kv_backend_up') === 1 && backend.pid !== oldPid;
    }, 60_000);

    // the schedule fires at the next minute boundary
    await waitFor('the schedule to fire', async () => value((await scrape()).samples, 'svc_queue_schedule_fires_total') >= 1, 70_000);
  } finally {
    stop = true;
    sse?.abort();
    await load.catch(() => undefined);
    await svc.close();
    await sink.close();
  }
});

test('SVC_METRICS=false: no /metrics route (404 behind the management sign-in); without a token /metrics is public', async () => {
  const off = await startTestSvc(['mgmt'], { env: { SVC_METRICS: 'false' } });
  try {
    const basic = Buffer.from(`${off.ctx.credentials.get('mgmt.user')}:${off.ctx.credentials.get('mgmt.password')}`).toString('base64');
    assert.equal((await fetch(`${off.urls.mgmt}/metrics`, { headers: { authorization: `Basic ${basic}` } })).status, 404);
    assert.equal(off.ctx.metrics.enabled, false);
  } finally {
    await off.close();
  }
  const open = await startTestSvc(['mgmt']);
  try {
    const r = await fetch(`${open.urls.mgmt}/metrics`);
    assert.equal(r.status, 200);
    const { types } = parse(await r.text());
    assert.equal(types.get('svc_mgmt_sign_in_failures_total'), 'counter');
  } finally {
    await open.close();
  }
});

test('namespace names (chosen by vector clients) are label values only behind SVC_METRICS_TOKEN, and at most MAX_NAMESPACE_SERIES per index', async () => {
  const extra = MAX_NAMESPACE_SERIES + 5;
  const fill = async (svc: Awaited<ReturnType<typeof startTestSvc>>) => {
    const index = new Index({ url: svc.urls.vector!, token: svc.ctx.credentials.get('vector.default.token') });
    // namespace i holds i + 1 records: the largest are the last ones
    for (let i = 0; i < extra; i++) {
      await index.upsert(Array.from({ length: i + 1 }, (_, j) => ({ id: `v${j}`, vector: [i, j, 1, 1] })), { namespace: `tenant-alice-${i}` });
    }
  };
  const total = (extra * (extra + 1)) / 2;
  const open = await startTestSvc(['vector', 'mgmt']);
  try {
    await fill(open);
    const r = await fetch(`${open.urls.mgmt}/metrics`);
    assert.equal(r.status, 200);
    const text = await r.text();
    assert.ok(!text.includes('tenant-alice'), 'an unauthenticated scrape names no namespace');
    const { samples, types } = parse(text);
    assert.equal(types.has('svc_vector_namespace_vectors'), false);
    assert.equal(value(samples, 'svc_vector_vectors', { index: 'default' }), total);
    assert.equal(value(samples, 'svc_vector_namespaces', { index: 'default' }), extra + 1, 'the tenants and the (empty) default namespace');
    assert.ok(samples.every((s) => s.labels.namespace === undefined), 'no namespace label at all');
  } finally {
    await open.close();
  }
  const closed = await startTestSvc(['vector', 'mgmt'], { env: { SVC_METRICS_TOKEN: 'scrape-secret' } });
  try {
    await fill(closed);
    const r = await fetch(`${closed.urls.mgmt}/metrics`, { headers: { authorization: 'Bearer scrape-secret' } });
    assert.equal(r.status, 200);
    const { samples } = parse(await r.text());
    const series = samples.filter((s) => s.name === 'svc_vector_namespace_vectors');
    assert.equal(series.length, MAX_NAMESPACE_SERIES, 'one series per namespace up to the cap');
    const expected = Array.from({ length: MAX_NAMESPACE_SERIES }, (_, k) => `tenant-alice-${extra - 1 - k}`).sort();
    assert.deepEqual(series.map((s) => s.labels.namespace).sort(), expected, 'the largest namespaces');
    for (const s of series) assert.equal(s.value, Number(s.labels.namespace.split('-').pop()) + 1);
    assert.equal(value(samples, 'svc_vector_vectors', { index: 'default' }), total);
  } finally {
    await closed.close();
  }
});
