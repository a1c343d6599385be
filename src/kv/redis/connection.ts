/**
 * One RESP2 connection to Redis over `net` (unix socket or TCP) or `tls` (rediss://), with
 * RESP pipelining: any number of commands may be in flight; replies are matched to requests in
 * FIFO order (Redis answers in order on a connection). Also a tiny pool of such connections.
 *
 * Errors (catalogue `../errors.ts`): every in-flight request is rejected with a {@link KvError}
 * `databaseConnectionLost` when the socket closes (redis-server died, network error), and connecting
 * fails with `databaseUnreachable` / `databaseTimeout` (503), or `aclAuthFailed` (401) when AUTH is refused.
 */
import net from 'node:net';
import tls from 'node:tls';
import type { HistogramCell } from '../../metrics.js';
import { KvError, kvError } from '../errors.js';
import { encodeCommand, encodeCommands, RespError, RespParser, type Arg, type Reply } from '../resp.js';
import { OutBytes, PartialFrame, replyEnd } from './frames.js';

/** Where Redis listens: a unix socket `path`, or `host:port` (optionally TLS). */
export interface Endpoint {
  path?: string;
  host?: string;
  port?: number;
  tls?: boolean;
  /** Logical database to SELECT after AUTH (external mode `/db` in the URL); 0 = default. */
  db?: number;
  /** Extra trusted CA certificates (PEM) for TLS, added to Node's default roots. */
  ca?: Buffer;
}

/** The ACL user a connection authenticates as (`AUTH user password`); no password = no AUTH. */
export interface RedisUser {
  user?: string;
  password?: string;
}

interface Pending {
  n: number;
  replies: Reply[];
  raws: Buffer[] | undefined;
  /** Called once: with the completed request, or with the error that failed it (batches). */
  done: ((err: Error | null, p: Pending) => void) | undefined;
  /** Single commands ({@link RedisConnection.sendCb}): called once with the reply, no arrays built. */
  cb: ReplyCallback | undefined;
  /** Single commands: keep the raw bytes. */
  wantRaw: boolean;
  /** Commands of {@link RedisConnection.sendForwardCb}: called with each reply's bytes (and the error it is); `n` replies still to come. */
  fwd: ForwardCallback | undefined;
  /** Single commands: passed back to `cb` as its last argument (the caller's per-command value). */
  tag: string | undefined;
  /** `performance.now()` when written to the socket (only with {@link RedisConnection.rtt}). */
  t: number;
}

/**
 * Callback of {@link RedisConnection.sendCb}: the reply (and raw bytes when asked), or the error;
 * `tag` is the value given to `sendCb`.
 */
export type ReplyCallback = (err: Error | null, reply: Reply, raw: Buffer | undefined, tag?: string) => void;

/**
 * Callback of {@link RedisConnection.sendForwardCb}: the reply is `bytes[from .. to]` (valid during
 * the call only: copy or view what is kept), `error` its value when it is an error reply; or `err`
 * when the connection was lost (then `bytes` is empty).
 */
export type ForwardCallback = (err: Error | null, error: RespError | undefined, bytes: Buffer, from: number, to: number) => void;

/** Result of {@link RedisConnection.batch}: one reply per command, and raw bytes when asked. */
export interface BatchResult {
  replies: Reply[];
  raws: Buffer[] | undefined;
}

/** Where the chunks of one socket read by {@link readInto} go: `sink` once set, `chunks` until then. */
interface ReadSink {
  sink: ((chunk: Buffer) => void) | undefined;
  chunks: Buffer[];
}

/** Bytes of {@link sharedReadBuffer}: what Node's stream reads ask of libuv per read. */
const READ_BUFFER_BYTES = 64 * 1024;
let sharedReadBuffer: Buffer | undefined;

/**
 * The `onread` option of `net.connect` for a Redis socket: libuv reads into one buffer shared by
 * every connection of the process (reads run one at a time on the event loop, and each is copied
 * out before the next), and each read's bytes are copied into a buffer of their exact size
 * (`Buffer.allocUnsafe`: a slice of Node's pool when small) for `to`. Against a `'data'` listener
 * this saves, per read, the read buffer Node allocates (64 KiB, shrunk to the bytes read) and the
 * `Readable` stream's work (`push`, the `'data'` event, a `nextTick` to read more); `'end'`,
 * `'close'` and `'error'` come as before (Node's documented `onread`, `net.Socket` options).
 */
function readInto(to: ReadSink): net.OnReadOpts {
  sharedReadBuffer ??= Buffer.allocUnsafe(READ_BUFFER_BYTES);
  return {
    buffer: sharedReadBuffer,
    callback(n: number, buf: Uint8Array): boolean {
      const chunk = Buffer.allocUnsafe(n);
      chunk.set(n === buf.length ? buf : buf.subarray(0, n));
      if (to.sink !== undefined) to.sink(chunk);
      else to.chunks.push(chunk);
      return true;
    },
  };
}

const NO_REPLIES: Reply[] = [];
/** The bytes of a {@link ForwardCallback} of a lost connection. */
const NOTHING_HELD = Buffer.alloc(0);

export class RedisConnection {
  private readonly queue: Pending[] = [];
  private head = 0;
  private readonly parser: RespParser;
  private isClosed = false;
  private readonly closeListeners: (() => void)[] = [];
  private idleListeners: (() => void)[] | undefined;
  /** Receives replies that match no request (pub/sub messages, MONITOR lines). */
  onPush: ((reply: Reply) => void) | undefined;
  /** Receives what a {@link sendCb} callback threw (logged by the owner; never rethrown). */
  onCallbackError: ((err: unknown) => void) | undefined;
  /**
   * Observes each request's round trip, in seconds: from its write to the socket (a corked one's
   * when the cork is lifted) until the chunk that brought its last reply was read. The clock is
   * read once per write and once per chunk read, not per command: with many requests in flight
   * one `writev` and one read carry many.
   */
  rtt: HistogramCell | undefined;
  /** With {@link rtt}: `performance.now()` when the chunk being parsed was read. */
  private readAt = 0;
  /** With {@link rtt}: the requests written since the cork, whose write time is the uncork's. */
  private readonly corkedPending: Pending[] = [];

  private constructor(
    private readonly socket: net.Socket,
    early?: ReadSink,
  ) {
    this.parser = new RespParser(
      (reply, raw) => this.onReply(reply, raw),
      () => {
        const p = this.queue[this.head];
        return p !== undefined && (p.raws !== undefined || p.wantRaw);
      },
    );
    socket.setNoDelay(true);
    if (early === undefined) socket.on('data', (chunk: Buffer) => this.receive(chunk));
    else {
      // read by `onread` (see {@link connect}): what arrived before this object existed first
      early.sink = (chunk) => this.receive(chunk);
      for (const chunk of early.chunks.splice(0)) this.receive(chunk);
    }
    socket.on('error', () => {
      /* 'close' follows */
    });
    socket.on('close', () => this.fail(kvError('databaseConnectionLost')));
  }

  /** Parses one chunk read from the socket (its own memory: kept views stay valid). */
  private receive(chunk: Buffer): void {
    if (this.rtt !== undefined) this.readAt = performance.now();
    try {
      if (this.framed) this.feedFramed(chunk);
      else this.parser.feed(chunk);
    } catch (err) {
      this.fail(err instanceof KvError ? err : kvError('databaseProtocolError', (err as Error).message));
      this.socket.destroy();
    }
  }

  /**
   * Connects and authenticates. Resolves once AUTH (if any) succeeded. `clientName` (optional) is
   * set with `CLIENT SETNAME` (no spaces; errors ignored).
   * @throws KvError `databaseUnreachable` (connect failed), `databaseTimeout` (after `timeoutMs` ms), `aclAuthFailed`
   */
  static connect(endpoint: Endpoint, who: RedisUser, timeoutMs = 3000, clientName?: string): Promise<RedisConnection> {
    return new Promise((resolve, reject) => {
      let socket: net.Socket;
      const event = endpoint.tls ? 'secureConnect' : 'connect';
      // plain sockets are read with `onread` (TLS ones through their stream)
      const early: ReadSink | undefined = endpoint.tls ? undefined : { sink: undefined, chunks: [] };
      const onread = early === undefined ? undefined : readInto(early);
      if (endpoint.path) socket = net.connect({ path: endpoint.path, onread });
      else if (endpoint.tls) {
        socket = tls.connect({
          host: endpoint.host,
          port: endpoint.port,
          servername: endpoint.host && !net.isIP(endpoint.host) ? endpoint.host : undefined,
          ca: endpoint.ca ? [...tls.rootCertificates, endpoint.ca.toString('utf8')] : undefined,
        });
      }
      else socket = net.connect({ host: endpoint.host ?? '127.0.0.1', port: endpoint.port ?? 6379, onread });
      const timer = setTimeout(() => {
        socket.destroy();
        reject(kvError('databaseTimeout'));
      }, timeoutMs);
      const onError = (err: Error) => {
        clearTimeout(timer);
        reject(kvError('databaseUnreachable', err.message));
      };
      socket.once('error', onError);
      socket.once(event, () => {
        socket.off('error', onError);
        clearTimeout(timer);
        const conn = new RedisConnection(socket, early);
        const hello: Arg[][] = [];
        if (who.password !== undefined) hello.push(who.user ? ['AUTH', who.user, who.password] : ['AUTH', who.password]);
        if (endpoint.db) hello.push(['SELECT', String(endpoint.db)]);
        const checked = hello.length;
        // the name shows in CLIENT LIST which svc process a connection is from; a server that
        // refuses CLIENT SETNAME (some managed services) is fine: its reply is not checked
        if (clientName) hello.push(['CLIENT', 'SETNAME', clientName]);
        if (!hello.length) return resolve(conn);
        conn.batch(hello, false).then(
          ({ replies }) => {
            const err = replies.slice(0, checked).find((r): r is RespError => r instanceof RespError);
            if (err) {
              conn.close();
              reject(kvError('aclAuthFailed', err.message));
            } else resolve(conn);
          },
          (e: Error) => reject(e),
        );
      });
    });
  }

  /** True after the socket closed. */
  get closed(): boolean {
    return this.isClosed;
  }

  /** Requests in flight. */
  get inFlight(): number {
    return this.queue.length - this.head;
  }

  /** Runs `fn` once as soon as no request is in flight (at once when none is). */
  whenIdle(fn: () => void): void {
    if (this.inFlight === 0 || this.isClosed) fn();
    else (this.idleListeners ??= []).push(fn);
  }

  /**
   * Bounds how long the server may leave this connection's requests unanswered: when requests are
   * in flight and no reply arrived for `ms` (checked every `ms / 4`, so after `ms` to `1.25 x ms`),
   * the server is taken as hung (e.g. a SIGSTOPped or partitioned node that still holds the TCP
   * connection open) and the connection is closed: every request in flight fails with a
   * {@link KvError} `databaseTimeout` (a command may or may not have run). Off by default (the
   * single-server gateway never waits on a request); svc's topology router turns it on for its
   * node connections (`SVC_KV_NODE_TIMEOUT_MS`).
   */
  timeoutAfter(ms: number): void {
    const tick = Math.max(10, Math.floor(ms / 4));
    let seen = this.answered;
    let stalledMs = 0;
    const timer = setInterval(() => {
      if (this.inFlight === 0 || this.answered !== seen) {
        seen = this.answered;
        stalledMs = 0;
      } else if ((stalledMs += tick) >= ms) {
        this.socket.destroy();
        this.fail(kvError('databaseTimeout'));
      }
    }, tick);
    timer.unref();
    this.onClose(() => clearInterval(timer));
  }

  /** Replies received so far (the {@link timeoutAfter} watchdog's sign of progress). */
  private answered = 0;

  /** Runs `fn` once when the connection closes. */
  onClose(fn: () => void): void {
    if (this.isClosed) fn();
    else this.closeListeners.push(fn);
  }

  /** Sends one command; resolves to its reply (a {@link RespError} reply resolves, it is not thrown). */
  send(args: readonly Arg[]): Promise<Reply> {
    return this.write(encodeCommand(args), 1, false).then((p) => p.replies[0]);
  }

  /**
   * Sends several commands in ONE write (RESP pipelining); resolves when all `cmds.length + extra`
   * replies arrived. `wantRaw` keeps each reply's exact bytes.
   */
  batch(cmds: readonly (readonly Arg[])[], wantRaw: boolean): Promise<BatchResult> {
    return this.write(encodeCommands(cmds), cmds.length, wantRaw);
  }

  /**
   * Sends one command without a Promise (the gateway's hot path): `cb` runs once with its reply
   * (a {@link RespError} reply is not an error) and, when `wantRaw`, its exact bytes; or with
   * a {@link KvError} `databaseConnectionLost` when the connection is lost. What `cb` throws goes to
   * {@link onCallbackError}.
   */
  sendCb(args: readonly Arg[], wantRaw: boolean, cb: ReplyCallback, tag?: string): void {
    if (this.isClosed) return cb(kvError('databaseConnectionLost'), null, undefined, tag);
    // no closure and no arrays per command (hot path)
    this.enqueue(encodeCommand(args), { n: 1, replies: NO_REPLIES, raws: undefined, done: undefined, cb, wantRaw, fwd: undefined, tag, t: 0 });
  }

  /**
   * {@link sendCb} of one command already encoded as `encoded[from .. to]` (not checked), for a
   * proxy that passes replies on unread (svc's topology router): `cb` ({@link ForwardCallback})
   * gets the reply's exact bytes, and its value only when it is an error (`-...`, e.g. `MOVED`).
   * During a {@link hold} the bytes are copied (no view per command), and the commands written
   * with the same `cb` one after another share one request record. Needs {@link frameReplies}.
   */
  sendForwardCb(encoded: Buffer, from: number, to: number, cb: ForwardCallback): void {
    if (this.isClosed) return cb(kvError('databaseConnectionLost'), undefined, NOTHING_HELD, 0, 0);
    if (!this.held) {
      return this.enqueue(encoded.subarray(from, to), { n: 1, replies: NO_REPLIES, raws: undefined, done: undefined, cb: undefined, wantRaw: true, fwd: cb, tag: undefined, t: 0 });
    }
    // held (the router parsing one chunk of a pipeline): the bytes are copied, no view per command;
    // commands held together for one callback share one request record
    this.heldBytes.append(encoded, from, to);
    const last = this.queue.length > this.head ? this.queue[this.queue.length - 1] : undefined;
    if (last !== undefined && last.fwd === cb) last.n++;
    else this.queue.push({ n: 1, replies: NO_REPLIES, raws: undefined, done: undefined, cb: undefined, wantRaw: true, fwd: cb, tag: undefined, t: this.rtt === undefined ? 0 : performance.now() });
  }

  /**
   * From now on, replies are first cut at their ends ({@link replyEnd}) and only parsed when the
   * request waiting for them needs the value ({@link sendForwardCb}). Call before any request.
   */
  frameReplies(): void {
    this.framed = true;
  }

  private framed = false;
  /** With {@link framed}: an incomplete reply. */
  private readonly partial = new PartialFrame();

  /** {@link frameReplies}: cuts `chunk` (after any incomplete reply kept) into replies. */
  private feedFramed(chunk: Buffer): void {
    const buf = this.partial.take(chunk);
    if (buf === undefined) return;
    const len = buf.length;
    let pos = 0;
    while (pos < len) {
      const end = replyEnd(buf, pos, len);
      if (end < 0) return this.partial.keep(buf, pos, -1 - end);
      const p = this.queue[this.head];
      if (p !== undefined && p.fwd !== undefined && buf[pos] !== 45) {
        this.answered++;
        const last = --p.n === 0;
        if (last) this.shift(p);
        this.forward(p.fwd, null, undefined, buf, pos, end);
        if (last && this.rtt !== undefined) this.observe(p);
      }
      else this.parser.feed(pos === 0 && end === len ? buf : buf.subarray(pos, end));
      if (this.isClosed) return;
      pos = end;
    }
  }

  /** Writes `count` commands (already encoded) and waits for `count` replies. */
  private write(data: string | Buffer, count: number, wantRaw: boolean): Promise<Pending> {
    if (this.isClosed) return Promise.reject(kvError('databaseConnectionLost'));
    return new Promise<Pending>((resolve, reject) => {
      this.enqueue(data, { n: count, replies: [], raws: wantRaw ? [] : undefined, done: (err, p) => (err ? reject(err) : resolve(p)), cb: undefined, wantRaw, fwd: undefined, tag: undefined, t: 0 });
    });
  }

  private enqueue(data: string | Buffer, p: Pending): void {
    this.queue.push(p);
    if (this.held) {
      if (this.rtt !== undefined) p.t = performance.now();
      this.heldBytes.append(typeof data === 'string' ? Buffer.from(data) : data);
      return;
    }
    if (!this.corked && this.queue.length - this.head === 1) {
      // nothing else in flight (e.g. one client connection): send at once, without the cork and
      // its setImmediate; the requests that follow in this turn are coalesced below
      if (this.rtt !== undefined) p.t = performance.now();
      this.socket.write(data);
      return;
    }
    if (!this.corked) {
      // Coalesce the writes of every request handled in this event-loop turn into one writev
      // (many concurrent HTTP requests -> one syscall to Redis).
      this.corked = true;
      this.socket.cork();
      setImmediate(this.uncork);
    }
    if (this.rtt !== undefined) this.corkedPending.push(p);
    this.socket.write(data);
  }

  /**
   * Holds this connection's writes until {@link flush}: the commands sent meanwhile go out in one
   * write of one buffer (svc's topology router holds each node connection while it parses one chunk from the
   * gateway, so a `/pipeline` costs one write per node, not one per command). Returns true when
   * the connection was not held already (the caller then owes one {@link flush}).
   */
  hold(): boolean {
    if (this.held) return false;
    this.held = true;
    return true;
  }

  /** Ends a {@link hold}: what was written meanwhile goes out now (after anything corked before it). */
  flush(): void {
    if (!this.held) return;
    this.held = false;
    const out = this.heldBytes.take();
    if (out.length === 0 || this.isClosed) return;
    this.socket.write(out);
  }

  /** True during a {@link hold}: commands are copied into {@link heldBytes}. */
  private held = false;
  private readonly heldBytes = new OutBytes();
  private corked = false;
  private readonly uncork = () => {
    this.corked = false;
    const written = this.corkedPending;
    if (written.length > 0) {
      const now = performance.now();
      for (let i = 0; i < written.length; i++) written[i].t = now;
      written.length = 0;
    }
    this.socket.uncork();
  };

  private onReply(reply: Reply, raw: Buffer | undefined): void {
    this.answered++;
    const p = this.queue[this.head];
    if (p === undefined) {
      this.onPush?.(reply);
      return;
    }
    if (p.cb === undefined && p.fwd === undefined) {
      p.replies.push(reply);
      if (p.raws !== undefined && raw !== undefined) p.raws.push(raw);
      if (p.replies.length < p.n) return;
    }
    const last = p.fwd === undefined || --p.n === 0;
    if (last) this.shift(p);
    if (p.cb !== undefined) this.deliver(p.cb, null, reply, raw, p.tag);
    else if (p.fwd !== undefined) this.forward(p.fwd, null, reply as RespError, raw!, 0, raw!.length);
    else p.done!(null, p);
    // observed after the callback, which writes the answer: not part of the client's wait
    if (last && this.rtt !== undefined) this.observe(p);
  }

  /** Observes the round trip of the answered request `p` ({@link rtt}). */
  private observe(p: Pending): void {
    this.rtt!.observe((this.readAt - p.t) / 1000);
  }

  /** Takes the answered request `p` off the head of the queue. */
  private shift(p: Pending): void {
    this.queue[this.head++] = undefined as unknown as Pending;
    if (this.head === this.queue.length) {
      this.queue.length = 0;
      this.head = 0;
      if (this.idleListeners !== undefined) setImmediate(this.fireIdle);
    } else if (this.head > 1024 && this.head * 2 > this.queue.length) {
      this.queue.splice(0, this.head);
      this.head = 0;
    }
  }

  /** Runs a {@link ForwardCallback}; its exceptions never reach the reply parser. */
  private forward(cb: ForwardCallback, err: Error | null, error: RespError | undefined, bytes: Buffer, from: number, to: number): void {
    try {
      cb(err, error, bytes, from, to);
    } catch (e) {
      this.onCallbackError?.(e);
    }
  }

  /** Runs the {@link whenIdle} callbacks if still idle (after the reply's callback ran). */
  private readonly fireIdle = (): void => {
    if (this.inFlight > 0 || this.idleListeners === undefined) return;
    const fns = this.idleListeners;
    this.idleListeners = undefined;
    for (const fn of fns) fn();
  };

  /** Runs a single command's callback; its exceptions never reach the reply parser. */
  private deliver(cb: ReplyCallback, err: Error | null, reply: Reply, raw: Buffer | undefined, tag?: string): void {
    try {
      cb(err, reply, raw, tag);
    } catch (e) {
      this.onCallbackError?.(e);
    }
  }

  private fail(err: Error): void {
    if (this.isClosed) return;
    this.isClosed = true;
    this.parser.reset();
    this.partial.reset();
    const pending = this.queue.slice(this.head);
    this.queue.length = 0;
    this.head = 0;
    for (const p of pending) {
      if (p.cb !== undefined) this.deliver(p.cb, err, null, undefined, p.tag);
      else if (p.fwd !== undefined) for (let i = 0; i < p.n; i++) this.forward(p.fwd, err, undefined, NOTHING_HELD, 0, 0);
      else p.done!(err, p);
    }
    for (const fn of this.closeListeners.splice(0)) fn();
    this.fireIdle();
  }

  /** Closes the socket; in-flight requests are rejected. Idempotent. */
  close(): void {
    this.socket.destroy();
    this.fail(kvError('databaseConnectionClosed'));
  }
}

/**
 * A small pool for one Redis user: `size` shared connections used round-robin by many concurrent
 * requests (commands are pipelined on them; each request writes its commands in one write, so a
 * request's commands stay contiguous and in order), plus exclusive connections for transactions.
 */
export class ConnectionPool {
  private readonly shared: (RedisConnection | undefined)[];
  private readonly connecting: (Promise<RedisConnection> | undefined)[];
  private readonly idle: RedisConnection[] = [];
  private readonly all = new Set<RedisConnection>();
  private next = 0;
  private isClosed = false;
  /** Set by {@link retire}: no longer handed out by its owner; connections close once idle. */
  private retiring = false;
  /** Uses ({@link get}, {@link exclusive}) of all pools so far. */
  private static uses = 0;
  /**
   * The order of this pool's last use among all pools' ({@link get}, {@link exclusive}): larger
   * = more recent. For least-recently-used choices; counts, reads no clock.
   */
  lastUse = 0;
  /** {@link lastUse} as of the last read of {@link lastUsed}, and the time of that read. */
  private useSeen = 0;
  private usedAt = Date.now();

  /**
   * Time of the last use (ms since epoch), for idle eviction by the owner: the time of the first
   * read after a use (no clock is read per request), so at or after the real last use, never
   * before it: an owner that evicts pools unused for some time evicts none too early.
   */
  get lastUsed(): number {
    if (this.lastUse !== this.useSeen) {
      this.useSeen = this.lastUse;
      this.usedAt = Date.now();
    }
    return this.usedAt;
  }

  /** Counts a use of a connection this pool handed out earlier (kept by the caller) as {@link get} does. */
  markUsed(): void {
    this.lastUse = ++ConnectionPool.uses;
  }

  constructor(
    private readonly open: () => Promise<RedisConnection>,
    size: number,
  ) {
    this.shared = new Array(size).fill(undefined);
    this.connecting = new Array(size).fill(undefined);
  }

  /** A shared connection (an open one synchronously when available). */
  get(): RedisConnection | Promise<RedisConnection> {
    this.markUsed();
    const i = this.next;
    this.next = (i + 1) % this.shared.length;
    const c = this.shared[i];
    if (c !== undefined && !c.closed) return c;
    const pending = this.connecting[i];
    if (pending) return pending;
    const p = this.track(this.open()).then(
      (conn) => {
        this.connecting[i] = undefined;
        this.shared[i] = conn;
        return conn;
      },
      (err: Error) => {
        this.connecting[i] = undefined;
        throw err;
      },
    );
    this.connecting[i] = p;
    return p;
  }

  /** A connection used by nobody else until {@link release}d (e.g. MULTI ... EXEC). */
  async exclusive(): Promise<RedisConnection> {
    this.markUsed();
    while (this.idle.length) {
      const c = this.idle.pop()!;
      if (!c.closed) return c;
    }
    return this.track(this.open());
  }

  /** Returns an exclusive connection; it is closed instead when it is busy or the pool is closed or retired. */
  release(c: RedisConnection): void {
    if (c.closed) return;
    if (this.isClosed || this.retiring || c.inFlight > 0 || this.idle.length >= 4) c.close();
    else this.idle.push(c);
  }

  private async track(p: Promise<RedisConnection>): Promise<RedisConnection> {
    const c = await p;
    if (this.isClosed) {
      c.close();
      throw kvError('databaseConnectionClosed');
    }
    this.all.add(c);
    c.onClose(() => this.all.delete(c));
    // retired while connecting: the request that waited for it still runs (it writes in this
    // turn's microtasks), then the connection closes once idle
    if (this.retiring) setImmediate(() => c.whenIdle(() => c.close()));
    return c;
  }

  /**
   * Retires the pool (its owner stopped handing it out, e.g. evicted it): requests already in
   * flight on its connections finish, then each connection closes; idle exclusive connections
   * close now. Unlike {@link close}, no request fails.
   */
  retire(): void {
    this.retiring = true;
    for (const c of this.idle.splice(0)) c.close();
    for (const c of [...this.all]) c.whenIdle(() => c.close());
  }

  /** Closes every connection (in-flight requests are rejected). */
  close(): void {
    this.isClosed = true;
    for (const c of [...this.all]) c.close();
    this.idle.length = 0;
  }
}
