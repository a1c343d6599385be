/**
 * A minimal HTTP/1.1 server on `node:net` for an area's hot path, with Node's own `http` server
 * behind it for everything else (shared plumbing). Measured on the 2-core
 * bench machine, Node's `http` module alone (a hello-world that does nothing) answers about 20k
 * req/s while a plain socket that writes a canned response does about 40k: for small requests the
 * HTTP layer, not the area, was the ceiling (`docs/readme/kv-perf.md`). Used by kv, vector and the
 * queue (publishes).
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
 * The plain form also needs a `Host` header and a target of visible ASCII bytes, and its lines end
 * in CRLF: a request without `Host`, with HTAB or bytes 0x80-0xFF in its target, or with a bare LF
 * line end goes to the Node server too, which answers 400 as `node:http` does. A client that
 * half-closes in the middle of a request is handed over with its bytes, so Node's parser answers
 * it (400) before the connection closes.
 *
 * Requests on one connection are served strictly one after the other (HTTP/1.1 pipelining keeps
 * its order); reading pauses while a request is in flight and more bytes are buffered than one
 * request can use, and while the last response waits for the client to read it (the socket's
 * `write()` returned false, until `'drain'`): as in `node:http`, a client that does not read its
 * answers stops being read. Received bytes are copied once (chunks are collected and joined when
 * a head or a body is complete; a head is searched only in new bytes and parsed once). Idle
 * keep-alive connections close after `keepAliveMs` (found by a periodic check, not a per-socket
 * timer re-armed at every read and write; 72 s like Fastify's setting in
 * `src/http/server.ts`). The deadlines, the connection cap and the credentials check before a body
 * are described at {@link createFastServer}.
 */
import type http from 'node:http';
import net from 'node:net';
import { STATUS_CODES, type IncomingHttpHeaders } from 'node:http';
import { closeWith } from './close-after-answer.js';

/** Idle keep-alive timeout in ms (Fastify's setting in `src/http/server.ts`; `Keep-Alive: timeout=72`). */
export const FAST_KEEP_ALIVE_MS = 72_000;
/** Bodies above this many bytes go to the Node server (which streams them with the size limit). */
export const FAST_BODY_MAX = 1024 * 1024;
/** Request heads above this many bytes go to the Node server (it answers 431 past its own limit). */
const FAST_HEAD_MAX = 16 * 1024;
/** Bytes buffered beyond the request in flight before reading pauses. */
const READ_AHEAD_MAX = 64 * 1024;
/**
 * The largest received buffer a connection keeps for its last head ({@link FastConnection}
 * `lastHead`): a head with a small body fits; with 10,000 connections at most 40 MiB are held.
 */
const HEAD_CACHE_MAX = 4 * 1024;

const CRLF2 = Buffer.from('\r\n\r\n');
const EMPTY = Buffer.alloc(0);

/**
 * True when `buf` has, at or after `from`, an LF not preceded by CR or a CR followed by anything
 * but LF (a line end only Node's parser judges: it refuses both).
 */
function hasBareLineEnd(buf: Buffer, from: number): boolean {
  for (let k = buf.indexOf(10, from); k >= 0; k = buf.indexOf(10, k + 1)) if (k === 0 || buf[k - 1] !== 13) return true;
  for (let k = buf.indexOf(13, from); k >= 0 && k + 1 < buf.length; k = buf.indexOf(13, k + 1)) if (buf[k + 1] !== 10) return true;
  return false;
}
const STATUS_LINES = new Map<number, string>();

let dateCache = '';
/** The end of a keep-alive response head from `Date` on (with its blank line), rebuilt with {@link dateCache}. */
let keepAliveTail = '';
/** Forgets {@link dateCache} at the turn of the second it was made in. */
const dateExpired = () => {
  dateCache = '';
};
/**
 * The `Date` header value. Made at the first use after the turn of a second, then kept until a
 * timer at the next turn clears it (`node:http` keeps its `Date` the same way): no clock is read
 * per response.
 */
function httpDate(): string {
  if (dateCache === '') {
    const d = new Date();
    dateCache = d.toUTCString();
    keepAliveTail = `Date: ${dateCache}\r\nConnection: keep-alive\r\nKeep-Alive: timeout=72\r\n\r\n`;
    setTimeout(dateExpired, 1000 - d.getMilliseconds()).unref();
  }
  return dateCache;
}

/**
 * The end of the last response head after its `content-length` digits: CRLF, the handler's extra
 * header lines, then {@link keepAliveTail}; kept while both are the same (e.g. kv answers between
 * two writes share their sync-token lines), so that a response head is three pieces, not six.
 */
let tailExtra = '';
let tailKeepAlive = '';
let tailText = '';

/** The last response head prefix built by {@link headPrefix}, for its status and type. */
let prefixStatus = 0;
let prefixType = '';
let prefixText = '';
/**
 * `<status line>content-type: <type>\r\ncontent-length: ` (the length follows): the last one is
 * kept, since a connection's answers mostly share status and type.
 */
function headPrefix(status: number, type: string): string {
  if (status !== prefixStatus || type !== prefixType) {
    prefixStatus = status;
    prefixType = type;
    prefixText = `${statusLine(status)}content-type: ${type}\r\ncontent-length: `;
  }
  return prefixText;
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
  /** Free for the handler: what {@link FastHandler.precheck} found (e.g. the identity), for `handle`. */
  auth?: unknown;
}

/** An answer sent from a request's head alone, after which the connection is closed ({@link FastHandler.precheck}). */
export interface FastRefusal {
  status: number;
  type: string;
  body: string;
  /** Complete `name: value\r\n` lines, or ''. */
  extraHeaders: string;
}

/** Where a fast-path response goes. */
export interface FastResponse {
  /** The client's address (`net.Socket.remoteAddress`; undefined once the socket is gone). */
  readonly remoteAddress: string | undefined;
  /**
   * Writes the whole response: status line, `content-type: type`, `content-length`, the
   * handler's `extraHeaders` (complete `name: value\r\n` lines, or ''), `Date`, keep-alive, then
   * `body` (omitted for HEAD). Must be called exactly once per request; the next request on the
   * connection is served after it. `ascii`: the caller knows that `body` (a string) and
   * `extraHeaders` are ASCII only, so the response is written as latin1 (no UTF-8 length count
   * and no UTF-8 conversion of the text); other text is written as UTF-8.
   */
  send(status: number, type: string, body: string | Buffer, extraHeaders: string, ascii?: boolean): void;
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
   * Called for a request with a body (`Content-Length` above 0) once its head is parsed, before the
   * body is read (also for bodies the Node server will read): the refusal to answer at once, after
   * which the connection is closed and the body discarded unread (e.g. 401 for a wrong token), or
   * undefined to go on. May keep what it found in `head.auth` for `handle`. Must not throw.
   */
  precheck?(head: FastHead): FastRefusal | undefined;
  /**
   * The request meter of a request (`src/metrics.ts` `RouteMeter`: pre-bound cells, no per-request
   * labels), told the status and the start time (`performance.now()` ms) when the response is sent.
   */
  meter?(head: FastHead): { done(status: number, startMs: number): void } | undefined;
  /**
   * True when the handler only reads `head.headers` (never adds, changes or deletes a header): a
   * request whose head is byte for byte the last one parsed on its connection is then given the
   * same headers object, and its head is not parsed again (`FastConnection.lastHead`).
   */
  sharedHeaders?: boolean;
}

/** 1 for the bytes of an RFC 9110 token (`tchar`), by byte value. */
const TCHAR = new Uint8Array(256);
for (const c of "!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ") TCHAR[c.charCodeAt(0)] = 1;
/** `HTTP/1.1` as bytes. */
const HTTP11 = [72, 84, 84, 80, 47, 49, 46, 49];

/**
 * Header names the fast path meets often (what the SDKs, curl, browsers and load generators send,
 * and the ones it judges itself), by length: a name that matches one (ASCII case-insensitively)
 * is given as this literal, so the common head takes no string copy and no lower-casing per name.
 */
const KNOWN_NAMES: [Uint8Array, string][][] = [];
for (const name of [
  'host', 'authorization', 'content-type', 'content-length', 'connection', 'transfer-encoding', 'expect', 'upgrade',
  'user-agent', 'accept', 'accept-encoding', 'accept-language', 'keep-alive', 'origin', 'referer', 'cookie',
  'traceparent', 'tracestate', 'cache-control', 'pragma',
  'upstash-sync-token', 'svc-sync-token', 'upstash-encoding', 'svc-encoding', 'upstash-response-format', 'svc-response-format',
  'upstash-telemetry-sdk', 'upstash-telemetry-runtime', 'upstash-telemetry-platform', 'upstash-telemetry-retry',
  'upstash-method', 'upstash-retries', 'upstash-delay', 'upstash-forward-authorization', 'upstash-callback', 'upstash-failure-callback',
  'upstash-deduplication-id', 'upstash-content-based-deduplication', 'upstash-flow-control-key', 'upstash-flow-control-value',
]) (KNOWN_NAMES[name.length] ??= []).push([Buffer.from(name, 'latin1'), name]);

/**
 * The literal of {@link KNOWN_NAMES} that `buf[from, to)` spells in any case, or undefined. The
 * bytes are tchars (checked by the caller): OR-ing 0x20 maps an upper-case letter to its lower
 * case and leaves `-` and digits as they are, and no other tchar maps to a letter or `-`.
 */
function knownName(buf: Buffer, from: number, to: number): string | undefined {
  const candidates = KNOWN_NAMES[to - from];
  if (candidates === undefined) return undefined;
  next: for (let i = 0; i < candidates.length; i++) {
    const [bytes, name] = candidates[i];
    for (let k = 0; k < bytes.length; k++) if ((buf[from + k] | 0x20) !== bytes[k]) continue next;
    return name;
  }
  return undefined;
}

/** The method literal of `buf[0, len)` when it is GET, POST, PUT or HEAD, else undefined. */
function plainMethod(buf: Buffer, len: number): string | undefined {
  const c0 = buf[0];
  if (len === 3) {
    if (c0 === 71 && buf[1] === 69 && buf[2] === 84) return 'GET';
    if (c0 === 80 && buf[1] === 85 && buf[2] === 84) return 'PUT';
  } else if (len === 4) {
    if (c0 === 80 && buf[1] === 79 && buf[2] === 83 && buf[3] === 84) return 'POST';
    if (c0 === 72 && buf[1] === 69 && buf[2] === 65 && buf[3] === 68) return 'HEAD';
  }
  return undefined;
}

/**
 * Parses the head in `buf[0, end)` (`end` = index of the CRLFCRLF). Undefined when the request is
 * not of the plain form the fast path serves (the Node server then takes the connection), e.g. a
 * `Content-Length` above `bodyMax` bytes. One pass over the bytes (no split or regular
 * expressions, no line found first and scanned again): the request line is checked as it is
 * read (method up to the first space, a target of visible ASCII, then exactly ` HTTP/1.1` CRLF);
 * each header line as its name (`tchar`s up to the colon) and its value (no control byte but
 * HTAB, ending in CRLF) are read; values are trimmed of SP/HTAB (RFC 9110 OWS). The head is
 * decoded once (latin1, one native call); the target and the values are slices of it, and the
 * common header names and methods are literals ({@link knownName}).
 */
export function parseHead(buf: Buffer, end: number, bodyMax: number, handler: FastHandler): FastHead | undefined {
  // the method: up to the first space (checked against the methods served below)
  let sp1 = 0;
  while (sp1 < end && buf[sp1] !== 32) sp1++;
  if (sp1 === 0 || sp1 >= end) return undefined;
  let method = plainMethod(buf, sp1);
  if (method === undefined) {
    method = buf.toString('latin1', 0, sp1);
    if (!handler.methods?.includes(method)) return undefined;
  }
  // the target: `/`, then visible ASCII only (no HTAB, no bytes 0x80-0xFF: Node's parser judges the rest)
  if (buf[sp1 + 1] !== 47 /* / */) return undefined;
  let sp2 = sp1 + 2;
  for (let c = buf[sp2]; c !== 32; c = buf[++sp2]) if (c < 0x21 || c > 0x7e) return undefined; // ends at the CR of CRLFCRLF at the latest
  // exactly one space, `HTTP/1.1`, CRLF, and at least one header line (Host) before the end
  const rlEnd = sp2 + 9;
  if (rlEnd >= end || buf[rlEnd] !== 13 || buf[rlEnd + 1] !== 10) return undefined;
  for (let k = 0; k < 8; k++) if (buf[sp2 + 1 + k] !== HTTP11[k]) return undefined;
  const text = buf.toString('latin1', 0, end);
  const url = text.slice(sp1 + 1, sp2);
  const headers: IncomingHttpHeaders = Object.create(null) as IncomingHttpHeaders;
  let bodyLength = 0;
  let pos = rlEnd + 2;
  while (pos < end) {
    // the name: tchars up to the colon (a CR, LF, space or control byte on the way is refused)
    let colon = pos;
    let upper = false;
    for (; colon < end; colon++) {
      const c = buf[colon];
      if (c === 58 /* : */) break;
      if (TCHAR[c] === 0) return undefined;
      if (c >= 65 && c <= 90) upper = true;
    }
    if (colon === pos || colon === end) return undefined;
    // the value: up to the CR of its CRLF (the last line's is the one at `end`); no control byte but HTAB
    let le = colon + 1;
    for (; le < end; le++) {
      const c = buf[le];
      if (c === 13) {
        if (buf[le + 1] !== 10) return undefined;
        break;
      }
      if ((c < 32 && c !== 9) || c === 127) return undefined;
    }
    let name = knownName(buf, pos, colon);
    if (name === undefined) {
      name = text.slice(pos, colon);
      if (upper) name = name.toLowerCase();
    }
    if (headers[name] !== undefined) return undefined;
    let vs = colon + 1;
    let ve = le;
    while (vs < ve && (buf[vs] === 32 || buf[vs] === 9)) vs++;
    while (ve > vs && (buf[ve - 1] === 32 || buf[ve - 1] === 9)) ve--;
    const value = text.slice(vs, ve);
    switch (name) {
      case 'transfer-encoding':
      case 'expect':
      case 'upgrade':
        return undefined;
      case 'connection':
        if (value.toLowerCase().includes('close')) return undefined;
        break;
      case 'content-length': {
        // 1 to 15 digits (at most 2^53 - 1: exact as a number)
        if (ve === vs || ve - vs > 15) return undefined;
        let n = 0;
        for (let k = vs; k < ve; k++) {
          const d = buf[k] - 48;
          if (d < 0 || d > 9) return undefined;
          n = n * 10 + d;
        }
        bodyLength = n;
        if (bodyLength > bodyMax) return undefined;
        break;
      }
    }
    headers[name] = value;
    pos = le + 2;
  }
  if (method === 'GET' || method === 'HEAD') {
    if (bodyLength > 0) return undefined; // rare: let Node read and discard it
  }
  if (headers.host === undefined) return undefined; // Node answers 400 (HTTP/1.1 requires Host)
  const qi = url.indexOf('?');
  if (!handler.accepts(method, qi < 0 ? url : url.slice(0, qi))) return undefined;
  return { method, url, headers, bodyLength, headLength: end + 4, auth: undefined };
}

/** Node's private `net.Socket` fields behind its `onread` option (found by their descriptions), or null when absent. */
interface OnreadFields {
  buffer: symbol;
  callback: symbol;
  generator: symbol;
}
let onreadFields: OnreadFields | null | undefined;
/** The read buffer of every accepted socket that {@link readWithoutStream} set up (see there). */
let clientReadBuffer: Buffer | undefined;
/** Bytes libuv reads at most at once into {@link clientReadBuffer} (Node's own read size). */
const CLIENT_READ_BYTES = 64 * 1024;

/** The socket's `onread` fields, by their descriptions, when each is there once and unset (null). */
function findOnreadFields(socket: net.Socket): OnreadFields | null {
  const found = new Map<string, symbol[]>();
  for (const sym of Object.getOwnPropertySymbols(socket)) {
    const d = sym.description ?? '';
    if (d === 'kBuffer' || d === 'kBufferCb' || d === 'kBufferGen') found.set(d, [...(found.get(d) ?? []), sym]);
  }
  const one = (d: string) => (found.get(d)?.length === 1 ? found.get(d)![0] : undefined);
  const buffer = one('kBuffer');
  const callback = one('kBufferCb');
  const generator = one('kBufferGen');
  if (buffer === undefined || callback === undefined || generator === undefined) return null;
  return { buffer, callback, generator };
}

/**
 * The `onread` callback of an accepted socket (`this`): copies the `n` bytes read into a buffer of
 * their own (`Buffer.allocUnsafe`: a slice of Node's pool when small), since the read buffer is
 * shared, and emits them as the socket's `'data'` event.
 */
function onClientRead(this: net.Socket, n: number, buf: Uint8Array): boolean {
  const chunk = Buffer.allocUnsafe(n);
  chunk.set(n === buf.length ? buf : buf.subarray(0, n));
  this.emit('data', chunk);
  return true;
}

/**
 * Makes an accepted socket read as a socket opened with `net.Socket`'s documented `onread` option
 * does (Node's `net.Server` offers no such option for the sockets it accepts): libuv reads into
 * one 64 KiB buffer shared by every such socket of the process (reads run one at a time on the
 * event loop, and each is copied out before the next: {@link onClientRead}), and each read is
 * given to the socket's `'data'` listeners straight away. Against Node's stream path this saves,
 * per read, Node's 64 KiB read buffer (allocated, then shrunk to the bytes read) and the
 * `Readable` stream's work (`push`, its buffer, a `process.nextTick` to read ahead). Everything
 * else is the socket's own: `pause()`/`resume()` stop and restart the handle's reading (what Node
 * does for an `onread` socket), `'end'`, `'close'`, `'error'`, timeouts, writes and the server's
 * connection count are untouched, and a connection handed to the Node `http` server gets its bytes
 * as `'data'` events as before (its parser does not read the handle itself once a `'data'`
 * listener is added, see {@link HandedOff}).
 *
 * This sets Node's private fields of the `onread` option (`kBuffer`, `kBufferCb`, found by their
 * descriptions on the socket) and calls the handle's `useUserBuffer`, which is what
 * `new net.Socket({ onread })` does: internals of Node's `lib/net.js` (checked on Node 20 and 24).
 * Only a socket in the state Node's `onread` needs is changed: a plain TCP `net.Socket` with a
 * handle that has `useUserBuffer`, no `onread` set yet and nothing read into its stream buffer;
 * otherwise (another Node with other internals, a socket passed between processes that already
 * read) it is left as it is and read through its stream. False then.
 */
export function readWithoutStream(socket: net.Socket): boolean {
  if (onreadFields === undefined) onreadFields = findOnreadFields(socket);
  const f = onreadFields;
  if (f === null) return false;
  const handle = (socket as net.Socket & { _handle?: { useUserBuffer?: unknown } | null })._handle;
  const own = socket as unknown as Record<symbol, unknown>;
  if (
    handle == null ||
    typeof handle.useUserBuffer !== 'function' ||
    own[f.buffer] !== null ||
    own[f.callback] !== null ||
    own[f.generator] !== null ||
    socket.readableLength !== 0 ||
    socket.readableEnded ||
    socket.destroyed
  ) {
    return false;
  }
  clientReadBuffer ??= Buffer.allocUnsafe(CLIENT_READ_BYTES);
  own[f.buffer] = clientReadBuffer;
  own[f.callback] = onClientRead;
  (handle.useUserBuffer as (this: object, buf: Uint8Array) => void).call(handle, clientReadBuffer);
  return true;
}

/** Answer of a request whose head or body did not arrive in time (the bytes `node:http` sends). */
const TIMEOUT_RESPONSE = 'HTTP/1.1 408 Request Timeout\r\nConnection: close\r\n\r\n';
/** One client connection while it is on the fast path. */
class FastConnection implements FastResponse {
  /** Unconsumed input bytes: the start of the next request(s). */
  private buf: Buffer | undefined;
  /** Input chunks received after `buf`, not yet appended to it (appended once, when needed). */
  private parts: Buffer[] = [];
  private partBytes = 0;
  /** Bytes at the start of `buf` already searched for the end of a head (none found). */
  private scanned = 0;
  /** The parsed head whose body is still arriving (its head bytes are consumed from `buf`). */
  private pending: FastHead | undefined;
  /** The bytes of {@link pending}'s head (given back to the Node server on a hand-off). */
  private pendingRaw: Buffer | undefined;
  /** A request is being served (handler called, `send` not yet). */
  private busy = false;
  /** The last response was not fully accepted by the socket (`write()` returned false): no request is served before `'drain'`. */
  private blocked = false;
  private head = false;
  private draining = false;
  private gone = false;
  /**
   * 0 = no request is being received; -1 = one is, since after the last {@link sweep}; else the
   * `Date.now()` of the first sweep that saw it being received (no clock is read per request).
   */
  private reqStart = 0;
  /** Something was read, answered or drained since the last {@link sweep}. */
  private active = false;
  /** `Date.now()` of the {@link sweep} that last saw {@link active} (or of the connection's start). */
  private idleSince = 0;
  /**
   * The last head parsed on this connection when the handler shares headers
   * ({@link FastHandler.sharedHeaders}): its bytes are `lastHeadBuf[0, lastHeadEnd)` (a received
   * chunk or a join of chunks, never written to, kept only while its memory is at most
   * {@link HEAD_CACHE_MAX} bytes). A keep-alive client mostly sends the same head again (the same
   * target, headers and body length: a load generator always, an SDK for same-sized commands): a
   * head equal to it byte for byte (one native comparison) takes its parse result instead of
   * {@link parseHead}'s pass over every byte and its header strings and dictionary stores.
   */
  private lastHead: FastHead | undefined;
  private lastHeadBuf: Buffer | undefined;
  private lastHeadEnd = -1;
  /** Meter and start (`performance.now()` ms) of the request in flight. */
  private meter: { done(status: number, startMs: number): void } | undefined;
  private startMs = 0;
  private readonly onData = (chunk: Buffer) => this.data(chunk);
  private readonly onEnd = () => this.settle();
  private readonly onDrain = () => {
    this.active = true;
    this.blocked = false;
    this.settle();
  };
  private readonly onClose = () => {
    this.gone = true;
    this.pool.conns.delete(this.socket);
    this.pool.fast.delete(this);
  };
  private readonly onError = () => {
    /* 'close' follows */
  };

  constructor(
    private readonly socket: net.Socket,
    private readonly handler: FastHandler,
    private readonly pool: ConnectionPool,
  ) {
    socket.setNoDelay(true);
    this.idleSince = Date.now();
    socket.on('data', this.onData);
    socket.on('end', this.onEnd);
    socket.on('close', this.onClose);
    socket.on('error', this.onError);
    socket.on('drain', this.onDrain);
    pool.fast.add(this);
  }

  private data(chunk: Buffer): void {
    this.active = true;
    if (this.buf === undefined && this.partBytes === 0) this.buf = chunk; // the usual case: nothing buffered
    else {
      this.parts.push(chunk);
      this.partBytes += chunk.length;
    }
    if (this.busy || this.blocked) {
      // read ahead at most one request's worth while a response is pending
      if ((this.buf?.length ?? 0) + this.partBytes > READ_AHEAD_MAX + FAST_BODY_MAX) this.socket.pause();
      return;
    }
    this.drain();
  }

  /** Appends the received chunks to `buf` (one copy for all of them). */
  private gather(): Buffer | undefined {
    if (this.parts.length === 0) return this.buf;
    if (this.buf !== undefined) this.parts.unshift(this.buf);
    this.buf = this.parts.length === 1 ? this.parts[0] : Buffer.concat(this.parts);
    this.parts.length = 0;
    this.partBytes = 0;
    return this.buf;
  }

  private get buffered(): number {
    return (this.buf?.length ?? 0) + this.partBytes;
  }

  /** Serves every complete request in the buffer, one at a time. */
  private drain(): void {
    if (this.draining) return;
    this.draining = true;
    try {
      while (!this.busy && !this.blocked && !this.gone) {
        let h = this.pending;
        let body: Buffer | undefined;
        if (h === undefined) {
          const buf = this.gather();
          if (buf === undefined) return;
          if (this.reqStart === 0) this.reqStart = -1;
          const end = buf.indexOf(CRLF2, this.scanned > 3 ? this.scanned - 3 : 0);
          if (end < 0) {
            // no end of head yet: a bare LF or CR is a line end only Node's parser judges (it refuses it)
            if (buf.length > FAST_HEAD_MAX || hasBareLineEnd(buf, this.scanned > 0 ? this.scanned - 1 : 0)) return this.handOff();
            this.scanned = buf.length;
            return;
          }
          this.scanned = 0;
          const parsed = end > FAST_HEAD_MAX ? undefined : this.parse(buf, end);
          if (parsed === undefined) return this.handOff();
          h = parsed;
          // a request with a body: its credentials are checked before the body is read
          if (h.bodyLength > 0 && this.handler.precheck !== undefined) {
            const no = this.handler.precheck(h);
            if (no !== undefined) return this.refuse(no);
          }
          if (h.bodyLength > this.pool.fastBodyMax) return this.handOff();
          const total = h.headLength + h.bodyLength;
          if (buf.length < total) {
            // the body is still arriving: the head is consumed, its bytes kept for a hand-off
            this.pendingRaw = buf.subarray(0, h.headLength);
            this.buf = buf.length === h.headLength ? undefined : buf.subarray(h.headLength);
            this.pending = h;
            return;
          }
          // the usual case: the whole request is here
          if (h.bodyLength > 0) body = buf.subarray(h.headLength, total);
          this.buf = buf.length === total ? undefined : buf.subarray(total);
        } else {
          if (this.buffered < h.bodyLength) return; // body still arriving
          const buf = this.gather()!;
          body = buf.subarray(0, h.bodyLength);
          this.buf = buf.length === h.bodyLength ? undefined : buf.subarray(h.bodyLength);
          this.pending = undefined;
          this.pendingRaw = undefined;
        }
        if (h.method === 'GET' || h.method === 'HEAD') body = undefined;
        else if (body === undefined && h.headers['content-type'] !== undefined) body = EMPTY;
        this.reqStart = 0;
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

  /**
   * The head in `buf[0, end)` parsed ({@link parseHead}), or the last head's result (a new
   * {@link FastHead} sharing its headers object) when the bytes are the same ({@link lastHead}).
   */
  private parse(buf: Buffer, end: number): FastHead | undefined {
    const last = this.lastHead;
    if (last !== undefined && end === this.lastHeadEnd && buf.compare(this.lastHeadBuf!, 0, end, 0, end) === 0) {
      return { method: last.method, url: last.url, headers: last.headers, bodyLength: last.bodyLength, headLength: last.headLength, auth: undefined };
    }
    const h = parseHead(buf, end, Number.MAX_SAFE_INTEGER, this.handler);
    if (h !== undefined && this.handler.sharedHeaders === true && end <= HEAD_CACHE_MAX) {
      this.lastHead = h;
      // the received buffer itself when its memory is small (no copy), else a copy of the head: a
      // read by `readWithoutStream` is a slice of Node's 8 KiB buffer pool, which must not be held
      this.lastHeadBuf = buf.buffer.byteLength <= HEAD_CACHE_MAX ? buf : Buffer.copyBytesFrom(buf, 0, end);
      this.lastHeadEnd = end;
    } else {
      this.lastHead = undefined;
      this.lastHeadBuf = undefined;
      this.lastHeadEnd = -1;
    }
    return h;
  }

  /**
   * After a response was written, the output drained or the client half-closed: serves what is
   * buffered, reads on while the output is drained, and finishes a half-closed connection (its
   * unfinished request goes to the Node server, whose parser answers it as `node:http` does).
   */
  private settle(): void {
    // inside drain() (a handler answered synchronously): its loop goes on, then its caller settles
    if (this.draining || this.gone || this.busy || this.blocked) return;
    if (this.buffered > 0) this.drain();
    if (this.gone || this.busy || this.blocked) return;
    if (this.socket.readableEnded) {
      if (this.buffered > 0 || this.pending !== undefined) this.handOff();
      else this.socket.end();
      return;
    }
    if (this.socket.isPaused()) this.socket.resume();
  }

  get remoteAddress(): string | undefined {
    return this.socket.remoteAddress;
  }

  /** {@link FastResponse}: writes the whole response, then serves the next buffered request once the output drained. */
  send(status: number, type: string, body: string | Buffer, extraHeaders: string, ascii = false): void {
    if (!this.busy) return;
    this.busy = false;
    this.active = true;
    const meter = this.meter;
    if (meter !== undefined) this.meter = undefined;
    if (this.gone) {
      meter?.done(status, this.startMs);
      return;
    }
    const len = typeof body === 'string' ? (ascii ? body.length : Buffer.byteLength(body)) : body.length;
    httpDate(); // keeps keepAliveTail current
    if (extraHeaders !== tailExtra || keepAliveTail !== tailKeepAlive) {
      tailExtra = extraHeaders;
      tailKeepAlive = keepAliveTail;
      tailText = '\r\n' + extraHeaders + keepAliveTail;
    }
    const head = headPrefix(status, type) + len + tailText;
    let ok: boolean;
    if (this.head || len === 0) ok = this.socket.write(head, 'latin1');
    else if (typeof body === 'string') ok = this.socket.write(head + body, ascii ? 'latin1' : 'utf8');
    else {
      this.socket.cork();
      this.socket.write(head, 'latin1');
      ok = this.socket.write(body);
      this.socket.uncork();
    }
    // the request is metered once its answer is out: its clock read and histogram update are not
    // part of the client's wait
    meter?.done(status, this.startMs);
    if (!ok) {
      // the client does not read as fast as it asks: read and serve nothing more until 'drain'
      this.blocked = true;
      this.socket.pause();
      return;
    }
    this.settle();
  }

  /**
   * Refuses the request whose head was just parsed, before its body is read: writes the answer
   * with `Connection: close` and closes the connection ({@link closeWith}); the body is discarded.
   */
  private refuse({ status, type, body, extraHeaders }: FastRefusal): void {
    if (this.gone) return;
    this.gone = true;
    this.pool.fast.delete(this);
    this.buf = undefined;
    this.parts = [];
    this.partBytes = 0;
    this.pending = undefined;
    const s = this.socket;
    s.off('end', this.onEnd);
    s.off('drain', this.onDrain);
    closeWith(
      s,
      statusLine(status) +
        `content-type: ${type}\r\ncontent-length: ${Buffer.byteLength(body)}\r\n${extraHeaders}Date: ${httpDate()}\r\nConnection: close\r\n\r\n${body}`,
    );
  }

  /**
   * The periodic check of {@link createFastServer} (`now` = `Date.now()`): destroys the connection
   * when nothing was read, answered or drained on it for `keepAliveMs` ms (an idle keep-alive
   * connection, or a client that stopped reading its answers); answers 408 and closes (as
   * `node:http`) when the request being received passed a deadline: its head `headersMs` ms after
   * it started, the whole request `requestMs` ms after.
   *
   * Inactivity is seen per check, not per read or write: {@link active} is set by every read,
   * answer and `'drain'`, and a check that finds it set clears it and restarts {@link idleSince}.
   * A connection is thus closed between `keepAliveMs` and `keepAliveMs` + one check interval after
   * its last activity, never earlier. (`socket.setTimeout` would do it exactly, at the price of
   * re-arming a timer at every read and every write of every request.) Likewise a request's age
   * is counted from the first sweep that saw it being received (no `Date.now()` per request), so a
   * deadline is enforced up to two intervals late, never early.
   */
  sweep(now: number, keepAliveMs: number, headersMs: number, requestMs: number): void {
    if (this.gone) return;
    if (this.active) {
      this.active = false;
      this.idleSince = now;
    } else if (now - this.idleSince >= keepAliveMs) {
      this.socket.destroy();
      return;
    }
    if (this.reqStart === 0 || this.busy || this.blocked) return;
    if (this.reqStart < 0) {
      // started since the last sweep: its age is counted from now (at most one interval short)
      this.reqStart = now;
      return;
    }
    const age = now - this.reqStart;
    if (age <= requestMs && (this.pending !== undefined || age <= headersMs)) return;
    this.gone = true;
    this.pool.fast.delete(this);
    this.buf = undefined;
    this.parts = [];
    this.pending = undefined;
    this.socket.off('end', this.onEnd);
    this.socket.off('drain', this.onDrain);
    closeWith(this.socket, TIMEOUT_RESPONSE);
  }

  /** Gives the connection (and its unread bytes) to the Node `http` server. */
  private handOff(): void {
    const s = this.socket;
    // the socket stays in `conns` (its 'close' listener removes it) so closeAll() reaches it: a
    // Node server that never listened does not track connections for closeAllConnections()
    s.off('data', this.onData);
    s.off('end', this.onEnd);
    s.off('drain', this.onDrain);
    s.off('error', this.onError);
    this.gone = true;
    this.pool.fast.delete(this);
    let rest = this.gather();
    if (this.pending !== undefined) {
      // the head was consumed from the buffer: give it back
      const h = this.pendingRaw!;
      rest = rest === undefined ? h : Buffer.concat([h, rest]);
    }
    this.buf = undefined;
    this.pending = undefined;
    this.pendingRaw = undefined;
    const dataBefore = new Set(s.listeners('data'));
    const endBefore = new Set(s.listeners('end'));
    this.pool.fallback.emit('connection', s);
    // the Node server's parser is fed through a HandedOff from now on: its own 'data' and 'end'
    // listeners are taken off the socket and called by it
    const nodeData = s.listeners('data').filter((l) => !dataBefore.has(l)) as ((chunk: Buffer) => void)[];
    const nodeEnd = s.listeners('end').filter((l) => !endBefore.has(l)) as (() => void)[];
    for (const l of nodeData) s.off('data', l);
    for (const l of nodeEnd) s.off('end', l);
    const h = new HandedOff(s, nodeData, nodeEnd);
    this.pool.handed.set(s, h);
    // the bytes already read go first; a client that already half-closed: the Node server learns it
    // too once they are parsed (its parser answers an unfinished request 400)
    h.start(rest, s.readableEnded);
  }
}

/** Most answers the Node server may owe on one handed-over connection before its parser is fed more bytes. */
const HANDOFF_PENDING_MAX = 4;
/** Bytes given to the Node server's parser at a time (it runs every request of what it is given at once). */
const HANDOFF_SLICE = 4096;
/** Bytes read ahead of the Node server's parser before reading pauses. */
const HANDOFF_QUEUE_MAX = 64 * 1024;

/**
 * A connection handed to the Node server, whose parser it feeds. `node:http` runs the handler of
 * every request in the bytes it is given at once, and stops reading only once answers are written
 * and not drained: with asynchronous handlers a client that pipelines without reading would get all
 * its requests run and their answers held in memory. So the parser gets at most
 * {@link HANDOFF_SLICE} bytes at a time, and only while the server owes fewer than
 * {@link HANDOFF_PENDING_MAX} answers on the connection (counted from its `'request'` event to
 * the answer's `'close'`), the socket's output is drained, and the server has not paused the
 * socket itself; at most {@link HANDOFF_QUEUE_MAX} bytes wait here before reading pauses. The
 * client's half-close reaches the server after the bytes before it.
 *
 * Adding a `'data'` listener to the socket makes the Node server read it through the stream
 * (`'data'` events) instead of straight from the handle, which is what makes this possible.
 */
class HandedOff {
  /** Answers the Node server owes on the connection. */
  owed = 0;
  private queue: Buffer[] = [];
  private queued = 0;
  private ended = false;
  private endDelivered = false;
  private pumping = false;
  private readonly onData = (chunk: Buffer) => {
    this.queue.push(chunk);
    this.queued += chunk.length;
    this.pump();
  };
  private readonly onEnd = () => {
    this.ended = true;
    this.pump();
  };
  /** Resumes feeding; bound so that it can be a listener. */
  readonly pump = () => this.feed();

  constructor(
    private readonly socket: net.Socket,
    private readonly nodeData: ((chunk: Buffer) => void)[],
    private readonly nodeEnd: (() => void)[],
  ) {}

  /** Takes over the socket: `first` (bytes already read) goes to the parser first; `ended` when the client already half-closed. */
  start(first: Buffer | undefined, ended: boolean): void {
    const s = this.socket;
    if (first !== undefined) {
      this.queue.push(first);
      this.queued = first.length;
    }
    this.ended = ended;
    s.on('data', this.onData);
    s.on('end', this.onEnd);
    s.on('drain', this.pump);
    s.on('resume', this.pump);
    // the Node server ends a connection after an answer with `Connection: close` by
    // `destroySoon()` (destroy once the output is flushed), which resets a client still sending a
    // body it did not read (e.g. one refused for its token) and can cost it the answer: linger instead
    s.destroySoon = () => {
      this.queue = [];
      this.queued = 0;
      this.endDelivered = true;
      closeWith(s, EMPTY);
    };
    this.feed();
  }

  private feed(): void {
    if (this.pumping) return;
    this.pumping = true;
    const s = this.socket;
    try {
      while (this.queued > 0 && !s.destroyed) {
        if (this.owed >= HANDOFF_PENDING_MAX || s.writableNeedDrain || (s as net.Socket & { _paused?: boolean })._paused === true) break;
        const first = this.queue[0];
        const n = Math.min(HANDOFF_SLICE, first.length);
        if (n === first.length) this.queue.shift();
        else this.queue[0] = first.subarray(n);
        this.queued -= n;
        const slice = n === first.length ? first : first.subarray(0, n);
        for (const l of this.nodeData) l.call(s, slice);
      }
    } finally {
      this.pumping = false;
    }
    if (s.destroyed) return;
    if (this.queued === 0 && this.ended && !this.endDelivered) {
      this.endDelivered = true;
      // in a later turn, as the socket's own 'end' would come: the last request's body 'end' (a
      // next-tick event) reaches its handler first
      setImmediate(() => {
        if (!s.destroyed) for (const l of this.nodeEnd) l.call(s);
      });
      return;
    }
    if (this.queued > HANDOFF_QUEUE_MAX) {
      if (!s.isPaused()) s.pause();
    } else if (s.isPaused() && (s as net.Socket & { _paused?: boolean })._paused !== true) s.resume();
  }
}

/** State shared by the connections of one {@link createFastServer}. */
interface ConnectionPool {
  /** Every open connection (fast or handed over), for {@link createFastServer}'s `closeAll` and the connection cap. */
  conns: Set<net.Socket>;
  /** Connections still on the fast path, for the deadline check. */
  fast: Set<FastConnection>;
  fallback: http.Server;
  keepAliveMs: number;
  /** The area's body limit (bytes). */
  bodyLimit: number;
  /** Bodies the fast path reads itself (bytes): `min(bodyLimit, FAST_BODY_MAX)`. */
  fastBodyMax: number;
  /** The connections handed to `fallback`, by socket. */
  handed: WeakMap<net.Socket, HandedOff>;
}

/** The `net.Server` options of {@link createFastServer} (for extra listening handles, `src/http/accept.ts`). */
export const FAST_SERVER_OPTIONS: net.ServerOpts = { noDelay: true, allowHalfOpen: true };

/** Bounds of one {@link createFastServer} (for the Node server behind it too). */
export interface FastServerOptions {
  /** Idle keep-alive timeout in ms ({@link FAST_KEEP_ALIVE_MS}); also the inactivity limit of a connection that does not read its answers. */
  keepAliveMs: number;
  /** The area's body limit in bytes; bodies up to `min(bodyLimit, FAST_BODY_MAX)` are read by the fast path. */
  bodyLimit: number;
  /** A request head must be complete this many ms after its reception started (`SVC_HTTP_HEADERS_TIMEOUT_MS`), else 408 and close. */
  headersTimeoutMs: number;
  /** The whole request likewise (`SVC_HTTP_REQUEST_TIMEOUT_MS`). */
  requestTimeoutMs: number;
  /** Open connections (`SVC_HTTP_MAX_CONNECTIONS`); one more is answered `busyResponse` and closed. */
  maxConnections: number;
  /** The JSON body of the 503 answer past `maxConnections` (the area's error shape). */
  busyBody: string;
}

/** `Retry-After` (s) of the answer to a connection past the cap. */
export const BUSY_RETRY_AFTER_S = 1;

/**
 * A `net.Server` that serves `handler`'s requests on the fast path and hands other connections to
 * `fallback` (a Node `http.Server` that is not listening itself; it answers bodies over
 * `bodyLimit` bytes). `closeAll()` destroys every open connection, handed over or not.
 *
 * Bounds (each also applied to the connections handed to `fallback`, whose `headersTimeout`,
 * `requestTimeout` and `timeout` are set here and whose deadline checks are started although it
 * does not listen):
 * - output: after a response the socket did not take in full (`write()` returned false), nothing
 *   more is read or served before `'drain'`, so a client that does not read its answers holds at
 *   most one response plus the socket's high-water mark (16 KiB) of unsent output, and
 *   `READ_AHEAD_MAX + FAST_BODY_MAX` of unread input; it is closed after `keepAliveMs` without
 *   progress, like an idle keep-alive connection;
 * - time: 408 and close when a head is not complete `headersTimeoutMs` after its reception
 *   started, or a whole request `requestTimeoutMs` after. One timer checks these and the
 *   inactivity of every fast connection ({@link FastConnection.sweep}) every eighth of the
 *   smallest of the three (at least every 25 ms, at most every 30 s), without a clock read or a
 *   timer per request: an idle limit is enforced up to one interval late, a deadline up to two,
 *   never early (with the defaults: idle connections close after 72-79.5 s, 408 after 60-75 s);
 * - connections: past `maxConnections` open ones, a new connection is answered 503 with
 *   `Retry-After` and closed;
 * - credentials: a request with a body is offered to {@link FastHandler.precheck} before its body
 *   is read.
 */
export function createFastServer(handler: FastHandler, fallback: http.Server, opts: FastServerOptions): net.Server & { closeAll(): void } {
  const pool: ConnectionPool = {
    conns: new Set<net.Socket>(),
    fast: new Set<FastConnection>(),
    fallback,
    keepAliveMs: opts.keepAliveMs,
    bodyLimit: opts.bodyLimit,
    fastBodyMax: Math.min(opts.bodyLimit, FAST_BODY_MAX),
    handed: new WeakMap(),
  };
  // answers the Node server owes per handed-over connection (HandedOff feeds its parser by them)
  fallback.on('request', (req: http.IncomingMessage, res: http.ServerResponse) => {
    const h = pool.handed.get(req.socket);
    if (h === undefined) return;
    h.owed++;
    res.once('close', () => {
      h.owed--;
      h.pump();
    });
  });
  const checkEveryMs = Math.min(30_000, Math.max(25, Math.floor(Math.min(opts.headersTimeoutMs, opts.requestTimeoutMs) / 4)));
  guardFallback(fallback, opts, checkEveryMs);
  // the fast connections' deadlines and inactivity (FastConnection.sweep): every eighth of the
  // smallest limit, which is then enforced at most a quarter late (two intervals)
  const sweepEveryMs = Math.min(30_000, Math.max(25, Math.floor(Math.min(opts.headersTimeoutMs, opts.requestTimeoutMs, opts.keepAliveMs) / 8)));
  const busy =
    `HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json; charset=utf-8\r\ncontent-length: ${Buffer.byteLength(opts.busyBody)}\r\n` +
    `Retry-After: ${BUSY_RETRY_AFTER_S}\r\nConnection: close\r\n\r\n${opts.busyBody}`;
  // allowHalfOpen: a client that half-closes after its request still gets the answer (as in node:http)
  const server = net.createServer(FAST_SERVER_OPTIONS, (socket) => {
    if (pool.conns.size >= opts.maxConnections) return closeWith(socket, busy);
    pool.conns.add(socket);
    readWithoutStream(socket);
    new FastConnection(socket, handler, pool);
  });
  const timer = setInterval(() => {
    const now = Date.now();
    for (const c of pool.fast) c.sweep(now, opts.keepAliveMs, opts.headersTimeoutMs, opts.requestTimeoutMs);
  }, sweepEveryMs);
  timer.unref();
  let stopped = false;
  const stop = () => {
    if (stopped) return;
    stopped = true;
    clearInterval(timer);
    // stops the deadline checks of the Node server (it never listened: nothing else is closed)
    if (!fallback.listening) fallback.close();
  };
  server.once('close', stop);
  return Object.assign(server, {
    closeAll(): void {
      for (const s of pool.conns) s.destroy();
      pool.conns.clear();
      stop();
    },
  });
}

/**
 * Sets `fallback`'s Node deadlines to the front's and starts its deadline checks: `node:http`
 * starts them when it begins listening (its `'listening'` handler), which a server that is only
 * given connections never does. Its `'clientError'` handler then gets `ERR_HTTP_REQUEST_TIMEOUT`
 * (answer 408, see {@link clientErrorStatus}).
 */
function guardFallback(fallback: http.Server, opts: FastServerOptions, checkEveryMs: number): void {
  fallback.headersTimeout = opts.headersTimeoutMs;
  fallback.requestTimeout = opts.requestTimeoutMs;
  fallback.keepAliveTimeout = opts.keepAliveMs;
  // inactivity limit of a handed-over connection (e.g. a client that does not read its answers)
  fallback.timeout = opts.keepAliveMs;
  (fallback as http.Server & { connectionsCheckingInterval: number }).connectionsCheckingInterval = checkEveryMs;
  // a client that half-closes after its requests gets their answers, then the close (as on the
  // fast path); without this `node:http` drops the requests whose answers are not written yet
  (fallback as http.Server & { httpAllowHalfOpen: boolean }).httpAllowHalfOpen = true;
  if (!fallback.listening) fallback.emit('listening');
}

/**
 * Status and reason phrase of the answer to a `node:http` `'clientError'` (the areas'
 * handlers of the Node servers behind the fast front): 408 for a passed deadline, 431 for an
 * oversized head, 400 otherwise — what `node:http`'s own handler answers.
 */
export function clientErrorStatus(err: NodeJS.ErrnoException): [number, string] {
  if (err.code === 'ERR_HTTP_REQUEST_TIMEOUT') return [408, 'Request Timeout'];
  if (err.code === 'HPE_HEADER_OVERFLOW') return [431, 'Request Header Fields Too Large'];
  return [400, 'Bad Request'];
}
