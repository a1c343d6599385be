/**
 * `npm run bench:kv-router` — svc's own Redis client code vs a well-kept client library (ioredis),
 * on the same servers, to decide which one routes kv commands over a Redis Cluster.
 *
 * Five clients, each sending the same pre-built batches of 100 commands (50 `SET` of a 100-byte
 * value and 50 `GET`, random keys of a 100,000-key space, so a batch touches every primary) from
 * `c` concurrent loops (each waits for its batch's answers before sending the next):
 * - `single: svc RedisConnection`: the gateway's own RESP connection (`src/kv/redis/connection.ts`,
 *   `batch`) to one redis-server: what svc's single-server path runs;
 * - `single: ioredis …`: `new Redis()` with auto-pipelining (every command of a tick in one
 *   write), and the batch as one `pipeline().exec()`;
 * - `cluster: svc router`: the same RedisConnection to svc's topology router
 *   (`<data dir>/kv/router.sock` of an `svc serve` child process, `SVC_KV_REDIS_CLUSTER`), which
 *   routes each command to its slot's primary: what the gateway does in cluster mode;
 * - `cluster: ioredis Cluster`: `new Cluster()` with auto-pipelining (commands of a tick grouped per
 *   node; an ioredis `pipeline()` must stay in one slot, so this is its way to send a
 *   many-slot batch) in this process: what the gateway would do with the library.
 * The cluster is 3 primaries + 3 replicas (`test/kv/topology-helpers.ts`), all servers from
 * `SVC_KV_REDIS_SERVER_BIN` (default `redis-server`). The variants take turns within each round
 * (`BENCH_ROUNDS` rounds), so a change in the machine's load hits them alike; medians are reported.
 *
 * Columns: commands/s; CPU per 1,000 commands in ms, of this process (the client: encoding,
 * reply parsing, and for ioredis the routing) and of the svc child (the router; `/proc/<pid>/stat`,
 * 10 ms ticks), the servers' own CPU not counted (the same work for every client).
 *
 * ioredis is not a dependency of svc: install it into a private prefix and name it,
 * `npm install --prefix /tmp/kvlib ioredis` then `BENCH_IOREDIS_PREFIX=/tmp/kvlib npm run bench:kv-router`.
 * Env: `BENCH_SECONDS` (per cell, default 4), `BENCH_ROUNDS` (default 3), `BENCH_CONCURRENCY`
 * (default `1,16`), `BENCH_OUT=<file>` (also write the report there).
 */
import fs from 'node:fs';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { RedisConnection } from '../src/kv/redis/connection.js';
import { startRedisCluster, startRedisNode } from '../test/kv/topology-helpers.js';
import { describeMachine } from './lib/machine.js';
import { cleanupAll, freePort, installCleanupHandlers, makeTempDir, startProcess, waitFor } from './lib/proc.js';
import { fmtInt, percentile } from './lib/stats.js';
import { markdownTable } from './lib/table.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const SECONDS = Number(process.env.BENCH_SECONDS ?? 4);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const CONCURRENCY = (process.env.BENCH_CONCURRENCY ?? '1,16').split(',').map(Number);
const BATCH = 100;
const VALUE = 'v'.repeat(100);

/** The part of ioredis this bench uses (its `Redis` and `Cluster` share it). */
interface IoClient {
  call(command: string, ...args: string[]): Promise<unknown>;
  pipeline(commands: string[][]): { exec(): Promise<unknown> };
  quit(): Promise<unknown>;
}
interface IoRedisModule {
  Redis: new (opts: object) => IoClient;
  Cluster: new (nodes: { host: string; port: number }[], opts: object) => IoClient;
}

/** ioredis from `BENCH_IOREDIS_PREFIX` (an `npm install --prefix` directory) or svc's own node_modules; exits with one line when absent. */
function loadIoredis(): IoRedisModule {
  const from = process.env.BENCH_IOREDIS_PREFIX ?? ROOT;
  try {
    return createRequire(path.join(path.resolve(from), 'package.json'))('ioredis') as IoRedisModule;
  } catch {
    console.error(`bench:kv-router needs ioredis (not a dependency of svc): npm install --prefix /tmp/kvlib ioredis, then BENCH_IOREDIS_PREFIX=/tmp/kvlib npm run bench:kv-router`);
    process.exit(2);
  }
}

/** `n` batches of {@link BATCH} commands: SET and GET alternating over random keys (lower-case names: ioredis's `pipeline()` calls its methods by name). */
function batches(n: number): string[][][] {
  const key = () => `bench:${Math.floor(Math.random() * 100_000)}`;
  return Array.from({ length: n }, () => Array.from({ length: BATCH }, (_, i) => (i % 2 === 0 ? ['set', key(), VALUE] : ['get', key()])));
}

/** CPU time of process `pid` so far, ms (utime + stime of `/proc/<pid>/stat`, 10 ms ticks). */
function procCpuMs(pid: number): number {
  const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return ((Number(f[11]) + Number(f[12])) * 1000) / 100;
}

/** One client under test: sends one batch and resolves when every answer is in. */
interface Variant {
  name: string;
  send(batch: string[][]): Promise<void>;
  /** pid of a process that works for this client besides this one (svc's router), if any. */
  helperPid?: number;
}

interface Cell {
  cmdsPerS: number;
  clientCpuPer1k: number;
  helperCpuPer1k: number;
}

/** `conc` loops sending batches for {@link SECONDS}; commands/s and CPU per 1,000 commands. */
async function measure(v: Variant, conc: number, work: string[][][]): Promise<Cell> {
  let i = 0;
  let cmds = 0;
  const loop = async (end: number) => {
    while (performance.now() < end) {
      await v.send(work[i++ % work.length]);
      cmds += BATCH;
    }
  };
  // warm-up, then the measured run
  await Promise.all(Array.from({ length: conc }, () => loop(performance.now() + 500)));
  cmds = 0;
  const cpu0 = process.cpuUsage();
  const helper0 = v.helperPid ? procCpuMs(v.helperPid) : 0;
  const t0 = performance.now();
  await Promise.all(Array.from({ length: conc }, () => loop(t0 + SECONDS * 1000)));
  const s = (performance.now() - t0) / 1000;
  const cpu = process.cpuUsage(cpu0);
  const helper = v.helperPid ? procCpuMs(v.helperPid) - helper0 : 0;
  return { cmdsPerS: cmds / s, clientCpuPer1k: ((cpu.user + cpu.system) / 1000 / cmds) * 1000, helperCpuPer1k: (helper / cmds) * 1000 };
}

/** svc (`serve`, kv only, no worker processes) on the cluster `seeds`; its router socket and pid. */
async function startSvcRouter(seeds: string): Promise<{ socket: string; pid: number; stop(): Promise<void> }> {
  const dataDir = makeTempDir();
  const port = await freePort();
  const proc = await startProcess({
    name: 'svc-cluster',
    cmd: process.execPath,
    args: [path.join(ROOT, 'bin/svc.js'), 'serve'],
    cwd: ROOT,
    env: { ...process.env, SVC_AREAS: 'kv', SVC_HOST: '127.0.0.1', SVC_KV_PORT: String(port), SVC_DATA_DIR: dataDir, SVC_KV_WORKERS: '0', SVC_LOG_LEVEL: 'warn', SVC_KV_REDIS_CLUSTER: seeds, SVC_KV_REDIS_URL: '' },
    readyPattern: /svc is running[\s\S]*Paste into/,
    readyTimeoutMs: 60_000,
  });
  const socket = path.join(dataDir, 'kv', 'router.sock');
  await waitFor('the router socket', () => fs.existsSync(socket), 30_000);
  return { socket, pid: proc.pid, stop: () => proc.stop() };
}

/** A variant over one {@link RedisConnection} (batches pipelined on it, as the gateway sends a `/pipeline`). */
async function svcVariant(name: string, endpoint: { path?: string; host?: string; port?: number }, helperPid?: number): Promise<Variant & { close(): void }> {
  const c = await RedisConnection.connect(endpoint, {}, 5000);
  return {
    name,
    helperPid,
    send: async (b) => {
      await c.batch(b, false);
    },
    close: () => c.close(),
  };
}

/**
 * A variant over an ioredis client: with auto-pipelining (a batch = its commands sent in one tick),
 * or as one `pipeline()` (one server only: an ioredis cluster pipeline must stay in one slot).
 */
function ioVariant(name: string, client: IoClient, how: 'auto' | 'pipeline'): Variant & { close(): Promise<unknown> } {
  return {
    name,
    send:
      how === 'auto'
        ? async (b) => {
            await Promise.all(b.map((cmd) => client.call(cmd[0], ...cmd.slice(1))));
          }
        : async (b) => {
            await client.pipeline(b).exec();
          },
    close: () => client.quit(),
  };
}

async function main(): Promise<void> {
  const io = loadIoredis();
  installCleanupHandlers();
  const t0 = Date.now();
  const single = await startRedisNode();
  const cluster = await startRedisCluster();
  const svc = await startSvcRouter(cluster.seeds);
  const seeds = cluster.seeds.split(',').map((s) => ({ host: '127.0.0.1', port: Number(s.split(':')[1]) }));
  const ioCluster = new io.Cluster(seeds, { enableAutoPipelining: true, scaleReads: 'master', redisOptions: { enableAutoPipelining: true } });
  await ioCluster.call('PING');
  const ioSingle = new io.Redis({ host: '127.0.0.1', port: single.port, enableAutoPipelining: true });
  const ioSinglePipelined = new io.Redis({ host: '127.0.0.1', port: single.port });
  const variants = [
    await svcVariant('single: svc RedisConnection', { host: '127.0.0.1', port: single.port }),
    ioVariant('single: ioredis auto-pipelining', ioSingle, 'auto'),
    ioVariant('single: ioredis pipeline()', ioSinglePipelined, 'pipeline'),
    await svcVariant('cluster: svc router', { path: svc.socket }, svc.pid),
    ioVariant('cluster: ioredis Cluster auto-pipelining', ioCluster, 'auto'),
  ];
  const work = batches(200);
  // every variant answers right before it is measured
  for (const v of variants) await v.send(work[0]);
  const cells = new Map<string, Cell[]>();
  for (let r = 0; r < ROUNDS; r++) {
    for (const conc of CONCURRENCY) {
      for (const v of variants) {
        const c = await measure(v, conc, work);
        const k = `${v.name}\0${conc}`;
        cells.set(k, [...(cells.get(k) ?? []), c]);
        console.error(`round ${r + 1}: ${v.name}, ${conc} loops: ${fmtInt(c.cmdsPerS)} cmds/s, client ${c.clientCpuPer1k.toFixed(1)} ms, router ${c.helperCpuPer1k.toFixed(1)} ms CPU per 1k (load ${os.loadavg()[0].toFixed(1)})`);
      }
    }
  }
  const med = (xs: number[]) => percentile(xs, 50);
  const rows: string[][] = [];
  for (const conc of CONCURRENCY) {
    for (const v of variants) {
      const cs = cells.get(`${v.name}\0${conc}`)!;
      const client = med(cs.map((c) => c.clientCpuPer1k));
      const helper = med(cs.map((c) => c.helperCpuPer1k));
      rows.push([v.name, String(conc), fmtInt(med(cs.map((c) => c.cmdsPerS))), `${fmtInt(Math.min(...cs.map((c) => c.cmdsPerS)))}–${fmtInt(Math.max(...cs.map((c) => c.cmdsPerS)))}`, client.toFixed(1), v.helperPid ? helper.toFixed(1) : '–', (client + helper).toFixed(1)]);
    }
  }
  let report = `# kv: svc's RESP connection and topology router vs ioredis (${new Date().toISOString()}, ${ROUNDS} rounds of ${SECONDS} s per cell, ${Math.round((Date.now() - t0) / 1000)} s in all)\n\n`;
  report += `${describeMachine()}; load average at the end ${os.loadavg().map((l) => l.toFixed(1)).join(' ')}\n\n`;
  report += `Batches of ${BATCH} commands (50 SET of 100 bytes + 50 GET, random keys over every slot), median of the rounds; CPU in ms per 1,000 commands.\n\n`;
  const headers = ['client', 'loops', 'cmds/s', 'range', 'client CPU', 'router CPU', 'total CPU'];
  report += markdownTable(headers.map((header, i) => ({ header, align: i === 0 ? 'left' : 'right' })), rows);
  report += '\n';
  console.log(report);
  if (process.env.BENCH_OUT) fs.writeFileSync(process.env.BENCH_OUT, report);
  for (const v of variants) await v.close();
  await svc.stop();
  await cluster.close();
  await single.close();
  await cleanupAll();
}

main().catch(async (err) => {
  console.error(err);
  await cleanupAll();
  process.exit(1);
});
