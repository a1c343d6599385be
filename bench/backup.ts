/**
 * `npm run bench:backup` — an online backup (`POST /v2/backup`) of a loaded svc: how long it takes,
 * how many bytes it writes, and what it does to the requests served meanwhile.
 *
 * svc runs as a child process (`node bin/svc.js serve`: queue on SQLite, a supervised
 * redis-server, one dense vector index, mgmt) in a fresh data directory. The bench fills it through
 * the official SDKs: `BENCH_BACKUP_MESSAGES` queue messages (batches of 100, delayed a day so they
 * stay waiting), `BENCH_BACKUP_KEYS` kv keys (pipelines of 1,000 SETs of 100 bytes),
 * `BENCH_BACKUP_VECTORS` vectors of `BENCH_BACKUP_DIM` dimensions (batches of 1,000). Then a
 * probe load — closed loops of single requests, `BENCH_BACKUP_PROBES` per kind: kv GET, vector query
 * (topK 10), queue publish — runs for `BENCH_BACKUP_IDLE_SECONDS` without a backup (idle) and
 * again while one backup runs (during); the p50/p99 of each kind are reported side by side.
 *
 * Env (defaults are a scaled-down run; the issue's size is 1,000,000 of each):
 * `BENCH_BACKUP_MESSAGES` (20000), `BENCH_BACKUP_KEYS` (20000), `BENCH_BACKUP_VECTORS` (20000),
 * `BENCH_BACKUP_DIM` (128), `BENCH_BACKUP_PROBES` (2), `BENCH_BACKUP_IDLE_SECONDS` (5),
 * `BENCH_OUT=<file>` (also write the report there).
 */
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Client } from '@upstash/qstash';
import { Redis } from '@upstash/redis';
import { Index } from '@upstash/vector';
import { describeMachine } from './lib/machine.js';
import { cleanupAll, installCleanupHandlers, makeTempDir, startProcess } from './lib/proc.js';
import { fmtInt, fmtMs, fmtRatio, percentile } from './lib/stats.js';
import { markdownTable } from './lib/table.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const num = (name: string, def: number) => (process.env[name] ? Number(process.env[name]) : def);
const MESSAGES = num('BENCH_BACKUP_MESSAGES', 20_000);
const KEYS = num('BENCH_BACKUP_KEYS', 20_000);
const VECTORS = num('BENCH_BACKUP_VECTORS', 20_000);
const DIM = num('BENCH_BACKUP_DIM', 128);
const PROBES = num('BENCH_BACKUP_PROBES', 2);
const IDLE_SECONDS = num('BENCH_BACKUP_IDLE_SECONDS', 5);

const randomVector = () => Array.from({ length: DIM }, () => Math.random() * 2 - 1);

type Kind = 'kv GET' | 'vector query' | 'queue publish';

/** Runs `PROBES` closed loops per kind until `until()` is true; latencies in ms per kind. */
async function probe(ops: Record<Kind, () => Promise<unknown>>, until: () => boolean): Promise<Record<Kind, number[]>> {
  const out = { 'kv GET': [], 'vector query': [], 'queue publish': [] } as Record<Kind, number[]>;
  const loops: Promise<void>[] = [];
  for (const kind of Object.keys(ops) as Kind[]) {
    for (let i = 0; i < PROBES; i++) {
      loops.push(
        (async () => {
          while (!until()) {
            const t = performance.now();
            await ops[kind]();
            out[kind].push(performance.now() - t);
          }
        })(),
      );
    }
  }
  await Promise.all(loops);
  return out;
}

async function main(): Promise<void> {
  installCleanupHandlers();
  const tmp = makeTempDir('svc-bench-backup-');
  const data = path.join(tmp, 'data');
  const svc = await startProcess({
    name: 'svc',
    cmd: process.execPath,
    args: [path.join(ROOT, 'bin/svc.js'), 'serve'],
    cwd: ROOT,
    env: {
      ...process.env,
      SVC_HOST: '127.0.0.1',
      SVC_DATA_DIR: data,
      SVC_LOG_LEVEL: 'warn',
      SVC_QUEUE_PORT: '0',
      SVC_KV_PORT: '0',
      SVC_VECTOR_PORT: '0',
      SVC_MGMT_PORT: '0',
      SVC_VECTOR_DIMENSION: String(DIM),
    },
    readyPattern: /Paste into/,
    readyTimeoutMs: 300_000,
  });
  const url = (area: string) => new RegExp(`^${area}\\s+(http://\\S+)`, 'm').exec(svc.output())![1];
  const creds = JSON.parse(fs.readFileSync(path.join(data, 'credentials.json'), 'utf8')) as Record<string, string>;
  const qstash = new Client({ baseUrl: url('queue'), token: creds['queue.token'], retry: false });
  const redis = new Redis({ url: url('kv'), token: creds['kv.token'], automaticDeserialization: false });
  const index = new Index({ url: url('vector'), token: creds['vector.default.token'] });

  const t0 = performance.now();
  const value = 'x'.repeat(100);
  for (let i = 0; i < KEYS; i += 1000) {
    const p = redis.pipeline();
    for (let j = i; j < Math.min(KEYS, i + 1000); j++) p.set(`key:${j}`, value);
    await p.exec();
  }
  const kvMs = performance.now() - t0;
  for (let i = 0; i < VECTORS; i += 1000) {
    await index.upsert(Array.from({ length: Math.min(1000, VECTORS - i) }, (_, j) => ({ id: `v${i + j}`, vector: randomVector() })));
  }
  const vectorMs = performance.now() - t0 - kvMs;
  const parallel = 4;
  let next = 0;
  await Promise.all(
    Array.from({ length: parallel }, async () => {
      for (;;) {
        const i = next;
        next += 100;
        if (i >= MESSAGES) return;
        await qstash.batchJSON(Array.from({ length: Math.min(100, MESSAGES - i) }, (_, j) => ({ url: 'https://example.com/bench', body: { i: i + j }, delay: 86_400 })));
      }
    }),
  );
  const queueMs = performance.now() - t0 - kvMs - vectorMs;
  // the index is queryable by the graph once its insertion queue has drained
  for (;;) {
    const info = await index.info();
    if (info.pendingVectorCount === 0) break;
    await new Promise((r) => setTimeout(r, 500));
  }

  const ops: Record<Kind, () => Promise<unknown>> = {
    'kv GET': () => redis.get(`key:${Math.floor(Math.random() * KEYS)}`),
    'vector query': () => index.query({ vector: randomVector(), topK: 10 }),
    'queue publish': () => qstash.publishJSON({ url: 'https://example.com/bench', body: { probe: true }, delay: 86_400 }),
  };
  const idleEnd = Date.now() + IDLE_SECONDS * 1000;
  const idle = await probe(ops, () => Date.now() > idleEnd);

  const auth = `Basic ${Buffer.from(`${creds['mgmt.user']}:${creds['mgmt.password']}`).toString('base64')}`;
  let backupDone = false;
  const tb = performance.now();
  const backup = fetch(`${url('mgmt')}/v2/backup`, {
    method: 'POST',
    headers: { authorization: auth, 'content-type': 'application/json' },
    body: JSON.stringify({ dir: path.join(tmp, 'backup') }),
    signal: AbortSignal.timeout(6 * 3_600_000),
  })
    .then(async (r) => {
      const body = (await r.json()) as { error?: string; manifest?: { files: { path: string; bytes: number }[] } };
      if (r.status !== 200) throw new Error(`backup failed (${r.status}): ${body.error}`);
      return body.manifest!;
    })
    .finally(() => (backupDone = true));
  const during = await probe(ops, () => backupDone);
  const manifest = await backup;
  const backupMs = performance.now() - tb;

  const dataBytes = (dir: string): number => {
    let n = 0;
    for (const rel of fs.readdirSync(dir, { recursive: true, encoding: 'utf8' })) {
      const st = fs.statSync(path.join(dir, rel));
      if (st.isFile()) n += st.size;
    }
    return n;
  };
  const lines = [
    `# svc online backup (${new Date().toISOString().slice(0, 10)})`,
    '',
    describeMachine(),
    '',
    `Data: ${fmtInt(MESSAGES)} queue messages, ${fmtInt(KEYS)} kv keys (100-byte values), ${fmtInt(VECTORS)} x ${DIM} vectors; loaded in ${fmtMs(kvMs)} / ${fmtMs(vectorMs)} / ${fmtMs(queueMs)} ms (kv / vector / queue). Data directory ${fmtInt(dataBytes(data))} bytes.`,
    '',
    `Backup: ${fmtMs(backupMs)} ms, ${fmtInt(manifest.files.reduce((s, f) => s + f.bytes, 0))} bytes in ${manifest.files.length} files:`,
    '',
    markdownTable(
      [{ header: 'file' }, { header: 'bytes', align: 'right' }],
      manifest.files.map((f) => [f.path, fmtInt(f.bytes)]),
    ),
    '',
    `Probe requests (${PROBES} closed loops per kind), idle for ${IDLE_SECONDS} s vs during the backup:`,
    '',
    markdownTable(
      [
        { header: 'request' },
        { header: 'idle n', align: 'right' },
        { header: 'idle p50 ms', align: 'right' },
        { header: 'idle p99 ms', align: 'right' },
        { header: 'during n', align: 'right' },
        { header: 'during p50 ms', align: 'right' },
        { header: 'during p99 ms', align: 'right' },
        { header: 'p99 during / idle', align: 'right' },
      ],
      (Object.keys(ops) as Kind[]).map((k) => [
        k,
        fmtInt(idle[k].length),
        fmtMs(percentile(idle[k], 50)),
        fmtMs(percentile(idle[k], 99)),
        fmtInt(during[k].length),
        fmtMs(percentile(during[k], 50)),
        fmtMs(percentile(during[k], 99)),
        fmtRatio(percentile(during[k], 99), percentile(idle[k], 99)),
      ]),
    ),
    '',
  ];
  const report = lines.join('\n');
  process.stdout.write(report);
  if (process.env.BENCH_OUT) fs.writeFileSync(process.env.BENCH_OUT, report);
  await svc.stop();
}

main()
  .catch((err: Error) => {
    process.stderr.write(`${err.stack ?? err.message}\n`);
    process.exitCode = 1;
  })
  .finally(() => cleanupAll());
