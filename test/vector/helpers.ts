/**
 * Vector test helpers: a real svc (vector area only) with extra indexes from a temp
 * `SVC_VECTOR_INDEXES` file, SDK clients per index, seeded random vectors.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { Index } from '@upstash/vector';
import { startTestSvc, tempDir, vectorDatabaseEnv } from '../helpers/env.js';
import { DEFAULT_HNSW, type IndexDefinition } from '../../src/vector/definitions.js';
import type { NamespaceState } from '../../src/vector/engine/namespace.js';
import type { VectorIndex } from '../../src/vector/engine/vector-index.js';
import { runQuery } from '../../src/vector/query/execute.js';

export type Svc = Awaited<ReturnType<typeof startTestSvc>>;

/** Starts svc with `indexes` (definitions file entries) in `dataDir` (fresh when absent). */
export async function startVector(
  indexes: object[] = [],
  opts: { env?: Record<string, string>; dataDir?: string } = {},
): Promise<Svc & { client(name?: string, readonly?: boolean): Index; indexUrl(name?: string): string; token(name?: string, readonly?: boolean): string }> {
  const cfg = tempDir('svc-vector-cfg-');
  const file = path.join(cfg.dir, 'indexes.json');
  fs.writeFileSync(file, JSON.stringify({ indexes }));
  const svc = await startTestSvc(['vector'], { env: { SVC_VECTOR_INDEXES: file, ...opts.env }, dataDir: opts.dataDir });
  const indexUrl = (name = 'default') => (name === 'default' ? svc.urls.vector! : `${svc.urls.vector}/${name}`);
  const token = (name = 'default', readonly = false) =>
    svc.ctx.credentials.get(`vector.${name}.${readonly ? 'readonlyToken' : 'token'}`);
  return {
    ...svc,
    indexUrl,
    token,
    client: (name = 'default', readonly = false) => new Index({ url: indexUrl(name), token: token(name, readonly), retry: false, enableTelemetry: false }),
    close: async () => {
      await svc.close();
      cfg.cleanup();
    },
  };
}

/** Deterministic PRNG (mulberry32) returning [0, 1). */
export function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** `n` random vectors of dimension `d` with components uniform in [-1, 1). */
export function randomVectors(n: number, d: number, seed: number): number[][] {
  const r = rng(seed);
  return Array.from({ length: n }, () => Array.from({ length: d }, () => r() * 2 - 1));
}

/** Raw POST with a bearer token; returns status and parsed JSON body. */
export async function raw(url: string, token: string | undefined, body?: string, method = 'POST'): Promise<{ status: number; body: any }> {
  const res = await fetch(url, {
    method,
    headers: token === undefined ? {} : { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: method === 'GET' || method === 'HEAD' ? undefined : body,
  });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : undefined };
}

/**
 * `node bin/svc.js serve` as a child process (vector area only, port 0) on `dataDir`, with `env`
 * added; resolves once the banner names the vector URL. `log()` is its stderr so far (pino JSON
 * lines, level warn and up), `stdout()` its standard output (the banner). For tests that stop svc with a signal (SIGKILL, SIGTERM). Rejects when
 * no banner came within `bannerTimeoutMs`.
 */
export async function serveVectorChild(
  dataDir: string,
  env: Record<string, string> = {},
  bannerTimeoutMs = 30_000,
): Promise<{ child: ChildProcess; url: string; log(): string; stdout(): string; exited(): Promise<void> }> {
  const root = path.resolve(import.meta.dirname, '../..');
  const child = spawn(process.execPath, [path.join(root, 'bin/svc.js'), 'serve'], {
    cwd: root,
    env: { ...process.env, SVC_AREAS: 'vector', SVC_VECTOR_PORT: '0', SVC_DATA_DIR: dataDir, SVC_HOST: '127.0.0.1', SVC_LOG_LEVEL: 'warn', SVC_VECTOR_INDEXES: '', ...vectorDatabaseEnv(dataDir), ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  child.stderr!.on('data', (b) => (err += b));
  const exited = () => new Promise<void>((r) => (child.exitCode !== null || child.signalCode !== null ? r() : child.once('exit', () => r())));
  try {
    const url = await new Promise<string>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`no banner in ${bannerTimeoutMs / 1000} s; stdout: ${out} stderr: ${err}`)), bannerTimeoutMs);
      child.stdout!.on('data', (b) => {
        out += b;
        const m = /^vector\s+(http:\/\/\S+)/m.exec(out);
        if (m) {
          clearTimeout(timer);
          resolve(m[1]);
        }
      });
      child.on('exit', (code) => reject(new Error(`svc exited ${code}: ${err}`)));
    });
    return { child, url, log: () => err, stdout: () => out, exited };
  } catch (e) {
    child.kill('SIGKILL');
    throw e;
  }
}

/** A dense COSINE index definition of dimension `d` with the default HNSW parameters (engine-level tests). */
export function denseDefinition(d: number): IndexDefinition {
  return { name: 'default', type: 'DENSE', dimension: d, metric: 'COSINE', hnsw: DEFAULT_HNSW, embedder: {} } as IndexDefinition;
}

/** An engine-level query for `vector` (optionally filtered) with the options the HTTP routes fill in. */
export function engineQuery(vector: number[], filter?: string): never {
  return { vector, filter, includeMetadata: false, includeVectors: false, includeData: false, fusion: 'RRF', useIdf: true } as never;
}

/** Id of the record nearest to `vector` in `ns` (top 1, search breadth 1); undefined when none. */
export function nearestId(idx: VectorIndex, ns: NamespaceState, vector: number[]): string | undefined {
  const [hit] = runQuery(idx, ns, engineQuery(vector), 1, 1);
  return hit === undefined ? undefined : ns.ids[hit.label];
}
