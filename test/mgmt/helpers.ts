/**
 * Helpers for the management API tests: Basic headers and authenticated requests against a
 * running svc started with `startTestSvc([..., 'mgmt'])`.
 */
import type { RunningSvc } from '../../src/main.js';

/** `Basic base64(user:password)`. */
export function basic(user: string, password: string): string {
  return `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}`;
}

/** The management account of a running svc (as stored). */
export function account(svc: RunningSvc): { user: string; password: string } {
  return { user: svc.ctx.credentials.get('mgmt.user'), password: svc.ctx.credentials.get('mgmt.password') };
}

/** A request to the management port; `auth` = Authorization header value (default: the right one). */
export async function mgmt(
  svc: RunningSvc,
  path: string,
  opts: { method?: string; auth?: string | null; body?: string; headers?: Record<string, string> } = {},
): Promise<{ status: number; headers: Headers; body: any }> {
  const { user, password } = account(svc);
  const headers: Record<string, string> = { ...opts.headers };
  const auth = opts.auth === undefined ? basic(user, password) : opts.auth;
  if (auth !== null) headers.authorization = auth;
  const res = await fetch(svc.urls.mgmt + path, { method: opts.method ?? 'GET', headers, body: opts.body });
  const text = await res.text();
  let body: unknown = text;
  try {
    body = JSON.parse(text);
  } catch {
    /* keep the text */
  }
  return { status: res.status, headers: res.headers, body };
}

/**
 * Status of a request with a Bearer token (for checking other areas' credentials); `token` null
 * sends no Authorization header (for query-parameter tokens).
 */
export async function bearerStatus(url: string, token: string | null, init: { method?: string; body?: string } = {}): Promise<number> {
  const headers: Record<string, string> = init.body ? { 'content-type': 'application/json' } : {};
  if (token !== null) headers.authorization = `Bearer ${token}`;
  const res = await fetch(url, { method: init.method ?? 'GET', headers, body: init.body });
  await res.arrayBuffer();
  return res.status;
}
