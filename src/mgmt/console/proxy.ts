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
 * Read-only console (`SVC_CONSOLE_READONLY=true`) refuses by operation, never by HTTP method alone:
 * - queue: only the read operations of {@link QUEUE_READS} pass (GET/HEAD on those paths); every
 *   other call is refused here with 403 — the queue has state-changing GETs (`GET
 *   /v2/dlq/resume/<dlqId>` resumes a failed workflow run; the workflow webhook path notifies a
 *   waiting run whatever the method), so a list of reads is the only safe rule;
 * - kv and vector: the calls are made with the areas' read-only tokens, so those areas refuse
 *   every write themselves, by command (kv: the read-only ACL user) and by endpoint (vector).
 *   One exception: a single `SCAN` command (the key browser's listing, which the hosted
 *   service's read-only token may not run) is sent with the standard kv token
 *   ({@link isLoneScan}); SCAN only reads, whatever its arguments.
 */
import type { Readable } from 'node:stream';
import { request } from 'undici';
import type { AreaContext } from '../../area.js';
import { mgmtError, type MgmtError } from '../errors.js';

/** Areas the console can reach. */
export const PROXIED_AREAS = ['queue', 'kv', 'vector'] as const;
export type ProxiedArea = (typeof PROXIED_AREAS)[number];

/** How long a forwarded call may take before the console gets 504, in ms (headers; then between body chunks). */
export const PROXY_TIMEOUT_MS = 30_000;

/**
 * The queue's read operations (path after the base URL, without the query string; GET or HEAD):
 * every route of the queue's API that only reads. A read-only console forwards these and nothing
 * else. Each pattern is anchored and its variable parts are single path segments, so e.g.
 * `v2/dlq/<dlqId>` (read one DLQ entry) never matches `v2/dlq/resume/<dlqId>` (a write).
 */
export const QUEUE_READS: readonly RegExp[] = [
  /^v2\/stats(\/events)?$/,
  /^v2\/(logs|events)$/,
  /^v2\/messages\/[^/]+$/,
  /^v2\/dlq(\/[^/]+)?$/,
  /^v2\/(schedules|queues|topics|flowControl)(\/[^/]+)?$/,
  /^v2\/(globalParallelism|keys)$/,
  /^v2\/workflows\/(logs|events|dlq)$/,
  /^v2\/workflows\/(dlq|runs)\/[^/]+$/,
  /^v2\/waiters\/[^/]+$/,
];

/** True when `method` on queue path `path` (no query string, no leading slash) only reads. */
export function isQueueRead(method: string, path: string): boolean {
  return (method === 'GET' || method === 'HEAD') && QUEUE_READS.some((r) => r.test(path));
}

/**
 * True when `body` is one kv command (the REST API's `POST /` JSON array of strings) that is a
 * `SCAN` (any case). The read-only console sends it with the standard token: the read-only token
 * may not SCAN (as on the hosted service), and the key browser lists keys with it.
 */
export function isLoneScan(body: Buffer | undefined): boolean {
  if (!body || body.length > 64 * 1024) return false;
  let cmd: unknown;
  try {
    cmd = JSON.parse(body.toString('utf8'));
  } catch {
    return false;
  }
  return Array.isArray(cmd) && cmd.length >= 2 && cmd.every((a) => typeof a === 'string') && (cmd[0] as string).toLowerCase() === 'scan';
}

/** kv paths that answer with a server-sent event stream (`/subscribe/<ch>`, `/psubscribe/<pat>`, `/monitor`). */
export function isKvStream(path: string): boolean {
  return /^(subscribe|psubscribe)\//.test(path) || /^monitor(\/?$)/.test(path);
}

export interface ProxyTarget {
  url: string;
  token: string;
  /** True for a server-sent event stream (no body timeout: it lives as long as the browser keeps it). */
  stream?: boolean;
}

/** Vector index names with tokens in the credential store (`vector.<name>.token`), `default` first. */
export function vectorIndexes(ctx: AreaContext): string[] {
  const names = ctx.credentials
    .names()
    .map((n) => /^vector\.(.+)\.token$/.exec(n)?.[1])
    .filter((n): n is string => n !== undefined);
  return names.sort((a, b) => (a === 'default' ? -1 : b === 'default' ? 1 : a.localeCompare(b)));
}

/** `rest` with dot segments resolved (as the URL parser of the forwarding would), split into path and query (`?...` or ''). */
function normalize(rest: string): { path: string; query: string } {
  const u = new URL(`./${rest}`, 'http://console.invalid/');
  return { path: u.pathname.slice(1), query: u.search };
}

/**
 * Where a console call goes. `rest` is the path after `/console/api/<area>/` including the query
 * string; `body` the request body (the read-only console's kv SCAN rule reads it). Throws a
 * {@link MgmtError}: `areaNotRunning` / `missingCredential` (503), `unknownVectorIndex` (404),
 * `vectorIndexEncoding` (400), `consoleReadonly` (403) for a queue call of a read-only console that
 * is not one of {@link QUEUE_READS}.
 */
export function proxyTarget(ctx: AreaContext, area: ProxiedArea, rest: string, method: string, body?: Buffer): ProxyTarget {
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
    const { path, query } = normalize(rest);
    if (readonly && !isQueueRead(method, path)) throw mgmtError('consoleReadonly');
    return { url: `${base}/${path}${query}`, token: need('queue.token') };
  }
  if (area === 'kv') {
    const { path, query } = normalize(rest);
    const full = !readonly || (method === 'POST' && path === '' && isLoneScan(body));
    return { url: `${base}/${path}${query}`, token: need(full ? 'kv.token' : 'kv.readonlyToken'), stream: isKvStream(path) };
  }
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

/** An area's answer with its body still to be read (a stream). */
export interface Opened {
  status: number;
  contentType: string;
  body: Readable;
}

export interface Forwarded {
  status: number;
  contentType: string;
  body: Buffer;
}

/** Browser headers passed on: the areas' option headers (`Upstash-Cron`, `Upstash-Retries`, `Svc-Workflow-RunId`, ...). */
const PASSED_HEADER = /^(upstash|svc)-/i;

/**
 * Sends one call to `target` with the area token and resolves once the area's status and headers
 * are in; the body is left to the caller to read (or destroy: that closes the connection to the
 * area). From the browser only `content-type`, the `Upstash-*` / `Svc-*` option headers and the
 * body pass (no cookies, no other headers).
 * @throws MgmtError `areaUnreachable` (502), `areaTimeout` (504) when the headers take longer than
 *   {@link PROXY_TIMEOUT_MS}.
 */
export async function open(
  target: ProxyTarget,
  method: string,
  incoming: Record<string, string | string[] | undefined>,
  body: Buffer | undefined,
): Promise<Opened> {
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
      bodyTimeout: target.stream ? 0 : PROXY_TIMEOUT_MS,
    });
    const ct = res.headers['content-type'];
    return { status: res.statusCode, contentType: (Array.isArray(ct) ? ct[0] : ct) ?? 'application/octet-stream', body: res.body };
  } catch (err) {
    throw asProxyError(err);
  }
}

/** The catalogue error for a failed forwarding: `areaTimeout` for undici's timeouts, else `areaUnreachable`. */
export function asProxyError(err: unknown): MgmtError {
  const code = (err as { code?: string }).code;
  if (code === 'UND_ERR_HEADERS_TIMEOUT' || code === 'UND_ERR_BODY_TIMEOUT') return mgmtError('areaTimeout');
  return mgmtError('areaUnreachable', (err as Error).message);
}

/**
 * {@link open}, then the whole body read into memory (for small answers: the overview's counters).
 * @throws MgmtError as {@link open}, and when reading the body fails or times out.
 */
export async function forward(
  target: ProxyTarget,
  method: string,
  incoming: Record<string, string | string[] | undefined>,
  body: Buffer | undefined,
): Promise<Forwarded> {
  const r = await open(target, method, incoming, body);
  try {
    const chunks: Buffer[] = [];
    for await (const c of r.body) chunks.push(c as Buffer);
    return { status: r.status, contentType: r.contentType, body: Buffer.concat(chunks) };
  } catch (err) {
    throw asProxyError(err);
  }
}
