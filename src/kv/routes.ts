/**
 * HTTP surface of the kv gateway (spec "Key-value REST interface", "Errors") on a
 * raw `node:http` server: one request handler that reads the body (size-limited), authenticates,
 * reads the format headers and dispatches to the path form, the JSON body form, `/pipeline`,
 * `/multi-exec` or an SSE stream (`sse.ts`). Raw Node instead of Fastify because the per-request
 * cost of the framework alone was above the whole budget of webdis's throughput (measurements in
 * `docs/readme/kv-perf.md`).
 *
 * Status codes: 200; 204 (CORS preflight); otherwise the catalogued errors of `errors.ts` (400
 * syntax, refused command, Redis error, format header, size, daily limit; 401 token; 404 a request
 * target that is not a path; 405 method; 500 unexpected; 503 database down or a temporary Redis
 * condition, with `Retry-After`).
 */
import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http';
import type { Logger } from '../logger.js';
import { endRequestSpan, requestSpan, tracingOn } from '../tracing.js';
import { originForm, rawRequestToken, readBody } from '../http/raw.js';
import { asciiItemJson, errorJson, itemJson, itemsJson } from './encode.js';
import { errorAnswer, isTemporaryRedisError, KV_ERRORS, kvError, kvMessage, RETRY_AFTER_SECONDS, type KvErrorCode, type KvMessageArgs } from './errors.js';
import type { KvGateway } from './gateway.js';
import type { KvMetrics } from './metrics.js';
import { commandFromBody, commandsFromBody, pathSegments, queryArgs } from './request.js';
import { encodeError, RespError, type Arg, type Reply } from './resp.js';
import { openStream } from './sse.js';
import type { Identity } from './tokens.js';

const PREFLIGHT_HEADERS: Record<string, string> = {
  'access-control-allow-origin': '*',
  'access-control-expose-headers': 'upstash-sync-token, svc-sync-token',
  'access-control-allow-methods': 'GET, HEAD, POST, PUT, OPTIONS',
  'access-control-allow-headers': [
    'authorization', 'content-type', 'upstash-encoding', 'upstash-sync-token', 'upstash-response-format',
    'upstash-telemetry-sdk', 'upstash-telemetry-runtime', 'upstash-telemetry-platform', 'upstash-telemetry-retry',
    'svc-encoding', 'svc-sync-token', 'svc-response-format',
  ].join(', '),
  'access-control-max-age': '86400',
};
const JSON_TYPE = 'application/json; charset=utf-8';
const RAW_TYPE = 'application/octet-stream';
const TOKEN_QUERY = ['_token'] as const;

/** Output format: bit 1 = base64, bit 2 = resp2 (the two are exclusive). */
interface Format {
  b64: boolean;
  resp2: boolean;
}
const JSON_PLAIN: Format = { b64: false, resp2: false };
const JSON_B64: Format = { b64: true, resp2: false };
const RESP2: Format = { b64: false, resp2: true };

/**
 * Where a response goes: a Node `ServerResponse` ({@link nodeOut}) or a connection of the fast
 * HTTP/1.1 server (`src/http/fast.ts`, whose `FastResponse` has this shape). `send` writes the
 * whole response: status, `content-type`, `content-length`, the `extraHeaders` lines (CORS and
 * both sync-token headers, {@link kvHeaders}), then the body.
 */
export interface KvOut {
  /** `ascii`: `body` (a string) and `extraHeaders` are ASCII only (it may then be written as latin1, its length being its byte length). */
  send(status: number, type: string, body: string | Buffer, extraHeaders: string, ascii?: boolean): void;
  /**
   * Told when the request became an SSE stream answered on `res` instead of through
   * {@link KvOut.send} (the request's span then ends when `res` closes).
   */
  streaming?(res: ServerResponse): void;
}

let lastToken = '';
let lastHeaders = '';
/**
 * The kv response headers besides type and length, as `name: value\r\n` lines. Those of the last
 * token are kept: the token changes only with writes, so reads between two writes share them.
 */
export function kvHeaders(token: string): string {
  if (token !== lastToken) {
    lastToken = token;
    lastHeaders =
      'access-control-allow-origin: *\r\naccess-control-expose-headers: upstash-sync-token, svc-sync-token\r\n' +
      `upstash-sync-token: ${token}\r\nsvc-sync-token: ${token}\r\n`;
  }
  return lastHeaders;
}

/** A {@link KvOut} over a Node `ServerResponse`. */
export function nodeOut(res: ServerResponse): KvOut {
  return {
    send(status, type, body, extraHeaders) {
      if (res.destroyed) return;
      const raw = ['content-type', type, 'content-length', String(typeof body === 'string' ? Buffer.byteLength(body) : body.length)];
      for (const line of extraHeaders.split('\r\n')) {
        const colon = line.indexOf(': ');
        if (colon > 0) raw.push(line.slice(0, colon), line.slice(colon + 2));
      }
      res.writeHead(status, raw);
      res.end(body);
    },
  };
}

/**
 * Writes a whole response with the read-your-writes token: `token` (that of the request's own
 * write), else the current one. A 503 asks to retry (`Retry-After`: `retryAfterSeconds`, default
 * {@link RETRY_AFTER_SECONDS}); so does any other status given `retryAfterSeconds` (a 429).
 * `ascii`: `body` is known to be ASCII only (the kv headers are: svc makes the tokens).
 */
function send(out: KvOut, gw: KvGateway, status: number, body: string | Buffer, type = JSON_TYPE, token?: string, retryAfterSeconds?: number, ascii = false): void {
  const headers = kvHeaders(token ?? gw.syncToken);
  const retryAfter = retryAfterSeconds ?? (status === 503 ? RETRY_AFTER_SECONDS : undefined);
  out.send(status, type, body, retryAfter === undefined ? headers : `${headers}retry-after: ${retryAfter}\r\n`, ascii);
}

/** Answers catalogue error `code` (`{"error": ...}` with its status). */
function sendError<C extends KvErrorCode>(out: KvOut, gw: KvGateway, code: C, ...args: KvMessageArgs<C>): void {
  send(out, gw, KV_ERRORS[code].status, errorJson(kvMessage(code, ...args)));
}

/** Status of a single command's reply: 200, else that of `redisTemporary` (503) or `redisError` (400). */
function replyStatus(r: Reply): number {
  return r instanceof RespError ? (isTemporaryRedisError(r.message) ? KV_ERRORS.redisTemporary.status : KV_ERRORS.redisError.status) : 200;
}

/**
 * A pipeline in which no command succeeded and some failed on a temporary server condition (e.g.
 * every command got `BUSY` while a script ran): that error, answered 503 as a whole so the client
 * retries; nothing of the pipeline ran. Undefined otherwise (per-command errors stay in place).
 */
function temporaryPipelineError(replies: Reply[]): RespError | undefined {
  let temporary: RespError | undefined;
  for (const r of replies) {
    if (!(r instanceof RespError)) return undefined;
    if (temporary === undefined && isTemporaryRedisError(r.message)) temporary = r;
  }
  return temporary;
}

function header(headers: IncomingHttpHeaders, name: string): string | undefined {
  const v = headers[name];
  return v === undefined ? undefined : Array.isArray(v) ? v.join(', ') : v;
}

/**
 * Output format from `Svc-Encoding` / `Svc-Response-Format` (and their `Upstash-` aliases; `Svc-`
 * wins). The public docs misspell the header
 * "Upstash-Reponse-Format"; that spelling is accepted too. @throws KvError `invalidResponseFormat`, `resp2WithBase64`
 */
function formatOf(h: IncomingHttpHeaders): Format {
  const enc = header(h, 'svc-encoding') ?? header(h, 'upstash-encoding');
  const b64 = enc !== undefined && (enc === 'base64' || enc.trim().toLowerCase() === 'base64');
  const fmt =
    header(h, 'svc-response-format') ?? header(h, 'upstash-response-format') ?? header(h, 'svc-reponse-format') ?? header(h, 'upstash-reponse-format');
  if (fmt === undefined) return b64 ? JSON_B64 : JSON_PLAIN;
  const f = fmt.trim().toLowerCase();
  if (f === 'json') return b64 ? JSON_B64 : JSON_PLAIN;
  if (f !== 'resp2') throw kvError('invalidResponseFormat', fmt);
  if (b64) throw kvError('resp2WithBase64');
  return RESP2;
}

/** Options of {@link createKvHandler}. */
export interface KvHandlerOptions {
  /** Maximum request body in bytes (`SVC_KV_MAX_REQUEST_BYTES`); larger ones get `ERR max request size exceeded`. */
  bodyLimit: number;
  logger: Logger;
  /** Stoppers of the open SSE streams (the server closes them on shutdown). */
  streams: Set<() => void>;
  /** Where requests are counted (those of the fast path are counted by `src/http/fast.ts`). */
  metrics: KvMetrics;
}

/**
 * The request listener of the kv server (`http.createServer(createKvHandler(...))`).
 * Never throws; every request gets a response (JSON `{error}` on failure).
 */
export function createKvHandler(gw: KvGateway, opts: KvHandlerOptions, core: KvCore = createKvCore(gw, opts.logger, opts.metrics)): (req: IncomingMessage, res: ServerResponse) => void {
  const { bodyLimit, streams, metrics } = opts;
  const metered = metrics.metrics.enabled;
  return (req, res) => {
    const method = req.method;
    const url = originForm(req.url ?? '/');
    if (metered) {
      const meter = metrics.route(url);
      const start = performance.now();
      res.once('finish', () => meter.done(res.statusCode, start));
    }
    if (method !== 'GET' && method !== 'POST' && method !== 'PUT' && method !== 'HEAD') {
      if (method === 'OPTIONS' && req.headers['access-control-request-method']) {
        res.writeHead(204, PREFLIGHT_HEADERS);
        res.end();
        return;
      }
      return sendError(nodeOut(res), gw, 'methodNotAllowed', String(method));
    }
    if (url.charCodeAt(0) !== 47 /* / */) return sendError(nodeOut(res), gw, 'notFound');
    const h = req.headers;
    const stream = { req, res, streams };
    if (method === 'GET' || method === 'HEAD' || !hasBody(h)) return core.handle(h, url, undefined, nodeOut(res), stream);
    // credentials before the body: a refused request's body is never read (the connection closes)
    const id = core.authorize(h, url);
    if (id === undefined) {
      res.shouldKeepAlive = false;
      return sendError(nodeOut(res), gw, 'unauthorized');
    }
    readBody(req, bodyLimit, (err, body) => {
      if (err === 'aborted') return;
      if (err === 'too-large') {
        res.shouldKeepAlive = false; // the rest of the body is not read
        return sendError(nodeOut(res), gw, 'requestTooLarge');
      }
      core.handle(h, url, body, nodeOut(res), stream, id);
    });
  };
}

/**
 * True when a POST/PUT has a body: a POST/PUT without `Content-Type`, `Transfer-Encoding` and a
 * non-zero `Content-Length` has none (Fastify's rule, which the gateway's error texts follow).
 */
export function hasBody(h: IncomingHttpHeaders): boolean {
  return !(h['content-type'] === undefined && h['transfer-encoding'] === undefined && (h['content-length'] === undefined || h['content-length'] === '0'));
}

/** The raw request/response of an SSE stream request (only the Node server serves streams). */
export interface StreamContext {
  req: IncomingMessage;
  res: ServerResponse;
  streams: Set<() => void>;
}

/**
 * The command a request runs, for its span's name (`SET`, `pipeline`, `multi-exec`, `subscribe`):
 * the first path segment, or the first element of a `POST /` JSON body. Never the arguments.
 */
function operationOf(url: string, body: Buffer | undefined): string {
  const qi = url.indexOf('?');
  const path = qi < 0 ? url : url.slice(0, qi);
  const end = path.indexOf('/', 1);
  const first = end < 0 ? path.slice(1) : path.slice(1, end);
  if (first === '') {
    const m = body && /^\s*\[\s*"([A-Za-z][A-Za-z0-9._-]{0,40})"/.exec(body.subarray(0, 64).toString('latin1'));
    return m ? m[1].toUpperCase() : 'command';
  }
  const lower = first.toLowerCase();
  return lower === 'pipeline' || lower === 'multi-exec' || lower === 'monitor' || lower === 'subscribe' || lower === 'psubscribe' ? lower : first.toUpperCase().slice(0, 40);
}

/**
 * With tracing on (`src/tracing.ts`): a SERVER span `kv <command>` for the request, child of its
 * `traceparent`, ended with the status it is answered with (an SSE stream's when the stream
 * closes). Only the command name is recorded, never keys or values.
 */
function tracedOut(headers: IncomingHttpHeaders, url: string, body: Buffer | undefined, out: KvOut): KvOut {
  const op = operationOf(url, body);
  const span = requestSpan(`kv ${op}`, headers, { 'db.system.name': 'redis', 'db.operation.name': op });
  if (!span) return out;
  let ended = false;
  const end = (status: number) => {
    if (!ended) endRequestSpan(span, status);
    ended = true;
  };
  return {
    send(status, type, b, extra, ascii) {
      end(status);
      out.send(status, type, b, extra, ascii);
    },
    streaming(res) {
      res.once('close', () => end(res.statusCode));
    },
  };
}

/** True when `path` is an SSE endpoint (`/monitor`, `/subscribe/...`, `/psubscribe/...`; any case). */
export function isStreamPath(path: string): boolean {
  const end = path.indexOf('/', 1);
  const first = (end < 0 ? path.slice(1) : path.slice(1, end)).toLowerCase();
  return (first === 'monitor' && end < 0) || ((first === 'subscribe' || first === 'psubscribe') && end > 0);
}

/** The request-handling core shared by the Node server and the fast HTTP/1.1 server. */
export interface KvCore {
  /**
   * Handles one request whose method is GET, POST, PUT or HEAD and whose target starts with `/`:
   * authenticates, dispatches, answers through `out`. `body` is undefined when the request has
   * none. `stream` must be given for SSE paths ({@link isStreamPath}); without it they get 400.
   * `id`: the identity {@link KvCore.authorize} found (else the token is resolved here). Never throws.
   */
  handle(headers: IncomingHttpHeaders, url: string, body: Buffer | undefined, out: KvOut, stream?: StreamContext, id?: Identity): void;
  /**
   * The identity of the request's token (`Authorization: Bearer` or `_token`), checked from the
   * head alone before a body is read; undefined (counted as rejected) when there is no valid one:
   * the caller answers {@link KvCore.unauthorized} and closes the connection.
   */
  authorize(headers: IncomingHttpHeaders, url: string): Identity | undefined;
  /** The 401 answer of a refused request: JSON body and the kv headers (`name: value\r\n` lines). */
  unauthorized(): { status: number; type: string; body: string; extraHeaders: string };
}

/** Builds the {@link KvCore} of a gateway; commands are counted by outcome in `metrics`. */
export function createKvCore(gw: KvGateway, logger: Logger, metrics: KvMetrics): KvCore {
  const { ok, error, rejected } = metrics;

  /** Counts the replies of a pipeline or transaction by outcome. */
  const countReplies = (replies: readonly Reply[]): void => {
    let errors = 0;
    for (const r of replies) if (r instanceof RespError) errors++;
    ok.inc(replies.length - errors);
    if (errors) error.inc(errors);
  };

  /** Answers a failed request whose `commands` commands did not run. */
  const fail = (out: KvOut, err: unknown, commands = 1): void => {
    rejected.inc(commands);
    const answer = errorAnswer(err);
    if (answer.log) logger.error({ err }, 'kv: unexpected error');
    send(out, gw, answer.status, errorJson(answer.message), JSON_TYPE, undefined, answer.retryAfterSeconds);
  };

  const sendSingle = (out: KvOut, fmt: Format, r: Reply, raw: Buffer | undefined, token: string | undefined): void => {
    const status = replyStatus(r);
    (r instanceof RespError ? error : ok).inc();
    if (fmt.resp2) return send(out, gw, status, raw ?? (r instanceof RespError ? encodeError(r.message) : Buffer.alloc(0)), RAW_TYPE, token);
    // the usual answers (`+OK`, a plain value, nil, an integer) as ASCII text: no UTF-8 pass
    const ascii = fmt.b64 ? undefined : asciiItemJson(r);
    if (ascii !== undefined) send(out, gw, status, ascii, JSON_TYPE, token, undefined, true);
    else send(out, gw, status, itemJson(r, fmt.b64), JSON_TYPE, token);
  };

  const single = (out: KvOut, id: Identity, args: Arg[], fmt: Format): void => {
    gw.singleCb(id, args, fmt.resp2, (err, reply, raw, token) => (err ? fail(out, err) : sendSingle(out, fmt, reply, raw, token)));
  };

  const pipeline = (out: KvOut, id: Identity, cmds: Arg[][], fmt: Format): void => {
    gw.pipeline(id, cmds, fmt.resp2).then(({ replies, raws, token }) => {
      countReplies(replies);
      const busy = temporaryPipelineError(replies);
      if (busy) return sendError(out, gw, 'redisTemporary', busy.message);
      if (!fmt.resp2) return send(out, gw, 200, itemsJson(replies, fmt.b64), JSON_TYPE, token);
      const parts = replies.map((r, i) => raws?.[i] ?? encodeError(r instanceof RespError ? r.message : 'ERR no reply'));
      send(out, gw, 200, Buffer.concat(parts), RAW_TYPE, token);
    }, (err: unknown) => fail(out, err, cmds.length));
  };

  const multiExec = (out: KvOut, id: Identity, cmds: Arg[][], b64: boolean): void => {
    gw.multi(id, cmds).then(
      ({ replies, token }) => {
        countReplies(replies);
        send(out, gw, 200, itemsJson(replies, b64), JSON_TYPE, token);
      },
      (err: unknown) => fail(out, err, cmds.length),
    );
  };

  /** Opens an SSE stream (Node server only). */
  const stream = (ctx: StreamContext | undefined, out: KvOut, id: Identity, kind: 'monitor' | 'subscribe' | 'psubscribe', target: string | undefined): void => {
    if (!ctx) return sendError(out, gw, 'streamUnavailable');
    out.streaming?.(ctx.res);
    openStream(ctx.req, ctx.res, gw, id, kind, target, ctx.streams, logger).catch((err: unknown) => fail(out, err));
  };

  /** Routes one authenticated request; `body` is undefined when the request has none. */
  const dispatch = (headers: IncomingHttpHeaders, out: KvOut, id: Identity, url: string, qi: number, body: Buffer | undefined, ctx: StreamContext | undefined): void => {
    const path = qi < 0 ? url : url.slice(0, qi);
    const fmt = formatOf(headers);
    if (path === '/') {
      if (body === undefined) throw kvError('noCommand');
      return single(out, id, commandFromBody(body), fmt);
    }
    const segs = pathSegments(path);
    const s0 = segs[0];
    if (segs.length === 1 && typeof s0 === 'string') {
      const first = s0.length === 8 || s0.length === 10 || s0.length === 7 ? s0.toLowerCase() : '';
      if (first === 'pipeline') return pipeline(out, id, commandsFromBody(body), fmt);
      if (first === 'multi-exec') return multiExec(out, id, commandsFromBody(body), fmt.b64);
      if (first === 'monitor') return stream(ctx, out, id, 'monitor', undefined);
    } else if (segs.length >= 2 && typeof s0 === 'string' && (s0.length === 9 || s0.length === 10)) {
      const first = s0.toLowerCase();
      if (first === 'subscribe' || first === 'psubscribe') return stream(ctx, out, id, first, path.slice(path.indexOf('/', 1) + 1));
    }
    const args: Arg[] = segs;
    if (body !== undefined && body.length > 0) args.push(body);
    if (qi >= 0) for (const a of queryArgs(url.slice(qi + 1))) args.push(a);
    single(out, id, args, fmt);
  };

  const unauthorizedBody = errorJson(kvMessage('unauthorized'));
  return {
    authorize(headers, url) {
      const qi = url.indexOf('?');
      const id = gw.tokens.resolve(rawRequestToken(headers, qi < 0 ? undefined : url.slice(qi + 1), TOKEN_QUERY));
      if (!id) rejected.inc();
      return id;
    },
    unauthorized: () => ({ status: KV_ERRORS.unauthorized.status, type: JSON_TYPE, body: unauthorizedBody, extraHeaders: kvHeaders(gw.syncToken) }),
    handle(headers, url, body, out, ctx, known) {
      if (tracingOn()) out = tracedOut(headers, url, body, out);
      const qi = url.indexOf('?');
      const id = known ?? gw.tokens.resolve(rawRequestToken(headers, qi < 0 ? undefined : url.slice(qi + 1), TOKEN_QUERY));
      if (!id) {
        rejected.inc();
        return sendError(out, gw, 'unauthorized');
      }
      try {
        dispatch(headers, out, id, url, qi, body, ctx);
      } catch (err) {
        fail(out, err);
      }
    },
  };
}
