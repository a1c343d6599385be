/** Shared raw-HTTP helpers for the kv tests. */
import { waitFor } from '../helpers/wait.js';

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
