/**
 * USearch (`usearch` 2.26.2, in-process, native) next to hnswlib-node in `npm run bench:vector`:
 * the engine question — same data, same graph parameters (connectivity 16, expansion_add 100),
 * build time single- and multi-threaded, process RSS growth, and QPS at each search breadth
 * (`expansion_search` 16…128; a saved index is re-opened with `view` per breadth, since the JS
 * binding fixes it at construction) with recall@10 — for float32, and for its half-precision
 * (`f16`) and 8-bit (`i8`) vector storage: the memory-saving option and its recall cost.
 * Not a dependency of svc (`bench/peers/package.json`; its `engines` asks Node 22, the linux-x64
 * prebuild loads on Node 20). Its JS binding offers no filtered search (no predicate argument).
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import { recallOf } from '../lib/stats.js';

const here = path.dirname(fileURLToPath(import.meta.url));

export interface UsearchInput {
  data: number[][];
  queries: number[][];
  truth: number[][];
  add(system: string, what: string, value: string): void;
  fmt(x: number, digits?: number): string;
  efs: number[];
}

/** Runs the USearch rows (module doc); errors become a row, never thrown. */
export async function runUsearch(input: UsearchInput): Promise<void> {
  const { data, queries, truth, add, fmt } = input;
  const sys = 'USearch 2.26.2 in-process';
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  let usearch: any;
  try {
    usearch = createRequire(path.join(here, 'package.json'))('usearch');
  } catch (err) {
    return add(sys, 'not run', `bench/peers not installed or usearch failed to load: ${(err as Error).message.split('\n')[0]}`);
  }
  const n = data.length;
  const d = data[0].length;
  const flat = new Float32Array(n * d);
  data.forEach((v, i) => flat.set(v, i * d));
  const keys = new BigUint64Array(n).map((_, i) => BigInt(i));
  const qs = queries.map((q) => Float32Array.from(q));
  const raw = n * d * 4 + n * (2 * 16 * 4 + 4) + n * 8;
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'svc-usearch-bench-'));
  try {
    for (const quantization of ['f32', 'f16', 'i8']) {
      const threadsList = quantization === 'f32' ? [1, os.cpus().length] : [os.cpus().length];
      let file = '';
      for (const threads of threadsList) {
        global.gc?.();
        const rss0 = process.memoryUsage().rss;
        const index = new usearch.Index({ dimensions: d, metric: 'cos', quantization, connectivity: 16, expansion_add: 100, expansion_search: 64 });
        const t = performance.now();
        const c0 = process.cpuUsage();
        for (let i = 0; i < n; i += 10_000) index.add(keys.subarray(i, i + 10_000), flat.subarray(i * d, Math.min(n, i + 10_000) * d), threads);
        const build = (performance.now() - t) / 1000;
        const cpu = process.cpuUsage(c0);
        const grown = process.memoryUsage().rss - rss0;
        add(sys, `${quantization}: build, ${threads} thread${threads > 1 ? 's' : ''}`, `${fmt(build, 1)} s (${fmt(n / build)} vec/s), CPU ${fmt((cpu.user + cpu.system) / 1e6, 1)} s; RSS +${fmt(grown / 1048576, 1)} MB = ${(grown / raw).toFixed(2)}× raw float32 + links`);
        file = path.join(dir, `${quantization}.usearch`);
        index.save(file);
      }
      for (const ef of input.efs) {
        const view = new usearch.Index({ dimensions: d, metric: 'cos', quantization, connectivity: 16, expansion_add: 100, expansion_search: ef });
        view.view(file);
        const t = performance.now();
        const c0 = process.cpuUsage();
        const got = qs.map((q) => Array.from(view.search(q, 10, 1).keys as BigUint64Array, Number));
        const cpu = process.cpuUsage(c0);
        const qps = (qs.length / (performance.now() - t)) * 1000;
        add(sys, `${quantization}: expansion_search ${ef}, 1 thread`, `${fmt(qps)} QPS @ recall ${recallOf(got, truth).toFixed(3)}; CPU ${fmt((cpu.user + cpu.system) / qs.length)} µs/query`);
      }
    }
  } catch (err) {
    add(sys, 'failed', (err as Error).message.split('\n')[0]);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}
