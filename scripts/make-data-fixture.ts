/**
 * Writes the fixture data directory `test/fixtures/data-v1/` with the current svc, through the
 * official SDKs: every area and every kind of record, and `test/fixtures/data-v1.json` listing
 * what it holds (what `test/ops/backup-upgrade.test.ts` expects a later svc to serve from it).
 *
 *   npx tsx scripts/make-data-fixture.ts        (or `npm run fixture:data`)
 *
 * Held: queue messages waiting (delayed), delivered, failed into the DLQ, cancelled, waiting in a
 * named queue and under a flow-control key; a URL group; a schedule; workflow runs finished and
 * waiting for an event (with its waiter); kv strings, a key with a TTL, hash, list, set, sorted
 * set, stream and a JSON document; vectors in a dense index (two namespaces, metadata and data),
 * a sparse index and a hybrid index. svc is stopped cleanly and its run-time files (lock, pid,
 * socket, logs, redis.conf) are removed, so the directory is what a stopped svc leaves.
 */
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Client } from '@upstash/qstash';
import { Redis } from '@upstash/redis';
import { Index } from '@upstash/vector';
import { Client as WorkflowClient, serve as serveWorkflow } from '@upstash/workflow';
import { loadConfig } from '../src/config.js';
import { createLogger } from '../src/logger.js';
import { createContext, startSvc } from '../src/main.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
export const FIXTURE_DIR = path.join(ROOT, 'test/fixtures/data-v1');
const FIXTURE_JSON = path.join(ROOT, 'test/fixtures/data-v1.json');
const INDEXES = [
  { name: 'sparse', type: 'SPARSE', metric: 'DOT_PRODUCT' },
  { name: 'hybrid', type: 'HYBRID', dimension: 4, metric: 'COSINE' },
];

async function waitFor<T>(what: string, fn: () => Promise<T | undefined | false>, ms = 30_000): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    const v = await fn().catch(() => undefined);
    if (v) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

async function main(): Promise<void> {
  fs.rmSync(FIXTURE_DIR, { recursive: true, force: true });
  fs.mkdirSync(path.dirname(FIXTURE_DIR), { recursive: true });
  const indexesFile = path.join(ROOT, 'test/fixtures/data-v1-indexes.json');
  fs.writeFileSync(indexesFile, JSON.stringify(INDEXES, null, 2) + '\n');
  const env = {
    SVC_HOST: '127.0.0.1',
    SVC_QUEUE_PORT: '0',
    SVC_KV_PORT: '0',
    SVC_VECTOR_PORT: '0',
    SVC_MGMT_PORT: '0',
    SVC_DATA_DIR: FIXTURE_DIR,
    SVC_LOG_LEVEL: 'warn',
    SVC_KV_WORKERS: '0',
    SVC_VECTOR_DIMENSION: '4',
    SVC_VECTOR_INDEXES: indexesFile,
  };
  const config = loadConfig(env);
  const ctx = createContext(config, { logger: createLogger(config.logLevel), env });
  const svc = await startSvc(ctx);
  const creds = ctx.credentials;
  const wfEnv = {
    QSTASH_URL: svc.urls.queue!,
    QSTASH_TOKEN: creds.get('queue.token'),
    QSTASH_CURRENT_SIGNING_KEY: creds.get('queue.currentSigningKey'),
    QSTASH_NEXT_SIGNING_KEY: creds.get('queue.nextSigningKey'),
  };
  let base = '';
  // the workflow endpoints (the SDK's serve, built per request with this server's URL)
  const routes: Record<string, Parameters<typeof serveWorkflow>[0]> = {
    '/three': async (c) => {
      const a = await c.run('s1', () => (c.requestPayload as { n: number }).n + 1);
      return { result: await c.run('s2', () => a * 10) };
    },
    '/waiter': async (c) => {
      const r = await c.waitForEvent('wait', 'fixture-event', { timeout: '18250d' });
      await c.run('after', () => r.eventData ?? null);
    },
  };
  // a destination: /ok answers 200, /fail 500
  const server = http.createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const p = (req.url ?? '/').split('?')[0];
    if (p === '/ok') return void res.writeHead(200).end('delivered');
    if (p === '/fail') return void res.writeHead(500).end('failed for the fixture');
    const route = routes[p];
    if (!route) return void res.writeHead(404).end();
    const headers = new Headers();
    for (const [k, v] of Object.entries(req.headers)) if (v !== undefined) headers.set(k, Array.isArray(v) ? v.join(', ') : v);
    const request = new Request(base + req.url, { method: req.method, headers, body: req.method === 'POST' ? Buffer.concat(chunks) : undefined });
    const response = await serveWorkflow(route, { env: wfEnv, url: base + p }).handler(request);
    res.writeHead(response.status, Object.fromEntries(response.headers));
    res.end(Buffer.from(await response.arrayBuffer()));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

  try {
    const q = new Client({ baseUrl: svc.urls.queue!, token: creds.get('queue.token'), retry: false });
    const year = 365 * 86_400;
    // far enough that the fixture's delayed messages stay waiting for the life of the repository
    const later = 50 * year;
    const pending = await q.publishJSON({ url: 'https://example.com/fixture/pending', body: { state: 'pending' }, delay: later });
    const delivered = await q.publishJSON({ url: `${base}/ok`, body: { state: 'delivered' } });
    const failed = await q.publishJSON({ url: `${base}/fail`, body: { state: 'dlq' }, retries: 0 });
    const cancelled = await q.publishJSON({ url: 'https://example.com/fixture/cancelled', body: { state: 'cancelled' }, delay: later });
    await q.messages.cancel(cancelled.messageId);
    await q.queue({ queueName: 'fixture-queue' }).upsert({ parallelism: 1 });
    const queued = await q.queue({ queueName: 'fixture-queue' }).enqueueJSON({ url: 'https://example.com/fixture/queued', body: { state: 'queued' }, delay: later });
    const flow = await q.publishJSON({
      url: 'https://example.com/fixture/flow',
      body: { state: 'flow-control' },
      delay: later,
      flowControl: { key: 'fixture-key', parallelism: 2, rate: 10 },
    });
    await q.urlGroups.addEndpoints({ name: 'fixture-group', endpoints: [{ url: 'https://example.com/fixture/a' }, { url: 'https://example.com/fixture/b', name: 'b' }] });
    const schedule = await q.schedules.create({ destination: 'https://example.com/fixture/schedule', cron: '0 0 1 1 *', body: '{"state":"schedule"}' });
    const dlq = await waitFor('the failed message in the DLQ', async () => {
      const { messages } = await q.dlq.listMessages();
      return messages.find((m) => m.messageId === failed.messageId);
    });
    await waitFor('the delivery', async () => {
      const { logs } = (await q.logs({ filter: { messageId: delivered.messageId } } as never)) as unknown as { logs: { state: string }[] };
      return logs.some((l) => l.state === 'DELIVERED');
    });

    const wf = new WorkflowClient({ baseUrl: svc.urls.queue!, token: creds.get('queue.token') });
    const done = await wf.trigger({ url: `${base}/three`, body: { n: 4 } });
    const waiting = await wf.trigger({ url: `${base}/waiter`, body: {} });
    const runState = async (id: string) => {
      const { runs } = (await wf.logs({ filter: { workflowRunId: id } } as never)) as unknown as { runs: { workflowRunId: string; workflowState: string }[] };
      return runs.find((r) => r.workflowRunId === id)?.workflowState;
    };
    await waitFor('the finished run', async () => (await runState(done.workflowRunId)) === 'RUN_SUCCESS');
    await waitFor('the waiter', async () => ((await wf.getWaiters({ eventId: 'fixture-event' })) as unknown[]).length > 0);

    const redis = new Redis({ url: svc.urls.kv!, token: creds.get('kv.token') });
    await redis.set('fixture:string', 'hello');
    await redis.set('fixture:ttl', 'expires in ten years', { ex: 10 * year });
    await redis.hset('fixture:hash', { a: '1', b: 'two' });
    await redis.rpush('fixture:list', 'x', 'y', 'z');
    await redis.sadd('fixture:set', 'm1', 'm2');
    await redis.zadd('fixture:zset', { score: 1, member: 'one' }, { score: 2, member: 'two' });
    await redis.xadd('fixture:stream', '1-1', { field: 'value' });
    await redis.json.set('fixture:json', '$', { name: 'svc', tags: ['a', 'b'], n: 3 });

    const dense = new Index({ url: svc.urls.vector!, token: creds.get('vector.default.token') });
    const denseRecords = {
      '': [
        { id: 'd1', vector: [1, 0, 0, 0], metadata: { kind: 'dense', n: 1 }, data: 'first' },
        { id: 'd2', vector: [0, 1, 0, 0], metadata: { kind: 'dense', n: 2 } },
      ],
      ns1: [{ id: 'n1', vector: [0, 0, 1, 0], metadata: { kind: 'dense', ns: 'ns1' }, data: 'in ns1' }],
    };
    for (const [ns, recs] of Object.entries(denseRecords)) await dense.namespace(ns).upsert(recs);
    const sparse = new Index({ url: `${svc.urls.vector!}/sparse`, token: creds.get('vector.sparse.token') });
    const sparseRecords = [
      { id: 's1', sparseVector: { indices: [1, 5, 9], values: [0.5, 0.25, 1] }, metadata: { kind: 'sparse' } },
      { id: 's2', sparseVector: { indices: [2], values: [1] }, data: 'sparse data' },
    ];
    await sparse.upsert(sparseRecords);
    await sparse.namespace('ns1').upsert([{ id: 's3', sparseVector: { indices: [3, 4], values: [0.1, 0.2] } }]);
    const hybrid = new Index({ url: `${svc.urls.vector!}/hybrid`, token: creds.get('vector.hybrid.token') });
    const hybridRecords = [
      { id: 'h1', vector: [0.5, 0.5, 0, 0], sparseVector: { indices: [7], values: [2] }, metadata: { kind: 'hybrid' } },
      { id: 'h2', vector: [0, 0, 0.5, 0.5], sparseVector: { indices: [8, 9], values: [1, 1] } },
    ];
    await hybrid.upsert(hybridRecords);

    const expected = {
      indexes: INDEXES,
      env: { SVC_VECTOR_DIMENSION: '4' },
      queue: {
        pending: pending.messageId,
        delivered: delivered.messageId,
        dlq: { messageId: failed.messageId, dlqId: dlq.dlqId },
        cancelled: cancelled.messageId,
        queued: { queueName: 'fixture-queue', messageId: queued.messageId },
        flowControl: { key: 'fixture-key', messageId: flow.messageId },
        urlGroup: { name: 'fixture-group', endpoints: ['https://example.com/fixture/a', 'https://example.com/fixture/b'] },
        schedule: { scheduleId: schedule.scheduleId, cron: '0 0 1 1 *' },
        runs: { finished: done.workflowRunId, waiting: waiting.workflowRunId, eventId: 'fixture-event' },
      },
      kv: {
        'fixture:string': 'hello',
        'fixture:ttl': 'expires in ten years',
        'fixture:hash': { a: '1', b: 'two' },
        'fixture:list': ['x', 'y', 'z'],
        'fixture:set': ['m1', 'm2'],
        'fixture:zset': ['one', 'two'],
        'fixture:stream': '1-1',
        'fixture:json': { name: 'svc', tags: ['a', 'b'], n: 3 },
      },
      vector: { default: denseRecords, sparse: { '': sparseRecords, ns1: [{ id: 's3', sparseVector: { indices: [3, 4], values: [0.1, 0.2] } }] }, hybrid: { '': hybridRecords } },
    };
    fs.writeFileSync(FIXTURE_JSON, JSON.stringify(expected, null, 2) + '\n');
  } finally {
    server.closeAllConnections();
    server.close();
    await svc.close();
  }
  // what a stopped svc leaves, without the run-time files
  for (const f of ['svc.lock', 'kv/redis.pid', 'kv/redis.sock', 'kv/redis.log', 'kv/redis.conf', 'kv/dump.rdb']) fs.rmSync(path.join(FIXTURE_DIR, f), { force: true });
  let bytes = 0;
  for (const rel of fs.readdirSync(FIXTURE_DIR, { recursive: true, encoding: 'utf8' })) {
    const st = fs.statSync(path.join(FIXTURE_DIR, rel));
    if (st.isFile()) bytes += st.size;
  }
  process.stdout.write(`fixture written: ${FIXTURE_DIR} (${bytes} bytes)\n`);
}

main().then(
  () => process.exit(0),
  (err) => {
    process.stderr.write(`${(err as Error).stack}\n`);
    process.exit(1);
  },
);
