/**
 * The HTTP/1.1 client deliveries go through: svc's own, on `node:net` / `node:tls` sockets.
 *
 * Why not undici: per delivered message undici validated every header again in `processHeader`
 * (~37,000 CPU instructions: a regular expression per value, lower-casing and dictionary lookups
 * per name), and read each response through a `readable`-mode stream (two `process.nextTick`s per
 * read chunk); `docs/readme/queue-bench.md` ("Fourth pass", "Sixth pass") has the numbers. Here a
 * request is one string built from the flat header list, checked by one regular expression per
 * value (once for a value repeated right after: the `Upstash-`/`Svc-` pairs) and a cached check
 * per name, and written with its body in one `write`; a plain-TCP response is read through the
 * socket's `onread` buffer (no stream machinery per read: the bytes are parsed in the read
 * callback, out of one buffer shared by every socket of the client).
 *
 * What it does, as undici did for delivery (`Agent` with `pipelining: 1`):
 * - a keep-alive pool per origin (`scheme://host:port`), at most `connectionsPerOrigin`
 *   connections; requests past it wait in the origin's queue (FIFO). An idle connection is kept
 *   30 s, or the server's `Keep-Alive: timeout=N` hint less 2 s (up to 600 s; none when that is
 *   not positive); one that the server closes while idle leaves the pool when its close is seen.
 * - request head as undici wrote it (byte-identical): `METHOD path HTTP/1.1`, `host: h[:port]`,
 *   `connection: keep-alive` (`close` for HEAD), the headers as given (`name: value`, same
 *   spelling and order), `content-length` for a non-empty body and for an empty body of a method
 *   that expects one (POST, PUT, PATCH, QUERY, PROPFIND, PROPPATCH); a body on another method
 *   closes the connection after the response.
 * - responses: status line, headers, bodies framed by `Content-Length`, `Transfer-Encoding:
 *   chunked` (trailers read and dropped) or the connection's close (RFC 9112 section 6.3); no
 *   body for HEAD, 204, 304; 1xx heads skipped (101 is an error: no upgrade was asked for). The
 *   body is kept up to `maxResponseBytes`; past it the attempt ends at once with the status and
 *   what was kept, and the connection is closed (the rest is not read).
 * - timeouts: the whole attempt (`timeoutMs` per request: waiting for a connection, connecting,
 *   sending, the response head and body), and connecting (10 s, undici's default).
 * - no redirect is followed (a 3xx is the attempt's outcome).
 * - https verifies the certificate (Node's default trust store, `NODE_EXTRA_CA_CERTS`) and the
 *   host name (SNI for a name, none for an address literal), ALPN `http/1.1`, TLS sessions reused
 *   per origin.
 * - `lookup` (the `dns.lookup` shape) resolves names: {@link HttpSender} gives the SSRF-checking
 *   one (`src/private-address.ts`), which sees every resolved address before a connect.
 * - a kept-alive connection that fails (reset, or closed by the server) before any byte of the
 *   response is retried once on a new connection: the server most likely closed it while idle,
 *   as the request was sent. The destination may have had it (at-least-once allows a second
 *   delivery); no outcome is lost, as none had arrived. A new connection is never retried.
 *
 * Every failure settles the request with an `error` string; nothing throws.
 */
import type dns from 'node:dns';
import net from 'node:net';
import tls from 'node:tls';
import type { AttemptOutcome, HeaderMap } from '../model.js';
import { canonicalHeader } from '../message-json.js';

export interface DeliveryClientOptions {
  /** Most connections (open or opening) per origin. */
  connectionsPerOrigin: number;
  /** Largest response body kept (bytes). */
  maxResponseBytes: number;
  /** Local address connections are made from (`localAddress`). */
  egressAddress?: string;
  /** Name resolution for connects (`dns.lookup` shape); default Node's. */
  lookup?: typeof dns.lookup;
  /** Idle keep-alive time without a server hint (ms); default 30,000. */
  keepAliveMs?: number;
  /** Connect timeout (ms); default 10,000. */
  connectTimeoutMs?: number;
  /** Largest response head (bytes); default 16 KiB (Node's `--max-http-header-size`). */
  maxHeadBytes?: number;
}

/** One request: `headers` is the flat `[name, value, ...]` list, written as given. */
export interface ClientRequest {
  /** `URL.origin` of the destination (`http:` or `https:`). */
  origin: string;
  /** Path and query (`URL.pathname + URL.search`). */
  path: string;
  method: string;
  headers: string[];
  /**
   * A header value svc built from characters a field value may carry (the `Upstash-Signature`
   * JWT: base64url and dots), not scanned again; the same string object as in `headers`.
   */
  trusted?: string;
  /** Null for no body. */
  body: Buffer | null;
  /** The whole attempt's time limit (ms). */
  timeoutMs: number;
}

const KEEP_ALIVE_THRESHOLD_MS = 2_000;
const KEEP_ALIVE_MAX_MS = 600_000;
/** Bodies up to this size are copied behind the head (one buffer, one write); larger ones are written after it (writev). */
const COPY_BODY_MAX = 16 * 1024;
const READ_BUFFER_BYTES = 64 * 1024;

/** RFC 9110 `token` (header names, methods). */
const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
/** A character a header value may not carry (RFC 9110 5.5: no CR, LF, NUL or other controls but HTAB; latin1 only). */
const BAD_VALUE = /[^\t\x20-\x7e\x80-\xff]/;
/** A character a request target may not carry (visible latin1 only, as undici). */
const BAD_PATH = /[^\u0021-\u00ff]/;
const EXPECTS_BODY = new Set(['POST', 'PUT', 'PATCH', 'QUERY', 'PROPFIND', 'PROPPATCH']);

/** Header names checked once (bounded): the same few names repeat. */
const goodNames = new Set<string>();
function validName(name: string): boolean {
  if (goodNames.has(name)) return true;
  if (!TOKEN.test(name)) return false;
  if (goodNames.size >= 1024) goodNames.clear();
  goodNames.add(name);
  return true;
}

/** Canonical header names seen in responses (`content-type` -> `Content-Type`), bounded. */
const canonicalCache = new Map<string, string>();
function canonical(raw: string): string {
  let c = canonicalCache.get(raw);
  if (c === undefined) {
    c = canonicalHeader(raw);
    if (canonicalCache.size < 1000) canonicalCache.set(raw, c);
  }
  return c;
}

/**
 * The outcome of an attempt that got a response. Its `headers` are decoded from the text of the
 * response's header lines at their first read, not per response: a delivered message's response
 * headers are read only when something needs them (a callback, a failed attempt's log row, a
 * workflow step, `Retry-After`).
 */
export class ResponseOutcome implements AttemptOutcome {
  private decoded: HeaderMap | undefined;
  constructor(
    readonly status: number,
    /** The header lines as latin1 text, `name: value\r\n` each (already checked by the parser). */
    private raw: string | undefined,
    public body: Buffer,
    public error: string | undefined,
  ) {}

  get headers(): HeaderMap {
    if (this.decoded === undefined) {
      const h: HeaderMap = {};
      const text = this.raw;
      if (text !== undefined) {
        let pos = 0;
        while (pos < text.length) {
          let le = text.indexOf('\r\n', pos);
          if (le < 0) le = text.length;
          const colon = text.indexOf(':', pos);
          if (colon > pos && colon < le) {
            const name = canonical(text.slice(pos, colon));
            const value = text.slice(colon + 1, le).trim();
            const prev = h[name];
            if (prev) prev.push(value);
            else h[name] = [value];
          }
          pos = le + 2;
        }
      }
      this.decoded = h;
      this.raw = undefined;
    }
    return this.decoded;
  }

  set headers(h: HeaderMap) {
    this.decoded = h;
    this.raw = undefined;
  }
}

/** One request in flight or waiting for a connection. Settles exactly once. */
class Attempt {
  done = false;
  conn: Conn | undefined;
  /** Already retried once on a new connection after a kept-alive one failed. */
  retried = false;
  readonly timer: NodeJS.Timeout;

  constructor(
    /** The head, or head and body in one buffer. */
    readonly data: Buffer,
    /** A body written after `data` (large bodies), else undefined. */
    readonly tail: Buffer | undefined,
    /** The response has no body (HEAD). */
    readonly noBody: boolean,
    /** Close the connection after the response (HEAD, a body on a method that expects none). */
    readonly closeAfter: boolean,
    readonly timeoutMs: number,
    private readonly settle: (o: AttemptOutcome) => void,
  ) {
    this.timer = setTimeout(() => this.timeout(), timeoutMs);
  }

  finish(o: AttemptOutcome): void {
    if (this.done) return;
    this.done = true;
    clearTimeout(this.timer);
    this.settle(o);
  }

  fail(reason: string): void {
    this.finish({ error: `delivery failed: ${reason}` });
  }

  private timeout(): void {
    const c = this.conn;
    this.fail(`timeout after ${this.timeoutMs} ms`);
    if (c !== undefined) c.abort(); // waiting in the queue: skipped when its turn comes
  }
}

/** Parser states of a connection. */
const enum S {
  /** No request on it. */
  Idle,
  Head,
  /** Body of `left` more bytes (Content-Length). */
  Length,
  /** Chunked body (sub-state in `cs`). */
  Chunked,
  /** Body up to the connection's close. */
  Close,
}

/** Chunked-body sub-states. */
const enum CS {
  Size,
  /** Chunk extension, up to CR. */
  Ext,
  SizeLf,
  Data,
  DataCr,
  DataLf,
  /** Trailer lines; `lineLen` counts the current line's bytes. */
  Trailer,
  TrailerLf,
}

const CRLFCRLF = Buffer.from('\r\n\r\n', 'latin1');
const CONTENT_LENGTH = Buffer.from('content-length', 'latin1');
const TRANSFER_ENCODING = Buffer.from('transfer-encoding', 'latin1');
const CONNECTION = Buffer.from('connection', 'latin1');
const KEEP_ALIVE = Buffer.from('keep-alive', 'latin1');

/**
 * Whether `buf[start, start + lower.length)` is the header name `lower` in any case. `| 0x20`
 * lower-cases ASCII letters; the only other byte it could turn into a letter or `-` is a control
 * byte, which a name never holds (the parser refuses it first).
 */
function nameIs(buf: Buffer, start: number, lower: Buffer): boolean {
  for (let k = 0; k < lower.length; k++) if ((buf[start + k] | 0x20) !== lower[k]) return false;
  return true;
}

/** One connection of an origin's pool. */
class Conn {
  readonly socket: net.Socket;
  attempt: Attempt | undefined;
  /** Responses completed on it (a kept-alive connection has at least one). */
  uses = 0;
  dead = false;
  connected = false;
  idleAt = 0;
  idleMs: number;
  private connectTimer: NodeJS.Timeout | undefined;
  // the response being read
  private state = S.Idle;
  private gotByte = false;
  private pend: Buffer | undefined;
  private status = 0;
  private headLines: string | undefined;
  private left = 0;
  private cs = CS.Size;
  private digits = 0;
  private lineLen = 0;
  private parts: Buffer[] = [];
  private size = 0;
  private reuse = true;

  constructor(
    readonly pool: Pool,
    first: Attempt,
  ) {
    const client = pool.client;
    this.idleMs = client.keepAliveMs;
    this.attempt = first;
    first.conn = this;
    const o = client.opts;
    if (pool.secure) {
      const s = tls.connect({
        host: pool.host,
        port: pool.port,
        servername: pool.servername,
        session: pool.session,
        ALPNProtocols: ['http/1.1'],
        lookup: o.lookup,
        // passed on to the TCP connect (the TLS options' type omits it)
        ...({ localAddress: o.egressAddress } as object),
      });
      s.on('session', (session: Buffer) => (pool.session = session));
      s.on('data', (b: Buffer) => this.bytes(b, b.length));
      s.once('secureConnect', () => this.onConnect());
      this.socket = s;
    } else {
      this.socket = net.connect({
        host: pool.host,
        port: pool.port,
        localAddress: o.egressAddress,
        lookup: o.lookup,
        onread: { buffer: client.readBuffer, callback: (n: number, b: Uint8Array) => this.bytes(b as Buffer, n) },
      });
      this.socket.once('connect', () => this.onConnect());
    }
    this.socket.on('error', (err: Error) => this.onError(err));
    this.socket.on('end', () => this.onEnd());
    this.socket.on('close', () => this.onClose());
    this.connectTimer = setTimeout(() => this.connectTimeout(), client.connectTimeoutMs);
  }

  private onConnect(): void {
    clearTimeout(this.connectTimer);
    this.connected = true;
    this.socket.setNoDelay(true);
    this.socket.setKeepAlive(true, 60_000);
    const a = this.attempt;
    if (a === undefined) return this.pool.release(this);
    this.send(a);
  }

  private connectTimeout(): void {
    const a = this.attempt;
    this.attempt = undefined;
    a?.fail(`connect timeout after ${this.pool.client.connectTimeoutMs} ms (${this.pool.host}:${this.pool.port})`);
    this.destroy();
  }

  /** Starts `a` on this (connected, idle) connection. */
  start(a: Attempt): void {
    this.attempt = a;
    a.conn = this;
    this.send(a);
  }

  private send(a: Attempt): void {
    this.state = S.Head;
    this.gotByte = false;
    this.reuse = !a.closeAfter;
    const s = this.socket;
    if (a.tail === undefined) s.write(a.data);
    else {
      s.cork();
      s.write(a.data);
      s.write(a.tail);
      s.uncork();
    }
  }

  /** The attempt timed out: the connection goes (its response, if any, is not wanted). */
  abort(): void {
    this.attempt = undefined;
    this.destroy();
  }

  destroy(): void {
    if (!this.socket.destroyed) this.socket.destroy();
    this.gone();
  }

  /** Leaves the pool (once). */
  private gone(): void {
    if (this.dead) return;
    this.dead = true;
    clearTimeout(this.connectTimer);
    this.state = S.Idle;
    this.parts = [];
    this.pend = undefined;
    this.headLines = undefined;
    this.pool.removed(this);
  }

  private onError(err: Error): void {
    const code = (err as NodeJS.ErrnoException).code;
    this.failAttempt(err.message || String(err), code === 'ECONNRESET' || code === 'EPIPE');
    this.destroy();
  }

  private onEnd(): void {
    if (this.attempt !== undefined && this.state === S.Close) this.complete();
    else this.failAttempt('other side closed', true);
    this.destroy();
  }

  private onClose(): void {
    this.failAttempt('other side closed', true);
    this.gone();
  }

  /**
   * Ends the current attempt with `reason`, or sends it again on a new connection when this one
   * was kept alive, no response byte had come, and the failure is a reset or close (`retryable`).
   */
  private failAttempt(reason: string, retryable: boolean): void {
    const a = this.attempt;
    if (a === undefined) return;
    this.attempt = undefined;
    a.conn = undefined;
    if (a.done) return;
    if (retryable && this.connected && this.uses > 0 && !this.gotByte && !a.retried && !this.pool.client.closed) {
      a.retried = true;
      this.pool.dispatch(a, true);
      return;
    }
    a.fail(reason);
  }

  /** Bytes `b[0, n)` read from the socket (for plain TCP, `b` is the client's shared read buffer: copied before kept). */
  private bytes(b: Buffer, n: number): true {
    this.read(b, n);
    return true; // keep reading
  }

  private read(b: Buffer, n: number): void {
    if (this.attempt === undefined || this.state === S.Idle) {
      // bytes nobody asked for (on an idle connection, or after the response): not reusable
      this.destroy();
      return;
    }
    this.gotByte = true;
    let i = 0;
    while (i < n && this.attempt !== undefined) {
      switch (this.state) {
        case S.Head: {
          i = this.head(b, i, n);
          if (i < 0) return;
          break;
        }
        case S.Length: {
          const k = Math.min(this.left, n - i);
          this.left -= k;
          if (!this.keep(b, i, k)) return;
          i += k;
          if (this.left === 0) this.complete();
          break;
        }
        case S.Chunked:
          i = this.chunked(b, i, n);
          if (i < 0) return;
          break;
        case S.Close:
          if (!this.keep(b, i, n - i)) return;
          i = n;
          break;
        default:
          i = n;
      }
    }
    if (this.attempt !== undefined) return;
    // the response is complete: reused unless bytes came past it (the server does not follow the protocol)
    if (this.reuse && i >= n && !this.dead) this.pool.release(this);
    else this.destroy();
  }

  /** Reads the response head from `b[i, n)` (with the pending start of it); returns where the body starts, or -1 when the head is not complete (or was refused). */
  private head(b: Buffer, i: number, n: number): number {
    let buf: Buffer;
    let from: number;
    let base: number; // index in `buf` of b[i]
    if (this.pend === undefined) {
      buf = b;
      from = i;
      base = i;
    } else {
      const p = this.pend;
      buf = Buffer.concat([p, b.subarray(i, n)]);
      from = 0;
      base = p.length;
      n = buf.length;
    }
    const max = this.pool.client.maxHeadBytes;
    const searchFrom = this.pend === undefined ? from : Math.max(0, this.pend.length - 3);
    const end = buf.indexOf(CRLFCRLF, searchFrom);
    if (end < 0 || end + 4 > n) {
      if (n - from > max) {
        this.protocolError('response head too large');
        return -1;
      }
      this.pend = Buffer.from(buf.subarray(from, n)); // a copy: `b` may be the shared read buffer
      return -1;
    }
    if (end + 4 - from > max) {
      this.protocolError('response head too large');
      return -1;
    }
    this.pend = undefined;
    if (!this.parseHead(buf, from, end)) return -1;
    const next = end + 4;
    // where the body starts in `b`
    return i + (next - base);
  }

  /** Parses the head `buf[from, end)` (end at its CRLFCRLF) and sets the body's framing; false when refused. */
  private parseHead(buf: Buffer, from: number, end: number): boolean {
    // status line: HTTP/1.x SP 3DIGIT [SP reason]
    if (
      end - from < 12 ||
      buf[from] !== 72 || buf[from + 1] !== 84 || buf[from + 2] !== 84 || buf[from + 3] !== 80 || buf[from + 4] !== 47 ||
      buf[from + 5] !== 49 || buf[from + 6] !== 46 || buf[from + 8] !== 32
    ) {
      this.protocolError('invalid response status line');
      return false;
    }
    const minor = buf[from + 7] - 48;
    const d0 = buf[from + 9] - 48;
    const d1 = buf[from + 10] - 48;
    const d2 = buf[from + 11] - 48;
    if (minor < 0 || minor > 9 || d0 < 1 || d0 > 5 || d1 < 0 || d1 > 9 || d2 < 0 || d2 > 9 || (end - from > 12 && buf[from + 12] !== 32 && buf[from + 12] !== 13)) {
      this.protocolError('invalid response status line');
      return false;
    }
    const status = d0 * 100 + d1 * 10 + d2;
    let pos = from + 12;
    while (pos < end && buf[pos] !== 13) {
      const c = buf[pos];
      if ((c < 32 && c !== 9) || c === 127) {
        this.protocolError('invalid response status line');
        return false;
      }
      pos++;
    }
    const linesFrom = pos + 2;
    // header lines: find the framing ones; the rest are decoded only when read (ResponseOutcome)
    // from this text (one latin1 decode of all the lines; a value is a slice of it)
    const text = linesFrom < end ? buf.toString('latin1', linesFrom, end + 2) : undefined;
    let length = -1;
    let chunked = false;
    let hasTe = false;
    let close = minor === 0;
    let keepAliveHint = -1;
    pos = linesFrom;
    while (pos < end) {
      const start = pos;
      let colon = -1;
      for (; pos < end + 2; pos++) {
        const c = buf[pos];
        if (c === 13) break;
        if (colon < 0) {
          if (c === 58) colon = pos;
          else if (c <= 32 || c === 127) return this.protocolError('invalid response header');
        } else if ((c < 32 && c !== 9) || c === 127) return this.protocolError('invalid response header');
      }
      if (buf[pos + 1] !== 10 || colon <= start) return this.protocolError('invalid response header');
      const nameLen = colon - start;
      if (nameLen === 14 && nameIs(buf, start, CONTENT_LENGTH)) {
        // digits only (OWS around them), as Node's parser
        let vs = colon + 1;
        let ve = pos;
        while (vs < ve && (buf[vs] === 32 || buf[vs] === 9)) vs++;
        while (ve > vs && (buf[ve - 1] === 32 || buf[ve - 1] === 9)) ve--;
        if (ve === vs || ve - vs > 15) return this.protocolError('invalid response content-length');
        let v = 0;
        for (let k = vs; k < ve; k++) {
          const d = buf[k] - 48;
          if (d < 0 || d > 9) return this.protocolError('invalid response content-length');
          v = v * 10 + d;
        }
        if (length >= 0 && length !== v) return this.protocolError('conflicting response content-length');
        length = v;
      } else if (nameLen === 17 && nameIs(buf, start, TRANSFER_ENCODING)) {
        hasTe = true;
        const codings = text!.slice(colon + 1 - linesFrom, pos - linesFrom).toLowerCase().split(',');
        chunked = codings[codings.length - 1].trim() === 'chunked';
      } else if (nameLen === 10 && nameIs(buf, start, CONNECTION)) {
        const value = text!.slice(colon + 1 - linesFrom, pos - linesFrom);
        if (/(?:^|,)[ \t]*close[ \t]*(?:,|$)/i.test(value)) close = true;
        else if (minor === 0 && /(?:^|,)[ \t]*keep-alive[ \t]*(?:,|$)/i.test(value)) close = false;
      } else if (nameLen === 10 && nameIs(buf, start, KEEP_ALIVE)) {
        const m = /(?:^|[,;\s])timeout\s*=\s*(\d+)/i.exec(text!.slice(colon + 1 - linesFrom, pos - linesFrom));
        if (m) keepAliveHint = Number(m[1]) * 1000;
      }
      pos += 2;
    }
    if (status < 200) {
      if (status === 101) return this.protocolError('unexpected 101 response (no upgrade was asked for)');
      return true; // informational: the final head follows (state stays Head)
    }
    this.status = status;
    this.headLines = text; // with the last CRLF
    if (close) this.reuse = false;
    if (keepAliveHint >= 0) {
      const ms = Math.min(keepAliveHint - KEEP_ALIVE_THRESHOLD_MS, KEEP_ALIVE_MAX_MS);
      if (ms <= 0) this.reuse = false;
      else this.idleMs = ms;
    }
    if (this.attempt!.noBody || status === 204 || status === 304) {
      this.complete();
    } else if (hasTe) {
      // Transfer-Encoding wins over Content-Length (RFC 9112 6.3), and such a connection is not reused
      if (length >= 0) this.reuse = false;
      if (chunked) {
        this.state = S.Chunked;
        this.cs = CS.Size;
        this.left = 0;
        this.digits = 0;
      } else {
        this.state = S.Close;
        this.reuse = false;
      }
    } else if (length >= 0) {
      this.left = length;
      this.state = S.Length;
      if (length === 0) this.complete();
    } else {
      this.state = S.Close;
      this.reuse = false;
    }
    return true;
  }

  /** Reads chunked framing and data from `b[i, n)`; returns the next index, or -1 when the attempt ended. */
  private chunked(b: Buffer, i: number, n: number): number {
    while (i < n) {
      const c = b[i];
      switch (this.cs) {
        case CS.Size: {
          let d = -1;
          if (c >= 48 && c <= 57) d = c - 48;
          else if (c >= 97 && c <= 102) d = c - 87;
          else if (c >= 65 && c <= 70) d = c - 55;
          if (d >= 0) {
            if (++this.digits > 12) return this.chunkError();
            this.left = this.left * 16 + d;
          } else if (this.digits === 0) return this.chunkError();
          else if (c === 13) this.cs = CS.SizeLf;
          else if (c === 59 || c === 32 || c === 9) this.cs = CS.Ext;
          else return this.chunkError();
          i++;
          break;
        }
        case CS.Ext:
          if (c === 13) this.cs = CS.SizeLf;
          else if (c === 10) return this.chunkError();
          i++;
          break;
        case CS.SizeLf:
          if (c !== 10) return this.chunkError();
          i++;
          if (this.left === 0) {
            this.cs = CS.Trailer;
            this.lineLen = 0;
          } else this.cs = CS.Data;
          break;
        case CS.Data: {
          const k = Math.min(this.left, n - i);
          this.left -= k;
          if (!this.keep(b, i, k)) return -1;
          i += k;
          if (this.left === 0) this.cs = CS.DataCr;
          break;
        }
        case CS.DataCr:
          if (c !== 13) return this.chunkError();
          this.cs = CS.DataLf;
          i++;
          break;
        case CS.DataLf:
          if (c !== 10) return this.chunkError();
          this.cs = CS.Size;
          this.digits = 0;
          i++;
          break;
        case CS.Trailer:
          if (c === 13) this.cs = CS.TrailerLf;
          else if (c === 10) return this.chunkError();
          else if (++this.lineLen > this.pool.client.maxHeadBytes) return this.chunkError();
          i++;
          break;
        case CS.TrailerLf:
          if (c !== 10) return this.chunkError();
          i++;
          if (this.lineLen === 0) {
            this.complete();
            return i;
          }
          this.lineLen = 0;
          this.cs = CS.Trailer;
          break;
      }
    }
    return i;
  }

  private chunkError(): number {
    this.protocolError('invalid chunked response body');
    return -1;
  }

  /**
   * Keeps `b[i, i + k)` of the body (a copy) up to the size limit; past it ends the attempt with
   * the status and what was kept and closes the connection (returns false).
   */
  private keep(b: Buffer, i: number, k: number): boolean {
    if (k === 0) return true;
    const max = this.pool.client.opts.maxResponseBytes;
    if (this.size < max) {
      const take = Math.min(k, max - this.size);
      const copy = Buffer.allocUnsafe(take);
      b.copy(copy, 0, i, i + take);
      this.parts.push(copy);
    }
    this.size += k;
    if (this.size > max) {
      // the kept part is all svc uses: the attempt ends with the status now and the rest is not
      // read (reading a large answer to its end could outlast the attempt's timeout and fail a
      // delivery the destination took, which would then be retried)
      this.reuse = false;
      this.complete();
      this.destroy();
      return false;
    }
    return true;
  }

  /** The response is complete (or cut at the limit): settles the attempt; the caller reuses or closes the connection. */
  private complete(): void {
    const a = this.attempt!;
    const status = this.status;
    const parts = this.parts;
    const body = parts.length === 1 ? parts[0] : parts.length === 0 ? EMPTY : Buffer.concat(parts);
    const ok = status >= 200 && status < 300;
    const outcome = new ResponseOutcome(status, this.headLines, body, ok ? undefined : `destination answered ${status}`);
    this.attempt = undefined;
    a.conn = undefined;
    this.state = S.Idle;
    this.parts = [];
    this.size = 0;
    this.headLines = undefined;
    this.uses++;
    a.finish(outcome);
  }

  private protocolError(reason: string): false {
    const a = this.attempt;
    this.attempt = undefined;
    if (a !== undefined) a.conn = undefined;
    a?.fail(reason);
    this.destroy();
    return false;
  }
}

const EMPTY = Buffer.alloc(0);

/** The connections and waiting requests of one origin. */
class Pool {
  readonly idle: Conn[] = [];
  readonly all = new Set<Conn>();
  readonly queue: Attempt[] = [];
  readonly secure: boolean;
  /** Host to connect to (an IPv6 literal without brackets). */
  readonly host: string;
  readonly port: number;
  /** `host: ...\r\n` as undici wrote it (`URL.hostname`, IPv6 in brackets, and the port when not the scheme's default). */
  readonly hostLine: string;
  readonly servername: string | undefined;
  session: Buffer | undefined;

  constructor(
    readonly client: DeliveryClient,
    readonly origin: string,
  ) {
    const u = new URL(origin);
    this.secure = u.protocol === 'https:';
    this.host = u.hostname.startsWith('[') ? u.hostname.slice(1, -1) : u.hostname;
    this.port = u.port ? Number(u.port) : this.secure ? 443 : 80;
    this.hostLine = `host: ${u.hostname}${u.port ? `:${u.port}` : ''}\r\n`;
    this.servername = net.isIP(this.host) ? undefined : this.host;
  }

  /** Runs `a` on an idle connection, a new one (at most `connectionsPerOrigin`), or queues it; `fresh` skips idle connections and goes first in the queue. */
  dispatch(a: Attempt, fresh: boolean): void {
    if (!fresh) {
      const now = Date.now();
      while (this.idle.length > 0) {
        const c = this.idle.pop()!;
        if (!c.dead && !c.socket.destroyed && now - c.idleAt < c.idleMs) {
          c.socket.ref();
          return c.start(a);
        }
        c.destroy();
      }
    }
    if (this.all.size < this.client.opts.connectionsPerOrigin) {
      this.all.add(new Conn(this, a));
      return;
    }
    if (fresh) this.queue.unshift(a);
    else this.queue.push(a);
  }

  /** The next waiting request that has not timed out. */
  private next(): Attempt | undefined {
    while (this.queue.length > 0) {
      const a = this.queue.shift()!;
      if (!a.done) return a;
    }
    return undefined;
  }

  /** `c` finished a response and may be reused. */
  release(c: Conn): void {
    const a = this.next();
    if (a !== undefined) return c.start(a);
    c.idleAt = Date.now();
    c.socket.unref(); // an idle connection does not keep the process alive (as undici's)
    this.idle.push(c);
    this.client.sweepSoon();
  }

  /** `c` is closed. */
  removed(c: Conn): void {
    this.all.delete(c);
    const at = this.idle.indexOf(c);
    if (at >= 0) this.idle.splice(at, 1);
    if (this.client.closed) return;
    if (this.queue.length > 0 && this.all.size < this.client.opts.connectionsPerOrigin) {
      const a = this.next();
      if (a !== undefined) this.all.add(new Conn(this, a));
    }
    // nothing left (e.g. an origin whose connects all fail): forgotten, so origins do not pile up
    if (this.all.size === 0 && this.queue.length === 0) this.client.forget(this);
  }

  /** Closes connections idle past their time; true when the pool is empty (may be dropped). */
  sweep(now: number): boolean {
    for (let k = this.idle.length - 1; k >= 0; k--) {
      const c = this.idle[k];
      if (now - c.idleAt >= c.idleMs) c.destroy();
    }
    return this.all.size === 0 && this.queue.length === 0;
  }
}

/** Keep-alive HTTP/1.1 client of the delivery side (see the module comment). */
export class DeliveryClient {
  readonly keepAliveMs: number;
  readonly connectTimeoutMs: number;
  readonly maxHeadBytes: number;
  /** One read buffer for every plain-TCP socket: each read is parsed (and what is kept, copied) in its callback. */
  readonly readBuffer = Buffer.allocUnsafe(READ_BUFFER_BYTES);
  closed = false;
  private readonly pools = new Map<string, Pool>();
  private sweeper: NodeJS.Timeout | undefined;

  constructor(readonly opts: DeliveryClientOptions) {
    this.keepAliveMs = opts.keepAliveMs ?? 30_000;
    this.connectTimeoutMs = opts.connectTimeoutMs ?? 10_000;
    this.maxHeadBytes = opts.maxHeadBytes ?? 16 * 1024;
  }

  /**
   * Sends `req` and settles with its outcome: a response (`status`, lazily decoded `headers`,
   * `body` up to the limit; `error` set unless 2xx) or `{error}` (`delivery failed: ...`).
   * Header names must be tokens and values latin1 without controls (else the request is not
   * sent: `delivery failed: invalid <name> header`).
   */
  request(req: ClientRequest, settle: (o: AttemptOutcome) => void): void {
    if (this.closed) return settle({ error: 'delivery failed: the sender is closed' });
    const { method, body } = req;
    if (!validName(method)) return settle({ error: 'delivery failed: invalid request method' });
    if (BAD_PATH.test(req.path)) return settle({ error: 'delivery failed: invalid request path' });
    let pool = this.pools.get(req.origin);
    if (pool === undefined) {
      if (!req.origin.startsWith('http://') && !req.origin.startsWith('https://')) return settle({ error: 'delivery failed: invalid destination url' });
      pool = new Pool(this, req.origin);
      this.pools.set(req.origin, pool);
    }
    const isHead = method === 'HEAD';
    const h = req.headers;
    let lines = '';
    let checked: string | undefined;
    for (let k = 0; k + 1 < h.length; k += 2) {
      const name = h[k];
      const value = h[k + 1];
      // a value given again right after (each `Upstash-X` and `Svc-X` pair) is the same string:
      // checked once; the signature's ~400 characters (`trusted`) not at all
      if (value !== checked && value !== req.trusted) {
        if (BAD_VALUE.test(value)) return settle({ error: `delivery failed: invalid ${name} header` });
        checked = value;
      }
      if (!validName(name)) return settle({ error: `delivery failed: invalid ${name} header` });
      lines += `${name}: ${value}\r\n`;
    }
    let head = `${method} ${req.path} HTTP/1.1\r\n${pool.hostLine}${isHead ? 'connection: close\r\n' : 'connection: keep-alive\r\n'}${lines}`;
    const expects = EXPECTS_BODY.has(method);
    const bodyLen = body === null ? 0 : body.length;
    let closeAfter = isHead;
    if (bodyLen > 0) {
      head += `content-length: ${bodyLen}\r\n\r\n`;
      if (!expects) closeAfter = true;
    } else head += expects ? 'content-length: 0\r\n\r\n' : '\r\n';
    let data: Buffer;
    let tail: Buffer | undefined;
    if (bodyLen > 0 && bodyLen <= COPY_BODY_MAX) {
      data = Buffer.allocUnsafe(head.length + bodyLen);
      data.write(head, 0, 'latin1');
      body!.copy(data, head.length);
    } else {
      data = Buffer.from(head, 'latin1');
      if (bodyLen > 0) tail = body!;
    }
    pool.dispatch(new Attempt(data, tail, isHead, closeAfter, req.timeoutMs, settle), false);
  }

  /** Drops `pool` from the origin map (when it is still the one there). */
  forget(pool: Pool): void {
    if (this.pools.get(pool.origin) === pool) this.pools.delete(pool.origin);
  }

  /** Starts the idle sweep (once a second, not keeping the process alive) if it is not running. */
  sweepSoon(): void {
    if (this.sweeper !== undefined || this.closed) return;
    this.sweeper = setInterval(() => {
      const now = Date.now();
      for (const [key, pool] of this.pools) if (pool.sweep(now)) this.pools.delete(key);
      if (this.pools.size === 0) {
        clearInterval(this.sweeper);
        this.sweeper = undefined;
      }
    }, 1000);
    this.sweeper.unref();
  }

  /** Closes every connection; requests in flight or waiting settle with `delivery failed: the sender is closed`. */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    clearInterval(this.sweeper);
    this.sweeper = undefined;
    for (const pool of this.pools.values()) {
      for (const a of pool.queue.splice(0)) a.fail('the sender is closed');
      for (const c of [...pool.all]) {
        const a = c.attempt;
        c.abort();
        a?.fail('the sender is closed');
      }
    }
    this.pools.clear();
  }
}
