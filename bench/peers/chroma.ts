/**
 * Chroma (the server, over HTTP) as a peer in `npm run bench:vector`. Not a dependency of svc.
 *
 * PyPI is not reachable from the bench machine, so the Python `chromadb` server cannot be
 * installed; the npm package `chromadb` (3.x) ships the same Rust server as a CLI (`chroma run`,
 * `dist/cli.mjs`) through the platform package `chromadb-js-bindings-linux-x64-gnu`.
 * `bench/peers/package.json` pins `chromadb` 3.0.14 and overrides the bindings to 1.0.5: every
 * later bindings build needs glibc 2.38/2.39 (Debian 12 has 2.36) and fails to load.
 *
 * Measured through Chroma's v2 REST API (`/api/v2/tenants/default_tenant/databases/default_database/…`):
 * a collection with `hnsw: {space: 'cosine', max_neighbors: 16, ef_construction: 100}`; vectors
 * added in batches of 1,000 with metadata `{s: i % 1000}`; `ef_search` swept (collection update)
 * until recall@10 >= 0.95; at that ef: QPS with `wrk` at 1 and 16 connections, latency p50/p99 of
 * sequential queries, filtered queries (`where: {s: {$lt: n}}`) at the bench's selectivities,
 * and the server process's RSS growth over the build.
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { request } from 'undici';
import { freePort, waitFor } from '../lib/proc.js';
import { percentile, recallOf } from '../lib/stats.js';

const here = path.dirname(fileURLToPath(import.meta.url));

export interface ChromaInput {
  data: number[][];
  queries: number[][];
  truth: number[][];
  /** Filters as `s < lt` with their exact top-10 per query. */
  filters: { name: string; lt: number; truth: number[][] }[];
  add(system: string, what: string, value: string): void;
  fmt(x: number, digits?: number): string;
  /**
   * QPS of POSTing `bodies` (cycled) to `url` with `connections` keep-alive connections (wrk), and
   * the CPU µs per request of process `pid`.
   */
  wrk(url: string, bodies: string[], connections: number, pid: number): Promise<{ qps: number; cpuUs: number }>;
}

function rssBytes(pid: number): number {
  const s = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
  return Number(/VmRSS:\s+(\d+) kB/.exec(s)![1]) * 1024;
}

async function call(url: string, method: 'GET' | 'POST' | 'PUT', body?: unknown): Promise<any> {
  const res = await request(url, { method, headers: { 'content-type': 'application/json' }, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await res.body.text();
  if (res.statusCode >= 300) throw new Error(`chroma ${method} ${url}: ${res.statusCode} ${text.slice(0, 200)}`);
  return text ? JSON.parse(text) : undefined;
}

/** Runs the Chroma rows (module doc); errors become a row, never thrown. */
export async function runChroma(input: ChromaInput): Promise<void> {
  const { data, queries, truth, add, fmt } = input;
  const sys = 'Chroma 3.0.14 server (HTTP)';
  const cli = path.join(here, 'node_modules/chromadb/dist/cli.mjs');
  if (!fs.existsSync(cli)) return add(sys, 'not run', 'bench/peers not installed (chromadb missing)');
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'svc-chroma-bench-'));
  const port = await freePort();
  const child = spawn(process.execPath, [cli, 'run', '--path', dir, '--port', String(port)], { stdio: ['ignore', 'pipe', 'pipe'], detached: true });
  let out = '';
  child.stdout!.on('data', (b) => (out += b));
  child.stderr!.on('data', (b) => (out += b));
  const base = `http://127.0.0.1:${port}/api/v2`;
  try {
    await waitFor('chroma heartbeat', async () => {
      try {
        await call(`${base}/heartbeat`, 'GET');
        return true;
      } catch {
        return false;
      }
    }, 60_000, 200);
    const rss0 = rssBytes(child.pid!);
    const db = `${base}/tenants/default_tenant/databases/default_database`;
    const col = await call(`${db}/collections`, 'POST', { name: 'bench', configuration: { hnsw: { space: 'cosine', max_neighbors: 16, ef_construction: 100, ef_search: 32 } } });
    const cu = `${db}/collections/${col.id}`;
    let t = performance.now();
    for (let i = 0; i < data.length; i += 1000) {
      const part = data.slice(i, i + 1000);
      await call(`${cu}/add`, 'POST', { ids: part.map((_, j) => String(i + j)), embeddings: part, metadatas: part.map((_, j) => ({ s: (i + j) % 1000 })) });
    }
    await waitFor('chroma count', async () => (await call(`${cu}/count`, 'GET')) === data.length, 600_000, 200);
    const build = (performance.now() - t) / 1000;
    add(sys, 'build (add batches of 1,000)', `${fmt(build, 1)} s (${fmt(data.length / build)} vec/s)`);
    const query = (q: number[], where?: unknown) => ({ query_embeddings: [q], n_results: 10, include: ['distances'], ...(where ? { where } : {}) });
    // First query after the build (loads the index), then the memory sample.
    await call(`${cu}/query`, 'POST', query(queries[0]));
    const grown = rssBytes(child.pid!) - rss0;
    const raw = data.length * data[0].length * 4 + data.length * (2 * 16 * 4 + 4) + data.length * 8;
    add(sys, 'memory after the build (process RSS growth)', `+${fmt(grown / 1048576, 1)} MB vs raw ${fmt(raw / 1048576, 1)} MB = ${(grown / raw).toFixed(2)}×`);
    const seq = async (where?: unknown) => {
      const got: number[][] = [];
      const lat: number[] = [];
      for (const q of queries) {
        const t0 = performance.now();
        const r = await call(`${cu}/query`, 'POST', query(q, where));
        lat.push(performance.now() - t0);
        got.push((r.ids[0] as string[]).map(Number));
      }
      return { got, lat };
    };
    let ef = 0;
    for (const e of [16, 32, 64, 128, 256]) {
      await call(cu, 'PUT', { new_configuration: { hnsw: { ef_search: e } } });
      const r = await seq();
      const rec = recallOf(r.got, truth);
      add(sys, `ef_search ${e}, 1 client (sequential)`, `recall ${rec.toFixed(3)}, p50 ${percentile(r.lat, 50).toFixed(2)} ms, p99 ${percentile(r.lat, 99).toFixed(2)} ms`);
      if (rec >= 0.95) {
        ef = e;
        break;
      }
    }
    ef ||= 256;
    const bodies = queries.map((q) => JSON.stringify(query(q)));
    for (const c of [1, 16]) {
      const r = await input.wrk(`${cu}/query`, bodies, c, child.pid!);
      add(sys, `ef_search ${ef}, ${c} client${c > 1 ? 's' : ''} (wrk)`, `${fmt(r.qps)} QPS; server CPU ${fmt(r.cpuUs)} µs/query`);
    }
    for (const f of input.filters) {
      const where = { s: { $lt: f.lt } };
      const r = await seq(where);
      const w = await input.wrk(`${cu}/query`, queries.map((q) => JSON.stringify(query(q, where))), 1, child.pid!);
      add(sys, `filter ${f.name}, ef_search ${ef}, 1 client (wrk)`, `${fmt(w.qps)} QPS @ recall ${recallOf(r.got, f.truth).toFixed(3)}; server CPU ${fmt(w.cpuUs)} µs/query; sequential p50 ${percentile(r.lat, 50).toFixed(2)} ms, p99 ${percentile(r.lat, 99).toFixed(2)} ms`);
    }
  } catch (err) {
    add(sys, 'failed', `${(err as Error).message.split('\n')[0]} ${out.slice(-300).replace(/\s+/g, ' ')}`);
  } finally {
    try {
      process.kill(-child.pid!, 'SIGTERM');
    } catch {
      /* gone */
    }
    await new Promise((r) => (child.exitCode !== null ? r(null) : child.once('exit', r)));
    fs.rmSync(dir, { recursive: true, force: true });
  }
}
