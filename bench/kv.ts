/**
 * `npm run bench:kv` — the key-value REST gateway against its peers, in one run on this machine
 * (the peers):
 *
 * - **svc**: `node bin/svc.js serve` with `SVC_AREAS=kv` and its default number of kv worker
 *   processes (`SVC_KV_WORKERS`, passed through when set; printed in the header), as a child process, pointed by
 *   `SVC_KV_REDIS_URL` at the bench's own redis-server (no persistence) — the SAME backend webdis
 *   uses, so both gateways are measured on equal terms. `BENCH_SVC_SUPERVISED=1` adds rows for svc
 *   with its default supervised redis-server (appendonly on).
 * - **webdis**: Debian's C gateway, same redis-server. It has no JSON-body and no pipeline endpoint.
 * - **redis-benchmark**: raw RESP on the same redis-server, the ceiling (`-P 100` for batches).
 *
 * Workloads: GET and SET of a 100-byte value as single requests (path form: svc `GET /get/<k>`,
 * `POST /set/<k>` with the value as body; webdis `GET /GET/<k>`, `PUT /SET/<k>` with the value as
 * body; JSON form, svc only: `POST /` `["GET",k]`); `/pipeline` batches of 100 GETs or 100 SETs
 * (svc only). Each at 1 and 64 keep-alive connections with `wrk`. Every cell is checked once with
 * `fetch` (status and body) before it is loaded, so error responses are never benchmarked.
 *
 * Env: `BENCH_SECONDS` (per cell, default 5), `BENCH_WARMUP_SECONDS` (per cell, default 1),
 * `BENCH_START_WARMUP_SECONDS` (every workload on every gateway before the first cell, default 3),
 * `BENCH_CONNECTIONS` (default `1,64`), `BENCH_REPEAT` (measured runs per cell, interleaved across
 * systems; the median run is reported; default 1), `BENCH_WRK_THREADS` (default 1),
 * `BENCH_WEBDIS_THREADS` / `BENCH_WEBDIS_POOL` (default 4 / 2, webdis's own defaults), `BENCH_ONLY` (subset of
 * `svc,webdis,redis-benchmark`), `BENCH_WORKLOADS` (subset of `get-path,set-path,get-json,set-json,
 * get-pipeline,set-pipeline`; redis-benchmark always runs GET and SET), `BENCH_SVC_SUPERVISED=1`, `BENCH_PROFILE=1` (svc runs with
 * `--cpu-prof`; hot spots printed at the end), `BENCH_OUT=<file>` (also write the report there),
 * `BENCH_METRICS_AB=1` or `--metrics-ab` (instead of the peers: svc with `SVC_METRICS=false` vs
 * `true`, interleaved, median and range per side; `npm run bench:kv -- --metrics-ab`),
 * `BENCH_AB_NODE=<node>` + `BENCH_AB_ROOT=<checkout>` (the same A/B: this Node.js vs that one,
 * `lib/ab.ts` {@link abVariants}).
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { defaultKvWorkers } from '../src/config.js';
import { summarizeCpuProfile } from './lib/cpuprofile.js';
import { abOrder, abRatios, abVariants, cpuMs, fmtSpread, type SvcVariant } from './lib/ab.js';
import { describeMachine, machineInfo } from './lib/machine.js';
import { cleanupAll, freePort, installCleanupHandlers, makeTempDir, runToCompletion, startProcess, waitFor, type ManagedProcess } from './lib/proc.js';
import { runRedisBenchmarkFor, startRedisServer, startWebdis } from './lib/redis.js';
import { fmtInt, fmtMs, fmtRatio } from './lib/stats.js';
import { requirePrograms } from './lib/needs.js';
import { markdownTable } from './lib/table.js';
import { runWrk, type WrkRequest } from './lib/wrk.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const env = process.env;
const num = (name: string, def: number) => (env[name] ? Number(env[name]) : def);
const SECONDS = num('BENCH_SECONDS', 5);
const WARMUP = num('BENCH_WARMUP_SECONDS', 1);
/**
 * Seconds of load each gateway gets per workload before the first measured cell (at the largest
 * connection count): Node's V8 keeps compiling (Maglev, then TurboFan, on background threads that
 * take CPU from the 2 cores) for several seconds of load, which would land in the first cells.
 */
const START_WARMUP = num('BENCH_START_WARMUP_SECONDS', 3);
const CONNS = (env.BENCH_CONNECTIONS ?? '1,64').split(',').map(Number);
const WRK_THREADS = num('BENCH_WRK_THREADS', 1);
const REPEAT = Math.max(1, num('BENCH_REPEAT', 1));
const ONLY = new Set((env.BENCH_ONLY ?? 'svc,webdis,redis-benchmark').split(','));
const PROFILE = env.BENCH_PROFILE === '1';
/** Two svc variants (metrics off/on, or two Node.js versions) interleaved ({@link abRun}) instead of the peer comparison. */
const AB = abVariants(ROOT);
/** kv worker processes of the svc under test: `SVC_KV_WORKERS` (passed through), else svc's default. */
const SVC_WORKERS = env.SVC_KV_WORKERS ? Number(env.SVC_KV_WORKERS) : defaultKvWorkers();

/** The kv bench targets. */
const PIPELINE_TARGET_CMDS = 300_000;
const P99_TARGET_MS = 5;
const VALUE = 'v'.repeat(100);
const KEY = 'bench:kv:key';
const BATCH = 100;
const batchKeys = Array.from({ length: BATCH }, (_, i) => `bench:kv:p:${i}`);

type Op = 'get' | 'set';
type Form = 'path' | 'json' | 'pipeline';
interface Workload {
  op: Op;
  form: Form;
  cmdsPerReq: number;
}
const WORKLOADS: Workload[] = (['path', 'json', 'pipeline'] as Form[]).flatMap((form) =>
  (['get', 'set'] as Op[]).map((op) => ({ op, form, cmdsPerReq: form === 'pipeline' ? BATCH : 1 })),
).filter((w) => !env.BENCH_WORKLOADS || env.BENCH_WORKLOADS.split(',').includes(`${w.op}-${w.form}`));

/** An HTTP gateway under test: how it spells each workload, and what a correct answer is. */
interface Gateway {
  system: string;
  backend: string;
  baseUrl: string;
  request(w: Workload): WrkRequest | undefined;
  valid(w: Workload, status: number, body: string): boolean;
  /** Writes the keys the GET workloads read, when the gateway's backend is not the seeded one. */
  seed?(): Promise<void>;
}

function svcGateway(system: string, backend: string, baseUrl: string, token: string): Gateway {
  const auth = { Authorization: `Bearer ${token}` };
  const json = { ...auth, 'Content-Type': 'application/json' };
  return {
    system,
    backend,
    baseUrl,
    request(w) {
      if (w.form === 'path') {
        return w.op === 'get'
          ? { url: `${baseUrl}/get/${KEY}`, method: 'GET', headers: auth }
          : { url: `${baseUrl}/set/${KEY}`, method: 'POST', headers: { ...auth, 'Content-Type': 'application/octet-stream' }, body: VALUE };
      }
      if (w.form === 'json') {
        return { url: `${baseUrl}/`, method: 'POST', headers: json, body: JSON.stringify(w.op === 'get' ? ['GET', KEY] : ['SET', KEY, VALUE]) };
      }
      const cmds = batchKeys.map((k) => (w.op === 'get' ? ['GET', k] : ['SET', k, VALUE]));
      return { url: `${baseUrl}/pipeline`, method: 'POST', headers: json, body: JSON.stringify(cmds) };
    },
    async seed() {
      const cmds = [KEY, ...batchKeys].map((k) => ['SET', k, VALUE]);
      const r = await fetch(`${baseUrl}/pipeline`, { method: 'POST', headers: json, body: JSON.stringify(cmds) });
      if (!r.ok) throw new Error(`${system}: seeding failed: ${r.status} ${await r.text()}`);
    },
    valid(w, status, body) {
      if (status !== 200) return false;
      const want = w.op === 'get' ? VALUE : 'OK';
      const j = JSON.parse(body) as unknown;
      if (w.form !== 'pipeline') return (j as { result?: unknown }).result === want;
      return Array.isArray(j) && j.length === BATCH && j.every((x: { result?: unknown }) => x.result === want);
    },
  };
}

function webdisGateway(baseUrl: string, backend: string): Gateway {
  return {
    system: 'webdis',
    backend,
    baseUrl,
    request(w) {
      if (w.form !== 'path') return undefined; // webdis has no JSON-body form and no pipeline endpoint
      return w.op === 'get' ? { url: `${baseUrl}/GET/${KEY}`, method: 'GET' } : { url: `${baseUrl}/SET/${KEY}`, method: 'PUT', body: VALUE };
    },
    valid(w, status, body) {
      if (status !== 200) return false;
      const j = JSON.parse(body) as { GET?: unknown; SET?: unknown };
      return w.op === 'get' ? j.GET === VALUE : JSON.stringify(j.SET) === '[true,"OK"]';
    },
  };
}

interface Row {
  system: string;
  op: Op;
  form: Form | 'resp';
  conns: number;
  rps?: number;
  cmds?: number;
  p50?: number;
  p99?: number;
  /** CPU µs the gateway process used per request during the measured run (metrics A/B only). */
  cpuUs?: number;
  note?: string;
}

const log = (s: string) => process.stderr.write(`[bench:kv] ${s}\n`);

/**
 * One measured wrk run of `gw` on workload `w` at `conns` connections, after a correctness check
 * (and a warm-up when `warm`). A failed check gives a row with a `note` and no numbers.
 */
async function measureHttp(gw: Gateway, w: Workload, conns: number, workDir: string, warm: boolean, pid?: number): Promise<Row> {
  const row: Row = { system: gw.system, op: w.op, form: w.form, conns };
  const req = gw.request(w);
  if (!req) return { ...row, note: 'not offered' };
  try {
    const r = await fetch(req.url, { method: req.method, headers: req.headers, body: typeof req.body === 'string' ? req.body : req.body && new Uint8Array(req.body) });
    const body = await r.text();
    if (!gw.valid(w, r.status, body)) return { ...row, note: `bad answer ${r.status} ${body.slice(0, 120)}` };
  } catch (err) {
    return { ...row, note: `request failed: ${String(err)}` };
  }
  const opts = { connections: conns, threads: WRK_THREADS, workDir };
  if (warm && WARMUP > 0) await runWrk(req, { ...opts, durationS: WARMUP });
  const cpu0 = pid ? cpuMs(pid) : 0;
  const res = await runWrk(req, { ...opts, durationS: SECONDS });
  const cpuUs = pid ? ((cpuMs(pid) - cpu0) * 1000) / res.requests : undefined;
  const errs = res.non2xx + res.socketErrors;
  log(`${gw.system} ${w.op} ${w.form} c=${conns}: ${fmtInt(res.rps)} req/s, p50 ${fmtMs(res.p50Ms)} ms, p99 ${fmtMs(res.p99Ms)} ms${errs ? `, ${errs} errors` : ''}`);
  return { ...row, rps: res.rps, cmds: res.rps * w.cmdsPerReq, p50: res.p50Ms, p99: res.p99Ms, cpuUs, note: errs ? `${res.non2xx} non-2xx, ${res.socketErrors} socket errors` : undefined };
}

/**
 * Loads every gateway with every workload it offers for {@link START_WARMUP} s (at the largest
 * connection count), so that the measured cells find svc's hot paths compiled.
 */
async function warmAll(gws: Gateway[], workDir: string): Promise<void> {
  if (START_WARMUP <= 0) return;
  const conns = Math.max(...CONNS);
  for (const gw of gws) {
    for (const w of WORKLOADS) {
      const req = gw.request(w);
      if (req) await runWrk(req, { connections: conns, threads: WRK_THREADS, workDir, durationS: START_WARMUP });
    }
  }
  log(`start warm-up done (${START_WARMUP} s per workload and gateway, ${conns} connections)`);
}

/** The run with the median throughput (lower middle for an even count); rows without numbers lose. */
function medianRow(runs: Row[]): Row {
  const sorted = [...runs].sort((a, b) => (a.cmds ?? -1) - (b.cmds ?? -1));
  return sorted[Math.floor((sorted.length - 1) / 2)];
}

async function startSvc(label: string, dataDir: string, redisUrl: string | undefined, profDir: string | undefined, variant?: SvcVariant): Promise<{ proc: ManagedProcess; url: string; token: string } | string> {
  const port = await freePort();
  const token = `bench-${Math.random().toString(36).slice(2)}`;
  const nodeArgs = profDir ? ['--cpu-prof', `--cpu-prof-dir=${profDir}`] : [];
  const proc = await startProcess({
    name: label,
    cmd: variant?.node ?? process.execPath,
    args: [...nodeArgs, path.join(variant?.root ?? ROOT, 'bin/svc.js'), 'serve'],
    cwd: variant?.root ?? ROOT,
    env: { ...env, SVC_AREAS: 'kv', SVC_HOST: '127.0.0.1', SVC_KV_PORT: String(port), SVC_DATA_DIR: dataDir, SVC_KV_TOKEN: token, SVC_LOG_LEVEL: 'warn', ...(redisUrl ? { SVC_KV_REDIS_URL: redisUrl } : { SVC_KV_REDIS_URL: '' }), ...variant?.env },
    readyPattern: /svc is running[\s\S]*Paste into/,
    readyTimeoutMs: 60_000,
  });
  if (/kv: not available/.test(proc.output())) {
    await proc.stop();
    return 'the kv area is not registered in src/main.ts yet';
  }
  const url = `http://127.0.0.1:${port}`;
  await waitFor(`${label} to answer PING`, async () => (await fetch(`${url}/ping`, { headers: { Authorization: `Bearer ${token}` } })).ok, 30_000);
  return { proc, url, token };
}

async function main(): Promise<void> {
  requirePrograms('bench:kv', [
    { cmd: 'redis-server', pkg: 'redis-server' },
    { cmd: 'redis-cli', pkg: 'redis-tools' },
    { cmd: 'wrk', pkg: 'wrk' },
    ...(!AB && ONLY.has('webdis') ? [{ cmd: 'webdis', pkg: 'webdis', without: `BENCH_ONLY=${[...ONLY].filter((s) => s !== 'webdis').join(',')} npm run bench:kv` }] : []),
    ...(!AB && ONLY.has('redis-benchmark') ? [{ cmd: 'redis-benchmark', pkg: 'redis-tools' }] : []),
  ]);
  installCleanupHandlers();
  const t0 = Date.now();
  const loadStart = os.loadavg().map((x) => x.toFixed(2)).join(' ');
  const machine = machineInfo();
  const work = makeTempDir('svc-bench-kv-');
  const rows: Row[] = [];
  const notes: string[] = [];
  const redisPort = await freePort();
  await startRedisServer(redisPort, work);
  const redisUrl = `redis://127.0.0.1:${redisPort}`;
  const sharedBackend = `bench redis-server :${redisPort} (no persistence)`;
  // Seed the keys GET reads (SET workloads overwrite them with the same value).
  const seed = await runToCompletion('redis-cli', 'redis-cli', ['-p', String(redisPort), 'MSET', KEY, VALUE, ...batchKeys.flatMap((k) => [k, VALUE])]);
  if (seed.code !== 0) throw new Error(`seeding failed: ${seed.stderr}`);

  if (AB) return abRun(AB, redisUrl, work, loadStart, t0);

  const gateways: Gateway[] = [];
  const profDir = PROFILE ? makeTempDir('svc-bench-prof-') : undefined;
  const svcProcs: ManagedProcess[] = [];
  if (ONLY.has('svc')) {
    const s = await startSvc('svc', makeTempDir('svc-bench-data-'), redisUrl, profDir);
    if (typeof s === 'string') notes.push(`svc skipped: ${s}.`);
    else {
      svcProcs.push(s.proc);
      gateways.push(svcGateway('svc', sharedBackend, s.url, s.token));
    }
    if (env.BENCH_SVC_SUPERVISED === '1') {
      const s2 = await startSvc('svc-supervised', makeTempDir('svc-bench-data-'), undefined, undefined);
      if (typeof s2 !== 'string') {
        svcProcs.push(s2.proc);
        const gw = svcGateway('svc (own redis)', "svc's supervised redis-server (appendonly on)", s2.url, s2.token);
        await gw.seed!();
        gateways.push(gw);
      }
    }
  }
  // webdis's own defaults (src/conf.c: threads 4, pool_size 2); on this 2-core machine they did as
  // well as any other setting tried (1-8 threads, pool 2-8), within the run-to-run noise.
  const webdisThreads = num('BENCH_WEBDIS_THREADS', 4);
  const webdisPool = num('BENCH_WEBDIS_POOL', 2);
  if (ONLY.has('webdis')) {
    const httpPort = await freePort();
    await startWebdis({ httpPort, redisPort, threads: webdisThreads, poolSize: webdisPool, dir: work });
    gateways.push(webdisGateway(`http://127.0.0.1:${httpPort}`, sharedBackend));
  }

  // Rounds are interleaved (svc, webdis, redis-benchmark, svc, ...) so a noisy neighbour on this
  // shared machine hits every system alike; redis-benchmark runs next to the first HTTP workload
  // with the same command, connection count and batching (-P 1 for single, -P 100 for /pipeline).
  await warmAll(gateways, work);
  const rbDone = new Set<string>();
  for (const w of WORKLOADS) {
    for (const c of CONNS) {
      const pipeline = w.form === 'pipeline' ? BATCH : 1;
      const rbKey = `${w.op}-${pipeline}-${c}`;
      const withRb = ONLY.has('redis-benchmark') && !rbDone.has(rbKey);
      rbDone.add(rbKey);
      const runs = new Map<string, Row[]>();
      const add = (k: string, r: Row) => runs.set(k, [...(runs.get(k) ?? []), r]);
      for (let round = 0; round < REPEAT; round++) {
        for (const gw of gateways) {
          if (!gw.request(w)) continue;
          const prev = runs.get(gw.system);
          if (prev?.length && prev[0].cmds === undefined) continue; // failed its check: do not retry
          add(gw.system, await measureHttp(gw, w, c, work, round === 0));
        }
        if (withRb) {
          const r = await runRedisBenchmarkFor(SECONDS, { port: redisPort, test: w.op, valueBytes: VALUE.length, clients: c, pipeline });
          log(`redis-benchmark ${w.op} -P ${pipeline} -c ${c}: ${fmtInt(r.rps)} cmds/s, p50 ${fmtMs(r.p50Ms)} ms, p99 ${fmtMs(r.p99Ms)} ms`);
          add('redis-benchmark', { system: 'redis-benchmark', op: w.op, form: 'resp', conns: c, rps: r.rps / pipeline, cmds: r.rps, p50: r.p50Ms, p99: r.p99Ms, note: pipeline > 1 ? `-P ${pipeline}` : undefined });
        }
      }
      for (const r of runs.values()) rows.push(medianRow(r));
    }
  }

  // Stop svc gracefully now so --cpu-prof writes its profile.
  for (const p of svcProcs) await p.stop('SIGTERM', 15_000);
  const report = buildReport(rows, notes, { loadStart, webdisThreads, webdisPool, redisPort, elapsedS: (Date.now() - t0) / 1000, machine: describeMachine(machine) });
  let profText = '';
  if (profDir) {
    // svc writes one profile per thread (tsx's module-loader worker too) and per process (the
    // primary and each kv worker): keep the main thread of each process (its biggest file), the
    // busiest processes first (the workers serve the load, the primary only accepts).
    const byPid = new Map<string, { f: string; size: number }>();
    for (const f of fs.readdirSync(profDir).filter((x) => x.endsWith('.cpuprofile'))) {
      const pid = f.split('.')[3] ?? f;
      const size = fs.statSync(path.join(profDir, f)).size;
      if ((byPid.get(pid)?.size ?? -1) < size) byPid.set(pid, { f, size });
    }
    const summaries = [...byPid.entries()].map(([pid, { f }]) => ({ pid, s: summarizeCpuProfile(path.join(profDir, f), 25) }));
    summaries.sort((a, b) => b.s.totalSamples - a.s.totalSamples);
    for (const { pid, s } of summaries.slice(0, Math.max(1, SVC_WORKERS))) {
      profText += `\n### svc CPU profile (process ${pid}, main thread, ${s.totalSamples} busy samples of 1 ms, whole process life incl. start-up)\n\n`;
      profText += markdownTable([{ header: 'self %', align: 'right' }, { header: 'package / folder' }], s.buckets.slice(0, 12).map((b) => [b.selfPct.toFixed(1), b.name])) + '\n\n';
      profText += markdownTable([{ header: 'self %', align: 'right' }, { header: 'function' }], s.functions.map((b) => [b.selfPct.toFixed(1), b.name])) + '\n';
    }
  }
  process.stdout.write(report + profText);
  if (env.BENCH_OUT) fs.writeFileSync(env.BENCH_OUT, report + profText);
}

/**
 * An A/B run ({@link abVariants}: `SVC_METRICS=false` vs `true`, or two Node.js versions): two svc
 * processes on the bench's redis-server, interleaved per round (`lib/ab.ts`); per cell the median
 * and range of req/s and of the svc process's CPU µs per request, and the ratios B/A.
 */
async function abRun(ab: [SvcVariant, SvcVariant], redisUrl: string, work: string, loadStart: string, t0: number): Promise<void> {
  const variants: { name: string; gw: Gateway; pid: number }[] = [];
  for (const v of ab) {
    const s = await startSvc(`svc-${v.name.replace(/\W+/g, '-')}`, makeTempDir('svc-bench-data-'), redisUrl, undefined, { ...v, env: { ...v.env, SVC_KV_WORKERS: String(SVC_WORKERS) } });
    if (typeof s === 'string') throw new Error(s);
    variants.push({ name: v.name, gw: svcGateway(`svc, ${v.name}`, 'bench redis-server', s.url, s.token), pid: s.proc.pid });
  }
  await warmAll(variants.map((v) => v.gw), work);
  const [A, B] = ab.map((v) => v.name);
  const lines: string[][] = [];
  for (const w of WORKLOADS) {
    for (const c of CONNS) {
      const runs = new Map<string, Row[]>(variants.map((v) => [v.name, []]));
      for (let round = 0; round < REPEAT; round++) {
        for (const v of abOrder(round, variants[0], variants[1])) {
          const r = await measureHttp(v.gw, w, c, work, round === 0, SVC_WORKERS === 0 ? v.pid : undefined);
          if (r.rps === undefined) throw new Error(`${v.name}: ${r.note}`);
          runs.get(v.name)!.push(r);
        }
      }
      const [a, b] = variants.map((v) => runs.get(v.name)!);
      const rps = abRatios(a.map((r) => r.rps!), b.map((r) => r.rps!));
      const cpu = abRatios(a.map((r) => r.cpuUs ?? NaN), b.map((r) => r.cpuUs ?? NaN));
      const us = (n: number) => n.toFixed(1);
      lines.push([`${w.op.toUpperCase()} ${w.form}`, String(c), fmtSpread(a.map((r) => r.rps!)), fmtSpread(b.map((r) => r.rps!)), rps.ofMedians, rps.paired, fmtSpread(a.map((r) => r.cpuUs ?? NaN), us), fmtSpread(b.map((r) => r.cpuUs ?? NaN), us), cpu.paired]);
    }
  }
  const R = 'right' as const;
  const report = [
    `## kv bench: ${A} vs ${B} (interleaved)`,
    '',
    `Machine: ${describeMachine(machineInfo())}. Load average at start/end: ${loadStart} / ${os.loadavg().map((x) => x.toFixed(2)).join(' ')}; total run ${Math.round((Date.now() - t0) / 1000)} s.`,
    `Two svc processes (\`SVC_AREAS=kv\`, kv workers ${SVC_WORKERS}) on one redis-server: ${ab.map((v) => `${v.name} (\`${path.basename(v.node)} ${path.join(v.root, 'bin/svc.js')}\`${Object.entries(v.env).map(([k, x]) => `, \`${k}=${x}\``).join('')})`).join(' and ')}, measured alternately (${REPEAT} rounds, the first of each round swapped every round), ${SECONDS} s per run with wrk after a ${WARMUP} s warm-up in round 1. Cells: median (min-max) over the rounds; "paired" = median (min-max) of the per-round ratio B/A (${B} / ${A}). CPU = user+system time of the svc process per request (/proc, 10 ms ticks).`,
    '',
    markdownTable(
      [
        { header: 'workload' },
        { header: 'conns', align: R },
        { header: `req/s, ${A}`, align: R },
        { header: `req/s, ${B}`, align: R },
        { header: 'B/A (medians)', align: R },
        { header: 'B/A (paired)', align: R },
        { header: `CPU µs/req, ${A}`, align: R },
        { header: `CPU µs/req, ${B}`, align: R },
        { header: 'CPU B/A (paired)', align: R },
      ],
      lines,
    ),
    '',
  ].join('\n');
  process.stdout.write(report);
  if (env.BENCH_OUT) fs.writeFileSync(env.BENCH_OUT, report);
}

function buildReport(rows: Row[], notes: string[], o: { loadStart: string; webdisThreads: number; webdisPool: number; redisPort: number; elapsedS: number; machine: string }): string {
  const find = (system: string, op: Op, form: Row['form'], conns: number, pipelined?: boolean) =>
    rows.find((r) => r.system === system && r.op === op && r.form === form && r.conns === conns && (pipelined === undefined || (r.note === `-P ${BATCH}`) === pipelined));
  const checks: string[][] = [];
  const table = rows.map((r) => {
    const singles = r.form === 'path' || r.form === 'json';
    const web = singles && r.system !== 'webdis' ? find('webdis', r.op, 'path', r.conns) : undefined;
    const rb = r.system === 'redis-benchmark' ? undefined : find('redis-benchmark', r.op, 'resp', r.conns, r.form === 'pipeline');
    const targets: string[] = [];
    if (r.system.startsWith('svc') && r.cmds !== undefined) {
      const okNote = !r.note;
      if (singles) {
        const met = okNote && web?.cmds !== undefined && r.cmds >= web.cmds;
        targets.push(`>= webdis ${web?.cmds === undefined ? 'n/a' : met ? 'met' : 'NOT met'}`);
        checks.push([`${r.system}: single-command throughput >= webdis`, `${r.op.toUpperCase()} ${r.form}, ${r.conns} conn`, `${fmtInt(r.cmds)} vs ${fmtInt(web?.cmds)} cmds/s`, web?.cmds === undefined ? 'n/a' : met ? 'met' : 'NOT met']);
        if (r.conns === 64 && r.p99 !== undefined) {
          const m = okNote && r.p99 < P99_TARGET_MS;
          targets.push(`p99 < ${P99_TARGET_MS} ms ${m ? 'met' : 'NOT met'}`);
          checks.push([`${r.system}: p99 < ${P99_TARGET_MS} ms at 64 connections`, `${r.op.toUpperCase()} ${r.form}`, `${fmtMs(r.p99)} ms`, m ? 'met' : 'NOT met']);
        }
      } else {
        const m = okNote && r.cmds >= PIPELINE_TARGET_CMDS;
        targets.push(`>= 300k cmds/s ${m ? 'met' : 'NOT met'}${r.conns === 64 ? '' : ' (info)'}`);
        if (r.conns === 64) checks.push([`${r.system}: /pipeline >= 300,000 commands/s`, `${r.op.toUpperCase()} x${BATCH}, ${r.conns} conn`, `${fmtInt(r.cmds)} cmds/s`, m ? 'met' : 'NOT met']);
      }
    }
    const form = r.form === 'resp' ? (r.note ?? 'RESP') : r.form === 'pipeline' ? `/pipeline x${BATCH}` : r.form;
    return [
      r.system,
      r.op.toUpperCase(),
      form,
      String(r.conns),
      fmtInt(r.rps),
      fmtInt(r.cmds),
      fmtMs(r.p50),
      fmtMs(r.p99),
      r.system === 'webdis' || r.system === 'redis-benchmark' ? '-' : fmtRatio(r.cmds, web?.cmds),
      r.system === 'redis-benchmark' ? '-' : fmtRatio(r.cmds, rb?.cmds),
      [...targets, r.form !== 'resp' && r.note ? `(${r.note})` : ''].filter(Boolean).join('; '),
    ];
  });
  const R = 'right' as const;
  return [
    `## Key-value gateway benchmark`,
    '',
    `Machine: ${o.machine}. Load average at start/end: ${o.loadStart} / ${os.loadavg().map((x) => x.toFixed(2)).join(' ')} (the machine is shared).\nEach gateway: ${START_WARMUP} s of load per workload before the first cell; each cell: ${WARMUP} s warm-up + ${REPEAT > 1 ? `median of ${REPEAT} interleaved runs of ` : ''}${SECONDS} s measured with wrk (${WRK_THREADS} thread, keep-alive), value ${VALUE.length} bytes; total run ${Math.round(o.elapsedS)} s.`,
    `svc kv worker processes: ${SVC_WORKERS}${env.SVC_KV_WORKERS ? ' (SVC_KV_WORKERS)' : ' (the default: 0 below 4 CPUs, else CPUs, at most 8)'}; 0 = served by the one svc process.`,
    `Backend: one redis-server on 127.0.0.1:${o.redisPort} with \`--save '' --appendonly no\`, shared by svc (\`SVC_KV_REDIS_URL\`), webdis (threads ${o.webdisThreads}, pool_size ${o.webdisPool}) and redis-benchmark; the load generator, the gateway and redis-server share the same ${machineInfo().nproc} cores.`,
    '',
    markdownTable(
      [
        { header: 'system' },
        { header: 'op' },
        { header: 'form' },
        { header: 'conns', align: R },
        { header: 'req/s', align: R },
        { header: 'cmds/s', align: R },
        { header: 'p50 ms', align: R },
        { header: 'p99 ms', align: R },
        { header: 'vs webdis', align: R },
        { header: 'vs redis-benchmark', align: R },
        { header: 'targets' },
      ],
      table,
    ),
    '',
    'Targets:',
    '',
    markdownTable([{ header: 'target' }, { header: 'cell' }, { header: 'measured' }, { header: 'status' }], checks),
    '',
    'Notes: webdis has no JSON-body form (`POST /` takes `CMD/arg/...` text) and no pipeline endpoint, so the svc JSON rows are compared with webdis path rows and the /pipeline rows only with `redis-benchmark -P 100` (whose p50/p99 are per batch).',
    ...notes.map((n) => `- ${n}`),
    '',
  ].join('\n');
}

main()
  .catch((err) => {
    process.stderr.write(`[bench:kv] failed: ${err instanceof Error ? err.stack ?? err.message : String(err)}\n`);
    process.exitCode = 1;
  })
  .finally(() => cleanupAll());
