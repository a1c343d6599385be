/**
 * `npm run bench:kv-topology` — the kv gateway on one redis-server vs a Redis Cluster (3 primaries
 * + 3 replicas) vs a Sentinel setup (1 primary + 1 replica + 3 sentinels), all started by the
 * bench from the same redis-server binary (no persistence), svc as a child process
 * (`node bin/svc.js serve`, `SVC_AREAS=kv`, default workers) on each.
 *
 * Workloads (wrk, keep-alive): `GET /get/<k>` and `POST /set/<k>` (100-byte value) at 1 and 64
 * connections; `/pipeline` of 100 SETs over random keys (spread over every slot on the cluster)
 * at 1 and 64 connections. Then the failover row: the same pipeline at 16 connections for
 * `BENCH_FAILOVER_SECONDS` while one cluster primary is SIGKILLed after 2 s: p99, max, and the
 * non-2xx answers (503 while the replica takes over).
 *
 * Env: `BENCH_SECONDS` (per cell, default 5), `BENCH_FAILOVER_SECONDS` (default 12),
 * `BENCH_OUT=<file>` (also write the report there).
 */
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { startRedisCluster, startRedisSentinel } from '../test/kv/topology-helpers.js';
import { requirePrograms } from './lib/needs.js';
import { cleanupAll, freePort, installCleanupHandlers, makeTempDir, startProcess, waitFor } from './lib/proc.js';
import { startRedisServer } from './lib/redis.js';
import { fmtInt, fmtMs } from './lib/stats.js';
import { markdownTable } from './lib/table.js';
import { runWrk, type WrkRequest } from './lib/wrk.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const SECONDS = Number(process.env.BENCH_SECONDS ?? 5);
const FAILOVER_SECONDS = Number(process.env.BENCH_FAILOVER_SECONDS ?? 12);
const VALUE = 'v'.repeat(100);

async function startSvc(label: string, env: Record<string, string>): Promise<{ url: string; token: string; stop(): Promise<void> }> {
  const port = await freePort();
  const token = `bench-${Math.random().toString(36).slice(2)}`;
  const proc = await startProcess({
    name: label,
    cmd: process.execPath,
    args: [path.join(ROOT, 'bin/svc.js'), 'serve'],
    cwd: ROOT,
    env: { ...process.env, SVC_AREAS: 'kv', SVC_HOST: '127.0.0.1', SVC_KV_PORT: String(port), SVC_DATA_DIR: makeTempDir(), SVC_KV_TOKEN: token, SVC_LOG_LEVEL: 'warn', ...env },
    readyPattern: /svc is running[\s\S]*Paste into/,
    readyTimeoutMs: 60_000,
  });
  const url = `http://127.0.0.1:${port}`;
  await waitFor(`${label} to answer PING`, async () => (await fetch(`${url}/ping`, { headers: { Authorization: `Bearer ${token}` } })).ok, 30_000);
  return { url, token, stop: () => proc.stop() };
}

function workloads(url: string, token: string): { name: string; cmds: number; req: WrkRequest }[] {
  const auth = { Authorization: `Bearer ${token}` };
  const pipeline = JSON.stringify(Array.from({ length: 100 }, () => ['SET', `bench:r:${Math.random().toString(36).slice(2)}`, VALUE]));
  return [
    { name: 'GET /get/<k>', cmds: 1, req: { url: `${url}/get/bench:k`, headers: auth } },
    { name: 'SET /set/<k>', cmds: 1, req: { url: `${url}/set/bench:k`, method: 'POST', headers: auth, body: VALUE } },
    { name: '/pipeline 100 SET, random keys', cmds: 100, req: { url: `${url}/pipeline`, method: 'POST', headers: { ...auth, 'content-type': 'application/json' }, body: pipeline } },
  ];
}

async function main(): Promise<void> {
  requirePrograms('bench:kv-topology', [
    { cmd: 'redis-server', pkg: 'redis-server' },
    { cmd: 'redis-cli', pkg: 'redis-tools' },
    { cmd: 'wrk', pkg: 'wrk' },
  ]);
  installCleanupHandlers();
  const work = makeTempDir();
  const t0 = Date.now();
  const redisPort = await freePort();
  await startRedisServer(redisPort, makeTempDir());
  const cluster = await startRedisCluster();
  const sentinel = await startRedisSentinel();
  const systems = [
    { label: 'single redis-server', svc: await startSvc('svc-single', { SVC_KV_REDIS_URL: `redis://127.0.0.1:${redisPort}` }) },
    { label: 'cluster 3+3', svc: await startSvc('svc-cluster', { SVC_KV_REDIS_CLUSTER: cluster.seeds, SVC_KV_REDIS_URL: '' }) },
    { label: 'sentinel 1+1', svc: await startSvc('svc-sentinel', { SVC_KV_REDIS_SENTINELS: sentinel.addresses, SVC_KV_REDIS_SENTINEL_MASTER: sentinel.masterName, SVC_KV_REDIS_URL: '' }) },
  ];
  const rows: string[][] = [];
  for (const conns of [1, 64]) {
    for (let w = 0; w < 3; w++) {
      for (const s of systems) {
        const wl = workloads(s.svc.url, s.svc.token)[w];
        const check = await fetch(wl.req.url, { method: wl.req.method ?? 'GET', headers: wl.req.headers, body: wl.req.body as string | undefined });
        if (!check.ok) throw new Error(`${s.label} ${wl.name}: ${check.status} ${await check.text()}`);
        await runWrk(wl.req, { connections: conns, durationS: 1, workDir: work });
        const r = await runWrk(wl.req, { connections: conns, durationS: SECONDS, workDir: work });
        rows.push([s.label, wl.name, String(conns), fmtInt(r.rps), fmtInt(r.rps * wl.cmds), fmtMs(r.p50Ms), fmtMs(r.p99Ms), String(r.non2xx + r.socketErrors)]);
        console.error(rows[rows.length - 1].join(' | '));
      }
    }
  }
  // failover: a cluster primary SIGKILLed during the pipeline load
  const c = systems[1].svc;
  const wl = workloads(c.url, c.token)[2];
  const primaries = await cluster.primaries();
  const victim = cluster.nodes.find((n) => n.port === primaries[0])!;
  const killer = setTimeout(() => void victim.kill(), 2000);
  const f = await runWrk(wl.req, { connections: 16, durationS: FAILOVER_SECONDS, workDir: work, timeoutS: 20 });
  clearTimeout(killer);
  const failoverRow = [[`cluster 3+3, primary SIGKILLed at 2 s`, wl.name, '16', fmtInt(f.rps), fmtMs(f.p50Ms), fmtMs(f.p99Ms), fmtMs(f.maxMs), String(f.non2xx), String(f.socketErrors)]];
  let report = `# kv on one server, a Redis Cluster and Sentinel (${new Date().toISOString()}, ${SECONDS} s per cell, ${Math.round((Date.now() - t0) / 1000)} s in all)\n\n`;
  report += markdownTable(
    ['setup', 'workload', 'conns', 'req/s', 'cmds/s', 'p50', 'p99', 'errors'].map((h) => ({ header: h })),
    rows,
  );
  report += `\n\n## Failover (${FAILOVER_SECONDS} s of load)\n\n`;
  report += markdownTable(['setup', 'workload', 'conns', 'req/s', 'p50', 'p99', 'max', 'non-2xx (503)', 'socket errors'].map((h) => ({ header: h })), failoverRow);
  report += '\n';
  console.log(report);
  if (process.env.BENCH_OUT) fs.writeFileSync(process.env.BENCH_OUT, report);
  for (const s of systems) await s.svc.stop();
  await cluster.close();
  await sentinel.close();
  await cleanupAll();
}

main().catch(async (err) => {
  console.error(err);
  await cleanupAll();
  process.exit(1);
});
