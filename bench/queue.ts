/**
 * Queue benchmark (`npm run bench:queue`): publish -> delivery to a local HTTP sink.
 *
 *   svc            svc as a child process (`node bin/svc.js serve`; SQLite WAL, each publish
 *                  acknowledged after its group commit's WAL fsync),
 *                  publishers in this process POST /v2/publish/<sink> (undici keep-alive pool)
 *   bullmq         the peer users would otherwise build: BullMQ Queue.add + a Worker (child process,
 *                  concurrency 64) POSTing each job to the same sink, on a redis-server this bench
 *                  starts (appendonly yes, appendfsync everysec); BullMQ comes from `bench/peers`
 *                  (installed on first use by `bench/peers/install.ts`)
 *   undici alone   the ceiling: undici POSTs straight to the sink, 64 in flight
 *   delayed        N delayed messages in the store: svc start-up time and RSS vs an empty store
 *   PostgreSQL     svc's PostgreSQL queue store with one and two nodes beside graphile-worker and
 *                  pg-boss on one PostgreSQL cluster the bench starts (`bench/queue-pg.ts`)
 *
 * Prints a markdown table with ratios and writes it to `--out <file>` (default
 * docs/readme/queue-bench.md; `--out -` prints only, for experiment runs). Everything in the
 * existing file from the line {@link KEEP_MARKER} on (hand-written notes) is kept below the tables.
 * Flags: --out <file|-> --n1 <msgs at 1 publisher> --n64 <msgs at 64 publishers> --delayed <N, default 1,000,000> --skip-bullmq --skip-everysec
 *        --skip-pg (no PostgreSQL rows) --only-pg (only them and BullMQ at 64 publishers for the ratio; replaces only their section of --out) --pg-rate <msg/s, default 1000>
 *        --pg-rate-secs <s, default 10> --skip-pg-peers (svc on PostgreSQL without graphile-worker and pg-boss)
 *        --skip-delayed --skip-routing --fanout <publishes to a 10-endpoint group> --queue-n <msgs per
 *        queue / flow-control scenario> (scenarios: `bench/queue-routing.ts`);
 *        --pg-ab (with BENCH_AB_ROOT=<checkout>: svc on PostgreSQL, that checkout vs this one, interleaved: {@link pgAbRun})
 *        --metrics-ab [--repeat <rounds>] (only svc with SVC_METRICS=false vs true, interleaved: {@link abRun};
 *        with BENCH_AB_NODE=<node> BENCH_AB_ROOT=<checkout> instead: this Node.js vs that one, `lib/ab.ts`). Internal: --bullmq-worker <redisPort> <sinkUrl> (the worker child).
 *        --syscalls (svc's system calls per delivered message in each svc cell, printed to stderr: {@link syscallCounter})
 */
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Pool, request } from 'undici';
import { abOrder, abRatios, abVariants, cpuMs, fmtSpread, type SvcVariant } from './lib/ab.js';
import { ensurePeer, importPeer } from './peers/install.js';
import { requirePrograms } from './lib/needs.js';
import { postgresBinDir } from '../test/helpers/postgres.js';
import { closedLoop, now, startSink, type Sink } from './lib/queue-sink.js';
import { benchPostgres, benchPostgresAb, formatPg } from './queue-pg.js';
import { benchRouting } from './queue-routing.js';
import { writeSection } from './lib/report.js';
import { adoptChild, adoptTempDir } from './lib/proc.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const TOKEN = 'bench-token';

function arg(name: string, def: number): number {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? Number(process.argv[i + 1]) : def;
}
const flag = (name: string) => process.argv.includes(`--${name}`);
/** First line of the hand-written part of the output file, which a run keeps as it is. */
const KEEP_MARKER = '<!-- hand-written below: kept by bench/queue.ts -->';

// ---------------------------------------------------------------- helpers
const pct = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))] ?? NaN;
};

async function freePort(): Promise<number> {
  const s = net.createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const p = (s.address() as net.AddressInfo).port;
  await new Promise((r) => s.close(r));
  return p;
}

async function waitOutput(child: ChildProcess, re: RegExp, timeoutMs: number): Promise<RegExpExecArray> {
  let out = '';
  return new Promise((resolve, reject) => {
    const t = setTimeout(() => reject(new Error(`timeout waiting for ${re}: ${out}`)), timeoutMs);
    const on = (d: Buffer) => {
      out += d.toString();
      const m = re.exec(out);
      if (m) {
        clearTimeout(t);
        resolve(m);
      }
    };
    child.stdout?.on('data', on);
    child.stderr?.on('data', on);
  });
}

/** Starts svc (the queue area) on `dataDir`; `variant` (an A/B side, `lib/ab.ts`) picks the Node.js binary and checkout. */
async function startSvc(dataDir: string, extraEnv: Record<string, string> = {}, variant?: SvcVariant): Promise<{ child: ChildProcess; url: string; startMs: number }> {
  const t0 = now();
  const nodeArgs = (process.env.BENCH_SVC_NODE_ARGS ?? '').split(' ').filter(Boolean); // e.g. --cpu-prof
  const root = variant?.root ?? ROOT;
  const child = adoptChild(spawn(variant?.node ?? process.execPath, [...nodeArgs, path.join(root, 'bin/svc.js'), 'serve'], {
    cwd: root,
    env: { ...process.env, SVC_AREAS: 'queue', SVC_QUEUE_PORT: '0', SVC_DATA_DIR: dataDir, SVC_LOG_LEVEL: 'warn', SVC_QUEUE_TOKEN: TOKEN, ...extraEnv, ...variant?.env },
    stdio: ['ignore', 'pipe', 'pipe'],
  }), 'svc');
  const m = await waitOutput(child, /^queue\s+(http:\/\/\S+)/m, 120_000);
  return { child, url: m[1], startMs: now() - t0 };
}

async function stop(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null) return;
  child.kill('SIGTERM');
  await new Promise((r) => child.once('exit', r));
}

/** Starts a CPU meter over `pids` (summed); the returned function gives µs per message for `n` messages since then. */
function cpuMeter(pids: number[]): (n: number) => number {
  const total = () => pids.reduce((a, pid) => a + cpuMs(pid), 0);
  const t0 = total();
  return (n) => ((total() - t0) * 1000) / n;
}

function rssMb(pid: number): number {
  const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
  return Number(/VmRSS:\s+(\d+)/.exec(status)![1]) / 1024;
}

/** System calls {@link syscallCounter} counts (the socket, WAL, lock and wake-up calls of a delivered message). */
const SYSCALLS = ['read', 'write', 'writev', 'pwrite64', 'pread64', 'fdatasync', 'fsync', 'fcntl', 'futex', 'epoll_pwait'];

/**
 * `--syscalls`: counts process `pid`'s system calls from now until the returned function is
 * called, with `perf stat` on the kernel's `syscalls:sys_enter_<name>` tracepoints (Linux `perf`;
 * root, or `kernel.perf_event_paranoid` <= 1). The function stops the count and resolves to the
 * calls by name. Tracepoints count every call of every thread (libuv's pool included) at a small
 * cost per call; a count does not depend on the machine's load, only on the batching it causes.
 */
function syscallCounter(pid: number): () => Promise<Record<string, number>> {
  const out = path.join(os.tmpdir(), `svc-bench-syscalls-${pid}-${Date.now()}.csv`);
  const events = SYSCALLS.map((name) => `syscalls:sys_enter_${name}`).join(',');
  const perf = spawn('perf', ['stat', '-x', ',', '-o', out, '-e', events, '-p', String(pid)], { stdio: 'ignore' });
  return async () => {
    const exited = new Promise((r) => perf.once('exit', r));
    perf.kill('SIGINT');
    await exited;
    const counts: Record<string, number> = {};
    for (const line of fs.readFileSync(out, 'utf8').split('\n')) {
      const [value, , event] = line.split(',');
      const name = event?.replace('syscalls:sys_enter_', '');
      if (name && SYSCALLS.includes(name)) counts[name] = Number(value);
    }
    fs.rmSync(out, { force: true });
    return counts;
  };
}

interface Row {
  system: string;
  publishers: number;
  n: number;
  accepted: number;
  delivered: number;
  p50: number;
  p99: number;
  /** CPU µs the server process (svc, or the BullMQ worker + redis) used per delivered message. */
  cpuUs?: number;
  /** CPU µs this process (publishers + sink: the load generator) used per delivered message. */
  loadCpuUs?: number;
}

// ---------------------------------------------------------------- svc
async function benchSvc(sink: Sink, url: string, n: number, conc: number, pid?: number): Promise<Row> {
  const syscalls = pid && flag('syscalls') ? syscallCounter(pid) : undefined;
  if (syscalls) await new Promise((r) => setTimeout(r, 300)); // perf attaches before the cell starts
  const server = pid ? cpuMeter([pid]) : undefined;
  const load = cpuMeter([process.pid]);
  const pool = new Pool(url, { connections: conc, pipelining: 1 });
  const dest = `/v2/publish/${sink.url}/bench`;
  const delivered = sink.expect(n);
  const t0 = now();
  const pubMs = await closedLoop(n, conc, async () => {
    const res = await pool.request({
      path: dest,
      method: 'POST',
      headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify({ t: now() }),
    });
    await res.body.text();
    if (res.statusCode !== 200) throw new Error(`publish answered ${res.statusCode}`);
  });
  const { lat, lastAt } = await delivered;
  const cpuUs = server?.(n);
  const loadCpuUs = load(n);
  await pool.close();
  if (syscalls) {
    const counts = await syscalls();
    const per = Object.entries(counts).map(([name, c]) => `${name} ${(c / n).toFixed(3)}`);
    process.stderr.write(`[bench:queue] svc system calls per delivered message, ${conc} publishers, ${n} messages: ${per.join(', ')}\n`);
  }
  return { system: 'svc', publishers: conc, n, accepted: n / (pubMs / 1000), delivered: n / ((lastAt - t0) / 1000), p50: pct(lat, 50), p99: pct(lat, 99), cpuUs, loadCpuUs };
}

// ---------------------------------------------------------------- undici alone
async function benchUndici(sink: Sink, n: number, conc: number): Promise<Row> {
  const pool = new Pool(sink.url, { connections: conc, pipelining: 1 });
  const delivered = sink.expect(n);
  const load = cpuMeter([process.pid]);
  const ms = await closedLoop(n, conc, async () => {
    const res = await pool.request({ path: '/direct', method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ t: now() }) });
    await res.body.text();
  });
  const { lat } = await delivered;
  await pool.close();
  const rate = n / (ms / 1000);
  const loadCpuUs = load(n);
  return { system: 'undici alone (ceiling)', publishers: conc, n, accepted: rate, delivered: rate, p50: pct(lat, 50), p99: pct(lat, 99), loadCpuUs };
}

// ---------------------------------------------------------------- bullmq
async function bullmqWorker(redisPort: number, sinkUrl: string): Promise<void> {
  const { Worker } = await importPeer('bullmq');
  const pool = new Pool(sinkUrl, { connections: 64, pipelining: 1 });
  const worker = new Worker(
    'bench',
    async (job: { data: unknown }) => {
      const res = await pool.request({ path: '/bull', method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(job.data) });
      await res.body.text();
      if (res.statusCode >= 300) throw new Error(`sink answered ${res.statusCode}`);
    },
    { connection: { host: '127.0.0.1', port: redisPort }, concurrency: 64 },
  );
  await worker.waitUntilReady();
  process.stdout.write('worker ready\n');
}

async function benchBullmq(sink: Sink, runs: [number, number][]): Promise<Row[]> {
  const { Queue } = await importPeer('bullmq');
  const port = await freePort();
  const dir = adoptTempDir(fs.mkdtempSync(path.join(os.tmpdir(), 'svc-bench-redis-')));
  const redis = adoptChild(spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'yes', '--appendfsync', 'everysec', '--dir', dir], { stdio: ['ignore', 'pipe', 'pipe'] }), 'redis-server');
  await waitOutput(redis, /Ready to accept connections/, 10_000);
  const worker = adoptChild(spawn(process.execPath, ['--import', 'tsx', fileURLToPath(import.meta.url), '--bullmq-worker', String(port), sink.url], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] }), 'bullmq worker');
  const rows: Row[] = [];
  try {
    await waitOutput(worker, /worker ready/, 30_000);
    const queue = new Queue('bench', { connection: { host: '127.0.0.1', port } });
    for (const [n, conc] of runs) {
      const delivered = sink.expect(n);
      const server = cpuMeter([worker.pid!, redis.pid!]);
      const load = cpuMeter([process.pid]);
      const t0 = now();
      const pubMs = await closedLoop(n, conc, async () => {
        await queue.add('j', { t: now() }, { removeOnComplete: true, attempts: 4, backoff: { type: 'exponential', delay: 1000 } });
      });
      const { lat, lastAt } = await delivered;
      const cpuUs = server(n);
      const loadCpuUs = load(n);
      rows.push({ system: 'BullMQ + worker', publishers: conc, n, accepted: n / (pubMs / 1000), delivered: n / ((lastAt - t0) / 1000), p50: pct(lat, 50), p99: pct(lat, 99), cpuUs, loadCpuUs });
    }
    await queue.close();
  } finally {
    worker.kill('SIGKILL');
    redis.kill('SIGTERM');
    await new Promise((r) => redis.once('exit', r));
    fs.rmSync(dir, { recursive: true, force: true });
  }
  return rows;
}

// ---------------------------------------------------------------- delayed messages
async function benchDelayed(n: number): Promise<string[]> {
  const { openSqliteQueueStore } = await import('../src/queue/store/sqlite.js');
  const { buildMessage } = await import('../src/queue/build.js');
  const empty = adoptTempDir(fs.mkdtempSync(path.join(os.tmpdir(), 'svc-bench-empty-')));
  const full = adoptTempDir(fs.mkdtempSync(path.join(os.tmpdir(), 'svc-bench-delayed-')));
  try {
    const store = openSqliteQueueStore(path.join(full, 'queue.sqlite'));
    const t = Date.now();
    const body = Buffer.from(JSON.stringify({ hello: 'world', n: 0 }));
    const fillStart = now();
    for (let i = 0; i < n; i += 10_000) {
      const batch = Array.from({ length: Math.min(10_000, n - i) }, (_, k) =>
        buildMessage({ method: 'POST', headers: { 'Content-Type': ['application/json'] }, maxRetries: 3, delayMs: 86_400_000 + (i + k) }, { url: `http://127.0.0.1:9/delayed/${(i + k) % 1000}` }, body, t),
      );
      await store.enqueue(batch, t, 0);
    }
    await store.close();
    const fillMs = now() - fillStart;
    const measure = async (dir: string) => {
      const s = await startSvc(dir);
      await new Promise((r) => setTimeout(r, 3000)); // let the dispatcher settle
      const rss = rssMb(s.child.pid!);
      await stop(s.child);
      return { startMs: s.startMs, rss };
    };
    const base = await measure(empty);
    const loaded = await measure(full);
    const dbMb = fs.statSync(path.join(full, 'queue.sqlite')).size / 1024 / 1024;
    return [
      `| store | start-up to listening (ms) | RSS after 3 s (MB) |`,
      `| --- | ---: | ---: |`,
      `| empty | ${base.startMs.toFixed(0)} | ${base.rss.toFixed(0)} |`,
      `| ${n.toLocaleString('en')} delayed messages (${dbMb.toFixed(0)} MB file, filled in ${(fillMs / 1000).toFixed(1)} s) | ${loaded.startMs.toFixed(0)} | ${loaded.rss.toFixed(0)} |`,
      ``,
      `RSS increase with ${n.toLocaleString('en')} delayed messages: ${(loaded.rss - base.rss).toFixed(0)} MB (budget ~200 MB for 1M).`,
    ];
  } finally {
    fs.rmSync(empty, { recursive: true, force: true });
    fs.rmSync(full, { recursive: true, force: true });
  }
}

/** Mean fdatasync latency (ms) of a 4 KB append in the OS temp dir. */
function measureFsync(): number {
  const file = path.join(os.tmpdir(), `svc-bench-fsync-${process.pid}`);
  const fd = fs.openSync(file, 'w');
  const buf = Buffer.alloc(4096);
  const t0 = now();
  for (let i = 0; i < 50; i++) {
    fs.writeSync(fd, buf);
    fs.fdatasyncSync(fd);
  }
  const ms = (now() - t0) / 50;
  fs.closeSync(fd);
  fs.rmSync(file);
  return ms;
}

// ---------------------------------------------------------------- main
/**
 * Before anything starts: the programs the chosen parts run (redis-server for BullMQ, PostgreSQL's
 * server binaries for the PostgreSQL rows) and BullMQ itself (installed into bench/peers on first
 * use); what is missing ends the bench with one line (bench/lib/needs.ts).
 */
function checkPeers(): void {
  const pgPresent = () => {
    try {
      return Boolean(postgresBinDir());
    } catch {
      return false;
    }
  };
  requirePrograms('bench:queue', [
    ...(flag('skip-bullmq') ? [] : [{ cmd: 'redis-server', pkg: 'redis-server', without: 'npm run bench:queue -- --skip-bullmq' }]),
    ...(flag('skip-pg') ? [] : [{ cmd: 'initdb', pkg: 'postgresql', present: pgPresent, without: 'npm run bench:queue -- --skip-pg' }]),
  ]);
  const err = flag('skip-bullmq') ? undefined : ensurePeer('bullmq');
  if (err) {
    process.stderr.write(`bench:queue could not install its peer BullMQ into bench/peers (${err}): check the npm registry is reachable, or run without it: npm run bench:queue -- --skip-bullmq\n`);
    process.exit(1);
  }
}

async function main(): Promise<void> {
  const wi = process.argv.indexOf('--bullmq-worker');
  if (wi >= 0) return bullmqWorker(Number(process.argv[wi + 1]), process.argv[wi + 2]);

  if (flag('pg-ab')) return pgAbRun();
  const ab = abVariants(ROOT);
  if (ab) return abRun(ab);
  checkPeers();
  const loadAtStart = os.loadavg().map((l) => l.toFixed(1)).join(' ');
  const fsyncMs = measureFsync();
  const n1 = arg('n1', 1000);
  const n64 = arg('n64', 20_000);
  const delayed = arg('delayed', 1_000_000); // one million delayed messages
  const onlyPg = flag('only-pg');
  const sink = await startSink();
  const rows: Row[] = [];
  // svc as configured by default (fsync before every acknowledgement), then with the durability
  // of the BullMQ peer (SVC_QUEUE_FSYNC=everysec = redis-server's appendfsync everysec)
  for (const fsync of onlyPg ? [] : flag('skip-everysec') ? ['always'] : ['always', 'everysec']) {
    const dataDir = adoptTempDir(fs.mkdtempSync(path.join(os.tmpdir(), 'svc-bench-queue-')));
    const svc = await startSvc(dataDir, { SVC_QUEUE_FSYNC: fsync });
    try {
      await benchSvc(sink, svc.url, 2000, 16); // warm-up (JIT), not reported
      for (const [n, conc] of [[n1, 1], [n64, 64]]) {
        const row = await benchSvc(sink, svc.url, n, conc, svc.child.pid);
        if (fsync !== 'always') row.system = `svc, SVC_QUEUE_FSYNC=${fsync}`;
        rows.push(row);
      }
    } finally {
      await stop(svc.child);
      fs.rmSync(dataDir, { recursive: true, force: true });
    }
  }
  let routingLines: string[] = [];
  if (!onlyPg && !flag('skip-routing')) {
    const dir = adoptTempDir(fs.mkdtempSync(path.join(os.tmpdir(), 'svc-bench-routing-')));
    const rs = await startSvc(dir);
    try {
      routingLines = await benchRouting(rs.url, TOKEN, { fanout: arg('fanout', 1000), queueN: arg('queue-n', 2000) });
    } finally {
      await stop(rs.child);
      fs.rmSync(dir, { recursive: true, force: true });
    }
  }
  if (!onlyPg) rows.push(await benchUndici(sink, n64, 64));
  // with --only-pg, BullMQ at 64 publishers still runs (unless --skip-bullmq) for the same-run ratio
  if (!flag('skip-bullmq')) rows.push(...(await benchBullmq(sink, onlyPg ? [[200, 8], [n64, 64]] : [[200, 8], [n1, 1], [n64, 64]])).slice(1));
  const pgOpts = { sink, n: n64, rate: arg('pg-rate', 1000), secs: arg('pg-rate-secs', 10), skipPeers: flag('skip-pg-peers') };
  const pg = flag('skip-pg') ? undefined : await benchPostgres(pgOpts);
  await sink.close();

  const svc64 = rows.find((r) => r.system === 'svc' && r.publishers === 64);
  const bullmq64 = rows.find((r) => r.system.startsWith('BullMQ') && r.publishers === 64);
  const pgLines = pg ? formatPg(pg, pgOpts, bullmq64) : [];
  if (onlyPg) {
    pgLines.splice(2, 0, `${new Date().toISOString()}, ${os.cpus().length} CPUs (${os.cpus()[0]?.model ?? '?'}), Node ${process.version}, load average at start ${loadAtStart} (the machine is shared); this section alone was rerun (\`--only-pg\`).`, ``);
    return writeReport(pgLines.join('\n'), '## Queue on PostgreSQL');
  }
  const lines = [
    `# Queue benchmark`,
    ``,
    `${new Date().toISOString()}, ${os.cpus().length} CPUs (${os.cpus()[0]?.model ?? '?'}), Node ${process.version}, load average at start ${loadAtStart} (the machine is shared). ` +
      `svc: SQLite WAL, every publish acknowledged only after its group commit's WAL fsync (fdatasync measured at ${fsyncMs.toFixed(1)} ms on this disk); ` +
      `"svc, SVC_QUEUE_FSYNC=everysec": acknowledged at COMMIT, WAL fsynced once a second (the BullMQ peer's durability); ` +
      `BullMQ: redis-server appendonly yes, appendfsync everysec (no fsync per job). Sink, publishers and undici in the bench process; svc and the BullMQ worker in their own processes. ` +
      `Latency = publisher send -> sink receive. Server CPU = user+system time of the svc process (for BullMQ: the worker process plus redis-server) during the run, per delivered message (/proc, 10 ms ticks); load generator CPU = the same for this bench process (publishers and sink), which shares the machine's CPUs with the server.`,
    ``,
    `| system | publishers | messages | accepted msg/s | delivered msg/s | p50 publish->delivery (ms) | p99 (ms) | delivered vs svc@64 | server CPU per msg (µs) | load generator CPU per msg (µs) |`,
    `| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |`,
    ...rows.map(
      (r) =>
        `| ${r.system} | ${r.publishers} | ${r.n} | ${r.accepted.toFixed(0)} | ${r.delivered.toFixed(0)} | ${r.p50.toFixed(2)} | ${r.p99.toFixed(2)} | ${svc64 ? (r.delivered / svc64.delivered).toFixed(2) : '–'}x | ${r.cpuUs === undefined ? '–' : r.cpuUs.toFixed(0)} | ${r.loadCpuUs === undefined ? '–' : r.loadCpuUs.toFixed(0)} |`,
    ),
    ``,
    ...pgLines,
  ];
  if (routingLines.length) {
    lines.push(
      `## URL groups, queues and flow control`,
      ``,
      `One svc child process, 16 publishers over keep-alive; the sink counts requests in flight and request start times. ` +
        `Queues are filled while paused, then resumed, so the rate measures delivery alone. "Max observed starts per period" = most requests ` +
        `the sink received within any sliding window of one period (an attempt counts against the rate until one period after it ended, so this holds at the destination).`,
      ``,
      ...routingLines,
      ``,
    );
  }
  if (!flag('skip-delayed')) {
    lines.push(`## Delayed messages: memory and start-up`, ``, ...(await benchDelayed(delayed)), ``);
  }
  writeReport(lines.join('\n'));
}

/**
 * An A/B run (`lib/ab.ts` {@link abVariants}: `--metrics-ab` = `SVC_METRICS=false` vs `true`; or
 * two Node.js versions): two svc processes, one sink, publish -> delivery at 1 and 64 publishers,
 * the two alternating per round (`--repeat` rounds, default `BENCH_REPEAT` or 5). Prints median
 * and range of the delivered msg/s and of svc's CPU µs per message, and the ratios B/A; writes
 * the table to `--out <file>` only when given (never to queue-bench.md by default).
 */
async function abRun(ab: [SvcVariant, SvcVariant]): Promise<void> {
  const repeat = arg('repeat', Number(process.env.BENCH_REPEAT ?? 5));
  const cells: [number, number][] = [[arg('n1', 1000), 1], [arg('n64', 20_000), 64]];
  const loadAtStart = os.loadavg().map((l) => l.toFixed(1)).join(' ');
  const t0 = now();
  const sink = await startSink();
  const dirs: string[] = [];
  const variants: { name: string; svc: Awaited<ReturnType<typeof startSvc>> }[] = [];
  const [A, B] = ab.map((v) => v.name);
  const lines: string[] = [];
  try {
    for (const v of ab) {
      const dir = adoptTempDir(fs.mkdtempSync(path.join(os.tmpdir(), 'svc-bench-queue-ab-')));
      dirs.push(dir);
      const svc = await startSvc(dir, {}, v);
      variants.push({ name: v.name, svc });
      await benchSvc(sink, svc.url, 2000, 16); // warm-up (JIT), not reported
    }
    for (const [n, conc] of cells) {
      const runs = new Map<string, Row[]>(variants.map((v) => [v.name, []]));
      for (let round = 0; round < repeat; round++) {
        for (const v of abOrder(round, variants[0], variants[1])) {
          const row = await benchSvc(sink, v.svc.url, n, conc, v.svc.child.pid);
          process.stderr.write(`[bench:queue] ${v.name}, ${conc} publishers: ${row.delivered.toFixed(0)} msg/s delivered, svc CPU ${row.cpuUs?.toFixed(0)} µs/msg, p50 ${row.p50.toFixed(1)} ms\n`);
          runs.get(v.name)!.push(row);
        }
      }
      const [a, b] = variants.map((v) => runs.get(v.name)!);
      const rate = abRatios(a.map((r) => r.delivered), b.map((r) => r.delivered));
      const cpu = abRatios(a.map((r) => r.cpuUs!), b.map((r) => r.cpuUs!));
      const p50 = (rs: Row[]) => fmtSpread(rs.map((r) => r.p50), (x) => x.toFixed(1));
      lines.push(`| ${conc} | ${n} | ${fmtSpread(a.map((r) => r.delivered))} | ${fmtSpread(b.map((r) => r.delivered))} | ${rate.ofMedians} | ${rate.paired} | ${fmtSpread(a.map((r) => r.cpuUs!))} | ${fmtSpread(b.map((r) => r.cpuUs!))} | ${cpu.paired} | ${p50(a)} | ${p50(b)} |`);
    }
  } finally {
    for (const v of variants) await stop(v.svc.child);
    await sink.close();
    for (const d of dirs) fs.rmSync(d, { recursive: true, force: true });
  }
  const text = [
    `## Queue bench: ${A} vs ${B} (interleaved)`,
    ``,
    `${new Date().toISOString()}, ${os.cpus().length} CPUs (${os.cpus()[0]?.model ?? '?'}), Node ${process.version}, load average at start ${loadAtStart} / end ${os.loadavg().map((l) => l.toFixed(1)).join(' ')}; total run ${((now() - t0) / 1000).toFixed(0)} s. ` +
      `Two svc processes (\`SVC_AREAS=queue\`, default fsync before every acknowledgement): ${ab.map((v) => `${v.name} (\`${path.basename(v.node)} ${path.join(v.root, 'bin/svc.js')}\`${Object.entries(v.env).map(([k, x]) => `, \`${k}=${x}\``).join('')})`).join(' and ')}, one sink; ${repeat} rounds, the two alternating (the first of each round swapped every round), after a 2,000-message warm-up each. ` +
      `Cells: median (min-max) over the rounds; "paired" = median (min-max) of the per-round ratio B/A (${B} / ${A}); CPU = user+system time of the svc process per delivered message (/proc, 10 ms ticks); p50 = publish -> delivery.`,
    ``,
    `| publishers | messages | delivered msg/s, ${A} | delivered msg/s, ${B} | B/A (medians) | B/A (paired) | CPU µs/msg, ${A} | CPU µs/msg, ${B} | CPU B/A (paired) | p50 ms, ${A} | p50 ms, ${B} |`,
    `| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |`,
    ...lines,
    ``,
  ].join('\n');
  process.stdout.write(text);
  const oi = process.argv.indexOf('--out');
  if (oi >= 0 && process.argv[oi + 1] !== '-') fs.writeFileSync(process.argv[oi + 1], text);
}

/**
 * `--pg-ab`: svc on PostgreSQL, one node, `BENCH_AB_ROOT=<checkout>` (A) vs this checkout (B),
 * interleaved (`bench/queue-pg.ts` {@link benchPostgresAb}); `--n64` messages per run (default
 * 20,000), `--repeat` rounds (default `BENCH_REPEAT` or 5). Prints the table; writes it to
 * `--out <file>` only when given.
 */
async function pgAbRun(): Promise<void> {
  const other = process.env.BENCH_AB_ROOT;
  if (!other) throw new Error('--pg-ab needs BENCH_AB_ROOT=<checkout> (the A side; this checkout is B)');
  const sink = await startSink();
  try {
    const lines = await benchPostgresAb(
      { sink, n: arg('n64', 20_000), rate: 0, secs: 0 },
      [{ name: `A (${path.basename(path.resolve(other))})`, root: path.resolve(other) }, { name: `B (${path.basename(ROOT)})`, root: ROOT }],
      arg('repeat', Number(process.env.BENCH_REPEAT ?? 5)),
    );
    const text = lines.join('\n');
    process.stdout.write(text + '\n');
    const oi = process.argv.indexOf('--out');
    if (oi >= 0 && process.argv[oi + 1] !== '-') fs.writeFileSync(process.argv[oi + 1], text);
  } finally {
    await sink.close();
  }
}

/**
 * Prints `text` and writes it to `--out` (module doc), keeping the hand-written part from
 * {@link KEEP_MARKER} on. With `section` (a `## ` heading that starts `text`), only that section of
 * the existing file is replaced (or inserted before the hand-written part), the rest kept.
 */
function writeReport(text: string, section?: string): void {
  process.stdout.write(text + '\n');
  const oi = process.argv.indexOf('--out');
  const out = oi >= 0 ? process.argv[oi + 1] : path.join(ROOT, 'docs/readme/queue-bench.md');
  if (out === '-') return;
  if (section) return writeSection(out, section, text, KEEP_MARKER);
  const old = fs.existsSync(out) ? fs.readFileSync(out, 'utf8') : '';
  const kept = old.indexOf(KEEP_MARKER);
  fs.mkdirSync(path.dirname(out), { recursive: true });
  fs.writeFileSync(out, kept >= 0 ? `${text}\n${old.slice(kept)}` : text);
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
