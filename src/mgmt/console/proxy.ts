/**
 * The console's way to the data: it forwards the browser's calls to the other areas' public HTTP
 * APIs — the same endpoints and tokens the SDKs use — instead of reading any store. The management
 * area never imports another area: it knows their base URLs from `AreaContext.urls` (filled by
 * `main.ts`) and their tokens from the credential store, read on every call (so rotations apply).
 *
 *   /console/api/queue/<path>           -> <queue url>/<path>           Bearer queue.token
 *   /console/api/kv/<path>              -> <kv url>/<path>              Bearer kv.token (read-only console: kv.readonlyToken)
 *   /console/api/vector/<index>/<path>  -> <vector url>[/<index>]/<path> Bearer vector.<index>.token (read-only: .readonlyToken)
 *
 * Read-only console (`SVC_CONSOLE_READONLY=true`): queue calls other than GET/HEAD are refused
 * here with 403; kv and vector calls use the read-only tokens, so those areas refuse every write
 * themselves (kv commands and vector queries are POSTs that only read).
 */
import { request } from 'undici';
import type { AreaContext } from '../../area.js';
import { mgmtError, type MgmtError } from '../errors.js';

/** Areas the console can reach. */
export const PROXIED_AREAS = ['queue', 'kv', 'vector'] as const;
export type ProxiedArea = (typeof PROXIED_AREAS)[number];

/** How long a forwarded call may take before the console gets 504, in ms. */
export const PROXY_TIMEOUT_MS = 30_000;

export interface ProxyTarget {
  url: string;
  token: string;
}

/** Vector index names with tokens in the credential store (`vector.<name>.token`), `default` first. */
export function vectorIndexes(ctx: AreaContext): string[] {
  const names = ctx.credentials
    .names()
    .map((n) => /^vector\.(.+)\.token$/.exec(n)?.[1])
    .filter((n): n is string => n !== undefined);
  return names.sort((a, b) => (a === 'default' ? -1 : b === 'default' ? 1 : a.localeCompare(b)));
}

/**
 * Where a console call goes. `rest` is the path after `/console/api/<area>/` including the query
 * string. Throws a {@link MgmtError}: `areaNotRunning` / `missingCredential` (503), `unknownVectorIndex`
 * (404), `vectorIndexEncoding` (400), `consoleReadonly` (403) for a queue write from a read-only console.
 */
export function proxyTarget(ctx: AreaContext, area: ProxiedArea, rest: string, method: string): ProxyTarget {
  const base = ctx.urls.get(area);
  if (!base) throw mgmtError('areaNotRunning', area);
  const readonly = ctx.config.mgmt.consoleReadonly;
  const store = ctx.credentials;
  const need = (name: string): string => {
    const v = store.peek(name);
    if (v === undefined) throw mgmtError('missingCredential', name);
    return v;
  };
  if (area === 'queue') {
    if (readonly && method !== 'GET' && method !== 'HEAD') throw mgmtError('consoleReadonly');
    return { url: `${base}/${rest}`, token: need('queue.token') };
  }
  if (area === 'kv') return { url: `${base}/${rest}`, token: need(readonly ? 'kv.readonlyToken' : 'kv.token') };
  const slash = rest.indexOf('/');
  let index: string;
  try {
    index = decodeURIComponent(slash < 0 ? rest : rest.slice(0, slash));
  } catch {
    throw mgmtError('vectorIndexEncoding');
  }
  const path = slash < 0 ? '' : rest.slice(slash + 1);
  if (!vectorIndexes(ctx).includes(index)) throw mgmtError('unknownVectorIndex', index);
  const prefix = index === 'default' ? '' : `/${encodeURIComponent(index)}`;
  return { url: `${base}${prefix}/${path}`, token: need(`vector.${index}.${readonly ? 'readonlyToken' : 'token'}`) };
}

export interface Forwarded {
  status: number;
  contentType: string;
  body: Buffer;
}

/** Browser headers passed on: the areas' option headers (`Upstash-Cron`, `Upstash-Retries`, `Svc-Workflow-RunId`, ...). */
const PASSED_HEADER = /^(upstash|svc)-/i;

/**
 * Sends one call to `target` with the area token. From the browser only `content-type`, the
 * `Upstash-*` / `Svc-*` option headers and the body pass (no cookies, no other headers).
 * Resolves to the area's status, content type and body.
 * @throws MgmtError `areaUnreachable` (502), `areaTimeout` (504) past {@link PROXY_TIMEOUT_MS}.
 */
export async function forward(
  target: ProxyTarget,
  method: string,
  incoming: Record<string, string | string[] | undefined>,
  body: Buffer | undefined,
): Promise<Forwarded> {
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries(incoming)) {
    if (typeof value === 'string' && (PASSED_HEADER.test(name) || name.toLowerCase() === 'content-type')) headers[name.toLowerCase()] = value;
  }
  headers.authorization = `Bearer ${target.token}`;
  try {
    const res = await request(target.url, {
      method: method as 'GET',
      headers,
      body: method === 'GET' || method === 'HEAD' ? undefined : body ?? Buffer.alloc(0),
      headersTimeout: PROXY_TIMEOUT_MS,
      bodyTimeout: PROXY_TIMEOUT_MS,
    });
    const buf = Buffer.from(await res.body.arrayBuffer());
    const ct = res.headers['content-type'];
    return { status: res.statusCode, contentType: (Array.isArray(ct) ? ct[0] : ct) ?? 'application/octet-stream', body: buf };
  } catch (err) {
    const code = (err as { code?: string }).code;
    if (code === 'UND_ERR_HEADERS_TIMEOUT' || code === 'UND_ERR_BODY_TIMEOUT') throw mgmtError('areaTimeout');
    throw mgmtError('areaUnreachable', (err as Error).message);
  }
}
