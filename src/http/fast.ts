/**
 * A minimal HTTP/1.1 server on `node:net` for an area's hot path, with Node's own `http` server
 * behind it for everything else (shared plumbing). Measured on the 2-core
 * bench machine, Node's `http` module alone (a hello-world that does nothing) answers about 20k
 * req/s while a plain socket that writes a canned response does about 40k: for small requests the
 * HTTP layer, not the area, was the ceiling (`docs/readme/kv-perf.md`). Used by kv and vector.
 *
 * A connection starts on the fast path. Each request head is parsed here when it is the plain,
 * common form — `GET|POST|PUT|HEAD <origin-form target> HTTP/1.1` (plus the methods the handler
 * lists in {@link FastHandler.methods}), well-formed `name: value` header lines (no obs-fold, no
 * control bytes, no repeated header names), no `Transfer-Encoding`, `Expect`, `Upgrade` or
 * `Connection: close`, an optional `Content-Length` (digits) of at most {@link FAST_BODY_MAX}
 * bytes and at most the body limit, and a target the handler {@link FastHandler.accepts} — and
 * answered by the handler. At the first request that is anything else, the connection is handed to
 * the Node `http` server (`server.emit('connection')`, then the bytes already read are given to its
 * parser as a `'data'` event), which then serves it to the end with its full RFC 9112 parser:
 * chunked bodies, 100-continue, HTTP/1.0, oversized heads (431), malformed requests (400), SSE
 * streams, CORS preflight, 405.
 *
 * Requests on one connection are served strictly one after the other (HTTP/1.1 pipelining keeps
 * its order); reading pauses while a request is in flight and more bytes are buffered than one
 * request can use. Idle keep-alive connections close after `keepAliveMs` (72 s like Fastify's
 * setting in `src/http/server.ts`).
 */
import type http from 'node:http';
import net from 'node:net';
import { STATUS_CODES, type IncomingHttpHeaders } from 'node:http';

/** Idle keep-alive timeout in ms (Fastify's setting in `src/http/server.ts`; `Keep-Alive: timeout=72`). */
export const FAST_KEEP_ALIVE_MS = 72_000;
/** Bodies above this many bytes go to the Node server (which streams them with the size limit). */
export const FAST_BODY_MAX = 1024 * 1024;
/** Request heads above this many bytes go to the Node server (it answers 431 past its own limit). */
const FAST_HEAD_MAX = 16 * 1024;
/** Bytes buffered beyond the request in flight before reading pauses. */
const READ_AHEAD_MAX = 64 * 1024;

const DIGITS = /^[0-9]{1,15}$/;
const STATUS_LINES = new Map<number, string>();

let dateCache = '';
let dateSecond = -1;
/** The `Date` header value, recomputed at most once a second. */
function httpDate(): string {
  const now = Date.now();
  const sec = Math.floor(now / 1000);
  if (sec !== dateSecond) {
    dateSecond = sec;
    dateCache = new Date(now).toUTCString();
  }
  return dateCache;
}

function statusLine(status: number): string {
  let s = STATUS_LINES.get(status);
  if (s === undefined) {
    s = `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? 'Unknown'}\r\n`;
    STATUS_LINES.set(status, s);
  }
  return s;
}

/** A parsed request head that the fast path serves. */
export interface FastHead {
  /** Upper-case method as sent. */
  method: string;
  /** The origin-form request target (path and query, still percent-encoded). */
  url: string;
  /** Lower-case names; each header appears once. */
  headers: IncomingHttpHeaders;
  /** `Content-Length` in bytes (0 when absent). */
  bodyLength: number;
  /** Bytes of the head including the blank line. */
  headLength: number;
}

/** Where a fast-path response goes. */
export interface FastResponse {
  /** The client's address (`net.Socket.remoteAddress`; undefined once the socket is gone). */
  readonly remoteAddress: string | undefined;
  /**
   * Writes the whole response: status line, `content-type: type`, `content-length`, the
   * handler's `extraHeaders` (complete `name: value\r\n` lines, or ''), `Date`, keep-alive, then
   * `body` (omitted for HEAD). Must be called exactly once per request; the next request on the
   * connection is served after it.
   */
  send(status: number, type: string, body: string | Buffer, extraHeaders: string): void;
}

/** What an area plugs into the fast server. */
export interface FastHandler {
  /** Methods served besides GET, POST, PUT, HEAD (e.g. `['DELETE', 'PATCH']`). */
  methods?: readonly string[];
  /** False for targets only the Node server serves (e.g. SSE streams); `path` excludes the query. */
  accepts(method: string, path: string): boolean;
  /**
   * Serves one request; `body` is undefined for GET/HEAD and for requests without
   * `Content-Length`/`Content-Type`. Must eventually call `out.send` once; must not throw.
   */
  handle(head: FastHead, body: Buffer | undefined, out: FastResponse): void;
  /**
   * The request meter of a request (`src/metrics.ts` `RouteMeter`: pre-bound cells, no per-request
   * labels), told the status and the start time (`performance.now()` ms) when the response is sent.
   */
  meter?(head: FastHead): { done(status: number, startMs: number): void } | undefined;
}

/** 1 for the bytes of an RFC 9110 token (`tchar`), by byte value. */
const TCHAR = new Uint8Array(256);
for (const c of "!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ") TCHAR[c.charCodeAt(0)] = 1;
/** `HTTP/1.1` as bytes. */
const HTTP11 = [72, 84, 84, 80, 47, 49, 46, 49];

/**
 * End of the line that starts at `from` in `buf[0, end)`: the index of its CR (or `end`), or -1
 * when the line has a control byte (anything below 0x20 but HTAB, or DEL) or a CR without LF.
 */
function lineEnd(buf: Buffer, from: number, end: number): number {
  for (let k = from; k < end; k++) {
    const c = buf[k];
    if (c === 13) return buf[k + 1] === 10 ? k : -1;
    if ((c < 32 && c !== 9) || c === 127) return -1;
  }
  return end;
}

/**
 * Parses the head in `buf[0, end)` (`end` = index of the CRLFCRLF). Undefined when the request is
 * not of the plain form the fast path serves (the Node server then takes the connection), e.g. a
 * `Content-Length` above `bodyMax` bytes. Scans bytes (no split or regular expressions): header
 * names are checked against `tchar` and lower-cased, values trimmed of SP/HTAB (RFC 9110 OWS).
 */
export function parseHead(buf: Buffer, end: number, bodyMax: number, handler: FastHandler): FastHead | undefined {
  const rlEnd = lineEnd(buf, 0, end);
  if (rlEnd < 0) return undefined;
  const sp1 = buf.indexOf(32, 0);
  if (sp1 <= 0 || sp1 >= rlEnd) return undefined;
  const sp2 = buf.indexOf(32, sp1 + 1);
  if (sp2 < 0 || sp2 + 9 !== rlEnd) return undefined; // exactly one space before `HTTP/1.1`
  for (let k = 0; k < 8; k++) if (buf[sp2 + 1 + k] !== HTTP11[k]) return undefined;
  const method = buf.toString('latin1', 0, sp1);
  if (method !== 'GET' && method !== 'POST' && method !== 'PUT' && method !== 'HEAD' && !handler.methods?.includes(method)) return undefined;
  if (buf[sp1 + 1] !== 47 /* / */) return undefined;
  const url = buf.toString('latin1', sp1 + 1, sp2);
  const headers: IncomingHttpHeaders = Object.create(null) as IncomingHttpHeaders;
  let bodyLength = 0;
  let pos = rlEnd + 2;
  while (pos < end) {
    const le = lineEnd(buf, pos, end);
    if (le < 0) return undefined;
    let colon = pos;
    let upper = false;
    for (; colon < le; colon++) {
      const c = buf[colon];
      if (c === 58 /* : */) break;
      if (TCHAR[c] === 0) return undefined;
      if (c >= 65 && c <= 90) upper = true;
    }
    if (colon === pos || colon === le) return undefined;
    let name = buf.toString('latin1', pos, colon);
    if (upper) name = name.toLowerCase();
    if (headers[name] !== undefined) return undefined;
    let vs = colon + 1;
    let ve = le;
    while (vs < ve && (buf[vs] === 32 || buf[vs] === 9)) vs++;
    while (ve > vs && (buf[ve - 1] === 32 || buf[ve - 1] === 9)) ve--;
    const value = buf.toString('latin1', vs, ve);
    switch (name) {
      case 'transfer-encoding':
      case 'expect':
      case 'upgrade':
        return undefined;
      case 'connection':
        if (value.toLowerCase().includes('close')) return undefined;
        break;
      case 'content-length':
        if (!DIGITS.test(value)) return undefined;
        bodyLength = Number(value);
        if (bodyLength > bodyMax) return undefined;
        break;
    }
    headers[name] = value;
    pos = le + 2;
  }
  if (method === 'GET' || method === 'HEAD') {
    if (bodyLength > 0) return undefined; // rare: let Node read and discard it
  }
  const qi = url.indexOf('?');
  if (!handler.accepts(method, qi < 0 ? url : url.slice(0, qi))) return undefined;
  return { method, url, headers, bodyLength, headLength: end + 4 };
}

/** One client connection while it is on the fast path. */
class FastConnection implements FastResponse {
  private buf: Buffer | undefined;
  private busy = false;
  private head = false;
  private draining = false;
  private gone = false;
  /** Meter and start (`performance.now()` ms) of the request in flight. */
  private meter: { done(status: number, startMs: number): void } | undefined;
  private startMs = 0;
  private readonly onData = (chunk: Buffer) => this.data(chunk);
  private readonly onEnd = () => {
    if (!this.busy) this.socket.end();
  };
  private readonly onClose = () => {
    this.gone = true;
    this.conns.delete(this.socket);
  };
  private readonly onTimeout = () => this.socket.destroy();
  private readonly onError = () => {
    /* 'close' follows */
  };

  constructor(
    private readonly socket: net.Socket,
    private readonly handler: FastHandler,
    private readonly fallback: http.Server,
    private readonly conns: Set<net.Socket>,
    keepAliveMs: number,
    private readonly bodyMax: number,
  ) {
    socket.setNoDelay(true);
    socket.setTimeout(keepAliveMs);
    socket.on('data', this.onData);
    socket.on('end', this.onEnd);
    socket.on('close', this.onClose);
    socket.on('timeout', this.onTimeout);
    socket.on('error', this.onError);
  }

  private data(chunk: Buffer): void {
    this.buf = this.buf === undefined ? chunk : Buffer.concat([this.buf, chunk]);
    if (this.busy) {
      if (this.buf.length > READ_AHEAD_MAX + FAST_BODY_MAX) this.socket.pause();
      return;
    }
    this.drain();
  }

  /** Serves every complete request in the buffer, one at a time. */
  private drain(): void {
    if (this.draining) return;
    this.draining = true;
    try {
      while (!this.busy && !this.gone && this.buf !== undefined) {
        const buf = this.buf;
        const end = buf.indexOf('\r\n\r\n');
        if (end < 0) {
          if (buf.length > FAST_HEAD_MAX) this.handOff();
          return;
        }
        const h = end > FAST_HEAD_MAX ? undefined : parseHead(buf, end, this.bodyMax, this.handler);
        if (h === undefined) return this.handOff();
        const total = h.headLength + h.bodyLength;
        if (buf.length < total) return; // body still arriving
        const body =
          h.method === 'GET' || h.method === 'HEAD' || (h.bodyLength === 0 && h.headers['content-type'] === undefined)
            ? undefined
            : buf.subarray(h.headLength, total);
        this.buf = buf.length === total ? undefined : buf.subarray(total);
        this.busy = true;
        this.head = h.method === 'HEAD';
        if (this.handler.meter !== undefined) {
          this.meter = this.handler.meter(h);
          this.startMs = performance.now();
        }
        this.handler.handle(h, body, this);
      }
    } finally {
      this.draining = false;
    }
  }

  get remoteAddress(): string | undefined {
    return this.socket.remoteAddress;
  }

  /** {@link FastResponse}: writes the whole response, then serves the next buffered request. */
  send(status: number, type: string, body: string | Buffer, extraHeaders: string): void {
    if (!this.busy) return;
    this.busy = false;
    const meter = this.meter;
    if (meter !== undefined) {
      this.meter = undefined;
      meter.done(status, this.startMs);
    }
    if (this.gone) return;
    const len = typeof body === 'string' ? Buffer.byteLength(body) : body.length;
    const head =
      statusLine(status) +
      `content-type: ${type}\r\ncontent-length: ${len}\r\n${extraHeaders}` +
      `Date: ${httpDate()}\r\nConnection: keep-alive\r\nKeep-Alive: timeout=72\r\n\r\n`;
    if (this.head || len === 0) this.socket.write(head, 'latin1');
    else if (typeof body === 'string') this.socket.write(head + body);
    else {
      this.socket.cork();
      this.socket.write(head, 'latin1');
      this.socket.write(body);
      this.socket.uncork();
    }
    if (this.socket.isPaused()) this.socket.resume();
    if (this.socket.readableEnded && this.buf === undefined) this.socket.end();
    else if (this.buf !== undefined) this.drain();
  }

  /** Gives the connection (and its unread bytes) to the Node `http` server. */
  private handOff(): void {
    const s = this.socket;
    // the socket stays in `conns` (its 'close' listener removes it) so closeAll() reaches it: a
    // Node server that never listened does not track connections for closeAllConnections()
    s.off('data', this.onData);
    s.off('end', this.onEnd);
    s.off('timeout', this.onTimeout);
    s.off('error', this.onError);
    s.setTimeout(0);
    this.gone = true;
    const rest = this.buf;
    this.buf = undefined;
    this.fallback.emit('connection', s);
    // the Node server's own 'data' listener is attached now: feed it the bytes already read
    if (rest !== undefined) s.emit('data', rest);
    if (s.isPaused()) s.resume();
  }
}

/** The `net.Server` options of {@link createFastServer} (for extra listening handles, `src/http/accept.ts`). */
export const FAST_SERVER_OPTIONS: net.ServerOpts = { noDelay: true, allowHalfOpen: true };

/**
 * A `net.Server` that serves `handler`'s requests on the fast path and hands other connections to
 * `fallback` (a Node `http.Server` that is not listening itself; it answers bodies over
 * `bodyLimit` bytes). `closeAll()` destroys every open connection, handed over or not. Set
 * `fallback.timeout` (inactivity, ms): its headers/request timeout checks only run on a server
 * that listens.
 */
export function createFastServer(handler: FastHandler, fallback: http.Server, keepAliveMs: number, bodyLimit: number): net.Server & { closeAll(): void } {
  const conns = new Set<net.Socket>();
  const bodyMax = Math.min(bodyLimit, FAST_BODY_MAX);
  // allowHalfOpen: a client that half-closes after its request still gets the answer (as in node:http)
  const server = net.createServer(FAST_SERVER_OPTIONS, (socket) => {
    conns.add(socket);
    new FastConnection(socket, handler, fallback, conns, keepAliveMs, bodyMax);
  });
  return Object.assign(server, {
    closeAll(): void {
      for (const s of conns) s.destroy();
      conns.clear();
    },
  });
}
