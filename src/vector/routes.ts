/**
 * HTTP routing of the vector port (vector-wire.md §C checklist 1): any of GET/POST/PUT/DELETE on
 * `[/<index>]/<endpoint>[/<namespace…>]` (namespace URL-decoded, may contain `/`), `reset?all`,
 * bodies `[]`, `null`, `{}` or empty. Answers `{"result": …}` or `{"error", "status"}`.
 * Order of checks: index by first path segment (else the default index), bearer token (401),
 * endpoint (404), method (405), read-only token (401), body size (413), JSON body (400), handler.
 *
 * Served by a raw `node:http` server (no Fastify): one catch-all handler needs no router, and the
 * query hot path measured ~10 % faster without the framework (docs/readme/vector-bench.md).
 * No per-request logging; unexpected errors are logged and answered 500.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { CredentialStore } from '../credentials.js';
import { StringDecoder } from 'node:string_decoder';
import { rawRequestToken } from '../http/raw.js';
import type { Logger } from '../logger.js';
import type { VectorIndex } from './engine.js';
import { MESSAGES, VectorError } from './errors.js';
import { HANDLERS, READONLY_ENDPOINTS } from './handlers.js';
import type { ResumableQueries } from './resumable.js';

export interface RouteDeps {
  indexes: Map<string, VectorIndex>;
  credentials: CredentialStore;
  resumable: ResumableQueries;
  logger: Logger;
  /** Request body limit in bytes (413 past it). */
  bodyLimit: number;
}

/** SHA-256 of the valid tokens, by token value (they change only on rotation; a few entries). */
const validDigests = new Map<string, Buffer>();
const sha256 = (s: string) => createHash('sha256').update(s).digest();

/**
 * Constant-time token check, as `constantTimeEqual` in `src/http/auth.ts` (both sides hashed to
 * 32 bytes, then `timingSafeEqual`), hashing the presented token once per request and each valid
 * token once per value instead of both on every comparison.
 */
function sameSecret(presentedDigest: Buffer, presented: string, valid: string): boolean {
  let d = validDigests.get(valid);
  if (!d) {
    if (validDigests.size >= 64) validDigests.clear();
    validDigests.set(valid, (d = sha256(valid)));
  }
  return timingSafeEqual(presentedDigest, d) && presented.length === valid.length;
}

const METHODS = new Set(['GET', 'POST', 'PUT', 'DELETE']);

const JSON_HEADERS = { 'content-type': 'application/json; charset=utf-8' };

function send(res: ServerResponse, status: number, body: string): void {
  if (res.headersSent || res.destroyed) return;
  res.writeHead(status, { ...JSON_HEADERS, 'content-length': Buffer.byteLength(body) });
  res.end(body);
}

function sendError(res: ServerResponse, status: number, error: string): void {
  send(res, status, JSON.stringify({ error, status }));
}

/**
 * Reads a request body as UTF-8 text, decoding each socket chunk as it arrives (so a large upsert
 * body never exists as one big native Buffer next to its string: glibc kept those 15 MB
 * allocations' pages after they were freed). Resolves to the text, `'too-large'` past `limit`
 * bytes (the rest is drained), or undefined when the client went away.
 */
function readText(req: IncomingMessage, limit: number): Promise<string | undefined | 'too-large'> {
  const declared = Number(req.headers['content-length']);
  if (declared > limit) {
    req.resume();
    return Promise.resolve('too-large');
  }
  return new Promise((resolve) => {
    const decoder = new StringDecoder('utf8');
    let text = '';
    let size = 0;
    let done = false;
    const finish = (v: string | undefined | 'too-large') => {
      if (done) return;
      done = true;
      resolve(v);
    };
    req.on('data', (chunk: Buffer) => {
      if (done) return;
      size += chunk.length;
      if (size > limit) {
        text = '';
        finish('too-large');
        return;
      }
      text += decoder.write(chunk);
    });
    req.on('end', () => finish(text + decoder.end()));
    req.on('error', () => finish(undefined));
    req.on('aborted', () => finish(undefined));
  });
}

/**
 * The request listener of the vector port: routes, authenticates, reads and parses the body, runs
 * the endpoint handler and writes the JSON answer. Never throws (errors become JSON answers).
 */
export function vectorRequestListener(deps: RouteDeps): (req: IncomingMessage, res: ServerResponse) => void {
  return (req, res) => {
    handle(req, res, deps).catch((err) => {
      deps.logger.error({ err }, 'vector request failed');
      sendError(res, 500, 'Internal server error');
    });
  };
}

async function handle(req: IncomingMessage, res: ServerResponse, deps: RouteDeps): Promise<void> {
  const raw = req.url ?? '/';
  const q = raw.indexOf('?');
  const pathname = q >= 0 ? raw.slice(0, q) : raw;
  const segments = pathname.replace(/^\/+/, '').split('/');
  let indexName = 'default';
  if (segments.length > 0 && segments[0] !== 'default' && deps.indexes.has(segments[0])) indexName = segments.shift()!;
  const index = deps.indexes.get(indexName)!;

  const token = rawRequestToken(req.headers, undefined);
  const full = deps.credentials.get(`vector.${indexName}.token`);
  const ro = deps.credentials.get(`vector.${indexName}.readonlyToken`);
  const presented = token !== undefined ? sha256(token) : undefined;
  const isFull = presented !== undefined && sameSecret(presented, token!, full);
  const isRo = !isFull && presented !== undefined && sameSecret(presented, token!, ro);
  const method = req.method ?? 'GET';
  // Answers before the body is read: drain it so the keep-alive connection stays usable.
  const early = (status: number, error: string) => {
    req.resume();
    sendError(res, status, error);
  };
  if (!isFull && !isRo) return early(401, MESSAGES.unauthorized);

  const endpoint = segments[0] ?? '';
  const handler = Object.prototype.hasOwnProperty.call(HANDLERS, endpoint) ? HANDLERS[endpoint] : undefined;
  if (!handler) return early(404, `Endpoint not found: /${endpoint}`);
  if (!METHODS.has(method)) return early(405, `Method ${method} is not allowed; use GET, POST, PUT or DELETE`);
  if (isRo && !READONLY_ENDPOINTS.has(endpoint)) return early(401, MESSAGES.readonly);

  let ns: string;
  try {
    ns = decodeURIComponent(segments.slice(1).join('/'));
  } catch {
    return early(400, 'Invalid namespace: bad percent-encoding');
  }
  const text = await readText(req, deps.bodyLimit);
  if (text === 'too-large') return sendError(res, 413, 'Request body is too large');
  if (text === undefined) return;
  let body: unknown;
  if (text.length > 0 && text.trim() !== '') {
    try {
      body = JSON.parse(text);
    } catch (err) {
      return sendError(res, 400, `Invalid JSON body: ${(err as Error).message}`);
    }
  }
  const search = new URLSearchParams(q >= 0 ? raw.slice(q + 1) : '');
  try {
    const result = await handler({ index, ns, body, search, resumable: deps.resumable });
    send(res, 200, result === undefined ? '{}' : `{"result":${JSON.stringify(result)}}`);
  } catch (err) {
    if (err instanceof VectorError) return sendError(res, err.status, err.message);
    deps.logger.error({ err, endpoint, index: indexName }, 'vector request failed');
    sendError(res, 500, 'Internal server error');
  }
}
