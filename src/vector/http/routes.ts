/**
 * HTTP routing of the vector port: any of GET/POST/PUT/DELETE on
 * `[/<index>]/<endpoint>[/<namespace…>]` (namespace URL-decoded, may contain `/`), `reset?all`,
 * bodies `[]`, `null`, `{}` or empty. Answers `{"result": …}` or `{"error", "status"}`.
 * Order of checks: index by first path segment (else the default index; a UUID that is no index: 404), bearer token (401),
 * endpoint (404), method (405), read-only token (401), body size (413), JSON body (400), handler.
 *
 * Two fronts share this logic ({@link routeRequest} then {@link answer}): the fast HTTP/1.1 server
 * of `src/http/fast.ts` (plain keep-alive requests with a `Content-Length` body up to 1 MiB: every
 * query) and a raw `node:http` server for everything it hands over (chunked or large upsert
 * bodies, HTTP/1.0, malformed heads) — see `index.ts` and docs/readme/vector-bench.md.
 * No per-request logging; unexpected errors are logged and answered 500.
 */
import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http';
import type { CredentialStore } from '../../credentials.js';
import { StringDecoder } from 'node:string_decoder';
import { SecretMatcher, secretDigest } from '../../http/auth.js';
import { originForm, rawRequestToken } from '../../http/raw.js';
import { jsonTooDeep, MAX_JSON_DEPTH } from '../../http/json-depth.js';
import type { Logger } from '../../logger.js';
import { endRequestSpan, requestSpan, type Span } from '../../tracing.js';
import type { VectorIndex } from '../engine/vector-index.js';
import { errorBody, retryAfter, VECTOR_ERRORS, VectorError, VectorsMissing, vectorMessage, type VectorErrorCode, type VectorMessageArgs } from '../errors.js';
import { HANDLERS, READONLY_ENDPOINTS, type Handler } from './handlers.js';
import type { VectorMetrics } from '../metrics.js';
import type { ResumableQueries } from './resumable.js';
import type { RequestLimits } from '../validate.js';
import { OFF_THREAD_PARSE_CHARS, parseUpload, parsingUploads } from './upload-parse.js';

export interface RouteDeps {
  indexes: Map<string, VectorIndex>;
  credentials: CredentialStore;
  resumable: ResumableQueries;
  logger: Logger;
  /** Request body limit in bytes (413 past it). */
  bodyLimit: number;
  /** Request counts and query/upsert durations. */
  metrics: VectorMetrics;
  /** Bounds on what one request may compute and send (`SVC_VECTOR_MAX_*`). */
  limits: RequestLimits;
}

/** Constant-time comparisons of presented tokens with the indexes' tokens. */
const secrets = new SecretMatcher();

const METHODS = new Set(['GET', 'POST', 'PUT', 'DELETE']);

/** An answer: HTTP status and the JSON body text. */
export interface Answer {
  status: number;
  body: string;
}

/**
 * Extra response header lines (`name: value\r\n`) of an answer with `status`: a 507 (disk full)
 * or 503 (the shared database unavailable) asks the client to retry later (`Retry-After`).
 */
export const answerHeaders = (status: number): string => {
  const s = retryAfter(status);
  return s === undefined ? '' : `retry-after: ${s}\r\n`;
};

/** The answer of catalogue error `code`. */
function errorAnswer<C extends VectorErrorCode>(code: C, ...args: VectorMessageArgs<C>): Answer {
  const status = VECTOR_ERRORS[code].status;
  return { status, body: errorBody(status, vectorMessage(code, ...args)) };
}

/** A request that passed routing and authentication; its body is still to be read. */
export interface Routed {
  index: VectorIndex;
  indexName: string;
  endpoint: string;
  handler: Handler;
  /** URL-decoded namespace ('' = default). */
  ns: string;
  /** Raw query string without `?` ('' when none). */
  query: string;
}

/** Keys of the indexes created at run time (`catalogue.ts`): UUIDs, never an endpoint name. */
const RUNTIME_ID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/**
 * Routes and authenticates a request from its method, origin-form target and headers (module doc
 * for the order of checks). Returns the route, or the error {@link Answer} to send without reading
 * the body.
 */
export function routeRequest(deps: RouteDeps, method: string, rawUrl: string, headers: IncomingHttpHeaders): Routed | Answer {
  const q = rawUrl.indexOf('?');
  const pathname = q >= 0 ? rawUrl.slice(0, q) : rawUrl;
  let p = 0;
  while (pathname.charCodeAt(p) === 47 /* / */) p++;
  const segments = pathname.slice(p).split('/');
  let indexName = 'default';
  if (segments[0] !== 'default' && deps.indexes.has(segments[0])) indexName = segments.shift()!;
  // the path of an index created through the management API (a UUID) that does not exist (deleted)
  else if (RUNTIME_ID_RE.test(segments[0])) return errorAnswer('indexNotFound');
  const index = deps.indexes.get(indexName)!;

  const token = rawRequestToken(headers, undefined);
  const presented = token !== undefined ? secretDigest(token) : undefined;
  // peek, never get: a token this node does not hold yet (an index another node created, before
  // the shared credentials are read) matches nothing, and is never generated here
  const full = deps.credentials.peek(`vector.${indexName}.token`);
  const readonly = deps.credentials.peek(`vector.${indexName}.readonlyToken`);
  const isFull = presented !== undefined && full !== undefined && secrets.same(token!, presented, full);
  const isRo = !isFull && presented !== undefined && readonly !== undefined && secrets.same(token!, presented, readonly);
  if (!isFull && !isRo) return errorAnswer('unauthorized');

  const endpoint = segments[0] ?? '';
  const handler = Object.prototype.hasOwnProperty.call(HANDLERS, endpoint) ? HANDLERS[endpoint] : undefined;
  if (!handler) return errorAnswer('endpointNotFound', endpoint);
  if (!METHODS.has(method)) return errorAnswer('methodNotAllowed', method);
  if (isRo && !READONLY_ENDPOINTS.has(endpoint)) return errorAnswer('readonlyToken');

  let ns = '';
  if (segments.length > 1) {
    const raw = segments.length === 2 ? segments[1] : segments.slice(1).join('/');
    try {
      ns = raw.includes('%') ? decodeURIComponent(raw) : raw;
    } catch {
      return errorAnswer('namespaceEncoding');
    }
  }
  return { index, indexName, endpoint, handler, ns, query: q >= 0 ? rawUrl.slice(q + 1) : '' };
}

/** Names a vector request's span (`src/tracing.ts`) after its endpoint, with the index and namespace. */
export function nameVectorSpan(span: Span, r: Routed): void {
  span.updateName(`vector ${r.endpoint}`);
  span.setAttributes({ 'db.system.name': 'svc.vector', 'db.operation.name': r.endpoint, 'db.collection.name': r.indexName, 'db.namespace': r.ns });
}

/** True when `x` is an {@link Answer} rather than a {@link Routed}. */
export const isAnswer = (x: Routed | Answer): x is Answer => (x as Answer).status !== undefined;

function isBlank(text: string): boolean {
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c !== 32 && c !== 9 && c !== 10 && c !== 13) return false;
  }
  return true;
}

/**
 * Parses the body text as JSON (empty or blank = no body) and runs the endpoint handler. Returns
 * the {@link Answer} directly when the handler is synchronous (the query hot path), else a Promise
 * of it. Never throws/rejects: errors become `{error, status}` answers (500 logged).
 */
export function answer(deps: RouteDeps, r: Routed, text: string): Answer | Promise<Answer> {
  // large upsert bodies (and any upsert while one is parsed there, so writes keep their order)
  // are parsed on a worker thread: upload-parse.ts
  if (r.endpoint === 'upsert' && (text.length >= OFF_THREAD_PARSE_CHARS || parsingUploads() > 0)) {
    return parseUpload(text).then(
      (p) => ('error' in p ? errorAnswer('invalidJson', p.error) : 'tooDeep' in p ? errorAnswer('jsonTooDeep', MAX_JSON_DEPTH) : run(deps, r, p.body)),
      (err: unknown) => {
        deps.logger.error({ err, endpoint: r.endpoint, index: r.indexName }, 'vector request failed');
        return errorAnswer('internal');
      },
    );
  }
  let body: unknown;
  if (text.length > 0 && !isBlank(text)) {
    try {
      body = JSON.parse(text);
    } catch (err) {
      return errorAnswer('invalidJson', (err as Error).message);
    }
    if (jsonTooDeep(body)) return errorAnswer('jsonTooDeep', MAX_JSON_DEPTH);
  }
  return run(deps, r, body);
}

/**
 * Runs of a request that found records' vectors not filled yet (`VectorsMissing`): each run reads
 * them from the shared store first (`VectorIndex.fetchMissing`); past this many the 503 escapes.
 */
export const FILL_RUNS = 3;

/**
 * `call()`, run again after reading the vectors it found missing (`VectorsMissing`, sync or
 * async) at most {@link FILL_RUNS} times: a handler reads them synchronously from the local copy
 * and has no effect before it throws (a write's savepoint is rolled back); what a run embedded is
 * kept on the request's context for the next (`handlers.ts` `HandlerContext.embedded`). @throws what `call`
 * throws otherwise, and `vectorsUnavailable` (503) when the database cannot be reached.
 */
function withVectors(index: VectorIndex, call: () => unknown, runs = 1): unknown {
  const again = (err: unknown): Promise<unknown> => {
    if (!(err instanceof VectorsMissing) || runs >= FILL_RUNS) throw err;
    return index.fetchMissing(err.ns, err.positions).then(() => withVectors(index, call, runs + 1));
  };
  try {
    const result = call();
    return result instanceof Promise ? result.catch(again) : result;
  } catch (err) {
    return again(err);
  }
}

/** Runs the endpoint handler on the parsed body (see {@link answer}). Never throws/rejects. */
function run(deps: RouteDeps, r: Routed, body: unknown): Answer | Promise<Answer> {
  const fail = (err: unknown): Answer => {
    if (err instanceof VectorError) return { status: err.status, body: errorBody(err.status, err.message) };
    deps.logger.error({ err, endpoint: r.endpoint, index: r.indexName }, 'vector request failed');
    return errorAnswer('internal');
  };
  const ok = (result: unknown): Answer => ({ status: 200, body: result === undefined ? '{}' : `{"result":${JSON.stringify(result)}}` });
  const timer = deps.metrics.timer(r.indexName, r.endpoint);
  const start = timer === undefined ? 0 : performance.now();
  try {
    const ctx = { index: r.index, ns: r.ns, body, search: new URLSearchParams(r.query), resumable: deps.resumable, limits: deps.limits };
    // (only a node still filling its vectors has records without one: no retry wrapper otherwise)
    const result = r.index.filling ? withVectors(r.index, () => r.handler(ctx)) : r.handler(ctx);
    if (result instanceof Promise) {
      return result.then(ok, fail).finally(() => timer?.since(start));
    }
    timer?.since(start);
    return ok(result);
  } catch (err) {
    timer?.since(start);
    return fail(err);
  }
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

function send(res: ServerResponse, a: Answer): void {
  if (res.headersSent || res.destroyed) return;
  const headers: Record<string, string | number> = { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(a.body) };
  const wait = retryAfter(a.status);
  if (wait !== undefined) headers['retry-after'] = wait;
  res.writeHead(a.status, headers);
  res.end(a.body);
}

/**
 * The request listener of the `node:http` front (requests the fast server hands over): routes,
 * authenticates, reads and parses the body, runs the endpoint handler and writes the JSON answer.
 * Never throws (errors become JSON answers).
 */
export function vectorRequestListener(deps: RouteDeps): (req: IncomingMessage, res: ServerResponse) => void {
  return (req, res) => {
    handleNode(req, res, deps).catch((err) => {
      deps.logger.error({ err }, 'vector request failed');
      send(res, errorAnswer('internal'));
    });
  };
}

async function handleNode(req: IncomingMessage, res: ServerResponse, deps: RouteDeps): Promise<void> {
  const start = performance.now();
  const r = routeRequest(deps, req.method ?? 'GET', originForm(req.url ?? '/'), req.headers);
  const meter = deps.metrics.route(isAnswer(r) ? undefined : r.endpoint);
  const span = requestSpan('vector', req.headers); // undefined unless tracing is on
  if (span && !isAnswer(r)) nameVectorSpan(span, r);
  res.once('finish', () => {
    meter.done(res.statusCode, start);
    endRequestSpan(span, res.statusCode);
  });
  if (isAnswer(r)) {
    // a request without valid credentials: its body is not read, the connection closes
    if (r.status === VECTOR_ERRORS.unauthorized.status && req.headers['content-length'] !== '0' && (req.headers['content-length'] !== undefined || req.headers['transfer-encoding'] !== undefined)) {
      res.shouldKeepAlive = false;
    }
    // answered before the body is read: drain it so the keep-alive connection stays usable
    req.resume();
    return send(res, r);
  }
  const text = await readText(req, deps.bodyLimit);
  if (text === 'too-large') return send(res, errorAnswer('bodyTooLarge'));
  if (text === undefined) return;
  send(res, await answer(deps, r, text));
}
