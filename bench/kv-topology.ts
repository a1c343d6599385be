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
 * `BENCH_OUT=<file>` (also write the report there), `BENCH_PROFILE=1` (the cluster's svc runs
 * with `--cpu-prof`, both sides in the A/B mode; the hot spots are printed at the end).
 *
 * A/B mode, `BENCH_AB_ROOT=<checkout>` (e.g. a worktree of main): only the cluster `/pipeline` cell
 * at 64 connections, on two svc processes in front of the same cluster (that checkout = A, this
 * one = B), plus this checkout's svc on the single server; `BENCH_AB_ROUNDS` rounds (default 5)
 * interleaved (`lib/ab.ts`: A B, B A, ...), each side's median and range of commands/s, of svc
 * CPU ms per 1,000 commands and of the Redis servers' CPU ms per 1,000 commands (the one server, or
 * all six cluster nodes, replicas included: shared by A and B, read during each side's rounds),
 * the paired ratios B/A, and each side's share of the single server.
 * `BENCH_AB_ENV_A` / `BENCH_AB_ENV_B` (`NAME=value,...`): extra environment of a side (e.g.
 * `BENCH_AB_ROOT=. BENCH_AB_ENV_A=SVC_KV_ROUTER_THREAD=false` compares the router's thread with the
 * main event loop).
 */
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { startRedisCluster, startRedisSentinel } from '../test/kv/topology-helpers.js';
import { abOrder, abRatios, cpuMs, fmtSpread, median } from './lib/ab.js';
import { summarizeCpuProfile } from './lib/cpuprofile.js';
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

interface Svc {
  url: string;
  token: string;
  pid: number;
  stop(): Promise<void>;
}

/** svc (`root`: the checkout, default this one) serving kv; `nodeArgs` before `bin/svc.js` (e.g. `--cpu-prof`). */
async function startSvc(label: string, env: Record<string, string>, root = ROOT, nodeArgs: string[] = []): Promise<Svc> {
  const port = await freePort();
  const token = `bench-${Math.random().toString(36).slice(2)}`;
  const proc = await startProcess({
    name: label,
    cmd: process.execPath,
    args: [...nodeArgs, path.join(root, 'bin/svc.js'), 'serve'],
    cwd: root,
    env: { ...process.env, SVC_AREAS: 'kv', SVC_HOST: '127.0.0.1', SVC_KV_PORT: String(port), SVC_DATA_DIR: makeTempDir(), SVC_KV_TOKEN: token, SVC_LOG_LEVEL: 'warn', ...env },
    readyPattern: /svc is running[\s\S]*Paste into/,
    readyTimeoutMs: 60_000,
  });
  const url = `http://127.0.0.1:${port}`;
  await waitFor(`${label} to answer PING`, async () => (await fetch(`${url}/ping`, { headers: { Authorization: `Bearer ${token}` } })).ok, 30_000);
  return { url, token, pid: proc.pid, stop: () => proc.stop('SIGTERM', 15_000) };
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
  const redis = await startRedisServer(redisPort, makeTempDir());
  const cluster = await startRedisCluster();
  if (process.env.BENCH_AB_ROOT) {
    const redisPids = { single: [redis.pid], cluster: cluster.nodes.map((n) => n.proc.pid!) };
    await abRun(path.resolve(process.env.BENCH_AB_ROOT), redisPort, cluster.seeds, work, t0, redisPids);
    await cluster.close();
    await cleanupAll();
    return;
  }
  const sentinel = await startRedisSentinel();
  const profDir = process.env.BENCH_PROFILE === '1' ? makeTempDir('svc-bench-prof-') : undefined;
  const systems = [
    { label: 'single redis-server', svc: await startSvc('svc-single', { SVC_KV_REDIS_URL: `redis://127.0.0.1:${redisPort}` }) },
    { label: 'cluster 3+3', svc: await startSvc('svc-cluster', { SVC_KV_REDIS_CLUSTER: cluster.seeds, SVC_KV_REDIS_URL: '' }, ROOT, profDir ? ['--cpu-prof', `--cpu-prof-dir=${profDir}`] : []) },
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
  for (const s of systems) await s.svc.stop();
  if (profDir) report += profileText(profDir);
  console.log(report);
  if (process.env.BENCH_OUT) fs.writeFileSync(process.env.BENCH_OUT, report);
  await cluster.close();
  await sentinel.close();
  await cleanupAll();
}

/** Hot spots of the two busiest `.cpuprofile`s in `dir` (svc's main thread and the router thread), as markdown. */
function profileText(dir: string): string {
  const summaries = fs
    .readdirSync(dir)
    .filter((f) => f.endsWith('.cpuprofile'))
    .map((f) => ({ f, s: summarizeCpuProfile(path.join(dir, f), 30) }))
    .sort((a, b) => b.s.totalSamples - a.s.totalSamples)
    .slice(0, 2);
  let out = '';
  for (const { f, s } of summaries) {
    out += `\n## svc CPU profile, cluster (${f}, ${s.totalSamples} busy samples, whole run)\n\n`;
    out += markdownTable([{ header: 'self %', align: 'right' }, { header: 'package / folder' }], s.buckets.slice(0, 12).map((b) => [b.selfPct.toFixed(1), b.name])) + '\n\n';
    out += markdownTable([{ header: 'self %', align: 'right' }, { header: 'function' }], s.functions.map((b) => [b.selfPct.toFixed(1), b.name])) + '\n';
  }
  return out;
}

/** The A/B mode (module comment): cluster `/pipeline` at 64 connections, checkout `abRoot` (A) vs this one (B). */
async function abRun(abRoot: string, redisPort: number, seeds: string, work: string, t0: number, redisPids: { single: number[]; cluster: number[] }): Promise<void> {
  const rounds = Number(process.env.BENCH_AB_ROUNDS ?? 5);
  const loadStart = fs.readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ');
  const single = await startSvc('svc-single', { SVC_KV_REDIS_URL: `redis://127.0.0.1:${redisPort}` });
  const profDirs = process.env.BENCH_PROFILE === '1' ? [makeTempDir('svc-bench-prof-'), makeTempDir('svc-bench-prof-')] : undefined;
  const prof = (i: number) => (profDirs ? ['--cpu-prof', `--cpu-prof-dir=${profDirs[i]}`] : []);
  const envOf = (v: string | undefined): Record<string, string> => Object.fromEntries((v ?? '').split(',').filter(Boolean).map((kv) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)]));
  const envA = envOf(process.env.BENCH_AB_ENV_A);
  const envB = envOf(process.env.BENCH_AB_ENV_B);
  const a = await startSvc('svc-cluster-A', { SVC_KV_REDIS_CLUSTER: seeds, SVC_KV_REDIS_URL: '', ...envA }, abRoot, prof(0));
  const b = await startSvc('svc-cluster-B', { SVC_KV_REDIS_CLUSTER: seeds, SVC_KV_REDIS_URL: '', ...envB }, ROOT, prof(1));
  const sides = { single, A: a, B: b } as const;
  const cmds: Record<keyof typeof sides, number[]> = { single: [], A: [], B: [] };
  const cpu: Record<keyof typeof sides, number[]> = { single: [], A: [], B: [] };
  /** CPU of the redis-servers behind each side (the single server; all six cluster nodes, replicas included). */
  const redisCpu: Record<keyof typeof sides, number[]> = { single: [], A: [], B: [] };
  const redisMs = (name: keyof typeof sides) => (name === 'single' ? redisPids.single : redisPids.cluster).reduce((a, pid) => a + cpuMs(pid), 0);
  for (const name of Object.keys(sides) as (keyof typeof sides)[]) {
    const wl = workloads(sides[name].url, sides[name].token)[2];
    await runWrk(wl.req, { connections: 64, durationS: 1, workDir: work });
  }
  for (let round = 0; round < rounds; round++) {
    for (const name of ['single', ...abOrder(round, 'A', 'B')] as (keyof typeof sides)[]) {
      const s = sides[name];
      const wl = workloads(s.url, s.token)[2];
      const c0 = cpuMs(s.pid);
      const r0 = redisMs(name);
      const r = await runWrk(wl.req, { connections: 64, durationS: SECONDS, workDir: work });
      cmds[name].push(r.rps * 100);
      cpu[name].push(((cpuMs(s.pid) - c0) / (r.rps * 100 * SECONDS)) * 1000);
      redisCpu[name].push(((redisMs(name) - r0) / (r.rps * 100 * SECONDS)) * 1000);
      console.error(`round ${round} ${name}: ${fmtInt(r.rps * 100)} cmds/s, errors ${r.non2xx + r.socketErrors}`);
    }
  }
  const loadEnd = fs.readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ');
  const share = (xs: number[]) => xs.map((x, i) => x / cmds.single[i]);
  const pct = (x: number) => `${(x * 100).toFixed(0)} %`;
  let report = `# kv cluster /pipeline A/B (${new Date().toISOString()}, ${rounds} rounds x ${SECONDS} s, load ${loadStart} -> ${loadEnd}, ${Math.round((Date.now() - t0) / 1000)} s in all)\n\n`;
  report += `A = ${abRoot} ${JSON.stringify(envA)}, B = ${ROOT} ${JSON.stringify(envB)}; workload /pipeline 100 SET over random keys, 64 connections\n\n`;
  report += markdownTable(
    ['side', 'cmds/s median (range)', 'svc CPU ms per 1,000 cmds', 'Redis CPU ms per 1,000 cmds', 'share of single (paired rounds)'].map((h) => ({ header: h })),
    (['single', 'A', 'B'] as const).map((n) => [n === 'single' ? 'single redis-server (B)' : `cluster 3+3 (${n})`, fmtSpread(cmds[n]), fmtSpread(cpu[n], (x) => x.toFixed(3)), fmtSpread(redisCpu[n], (x) => x.toFixed(3)), n === 'single' ? '-' : `${pct(median(share(cmds[n])))} (${pct(Math.min(...share(cmds[n])))}-${pct(Math.max(...share(cmds[n])))})`]),
  );
  const r = abRatios(cmds.A, cmds.B);
  const rc = abRatios(cpu.A, cpu.B);
  report += `\n\nB/A cmds/s: ${r.ofMedians} of medians, paired ${r.paired}; B/A CPU per command: ${rc.ofMedians}, paired ${rc.paired}\n`;
  for (const s of Object.values(sides)) await s.stop();
  if (profDirs) report += profileText(profDirs[0]).replace('cluster', 'cluster A') + profileText(profDirs[1]).replace('cluster', 'cluster B');
  console.log(report);
  if (process.env.BENCH_OUT) fs.writeFileSync(process.env.BENCH_OUT, report);
}

main().catch(async (err) => {
  console.error(err);
  await cleanupAll();
  process.exit(1);
});
