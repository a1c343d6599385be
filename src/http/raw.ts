/**
 * Helpers for an area served by a raw `node:http` server instead of Fastify (the kv gateway's hot
 * path, see `docs/readme/kv-perf.md`): the request token (the raw twin of `requestToken` in
 * `auth.ts`), a size-limited body reader, server-sent events on a raw response, and listening with the same base-URL rules as `server.ts` `listenOn`.
 */
import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http';
import type { Server } from 'node:net';

/**
 * The value of query parameter `name` in the raw query string `query` (the part after `?`,
 * without it): first occurrence (`''` when it has no value), `+` as space, percent-decoded (an
 * invalid escape leaves the text as sent) — what Fastify's query parser gives `requestToken`.
 * Undefined when absent.
 */
export function queryParam(query: string, name: string): string | undefined {
  let from = 0;
  while (from <= query.length) {
    let end = query.indexOf('&', from);
    if (end < 0) end = query.length;
    if (query.startsWith(name, from) && (from + name.length === end || query.charCodeAt(from + name.length) === 61 /* = */)) {
      let v = query.slice(Math.min(from + name.length + 1, end), end);
      if (v.includes('+')) v = v.replace(/\+/g, ' ');
      if (v.includes('%')) {
        try {
          v = decodeURIComponent(v);
        } catch {
          /* keep as sent */
        }
      }
      return v;
    }
    from = end + 1;
  }
  return undefined;
}

/**
 * The token of a raw request (same rules as `requestToken` in `auth.ts`): `Authorization: Bearer
 * <t>` first, else the first non-empty query parameter of `queryNames` in `query` (the raw query
 * string without `?`). Undefined when there is none.
 */
export function rawRequestToken(headers: IncomingHttpHeaders, query: string | undefined, queryNames: readonly string[] = []): string | undefined {
  const h = headers.authorization;
  if (typeof h === 'string') {
    // fast path for the usual exact form "Bearer <token>"
    if (h.length > 7 && h.charCodeAt(6) === 32 && h.startsWith('Bearer') && h.charCodeAt(7) > 32 && h.charCodeAt(h.length - 1) > 32) {
      return h.slice(7);
    }
    const m = /^Bearer\s+(.+)$/i.exec(h.trim());
    if (m) return m[1].trim();
  }
  if (query) {
    for (const n of queryNames) {
      const v = queryParam(query, n);
      if (v) return v;
    }
  }
  return undefined;
}

/**
 * The origin-form of a request target (RFC 9112 section 3.2): an absolute-form target
 * (`http://host:port/path?query`, which clients must send to proxies and servers must accept) is
 * cut to its path and query (`/path?query`; `/` when the path is empty); any other target is
 * returned as it is.
 */
export function originForm(target: string): string {
  if (target.charCodeAt(0) === 47 /* / */) return target;
  const m = /^[a-z][a-z0-9+.-]*:\/\/[^/?#]*/i.exec(target);
  if (m === null) return target;
  const rest = target.slice(m[0].length);
  return rest.charCodeAt(0) === 47 ? rest : `/${rest}`;
}

/** Why {@link readBody} gave up: the body exceeded the limit, or the client went away. */
export type BodyFailure = 'too-large' | 'aborted';

/**
 * Reads a request body into one Buffer, at most `limit` bytes, then calls `done(null, body)`.
 * A declared `Content-Length` above the limit fails at once (nothing is read); a body that grows
 * past it while streaming fails when it does (the rest is discarded). `done` runs exactly once.
 */
export function readBody(req: IncomingMessage, limit: number, done: (err: BodyFailure | null, body: Buffer) => void): void {
  const declared = req.headers['content-length'];
  if (declared !== undefined && Number(declared) > limit) {
    req.resume();
    done('too-large', EMPTY);
    return;
  }
  let first: Buffer | undefined;
  let parts: Buffer[] | undefined;
  let size = 0;
  let finished = false;
  const finish = (err: BodyFailure | null, body: Buffer) => {
    if (finished) return;
    finished = true;
    done(err, body);
  };
  req.on('data', (chunk: Buffer) => {
    if (finished) return;
    size += chunk.length;
    if (size > limit) {
      first = undefined;
      parts = undefined;
      finish('too-large', EMPTY);
      return;
    }
    if (first === undefined) first = chunk;
    else (parts ??= [first]).push(chunk);
  });
  req.on('end', () => finish(null, parts ? Buffer.concat(parts, size) : (first ?? EMPTY)));
  req.on('error', () => finish('aborted', EMPTY));
  req.on('aborted', () => finish('aborted', EMPTY));
}

const EMPTY = Buffer.alloc(0);

/** One server-sent events stream on a raw response. */
export interface RawSseStream {
  /** Sends one event: each line of `data` as a `data:` line, then a blank line. */
  send(data: string): void;
  /** Sends a comment line (`: text`), e.g. a heartbeat. */
  comment(text: string): void;
  /** Ends the stream from the server side. */
  close(): void;
  /** True once the client disconnected or {@link RawSseStream.close} ran. */
  readonly closed: boolean;
}

/**
 * Output limit of one SSE stream, as Redis's `client-output-buffer-limit pubsub <hard> <soft>
 * <seconds>`: a client that does not read makes the unsent output grow; past `hardBytes`, or above
 * `softBytes` (0 = no soft limit) for `softMs` ms or longer, the stream is dropped (socket
 * destroyed, buffered output freed). Checked on every write, heartbeats included.
 */
export interface SseOutputLimit {
  hardBytes: number;
  softBytes: number;
  softMs: number;
  /** Told why the stream was dropped (`hard` / `soft`) and how many bytes were unsent. */
  onExceeded?(limit: 'hard' | 'soft', unsentBytes: number): void;
}

/**
 * The rule of {@link SseOutputLimit} as a function of the unsent output: call it after each write
 * with the stream's unsent bytes (`res.writableLength`); it answers `hard` / `soft` once the stream
 * must be dropped, undefined while it may go on. One checker per stream (it keeps the time the
 * output went above the soft limit).
 */
export function outputLimitChecker(limit: Omit<SseOutputLimit, 'onExceeded'>, now: () => number = Date.now): (unsentBytes: number) => 'hard' | 'soft' | undefined {
  /** Since when the unsent output is above the soft limit (ms since epoch; 0 = it is not). */
  let softSince = 0;
  return (unsent) => {
    if (unsent > limit.hardBytes) return 'hard';
    if (limit.softBytes > 0 && unsent > limit.softBytes) {
      const t = now();
      if (softSince === 0) softSince = t;
      return t - softSince >= limit.softMs ? 'soft' : undefined;
    }
    softSince = 0;
    return undefined;
  };
}

/**
 * Starts an SSE response on `res` (status 200, `text/event-stream`, no buffering). A heartbeat comment every `heartbeatMs` ms
 * (default 15 000); `onClose` runs once when the client disconnects or the stream is closed
 * (also when `outputLimit` drops it).
 */
export function startRawSse(
  req: IncomingMessage,
  res: ServerResponse,
  onClose: () => void,
  opts: { heartbeatMs?: number; extraHeaders?: Record<string, string>; outputLimit?: SseOutputLimit } = {},
): RawSseStream {
  res.writeHead(200, {
    ...opts.extraHeaders,
    'Content-Type': 'text/event-stream',
    'Cache-Control': 'no-cache',
    Connection: 'keep-alive',
    'X-Accel-Buffering': 'no',
  });
  res.flushHeaders();
  let closed = false;
  const finish = () => {
    if (closed) return;
    closed = true;
    clearInterval(timer);
    try {
      onClose();
    } catch {
      /* ignore */
    }
  };
  const limit = opts.outputLimit;
  const check = limit && outputLimitChecker(limit);
  /** Writes `chunk` unless closed, then drops the stream if its unsent output is past the limit. */
  const write = (chunk: string) => {
    if (closed) return;
    res.write(chunk);
    if (check === undefined) return;
    const unsent = res.writableLength;
    const exceeded = check(unsent);
    if (exceeded === undefined) return;
    limit!.onExceeded?.(exceeded, unsent);
    res.destroy(); // not end(): that would keep the unsent output until the client reads it
    finish();
  };
  const timer = setInterval(() => write(': heartbeat\n\n'), opts.heartbeatMs ?? 15_000);
  timer.unref();
  res.on('close', finish);
  req.on('close', () => {
    if (res.writableEnded || res.destroyed) finish();
  });
  return {
    send(data: string) {
      if (!closed) write(data.split('\n').map((l) => `data: ${l}\n`).join('') + '\n');
    },
    comment(text: string) {
      write(`: ${text}\n\n`);
    },
    close() {
      if (!closed) res.end();
      finish();
    },
    get closed() {
      return closed;
    },
  };
}

/**
 * The base URL clients use for a server bound to `host:port`: a wildcard bind address (`0.0.0.0`,
 * `::`) is shown as `127.0.0.1`, an IPv6 address in brackets. E.g. `http://127.0.0.1:8079`.
 */
export function baseUrl(host: string, port: number): string {
  const shown = host === '0.0.0.0' || host === '::' ? '127.0.0.1' : host.includes(':') ? `[${host}]` : host;
  return `http://${shown}:${port}`;
}

/**
 * Listens on `host:port` (0 = a free port) and returns the base URL, e.g. `http://127.0.0.1:8079`
 * (same rules as `listenOn` in `server.ts`). @throws Error when the port cannot be bound.
 */
export function listenRaw(server: Server, host: string, port: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const onError = (err: Error) => reject(err);
    server.once('error', onError);
    server.listen(port, host, () => {
      server.off('error', onError);
      const addr = server.address();
      const actual = typeof addr === 'object' && addr ? addr.port : port;
      resolve(baseUrl(host, actual));
    });
  });
}
