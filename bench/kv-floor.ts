/**
 * `npm run bench:kv-floor` — the floor of a Node.js gateway at one connection: what a round trip
 * costs when the gateway does next to nothing, against svc and webdis in the same run.
 *
 * Three HTTP gateways in front of one redis-server (no persistence), each answering
 * `GET /get/<key>` with `{"result":"<100-byte value>"}`:
 * - **svc** (this checkout, kv only, `SVC_KV_WORKERS=0`);
 * - **webdis** (`GET /GET/<key>`, its defaults: 4 threads, pool 2);
 * - **node-floor**: a Node.js process of a few lines (the same Node.js as svc): a `net` server whose
 *   `'data'` listener counts the request heads in each read (`\r\n\r\n`), writes one prebuilt
 *   `GET <key>` per head to one Redis connection (read with `onread`), and answers each reply
 *   with a prebuilt response head and the value. No parsing, no token, no validation, no
 *   metrics: the event loop, the two sockets' reads and writes and the kernel's loopback path,
 *   which any Node.js gateway pays.
 *
 * wrk, 1 thread, keep-alive, at `BENCH_CONNECTIONS` (default `1`), `BENCH_REPEAT` (default 5)
 * interleaved rounds of `BENCH_SECONDS` (default 3) per gateway; the median round per gateway is
 * reported (req/s, p50, p99, and the gateway process's user and system CPU per request from
 * `/proc`, all its threads, in 10 ms ticks) with the load average at start and end: wall-clock numbers on a
 * shared 2-core machine, to be read next to the load.
 */
import os from 'node:os';
import { defaultKvWorkers } from '../src/config.js';
import fs from 'node:fs';
import { describeMachine, machineInfo } from './lib/machine.js';
import { cleanupAll, freePort, installCleanupHandlers, makeTempDir, runToCompletion, startProcess, waitFor } from './lib/proc.js';
import { startRedisServer, startWebdis } from './lib/redis.js';
import { runWrk, type WrkRequest, type WrkResult } from './lib/wrk.js';
import { requirePrograms } from './lib/needs.js';
import { markdownTable } from './lib/table.js';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const env = process.env;
const SECONDS = Number(env.BENCH_SECONDS ?? 3);
const REPEAT = Number(env.BENCH_REPEAT ?? 5);
const CONNS = (env.BENCH_CONNECTIONS ?? '1').split(',').map(Number);
const KEY = 'bench:floor';
const VALUE = 'v'.repeat(100);

/** The floor gateway (CommonJS for `node -e`): argv = HTTP port, Redis port, key. */
const FLOOR_GATEWAY = `
const net = require('node:net');
const [httpPort, redisPort, key] = process.argv.slice(1);
const cmd = Buffer.from('*2\\r\\n$3\\r\\nGET\\r\\n$' + key.length + '\\r\\n' + key + '\\r\\n');
const waiting = [];
let pending = '';
const redis = net.connect({ port: Number(redisPort), host: '127.0.0.1', noDelay: true, onread: { buffer: Buffer.allocUnsafe(65536), callback(n, buf) {
  pending += buf.latin1Slice(0, n);
  for (;;) {
    const nl = pending.indexOf('\\r\\n');
    if (nl < 0) return;
    const len = Number(pending.slice(1, nl));
    if (pending.length < nl + 2 + len + 2) return;
    const value = pending.slice(nl + 2, nl + 2 + len);
    pending = pending.slice(nl + 2 + len + 2);
    const body = '{"result":"' + value + '"}';
    const s = waiting.shift();
    if (s && !s.destroyed) s.write('HTTP/1.1 200 OK\\r\\ncontent-type: application/json\\r\\ncontent-length: ' + body.length + '\\r\\n\\r\\n' + body, 'latin1');
  }
} } });
net.createServer({ noDelay: true }, (s) => {
  s.on('error', () => {});
  s.on('data', (chunk) => {
    for (let at = chunk.indexOf('\\r\\n\\r\\n'); at >= 0; at = chunk.indexOf('\\r\\n\\r\\n', at + 4)) {
      waiting.push(s);
      redis.write(cmd);
    }
  });
}).listen(Number(httpPort), '127.0.0.1', () => console.log('floor ready'));
`;

/** User and system CPU ms of process `pid` so far (`/proc/<pid>/stat` utime, stime; all its threads). */
function cpuSplitMs(pid: number): [number, number] {
  const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return [(Number(fields[11]) * 1000) / 100, (Number(fields[12]) * 1000) / 100];
}

interface Gw {
  name: string;
  req: WrkRequest;
  /** The gateway's process (its user + system CPU is read from `/proc`). */
  pid: number;
}

async function main(): Promise<void> {
  requirePrograms('bench:kv-floor', [
    { cmd: 'redis-server', pkg: 'redis-server' },
    { cmd: 'redis-cli', pkg: 'redis-tools' },
    { cmd: 'wrk', pkg: 'wrk' },
    { cmd: 'webdis', pkg: 'webdis' },
  ]);
  installCleanupHandlers();
  const loadStart = os.loadavg().map((x) => x.toFixed(2)).join(' ');
  const machine = machineInfo();
  const work = makeTempDir('svc-bench-kv-floor-');
  const redisPort = await freePort();
  await startRedisServer(redisPort, work);
  const seed = await runToCompletion('redis-cli', 'redis-cli', ['-p', String(redisPort), 'SET', KEY, VALUE]);
  if (seed.code !== 0) throw new Error(`seeding failed: ${seed.stderr}`);

  const svcPort = await freePort();
  const token = `bench-${Math.random().toString(36).slice(2)}`;
  const svc = await startProcess({
    name: 'svc',
    cmd: process.execPath,
    args: [path.join(ROOT, 'bin/svc.js'), 'serve'],
    cwd: ROOT,
    env: { ...env, SVC_AREAS: 'kv', SVC_HOST: '127.0.0.1', SVC_KV_PORT: String(svcPort), SVC_DATA_DIR: makeTempDir('svc-bench-data-'), SVC_KV_TOKEN: token, SVC_LOG_LEVEL: 'warn', SVC_KV_REDIS_URL: `redis://127.0.0.1:${redisPort}` },
    readyPattern: /svc is running[\s\S]*Paste into/,
    readyTimeoutMs: 60_000,
  });
  const webdisPort = await freePort();
  const webdis = await startWebdis({ httpPort: webdisPort, redisPort, threads: 4, poolSize: 2, dir: work });
  const floorPort = await freePort();
  const floor = await startProcess({ name: 'node-floor', cmd: process.execPath, args: ['-e', FLOOR_GATEWAY, String(floorPort), String(redisPort), KEY], cwd: ROOT, env: { ...env }, readyPattern: /floor ready/, readyTimeoutMs: 30_000 });

  const gws: Gw[] = [
    { name: 'svc', req: { url: `http://127.0.0.1:${svcPort}/get/${KEY}`, headers: { Authorization: `Bearer ${token}` } }, pid: svc.pid },
    { name: 'webdis', req: { url: `http://127.0.0.1:${webdisPort}/GET/${KEY}` }, pid: webdis.pid },
    { name: 'node-floor', req: { url: `http://127.0.0.1:${floorPort}/get/${KEY}` }, pid: floor.pid },
  ];
  for (const g of gws) {
    await waitFor(`${g.name} to answer`, async () => {
      const r = await fetch(g.req.url, { headers: g.req.headers });
      const j = (await r.json()) as { result?: string; GET?: string };
      return r.ok && (j.result ?? j.GET) === VALUE;
    }, 30_000);
    await runWrk(g.req, { connections: 64, durationS: 2, workDir: work }); // warm-up
  }
  const rows: string[][] = [];
  for (const c of CONNS) {
    const runs = new Map<string, (WrkResult & { userUs: number; sysUs: number })[]>();
    for (let round = 0; round < REPEAT; round++) {
      for (const g of gws) {
        const [u0, s0] = cpuSplitMs(g.pid);
        const w = await runWrk(g.req, { connections: c, durationS: SECONDS, workDir: work });
        const [u1, s1] = cpuSplitMs(g.pid);
        const r = { ...w, userUs: ((u1 - u0) * 1000) / w.requests, sysUs: ((s1 - s0) * 1000) / w.requests };
        runs.set(g.name, [...(runs.get(g.name) ?? []), r]);
        console.error(`[bench:kv-floor] ${g.name} c=${c} round ${round + 1}: ${Math.round(r.rps)} req/s, p50 ${r.p50Ms.toFixed(3)} ms, CPU ${r.userUs.toFixed(1)} user + ${r.sysUs.toFixed(1)} system µs/req`);
      }
    }
    const med = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
    for (const g of gws) {
      const rs = runs.get(g.name)!;
      rows.push([g.name, String(c), Math.round(med(rs.map((r) => r.rps))).toLocaleString('en-US'), med(rs.map((r) => r.p50Ms)).toFixed(3), med(rs.map((r) => r.p99Ms)).toFixed(2), med(rs.map((r) => r.userUs)).toFixed(1), med(rs.map((r) => r.sysUs)).toFixed(1), rs.map((r) => r.p50Ms.toFixed(3)).join(' / ')]);
    }
  }
  const loadEnd = os.loadavg().map((x) => x.toFixed(2)).join(' ');
  console.log(`${describeMachine(machine)}, ${new Date().toISOString()}. Load average at start/end: ${loadStart} / ${loadEnd}. svc kv workers: ${defaultKvWorkers()} by default, 0 here (one process).`);
  console.log(`wrk 1 thread, keep-alive, ${REPEAT} interleaved rounds of ${SECONDS} s per gateway, median round; value 100 bytes.\n`);
  console.log(
    markdownTable(
      [{ header: 'gateway' }, { header: 'conns', align: 'right' }, { header: 'req/s', align: 'right' }, { header: 'p50 ms', align: 'right' }, { header: 'p99 ms', align: 'right' }, { header: 'user µs/req', align: 'right' }, { header: 'system µs/req', align: 'right' }, { header: 'p50 per round' }],
      rows,
    ),
  );
}

main()
  .catch((err: unknown) => {
    console.error(err);
    process.exitCode = 1;
  })
  .finally(() => cleanupAll());
