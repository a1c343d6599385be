/**
 * Tracing overhead (`npm run bench:tracing`): CPU of the svc process per request for three
 * variants, run interleaved (`lib/ab.ts`: each round rotates which goes first) on one machine:
 *
 *   before    the code before tracing existed (`--base <rev>`, default the parent of the commit
 *             that added `src/tracing.ts`), unpacked with `git archive` into a temporary
 *             directory that uses this checkout's `node_modules`
 *   off       this checkout, no `OTEL_*` endpoint set (the default)
 *   on        this checkout with `OTEL_EXPORTER_OTLP_ENDPOINT` pointing at an OTLP/HTTP receiver
 *             this bench runs (accepts every export and discards it), default sampler (every
 *             span recorded and exported)
 *
 * Workloads (svc with `SVC_AREAS=queue,kv`, `SVC_KV_WORKERS=0`, one process):
 *   publish         POST /v2/publish/<sink> -> delivery to a local sink (two spans per message when on)
 *   publish + tp    the same with a `traceparent` on every publish (off: kept and forwarded as is)
 *   kv GET          POST / ["GET","k"] through the kv REST gateway (one span per request when on)
 *
 * CPU = user + system time of the svc process (`/proc/<pid>/stat`, 10 ms ticks) per message or
 * request; cells are median (min-max) over the rounds; "vs before" is the median of the per-round
 * ratios. Flags: --rounds <n, default 5> --n <messages per publish cell, default 10000>
 * --kv-n <requests per kv cell, default 20000> --conc <concurrent clients, default 32>
 * --base <git rev> --out <file> (also write the table there).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import type net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Pool } from 'undici';
import { abOrder, cpuMs, fmtSpread, median } from './lib/ab.js';
import { checkoutRevision, revisionBefore, shortRev } from './lib/checkout.js';
import { adoptChild, adoptTempDir } from './lib/proc.js';
import { closedLoop, now, startSink, type Sink } from './lib/queue-sink.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const TOKEN = 'bench-token';
const KV_TOKEN = 'bench-kv-token';

function arg(name: string, def: string): string {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? process.argv[i + 1] : def;
}

interface Variant {
  name: string;
  root: string;
  env: Record<string, string>;
}

interface Running {
  child: ChildProcess;
  queue: string;
  kv: string;
}

/** The OTLP/HTTP receiver of the `on` variant: answers every export 200 and counts the bytes. */
async function startOtlpSink(): Promise<{ url: string; bytes(): number; close(): Promise<void> }> {
  let bytes = 0;
  const server = http.createServer((req, res) => {
    req.on('data', (c: Buffer) => (bytes += c.length));
    req.on('end', () => res.writeHead(200, { 'content-type': 'application/json' }).end('{}'));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as net.AddressInfo).port}`,
    bytes: () => bytes,
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}

async function startSvc(v: Variant, dataDir: string): Promise<Running> {
  const child = adoptChild(spawn(process.execPath, [path.join(v.root, 'bin/svc.js'), 'serve'], {
    cwd: v.root,
    env: {
      ...process.env,
      SVC_AREAS: 'queue,kv',
      SVC_QUEUE_PORT: '0',
      SVC_KV_PORT: '0',
      SVC_KV_WORKERS: '0',
      SVC_HOST: '127.0.0.1',
      SVC_DATA_DIR: dataDir,
      SVC_LOG_LEVEL: 'warn',
      SVC_QUEUE_TOKEN: TOKEN,
      SVC_KV_TOKEN: KV_TOKEN,
      ...v.env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  }), `svc (${v.name})`);
  let out = '';
  child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (out += d.toString()));
  const deadline = Date.now() + 120_000;
  while (!/^UPSTASH_REDIS_REST_URL=/m.test(out)) {
    if (Date.now() > deadline || child.exitCode !== null) throw new Error(`svc (${v.name}) did not start:\n${out}`);
    await new Promise((r) => setTimeout(r, 50));
  }
  return { child, queue: /^QSTASH_URL=(\S+)/m.exec(out)![1], kv: /^UPSTASH_REDIS_REST_URL=(\S+)/m.exec(out)![1] };
}

async function stop(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null) return;
  child.kill('SIGTERM');
  await new Promise((r) => child.once('exit', r));
}

const traceparent = () => `00-${randomBytes(16).toString('hex')}-${randomBytes(8).toString('hex')}-01`;

/** CPU µs of `pid` per message for `n` publishes (delivered to `sink`) from `conc` publishers. */
async function publishCell(svc: Running, sink: Sink, n: number, conc: number, withTrace: boolean): Promise<number> {
  const pool = new Pool(svc.queue, { connections: conc, pipelining: 1 });
  const run = randomUUID();
  const delivered = sink.expect(n, run, 300_000);
  const c0 = cpuMs(svc.child.pid!);
  await closedLoop(n, conc, async () => {
    const headers: Record<string, string> = { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' };
    if (withTrace) headers.traceparent = traceparent();
    const res = await pool.request({ path: `/v2/publish/${sink.url}/bench`, method: 'POST', headers, body: JSON.stringify({ t: now(), r: run }) });
    await res.body.text();
    if (res.statusCode !== 200) throw new Error(`publish answered ${res.statusCode}`);
  });
  const d = await delivered;
  if (!d.complete) throw new Error('deliveries did not all arrive');
  const us = ((cpuMs(svc.child.pid!) - c0) * 1000) / n;
  await pool.close();
  return us;
}

/** CPU µs of `pid` per kv GET for `n` requests from `conc` clients. */
async function kvCell(svc: Running, n: number, conc: number): Promise<number> {
  const pool = new Pool(svc.kv, { connections: conc, pipelining: 1 });
  const body = JSON.stringify(['GET', 'bench-key']);
  const c0 = cpuMs(svc.child.pid!);
  await closedLoop(n, conc, async () => {
    const res = await pool.request({ path: '/', method: 'POST', headers: { authorization: `Bearer ${KV_TOKEN}` }, body });
    await res.body.text();
    if (res.statusCode !== 200) throw new Error(`kv answered ${res.statusCode}`);
  });
  const us = ((cpuMs(svc.child.pid!) - c0) * 1000) / n;
  await pool.close();
  return us;
}

/** The order of `xs` in round `round`: rotated by one each round (A B C, B C A, C A B, ...), reversed every other. */
function rotation<T>(round: number, xs: readonly T[]): T[] {
  const k = round % xs.length;
  const r = [...xs.slice(k), ...xs.slice(0, k)];
  const [a, b] = abOrder(round >> 1, r, [...r].reverse());
  return round % 2 === 0 ? a : b;
}

async function main(): Promise<void> {
  const rounds = Number(arg('rounds', '5'));
  const n = Number(arg('n', '10000'));
  const kvN = Number(arg('kv-n', '20000'));
  const conc = Number(arg('conc', '32'));
  const base = arg('base', '') || revisionBefore(ROOT, 'src/tracing.ts');
  const baseRev = shortRev(ROOT, base);
  const headRev = shortRev(ROOT, 'HEAD');
  const loadAtStart = os.loadavg().map((l) => l.toFixed(1)).join(' ');
  const t0 = now();
  const baseDir = checkoutRevision(ROOT, base);
  const otlp = await startOtlpSink();
  const sink = await startSink();
  const variants: Variant[] = [
    { name: 'before', root: baseDir, env: {} },
    { name: 'off', root: ROOT, env: {} },
    { name: 'on', root: ROOT, env: { OTEL_EXPORTER_OTLP_ENDPOINT: otlp.url, OTEL_SERVICE_NAME: 'svc-bench' } },
  ];
  const dirs: string[] = [];
  const running = new Map<string, Running>();
  const cells = ['publish', 'publish + tp', 'kv GET'] as const;
  const results = new Map<string, number[]>(); // `${cell}|${variant}` -> µs per round
  try {
    for (const v of variants) {
      const dir = adoptTempDir(fs.mkdtempSync(path.join(os.tmpdir(), 'svc-bench-tracing-')));
      dirs.push(dir);
      const svc = await startSvc(v, dir);
      running.set(v.name, svc);
      // warm-up (JIT, connection pools), not reported
      await publishCell(svc, sink, 2000, conc, true);
      await kvCell(svc, 2000, conc);
    }
    for (let round = 0; round < rounds; round++) {
      for (const cell of cells) {
        for (const v of rotation(round, variants)) {
          const svc = running.get(v.name)!;
          const us = cell === 'kv GET' ? await kvCell(svc, kvN, conc) : await publishCell(svc, sink, n, conc, cell === 'publish + tp');
          const key = `${cell}|${v.name}`;
          results.set(key, [...(results.get(key) ?? []), us]);
          process.stderr.write(`[bench:tracing] round ${round + 1}/${rounds} ${cell} ${v.name}: ${us.toFixed(1)} µs CPU per request\n`);
        }
      }
    }
  } finally {
    for (const svc of running.values()) await stop(svc.child);
    await sink.close();
    await otlp.close();
    for (const d of [...dirs, baseDir]) fs.rmSync(d, { recursive: true, force: true });
  }
  const paired = (cell: string, v: string) => {
    const a = results.get(`${cell}|before`)!;
    const b = results.get(`${cell}|${v}`)!;
    const r = a.map((x, i) => b[i] / x);
    return `${((median(r) - 1) * 100).toFixed(1)} % (${((Math.min(...r) - 1) * 100).toFixed(1)} to ${((Math.max(...r) - 1) * 100).toFixed(1)} %)`;
  };
  const f = (x: number) => x.toFixed(1);
  const text = [
    `## Tracing overhead: before (${baseRev}) / off / on (${headRev}), interleaved`,
    ``,
    `${new Date().toISOString()}, ${os.cpus().length} CPUs (${os.cpus()[0]?.model ?? '?'}), Node ${process.version}, load average at start ${loadAtStart} / end ${os.loadavg().map((l) => l.toFixed(1)).join(' ')}; total run ${((now() - t0) / 1000).toFixed(0)} s. ` +
      `Three svc processes (\`SVC_AREAS=queue,kv\`, \`SVC_KV_WORKERS=0\`), ${rounds} rounds, ${conc} concurrent clients; ${n} messages per publish cell, ${kvN} requests per kv cell. ` +
      `CPU = user+system time of the svc process per request, µs, median (min-max) over the rounds; "vs before" = median (min to max) of the per-round ratio minus 1. ` +
      `OTLP export received: ${(otlp.bytes() / 1e6).toFixed(1)} MB.`,
    ``,
    `| workload | before µs | off µs | on µs | off vs before | on vs before |`,
    `| --- | ---: | ---: | ---: | ---: | ---: |`,
    ...cells.map(
      (c) =>
        `| ${c} | ${fmtSpread(results.get(`${c}|before`)!, f)} | ${fmtSpread(results.get(`${c}|off`)!, f)} | ${fmtSpread(results.get(`${c}|on`)!, f)} | ${paired(c, 'off')} | ${paired(c, 'on')} |`,
    ),
    ``,
  ].join('\n');
  process.stdout.write(text);
  const out = arg('out', '');
  if (out) fs.writeFileSync(out, text);
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
