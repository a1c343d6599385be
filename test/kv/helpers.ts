/** Shared raw-HTTP helpers for the kv tests. */
import { Redis } from '@upstash/redis';
import { startTestSvc } from '../helpers/env.js';
import { waitFor } from '../helpers/wait.js';

/**
 * ACL rules for a user of every command the gateway allows (`+@all` is refused: it would grant what
 * svc refuses for every token, and such a user can log in to the database directly).
 */
export const ACL_ALLOWED_COMMANDS = ['+@all', '-@admin', '-migrate', '-swapdb', '-move', '-select', '-memory', '-module'];

export interface Res {
  status: number;
  headers: Headers;
  body: Buffer;
  text: string;
  json: any;
}

/** fetch + body read; `json` is the parsed body when it is JSON, else undefined. */
export async function call(base: string, path: string, init: RequestInit & { token?: string | null } = {}): Promise<Res> {
  const headers = new Headers(init.headers);
  if (init.token !== null && init.token !== undefined && !headers.has('authorization')) headers.set('authorization', `Bearer ${init.token}`);
  const r = await fetch(base + path, { ...init, headers });
  const body = Buffer.from(await r.arrayBuffer());
  const text = body.toString('utf8');
  let json: any;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: r.status, headers: r.headers, body, text, json };
}

/** Polls `fn` until it returns a truthy value or `ms` passes (the suite's {@link waitFor}). */
export function until<T>(fn: () => Promise<T> | T, ms = 10_000): Promise<NonNullable<T>> {
  return waitFor('condition', fn, ms);
}

/** A running kv area with its standard token, an `@upstash/redis` client (default config) and a JSON POST helper. */
export interface KvUnderTest {
  svc: Awaited<ReturnType<typeof startTestSvc>>;
  base: string;
  token: string;
  redis: Redis;
  /** POSTs `body` as JSON with the standard token. */
  post(path: string, body: unknown, headers?: Record<string, string>): Promise<Res>;
  close(): Promise<void>;
}

/** Starts svc's kv area in a fresh data dir (`env`: extra settings). */
export async function startKv(env: Record<string, string> = {}): Promise<KvUnderTest> {
  const svc = await startTestSvc(['kv'], { env });
  const base = svc.urls.kv!;
  const token = svc.ctx.credentials.get('kv.token');
  return {
    svc,
    base,
    token,
    redis: new Redis({ url: base, token, enableTelemetry: false }),
    post: (path, body, headers = {}) =>
      call(base, path, { method: 'POST', token, body: JSON.stringify(body), headers: { 'content-type': 'application/json', ...headers } }),
    close: () => svc.close(),
  };
}
