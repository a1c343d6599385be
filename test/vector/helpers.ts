/**
 * Vector test helpers: a real svc (vector area only) with extra indexes from a temp
 * `SVC_VECTOR_INDEXES` file, SDK clients per index, seeded random vectors.
 */
import fs from 'node:fs';
import path from 'node:path';
import { Index } from '@upstash/vector';
import { startTestSvc, tempDir } from '../helpers/env.js';

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
