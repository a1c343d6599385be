/**
 * `npm run bench:metrics` — what the Prometheus counting costs per request, in CPU instructions
 * (a count that does not depend on how loaded the machine is, unlike req/s or CPU time).
 *
 * The built server (`npm run build` first, then `node dist/cli.js serve`, `SVC_AREAS=kv,queue`, kv
 * on the bench's own redis-server, no kv worker processes) runs under `valgrind --tool=callgrind`
 * once with `SVC_METRICS=false` and once with `true` (two processes at the same time). After start-up and a warm-up of every
 * scenario (so the JIT has compiled the hot paths), each scenario is measured as: zero callgrind's
 * counters (`callgrind_control --zero`), send N requests from this process one after the other
 * (undici; `--concurrency` in flight for kv, default 1: with more, how many requests share one
 * database write or group commit depends on timing, which valgrind changes; queue: each message
 * awaited until delivered), dump the counters
 * (`callgrind_control --dump`) and divide the instructions (`Ir`) by N, per thread
 * (`--separate-threads=yes`): the main thread (the event loop: HTTP, routing, gateway, metrics) and
 * all threads (V8's compiler and GC helper threads too; their share follows when the JIT
 * recompiles, so it varies more between rounds). Start-up and the warm-up are thus not counted;
 * each scenario runs `--rounds` times and the smallest count is reported (noise only adds). Under
 * valgrind the server runs ~50x slower, so time-driven work (timers; with metrics on, prom-client's
 * event-loop-delay sampling every 10 ms) weighs ~50x more per request than on a real machine:
 * after the rounds an idle interval is measured the same way, and each scenario is also given
 * with that rate times its duration subtracted ("net").
 *
 * Scenarios: kv `POST /set/<key>` (100-byte value) and `GET /get/<key>` (of that value); queue `POST
 * /v2/publish/<sink>` of a small JSON body, counted until delivered (publish, group commit,
 * dispatch, HTTP delivery, acknowledgement).
 *
 * `--tracing` (`npm run bench:tracing-instructions`) compares, the same way, the code before
 * OpenTelemetry tracing existed (`--base <rev>`, default the parent of the commit that added
 * `src/tracing.ts`; unpacked by `lib/checkout.ts` and built) with this checkout, tracing off (no
 * `OTEL_*` endpoint), metrics on in both; `--tracing-on` compares this checkout with tracing off
 * and on (`OTEL_EXPORTER_OTLP_ENDPOINT` at a receiver in this process that accepts and discards).
 *
 * Flags: `--n <requests per scenario, default 2000>` `--warmup <per scenario, default 3000>`
 * `--rounds <measurements per scenario and setting, default 3>` `--idle <s, default 30>`
 * `--concurrency <kv requests in flight, default 1>` `--no-build` (use dist/ as it is) `--out <file>` (also write the report there).
 */
import fs from 'node:fs';
import http from 'node:http';
import type net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { median } from './lib/ab.js';
import { checkoutRevision, revisionBefore, shortRev } from './lib/checkout.js';
import { describeMachine, machineInfo } from './lib/machine.js';
import { CALLGRIND_PROGRAMS, callgrindControl, dumpInstructions, publishOneByOne, requests, VALGRIND_CPU_PRELOAD, type CallgrindTarget } from './lib/callgrind.js';
import { cleanupAll, freePort, installCleanupHandlers, makeTempDir, runToCompletion, startProcess, type ManagedProcess } from './lib/proc.js';
import { now, startSink, type Sink } from './lib/queue-sink.js';
import { startRedisServer } from './lib/redis.js';
import { fmtInt } from './lib/stats.js';
import { requirePrograms } from './lib/needs.js';
import { markdownTable } from './lib/table.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const argNum = (name: string, def: number) => {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? Number(process.argv[i + 1]) : def;
};
const N = argNum('n', 2000);
const WARMUP = argNum('warmup', 3000);
const ROUNDS = argNum('rounds', 3);
const IDLE_S = argNum('idle', 30);
const CONCURRENCY = argNum('concurrency', 1);
const KV_TOKEN = 'bench-kv-token';
const QUEUE_TOKEN = 'bench-queue-token';
const VALUE = 'v'.repeat(100);
const log = (s: string) => process.stderr.write(`[bench:metrics] ${s}\n`);

/** A callgrind-run svc process and how to read its counters. */
interface Traced extends CallgrindTarget {
  proc: ManagedProcess;
  kvUrl: string;
  queueUrl: string;
}

/** One side of the comparison: which checkout's `dist/` runs, with which extra environment. */
interface Setting {
  /** Shown in the report (`metrics off`, `tracing off`, ...). */
  label: string;
  /** File-name-safe name (data directory, callgrind files). */
  slug: string;
  root: string;
  env: Record<string, string>;
}

/** Starts `<root>/dist/cli.js serve` under callgrind; resolves once the banner is printed (start-up under valgrind takes minutes on a loaded machine). */
async function startTraced(setting: Setting, redisUrl: string, dir: string): Promise<Traced> {
  const [kvPort, queuePort] = [await freePort(), await freePort()];
  const outBase = path.join(dir, `callgrind.${setting.slug}`);
  const proc = await startProcess({
    name: `svc-callgrind-${setting.slug}`,
    cmd: 'valgrind',
    // all-non-file: V8 writes and rewrites machine code on its heap; valgrind must notice that.
    args: ['--tool=callgrind', '--smc-check=all-non-file', '--separate-threads=yes', `--callgrind-out-file=${outBase}`, process.execPath, '--import', VALGRIND_CPU_PRELOAD, path.join(setting.root, 'dist/cli.js'), 'serve'],
    cwd: setting.root,
    env: {
      ...process.env,
      SVC_AREAS: 'kv,queue',
      SVC_HOST: '127.0.0.1',
      SVC_KV_PORT: String(kvPort),
      SVC_QUEUE_PORT: String(queuePort),
      SVC_DATA_DIR: path.join(dir, `data-${setting.slug}`),
      SVC_KV_TOKEN: KV_TOKEN,
      SVC_QUEUE_TOKEN: QUEUE_TOKEN,
      SVC_KV_REDIS_URL: redisUrl,
      SVC_KV_WORKERS: '0',
      SVC_LOG_LEVEL: 'warn',
      ...setting.env,
    },
    readyPattern: /svc is running[\s\S]*Paste into/,
    readyTimeoutMs: 900_000,
  });
  return { proc, pid: proc.pid, kvUrl: `http://127.0.0.1:${kvPort}`, queueUrl: `http://127.0.0.1:${queuePort}`, outBase, dumps: 0 };
}

/** One measured scenario: sends `n` requests (and waits for what proves them done). */
interface Scenario {
  name: string;
  run(t: Traced, n: number, sink: Sink): Promise<void>;
}

const SCENARIOS: Scenario[] = [
  {
    name: 'kv SET /set/<key> (100 bytes)',
    run: (t, n) => requests(t.kvUrl, n, CONCURRENCY, { path: '/set/bench:key', method: 'POST', headers: { authorization: `Bearer ${KV_TOKEN}`, 'content-type': 'application/octet-stream' }, body: VALUE }),
  },
  {
    name: 'kv GET /get/<key>',
    run: (t, n) => requests(t.kvUrl, n, CONCURRENCY, { path: '/get/bench:key', method: 'GET', headers: { authorization: `Bearer ${KV_TOKEN}` } }),
  },
  {
    name: 'queue publish + delivery',
    // one message at a time, each awaited until delivered: how many messages share a group commit
    // or a dispatch round depends on timing, which valgrind changes; one at a time does not batch
    run: (t, n, sink) => publishOneByOne(t.queueUrl, QUEUE_TOKEN, sink, n),
  },
];

interface Measured {
  /** Instructions per request, main thread, one per round. */
  main: number[];
  /** Instructions per request, all threads (JIT compiler and GC helper threads too), one per round. */
  all: number[];
  /** Seconds each round took under valgrind. */
  secs: number[];
}

interface SettingResult {
  scenarios: Map<string, Measured>;
  /** Main-thread instructions per second with no requests (timers), after the rounds. */
  idleMainPerS: number;
  idleAllPerS: number;
}

/** Measures one setting in its own svc process, with its own sink (the two settings run at the same time). */
async function measureSetting(setting: Setting, redisUrl: string, dir: string): Promise<SettingResult> {
  const label = setting.label;
  const t0 = now();
  const sink = await startSink();
  const t = await startTraced(setting, redisUrl, dir);
  log(`${label}: svc started under callgrind in ${((now() - t0) / 1000).toFixed(0)} s`);
  const scenarios = new Map<string, Measured>();
  try {
    for (const s of SCENARIOS) {
      const w0 = now();
      await s.run(t, WARMUP, sink);
      log(`${label}: warm-up ${s.name}, ${WARMUP} requests in ${((now() - w0) / 1000).toFixed(0)} s`);
    }
    for (let round = 0; round < ROUNDS; round++) {
      for (const s of SCENARIOS) {
        await callgrindControl(t, '--zero');
        const s0 = now();
        await s.run(t, N, sink);
        const c = await dumpInstructions(t);
        const secs = (now() - s0) / 1000;
        const m = scenarios.get(s.name) ?? { main: [], all: [], secs: [] };
        m.main.push(c.main / N);
        m.all.push(c.all / N);
        m.secs.push(secs);
        scenarios.set(s.name, m);
        log(`${label}: ${s.name}: ${fmtInt(c.main / N)} instructions/request in the main thread, ${fmtInt(c.all / N)} in all (${N} in ${secs.toFixed(0)} s)`);
      }
    }
    // timers alone, measured once the JIT has settled (after the rounds)
    await callgrindControl(t, '--zero');
    const i0 = now();
    await new Promise((r) => setTimeout(r, IDLE_S * 1000));
    const idle = await dumpInstructions(t);
    const secs = (now() - i0) / 1000;
    log(`${label}: idle ${fmtInt(idle.main / secs)} instructions/s in the main thread, ${fmtInt(idle.all / secs)} in all`);
    return { scenarios, idleMainPerS: idle.main / secs, idleAllPerS: idle.all / secs };
  } finally {
    await t.proc.stop('SIGTERM', 600_000);
    await sink.close();
  }
}

async function main(): Promise<void> {
  requirePrograms('bench:metrics', CALLGRIND_PROGRAMS);
  installCleanupHandlers();
  const t0 = now();
  const loadStart = os.loadavg().map((x) => x.toFixed(2)).join(' ');
  const { settings, title, cleanup } = await chooseSettings();
  try {
    await report(settings, title, t0, loadStart);
  } finally {
    await cleanup();
  }
}

/** The two settings of this run (module doc) and the report's title. */
async function chooseSettings(): Promise<{ settings: [Setting, Setting]; title: string; cleanup(): Promise<void> }> {
  const build = async (root: string) => {
    if (process.argv.includes('--no-build') && root === ROOT) return;
    const b = await runToCompletion('build', process.execPath, [path.join(root, 'scripts/build.mjs')]);
    if (b.code !== 0) throw new Error(`npm run build failed in ${root}: ${b.stderr}`);
  };
  await build(ROOT);
  if (process.argv.includes('--tracing')) {
    const i = process.argv.indexOf('--base');
    const base = i >= 0 ? process.argv[i + 1] : revisionBefore(ROOT, 'src/tracing.ts');
    const baseDir = checkoutRevision(ROOT, base);
    await build(baseDir);
    return {
      settings: [
        { label: `before tracing (${shortRev(ROOT, base)})`, slug: 'before', root: baseDir, env: {} },
        { label: `tracing off (${shortRev(ROOT, 'HEAD')})`, slug: 'tracing-off', root: ROOT, env: {} },
      ],
      title: 'before tracing vs tracing off',
      cleanup: async () => fs.rmSync(baseDir, { recursive: true, force: true }),
    };
  }
  if (process.argv.includes('--tracing-on')) {
    // an OTLP/HTTP receiver that accepts every export and discards it
    const receiver = http.createServer((req, res) => {
      req.resume();
      req.on('end', () => res.writeHead(200, { 'content-type': 'application/json' }).end('{}'));
    });
    await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', r));
    const endpoint = `http://127.0.0.1:${(receiver.address() as net.AddressInfo).port}`;
    return {
      settings: [
        { label: 'tracing off', slug: 'tracing-off', root: ROOT, env: {} },
        { label: 'tracing on', slug: 'tracing-on', root: ROOT, env: { OTEL_EXPORTER_OTLP_ENDPOINT: endpoint } },
      ],
      title: 'tracing off vs on',
      cleanup: () => new Promise<void>((r) => receiver.close(() => r())),
    };
  }
  return {
    settings: [
      { label: 'metrics off', slug: 'off', root: ROOT, env: { SVC_METRICS: 'false' } },
      { label: 'metrics on', slug: 'on', root: ROOT, env: { SVC_METRICS: 'true' } },
    ],
    title: 'metrics off vs on',
    cleanup: async () => undefined,
  };
}

/** Measures both settings (at the same time) and prints the report (and writes `--out`). */
async function report(settings: [Setting, Setting], title: string, t0: number, loadStart: string): Promise<void> {
  const dir = makeTempDir('svc-bench-metrics-');
  const redisPort = await freePort();
  await startRedisServer(redisPort, dir);
  // both settings at once: instruction counts do not depend on the load they put on each other
  const [off, on] = await Promise.all(settings.map((setting) => measureSetting(setting, `redis://127.0.0.1:${redisPort}`, dir)));
  const [A, B] = settings.map((x) => x.label);
  const R = 'right' as const;
  const pct = (x: number, y: number) => `${(((y - x) / x) * 100).toFixed(1)} %`;
  const rounds = (xs: number[]) => `${fmtInt(Math.min(...xs))} (${xs.map(fmtInt).join(' / ')})`;
  const rows = SCENARIOS.map((s) => {
    const a = off.scenarios.get(s.name)!;
    const b = on.scenarios.get(s.name)!;
    // main thread minus its timer work for as long as the round took under valgrind
    const net = (m: Measured, idle: number) => Math.min(...m.main.map((x, i) => x - (idle * m.secs[i]) / N));
    const [aNet, bNet] = [net(a, off.idleMainPerS), net(b, on.idleMainPerS)];
    return [
      s.name,
      rounds(a.main),
      rounds(b.main),
      pct(Math.min(...a.main), Math.min(...b.main)),
      fmtInt(aNet),
      fmtInt(bNet),
      pct(aNet, bNet),
      `${fmtInt(Math.min(...a.all))} / ${fmtInt(Math.min(...b.all))} (${pct(Math.min(...a.all), Math.min(...b.all))})`,
    ];
  });
  const report = [
    `## Instructions per request, ${title} (callgrind)`,
    '',
    `Machine: ${describeMachine(machineInfo())}; load average at start ${loadStart} (instruction counts do not depend on it). Total run ${((now() - t0) / 60000).toFixed(0)} min.`,
    `${A} (A) and ${B} (B): \`node dist/cli.js serve\` (\`SVC_AREAS=kv,queue\`, no kv workers, kv on a bench redis-server) under \`valgrind --tool=callgrind --separate-threads=yes\`; after a warm-up of ${WARMUP} requests per scenario, ${ROUNDS} rounds of ${N} requests per scenario, ${CONCURRENCY} in flight (queue: one message at a time, each until delivered); counters zeroed before and dumped after each. ` +
      `"main" = the main thread (event loop: HTTP, routing, the gateway, the metrics), min (each round); "net" = the min over rounds of main minus the main thread's timer work measured with no requests afterwards (${IDLE_S} s: ${A} ${fmtInt(off.idleMainPerS)}, ${B} ${fmtInt(on.idleMainPerS)} instructions/s) times the round's duration under valgrind; "all threads" adds V8's compiler and GC helper threads (min over rounds).`,
    '',
    markdownTable(
      [
        { header: 'scenario' },
        { header: `main, ${A}`, align: R },
        { header: `main, ${B}`, align: R },
        { header: 'main B vs A', align: R },
        { header: `net, ${A}`, align: R },
        { header: `net, ${B}`, align: R },
        { header: 'net B vs A', align: R },
        { header: 'all threads A / B', align: R },
      ],
      rows,
    ),
    '',
  ].join('\n');
  process.stdout.write(report);
  const oi = process.argv.indexOf('--out');
  if (oi >= 0) fs.writeFileSync(process.argv[oi + 1], report);
}

main()
  .catch((err) => {
    process.stderr.write(`[bench:metrics] failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exitCode = 1;
  })
  .finally(() => cleanupAll());
