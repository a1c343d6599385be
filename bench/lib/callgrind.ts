/**
 * Counting CPU instructions of a process run under `valgrind --tool=callgrind` (the
 * `bench:metrics` and `bench:instructions` benches): zero its counters, let it work, dump them and
 * read the totals back, per thread (`--separate-threads=yes`). Plus the request loop those benches
 * measure with.
 */
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Pool } from 'undici';
import { runToCompletion, waitFor } from './proc.js';
import { now, type Sink } from './queue-sink.js';

/**
 * `node --import <this>` for a Node.js run under valgrind, which does not implement AVX-512: the
 * process reads /proc/cpuinfo without the avx512* flags, so svc's HNSW addon loader picks the
 * AVX2 build (`valgrind-cpu.mjs`).
 */
export const VALGRIND_CPU_PRELOAD = path.join(path.dirname(fileURLToPath(import.meta.url)), 'valgrind-cpu.mjs');

/** What the callgrind benches run (for `requirePrograms`): valgrind and the bench's own redis-server. */
export const CALLGRIND_PROGRAMS = [
  { cmd: 'valgrind', pkg: 'valgrind' },
  { cmd: 'callgrind_control', pkg: 'valgrind' },
  { cmd: 'redis-server', pkg: 'redis-server' },
];

/** A process under callgrind: its pid, its `--callgrind-out-file` base, and the dumps written so far (callgrind numbers them from 1). */
export interface CallgrindTarget {
  pid: number;
  outBase: string;
  dumps: number;
}

/** Runs `callgrind_control <what> <pid>`. @throws Error when it fails. */
export async function callgrindControl(t: CallgrindTarget, what: '--zero' | '--dump'): Promise<void> {
  const r = await runToCompletion('callgrind_control', 'callgrind_control', [what, String(t.pid)]);
  if (r.code !== 0 || !/OK/.test(r.stdout)) throw new Error(`callgrind_control ${what}: ${r.stdout} ${r.stderr}`);
}

/** Instructions counted since the last zero: in the main thread (the event loop) and in all threads. */
export interface InstructionCount {
  main: number;
  all: number;
}

/**
 * Dumps the counters and reads them back: with `--separate-threads=yes` callgrind writes one file
 * per thread (`<base>.<dump>-<thread>`, thread 01 = the main thread), each with a `totals:` line.
 * @throws Error when the dump does not appear within 2 min
 */
export async function dumpInstructions(t: CallgrindTarget): Promise<InstructionCount> {
  const dir = path.dirname(t.outBase);
  const prefix = `${path.basename(t.outBase)}.${++t.dumps}-`;
  const files = () => fs.readdirSync(dir).filter((f) => f.startsWith(prefix));
  const totals = (f: string) => /^totals: (\d+)/m.exec(fs.readFileSync(path.join(dir, f), 'utf8'));
  await callgrindControl(t, '--dump');
  let seen = -1;
  await waitFor('the callgrind dump', () => {
    const fs1 = files();
    const done = fs1.length > 0 && fs1.length === seen && fs1.every((f) => totals(f) !== null);
    seen = fs1.length;
    return done;
  }, 120_000, 500);
  const count: InstructionCount = { main: 0, all: 0 };
  for (const f of files()) {
    const n = Number(totals(f)![1]);
    count.all += n;
    if (f.endsWith('-01')) count.main = n;
  }
  return count;
}

/** One request of {@link requests}. */
export interface BenchRequest {
  path: string;
  method: 'GET' | 'POST';
  headers: Record<string, string>;
  body?: string;
}

/** `n` requests to `url` through an undici pool, `concurrency` in flight. @throws Error when an answer is not 2xx */
export async function requests(url: string, n: number, concurrency: number, req: BenchRequest): Promise<void> {
  const pool = new Pool(url, { connections: concurrency, pipelining: 1 });
  let next = 0;
  try {
    await Promise.all(
      Array.from({ length: concurrency }, async () => {
        while (next < n) {
          next++;
          const res = await pool.request(req);
          const text = await res.body.text();
          if (res.statusCode >= 300) throw new Error(`${req.path} answered ${res.statusCode}: ${text}`);
        }
      }),
    );
  } finally {
    await pool.close();
  }
}

/**
 * `n` queue messages published to `sink` one at a time through `queueUrl` (token `token`), each
 * awaited at the sink until delivered: how many messages share a group commit or a dispatch round
 * depends on timing, which valgrind changes; one at a time does not batch.
 * @throws Error when a publish is not answered 200 or a message is not delivered within 10 min
 */
export async function publishOneByOne(queueUrl: string, token: string, sink: Sink, n: number): Promise<void> {
  const pool = new Pool(queueUrl, { connections: 1, pipelining: 1 });
  try {
    for (let i = 0; i < n; i++) {
      const delivered = sink.expect(1, undefined, 600_000);
      const res = await pool.request({
        path: `/v2/publish/${sink.url}/ab`,
        method: 'POST',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        body: JSON.stringify({ t: now() }),
      });
      const text = await res.body.text();
      if (res.statusCode !== 200) throw new Error(`publish answered ${res.statusCode}: ${text}`);
      if (!(await delivered).complete) throw new Error('queue: a message was not delivered within 10 min');
    }
  } finally {
    await pool.close();
  }
}
