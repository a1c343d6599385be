/**
 * The topology router: a RESP server on a unix socket that the gateway connects to exactly as it
 * connects to one redis-server (same {@link RedisConnection}, same pools, same AUTH as the token's
 * ACL user), and that sends each command on to the right node of a Redis Cluster or to the
 * current primary of a Sentinel deployment. So the single-server path is untouched, and everything
 * about topologies lives here and in `topology.ts`.
 *
 * Per client connection, commands are taken in order and answered in order; each one runs as
 * soon as it arrives (commands of a `/pipeline` for different nodes run in parallel, pipelined on
 * one connection per node and ACL user). What it does per command:
 *
 * - `AUTH user password`: later commands run on node connections authenticated as that user (the
 *   user must exist on every node); the answer is the first primary's answer to that AUTH.
 * - keyed commands (key positions from the server's `COMMAND` key specifications, `keys.ts`, else
 *   `COMMAND GETKEYS`): to the primary of their slot; keys in several slots: `MGET`, `MSET`,
 *   `DEL`, `UNLINK`, `EXISTS`, `TOUCH` are split per slot and their answers merged (not atomic),
 *   anything else is answered Redis Cluster's `CROSSSLOT` error without running.
 * - `MULTI` ... `EXEC`: held until `EXEC`, then sent at once to the one slot's primary; keys in two
 *   slots: `CROSSSLOT` on the first command of another slot and `EXECABORT` on `EXEC`, nothing sent.
 * - whole-database commands on every primary: `DBSIZE` (sum), `KEYS` (union), `SCAN` (a cursor that
 *   walks the primaries in slot order: node cursor x 16384 + the node's lowest slot; also the
 *   gateway's `SCAN … WITHTYPE` script), `RANDOMKEY`,
 *   `FLUSHDB`/`FLUSHALL`, `INFO` (each node's text after a `# svc node host:port` line),
 *   `SCRIPT LOAD/FLUSH/EXISTS/KILL`, `FUNCTION LOAD/DELETE/FLUSH/RESTORE/KILL`; `ACL SETUSER/DELUSER`
 *   on every node, replicas included. Libraries loaded and ACL changes made through svc are
 *   replayed on nodes that join later.
 * - `SUBSCRIBE`, `PSUBSCRIBE`: the connection is handed to one node (classic pub/sub is
 *   cluster-wide); `SSUBSCRIBE` to its channel's slot. `MONITOR`: handed to the first primary, and
 *   on a cluster every other primary's `MONITOR` lines are merged into it as they come.
 *
 * Failures (the rule: never run a command twice, never a wrong answer): `MOVED` -> the map is
 * updated and the command sent on; `ASK` -> `ASKING` + the command on the importing node;
 * `TRYAGAIN`, `CLUSTERDOWN`, `READONLY` (a demoted primary), `MASTERDOWN`, `LOADING` and an
 * unreachable node mean the command did not run: the topology is read again and the command
 * retried for up to `failoverWaitMs`; a connection lost with the command in flight retries a read
 * only; a write may have run, so it is answered `TRYAGAIN` (503 with `Retry-After` at the HTTP
 * side, `errors.ts`), as is anything still failing after `failoverWaitMs`. A node that holds its
 * connections open but stops answering (a stopped process, a network partition) is bounded by
 * `nodeTimeoutMs`: no reply for that long on a node connection closes it, its commands are answered
 * `TRYAGAIN` at once (reads too: not retried against a node that hangs), the topology is read
 * again, and the next command opens a new connection; other nodes' commands are not held up.
 *
 * With `waitReplicas` > 0, each write (and each transaction that writes) is followed by
 * `WAIT waitReplicas waitTimeoutMs` on the same node connection; fewer confirmations turn the
 * answer into an error `NOREPLICAS svc: ...` (the write did run on the primary).
 */
import fs from 'node:fs';
import net from 'node:net';
import type { Logger } from '../../logger.js';
import { KvError } from '../errors.js';
import { encodeError, encodeReply, RespError, SimpleString, type Arg, type Reply } from '../resp.js';
import { ConnectionPool, RedisConnection, type BatchResult, type ForwardCallback, type RedisUser } from './connection.js';
import { CommandFrames, commandArgs, OutBytes } from './frames.js';
import { KeyTable, KEYS_UNKNOWN, KEYS_WRITE, keySlot, keySlotAt, SLOTS } from './keys.js';
import type { NodeAccess, Topology } from './topology.js';

/** Settings of {@link TopologyRouter}. */
export interface RouterOptions {
  topology: Topology;
  access: NodeAccess;
  logger: Logger;
  /** Replicas each write waits for (`SVC_KV_WAIT_REPLICAS`); 0 = none. */
  waitReplicas: number;
  /** `WAIT` timeout in ms (`SVC_KV_WAIT_TIMEOUT_MS`). */
  waitTimeoutMs: number;
  /** How long a command that could not run waits for the topology to heal, ms (default 2000). */
  failoverWaitMs?: number;
  /**
   * How long a node may leave commands unanswered before they are answered `TRYAGAIN` (503) and
   * the connection to it is reopened, ms (`SVC_KV_NODE_TIMEOUT_MS`, default 10 000); with
   * `waitReplicas` the `WAIT` timeout is added.
   */
  nodeTimeoutMs?: number;
}

const CROSSSLOT = "CROSSSLOT Keys in request don't hash to the same slot";
const EXECABORT = 'EXECABORT Transaction discarded because of previous errors.';
/** Redis answers that mean the command did not run and may run once the topology healed. */
const NOT_RUN = /^(TRYAGAIN|CLUSTERDOWN|READONLY|MASTERDOWN|LOADING)( |$)/;
/** {@link NOT_RUN} and the redirections. */
const RETRY = /^(TRYAGAIN|CLUSTERDOWN|READONLY|MASTERDOWN|LOADING|MOVED|ASK)( |$)/;
/** Commands {@link TopologyRouter.run} and {@link TopologyRouter.command} treat specially (never on the direct path). */
const NOT_DIRECT = new Set([
  ...['dbsize', 'keys', 'scan', 'randomkey', 'flushdb', 'flushall', 'info', 'script', 'function', 'acl', 'eval_ro'],
  ...['auth', 'client', 'select', 'multi', 'subscribe', 'psubscribe', 'ssubscribe', 'monitor'],
]);
/** How the script of the gateway's `SCAN … WITHTYPE` emulation (`emulate.ts`) starts: `SCAN` with the script's ARGV. */
const SCAN_SCRIPT_START = "local r = redis.call('SCAN', unpack(ARGV))";
const OK_RAW = Buffer.from('+OK\r\n');
const QUEUED_RAW = Buffer.from('+QUEUED\r\n');

const lower = (a: Arg): string => (typeof a === 'string' ? a : a.toString('latin1')).toLowerCase();
const text = (r: Reply | string): string => (Buffer.isBuffer(r) ? r.toString('utf8') : r instanceof SimpleString ? r.value : String(r));
const sleep = (ms: number) => new Promise<void>((res) => setTimeout(res, ms).unref());

/**
 * A reply slot of a client connection: its sequence number in the connection's reply order
 * ({@link Session.reserve}); filled in any order, written in order.
 */
type Cell = number;

/** One command held between `MULTI` and `EXEC`. */
interface Queued {
  args: Arg[];
  cell: Cell;
}

/**
 * A session's use of one node connection on the direct path ({@link TopologyRouter.direct}): one
 * callback for all its commands (made once, not per command) and the FIFO of their reply slots
 * (a node connection answers in the order it was written to, and the callbacks of a lost
 * connection run in that order too).
 */
class Link {
  /** The reply slots of the commands in flight on {@link conn}, oldest first. */
  readonly cells = new CellQueue();
  readonly cb: ForwardCallback;

  constructor(
    readonly session: Session,
    readonly pool: ConnectionPool,
    readonly conn: RedisConnection,
    readonly addr: string,
    onReply: (link: Link, err: Error | null, error: RespError | undefined, bytes: Buffer, from: number, to: number) => void,
  ) {
    this.cb = (err, error, bytes, from, to) => onReply(this, err, error, bytes, from, to);
  }
}

/** A growable FIFO ring of numbers (no allocation per push once grown). */
class CellQueue {
  private ring = new Float64Array(64);
  private head = 0;
  private size = 0;

  push(n: number): void {
    if (this.size === this.ring.length) {
      const grown = new Float64Array(this.ring.length * 2);
      for (let i = 0; i < this.size; i++) grown[i] = this.ring[(this.head + i) & (this.ring.length - 1)];
      this.ring = grown;
      this.head = 0;
    }
    this.ring[(this.head + this.size) & (this.ring.length - 1)] = n;
    this.size++;
  }

  shift(): number {
    const n = this.ring[this.head];
    this.head = (this.head + 1) & (this.ring.length - 1);
    this.size--;
    return n;
  }
}

/** States of a reply slot ({@link Session}). */
const EMPTY_SLOT = 0;
const FILLED = 1;

/** One gateway connection to the router. */
class Session {
  user: RedisUser = {};
  multi: Queued[] | undefined;
  multiCell: Cell | undefined;
  /** The last command taking the Promise path, until it is answered ({@link TopologyRouter.inOrder}). */
  chain: Promise<void> | undefined;
  /** After SUBSCRIBE / MONITOR: the node connection the rest of this connection goes to. */
  passthrough: RedisConnection | Promise<RedisConnection> | undefined;
  /** After MONITOR on a cluster: the other primaries' MONITOR connections, merged into this one. */
  monitors: Promise<RedisConnection>[] | undefined;

  /*
   * The reply slots from `head` (the next to write) to `tail` (the next to reserve), as parallel
   * arrays indexed by `cell & mask` (no object per slot): a filled slot's reply is
   * `data[i][from[i] .. to[i]]` (a reference to the node's read buffer, no view made); for a slot
   * of the direct path also the command's exact bytes `cmd[i][cmdFrom[i] .. cmdTo[i]]` and whether
   * it writes, for when it must be sent again.
   */
  private head = 0;
  private tail = 0;
  private mask = 63;
  private state = new Uint8Array(64);
  private data: (Buffer | undefined)[] = new Array(64).fill(undefined);
  private from = new Int32Array(64);
  private to = new Int32Array(64);
  private cmd: (Buffer | undefined)[] = new Array(64).fill(undefined);
  private cmdFrom = new Int32Array(64);
  private cmdTo = new Int32Array(64);
  private cmdWrite = new Uint8Array(64);

  /** Filled slots not yet written (one write of them all at `setImmediate`). */
  private readonly out = new OutBytes();
  private readonly flushOut = (): void => {
    const out = this.out.take();
    if (out.length > 0 && !this.socket.destroyed) this.socket.write(out);
  };

  /** This session's links to node connections by node address (valid while {@link poolsGeneration} is the router's). */
  readonly links = new Map<string, Link>();
  poolsGeneration = 0;

  constructor(readonly socket: net.Socket) {}

  /** A new reply slot at the end of the order. */
  reserve(): Cell {
    if (this.tail - this.head > this.mask) this.grow();
    const c = this.tail++;
    const i = c & this.mask;
    this.state[i] = EMPTY_SLOT;
    this.cmd[i] = undefined;
    return c;
  }

  /** {@link reserve} for a command of the direct path, `buf[from .. to]` its exact bytes. */
  reserveCommand(buf: Buffer, from: number, to: number, write: boolean): Cell {
    const c = this.reserve();
    const i = c & this.mask;
    this.cmd[i] = buf;
    this.cmdFrom[i] = from;
    this.cmdTo[i] = to;
    this.cmdWrite[i] = write ? 1 : 0;
    return c;
  }

  /** The exact bytes of the direct-path command of slot `c` (a copy's worth: a view). */
  commandOf(c: Cell): Buffer {
    const i = c & this.mask;
    return this.cmd[i]!.subarray(this.cmdFrom[i], this.cmdTo[i]);
  }

  /** True when the direct-path command of slot `c` writes. */
  writes(c: Cell): boolean {
    return this.cmdWrite[c & this.mask] === 1;
  }

  private grow(): void {
    const size = (this.mask + 1) * 2;
    const mask = size - 1;
    const state = new Uint8Array(size);
    const data: (Buffer | undefined)[] = new Array(size).fill(undefined);
    const from = new Int32Array(size);
    const to = new Int32Array(size);
    const cmd: (Buffer | undefined)[] = new Array(size).fill(undefined);
    const cmdFrom = new Int32Array(size);
    const cmdTo = new Int32Array(size);
    const cmdWrite = new Uint8Array(size);
    for (let c = this.head; c < this.tail; c++) {
      const o = c & this.mask;
      const n = c & mask;
      state[n] = this.state[o];
      data[n] = this.data[o];
      from[n] = this.from[o];
      to[n] = this.to[o];
      cmd[n] = this.cmd[o];
      cmdFrom[n] = this.cmdFrom[o];
      cmdTo[n] = this.cmdTo[o];
      cmdWrite[n] = this.cmdWrite[o];
    }
    Object.assign(this, { mask, state, data, from, to, cmd, cmdFrom, cmdTo, cmdWrite });
  }

  /**
   * Fills `c` and writes every filled slot at the head of the order (the writes of one event-loop
   * turn, e.g. the replies of every node read in this poll phase, go out in one write of one
   * buffer at `setImmediate`).
   */
  fill(c: Cell, data: Buffer): void {
    this.fillBytes(c, data, 0, data.length);
  }

  /** {@link fill} with `bytes[from .. to]` (copied at once when `c` is next in order, else referenced: `bytes` is never written to). */
  fillBytes(c: Cell, bytes: Buffer, from: number, to: number): void {
    const mask = this.mask;
    if (c !== this.head) {
      const i = c & mask;
      this.state[i] = FILLED;
      this.data[i] = bytes;
      this.from[i] = from;
      this.to[i] = to;
      return;
    }
    this.cmd[c & mask] = undefined;
    this.sendBytes(bytes, from, to);
    let h = c + 1;
    for (let i = h & mask; h < this.tail && this.state[i] === FILLED; i = ++h & mask) {
      this.sendBytes(this.data[i]!, this.from[i], this.to[i]);
      this.data[i] = undefined;
      this.cmd[i] = undefined;
    }
    this.head = h;
  }

  /** Writes `data` after everything filled or sent before (outside the reply order: pub/sub messages, MONITOR lines). */
  send(data: Buffer): void {
    this.sendBytes(data, 0, data.length);
  }

  private sendBytes(data: Buffer, from: number, to: number): void {
    if (this.out.length === 0) setImmediate(this.flushOut);
    this.out.append(data, from, to);
  }

  /** True when every reserved slot was written. */
  get drained(): boolean {
    return this.head === this.tail;
  }
}

/** The result of one command: its reply and exact bytes. */
interface One {
  reply: Reply;
  raw: Buffer;
}

const errorOne = (message: string): One => ({ reply: new RespError(message), raw: encodeError(message) });
const one = (reply: Reply): One => ({ reply, raw: encodeReply(reply) });

export class TopologyRouter {
  private readonly server: net.Server;
  private readonly sessions = new Set<Session>();
  private readonly upstream = new Map<string, ConnectionPool>();
  private keys: KeyTable | undefined;
  private readonly failoverWaitMs: number;
  /** {@link RouterOptions.nodeTimeoutMs} plus the `WAIT` timeout when writes wait for replicas. */
  private readonly nodeTimeoutMs: number;
  /** `FUNCTION LOAD` code by library name, replayed on nodes that join. */
  private readonly libraries = new Map<string, Buffer>();
  /** `ACL SETUSER/DELUSER` commands run through svc, in order, replayed on nodes that join. */
  private readonly aclChanges: Arg[][] = [];
  private closed = false;
  /** True while a chunk from the gateway is parsed: node connections written to are held ({@link RedisConnection.hold}). */
  private feeding = false;
  /** Node connections held during the current chunk, flushed after it. */
  private readonly held: RedisConnection[] = [];
  /** Bumped whenever a pool leaves {@link upstream}: sessions' cached pools ({@link Session.pools}) are then dropped. */
  private poolsGeneration = 0;

  constructor(private readonly o: RouterOptions) {
    this.failoverWaitMs = o.failoverWaitMs ?? 2000;
    this.nodeTimeoutMs = (o.nodeTimeoutMs ?? 10_000) + (o.waitReplicas > 0 ? o.waitTimeoutMs : 0);
    this.server = net.createServer((socket) => this.accept(socket));
    o.topology.onChange((added) => this.nodesAdded(added));
    // node connections of ACL users that stopped sending (the gateway evicts its own pools too)
    this.sweeper = setInterval(() => {
      const idleSince = Date.now() - 60_000;
      for (const [k, p] of this.upstream) {
        if (p.lastUsed < idleSince) {
          this.upstream.delete(k);
          this.poolsGeneration++;
          p.retire();
        }
      }
    }, 30_000);
    this.sweeper.unref();
  }

  private readonly sweeper: NodeJS.Timeout;

  /** Reads the command table and listens on the unix socket `path`. @throws Error when no primary answers COMMAND. */
  async start(path: string): Promise<void> {
    await this.loadKeyTable();
    fs.rmSync(path, { force: true });
    await new Promise<void>((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen(path, () => {
        this.server.off('error', reject);
        resolve();
      });
    });
  }

  private async loadKeyTable(): Promise<void> {
    const addr = this.o.topology.primaries()[0]?.addr;
    if (!addr) throw new Error('kv: no primary known');
    const c = await RedisConnection.connect(this.o.access.endpointOf(addr), this.o.access.admin, 3000);
    try {
      const t = new KeyTable(await c.send(['COMMAND']));
      if (t.size === 0) throw new Error('kv: COMMAND answered no commands');
      this.keys = t;
    } finally {
      c.close();
    }
  }

  /** Stops listening and closes every connection. */
  async close(): Promise<void> {
    this.closed = true;
    clearInterval(this.sweeper);
    const done = new Promise<void>((res) => this.server.close(() => res()));
    for (const s of this.sessions) s.socket.destroy();
    for (const p of this.upstream.values()) p.close();
    this.upstream.clear();
    await done;
  }

  private accept(socket: net.Socket): void {
    const s = new Session(socket);
    this.sessions.add(s);
    // each command's exact bytes are kept: the direct path sends them on unchanged
    const parser = new CommandFrames((f) => {
      if (s.passthrough === undefined && s.multi === undefined && s.chain === undefined && this.direct(s, f, f.name())) return;
      this.command(s, f.args());
    });
    socket.on('data', (chunk: Buffer) => {
      // the commands of one chunk (a whole `/pipeline` as a rule) go to each node in one write
      this.feeding = true;
      try {
        parser.feed(chunk);
      } catch {
        socket.destroy();
      } finally {
        this.feeding = false;
        for (const c of this.held) c.flush();
        this.held.length = 0;
      }
    });
    socket.on('error', () => undefined);
    socket.on('close', () => {
      this.sessions.delete(s);
      const p = s.passthrough;
      if (p instanceof RedisConnection) p.close();
      else p?.then((c) => c.close(), () => undefined);
      for (const m of s.monitors ?? []) m.then((c) => c.close(), () => undefined);
    });
  }

  /**
   * The node connection of `user` on `addr`: ONE pipelined connection, so the commands of a
   * gateway connection for one node reach it in the order they came (a SET then a GET of the same
   * key in one `/pipeline`).
   */
  private pool(user: RedisUser, addr: string): ConnectionPool {
    const key = `${user.user ?? ''}\0${user.password ?? ''}\0${addr}`;
    let p = this.upstream.get(key);
    if (p === undefined) {
      p = new ConnectionPool(
        () =>
          RedisConnection.connect(this.o.access.endpointOf(addr), user, 1000).then((c) => {
            c.timeoutAfter(this.nodeTimeoutMs);
            c.frameReplies();
            return c;
          }),
        1,
      );
      this.upstream.set(key, p);
    }
    return p;
  }

  /** One command (a RESP array) from a gateway connection. */
  private command(s: Session, args: Arg[]): void {
    if (s.passthrough) return this.forwardPassthrough(s, args);
    const name = lower(args[0]);
    if (s.multi !== undefined) {
      if (name === 'exec') {
        const queued = s.multi;
        const multiCell = s.multiCell!;
        s.multi = undefined;
        const cell = s.reserve();
        return this.inOrder(s, () => this.exec(s, queued, multiCell, cell));
      }
      if (name === 'discard') {
        for (const q of s.multi) s.fill(q.cell, QUEUED_RAW);
        s.fill(s.multiCell!, OK_RAW);
        s.multi = undefined;
        return s.fill(s.reserve(), OK_RAW);
      }
      s.multi.push({ args, cell: s.reserve() });
      return;
    }
    const cell = s.reserve();
    switch (name) {
      case 'auth':
        s.user = args.length > 2 ? { user: text(args[1]), password: text(args[2]) } : { password: text(args[1]) };
        s.links.clear();
        return void this.auth(s.user).then((d) => s.fill(cell, d));
      case 'client':
      case 'select':
        return s.fill(cell, OK_RAW);
      case 'multi':
        s.multi = [];
        s.multiCell = cell;
        return;
      case 'subscribe':
      case 'psubscribe':
      case 'ssubscribe':
      case 'monitor':
        return void this.startPassthrough(s, cell, args);
    }
    this.inOrder(s, () => this.slow(s, cell, args));
  }

  /**
   * Runs `fn` once every earlier command of `s` that took the Promise path has been answered, and
   * keeps later commands of `s` off the direct path until `fn` is done: so a command is never sent
   * before an earlier one of the same connection (a split `MSET` and the `GET` after it).
   */
  private inOrder(s: Session, fn: () => Promise<void>): void {
    const p: Promise<void> = (s.chain ?? Promise.resolve()).then(fn).finally(() => {
      if (s.chain === p) s.chain = undefined;
    });
    s.chain = p;
  }

  /** {@link run} for one command of `s`, its answer into `cell`. */
  private slow(s: Session, cell: Cell, args: Arg[]): Promise<void> {
    return this.run(s.user, args).then(
      (o) => s.fill(cell, o.raw),
      (err: Error) => s.fill(cell, encodeError(`ERR svc router: ${err.message}`)),
    );
  }

  /**
   * The hot path, without Promises and without a value per argument: a command svc does not treat
   * specially, whose keys the table knows and lie in one slot, and whose node connection is open,
   * is written at once as the exact bytes the gateway sent (`f`'s current command; only its name,
   * subcommand and keys are decoded) and its exact reply bytes are passed back. Returns false
   * (nothing sent, no reply slot taken) for anything else. A reply that asks for a retry (MOVED,
   * ASK, a not-run answer) and a lost connection (reads only: a write in flight may have run) go
   * to {@link run}.
   */
  private direct(s: Session, f: CommandFrames, name: string): boolean {
    if (NOT_DIRECT.has(name)) return false;
    const at = this.keyAt;
    const table = this.keys!;
    const flags = table.positions(name, f, at);
    const write = (flags & KEYS_WRITE) !== 0;
    if (flags & KEYS_UNKNOWN || (write && this.o.waitReplicas > 0)) return false;
    const keys = table.found;
    let addr: string | undefined;
    if (!this.o.topology.sharded) addr = this.o.topology.primaryFor(0);
    else if (keys === 0) addr = this.anyPrimary();
    else {
      const slot = keySlotAt(f.buf, f.argStart(at[0]), f.argEnd(at[0]));
      for (let i = 1; i < keys; i++) if (keySlotAt(f.buf, f.argStart(at[i]), f.argEnd(at[i])) !== slot) return false;
      addr = this.o.topology.primaryFor(slot);
    }
    if (addr === undefined) return false;
    if (s.poolsGeneration !== this.poolsGeneration) {
      s.links.clear();
      s.poolsGeneration = this.poolsGeneration;
    }
    let link = s.links.get(addr);
    if (link === undefined || link.conn.closed) {
      const p = link?.pool ?? this.pool(s.user, addr);
      const c = p.get();
      if (!(c instanceof RedisConnection)) return false;
      s.links.set(addr, (link = new Link(s, p, c, addr, this.forwarded)));
    }
    const c = link.conn;
    // the pool's idle clock: a use counted, no clock read per command
    link.pool.markUsed();
    if (this.feeding && c.hold()) this.held.push(c);
    const { buf, start, end } = f;
    link.cells.push(s.reserveCommand(buf, start, end, write));
    c.sendForwardCb(buf, start, end, link.cb);
    return true;
  }

  /** The reply of a direct-path command of `link` (see {@link direct}). */
  private readonly forwarded = (link: Link, err: Error | null, error: RespError | undefined, bytes: Buffer, from: number, to: number): void => {
    const s = link.session;
    const cell = link.cells.shift();
    if (err === null) {
      if (error === undefined || !RETRY.test(error.message)) return s.fillBytes(cell, bytes, from, to);
    } else if (isTimeout(err)) {
      return s.fill(cell, encodeError(this.hung(link.addr, s.writes(cell))));
    } else if (s.writes(cell)) {
      return s.fill(cell, encodeError(`TRYAGAIN svc: the connection to ${link.addr} was lost with a write in flight; it may or may not have been applied`));
    }
    void this.slow(s, cell, commandArgs(s.commandOf(cell))); // the topology changed: order against later commands is not kept
  };

  /** Key indexes of the command on {@link direct} (reused). */
  private readonly keyAt: number[] = [];

  /**
   * `AUTH` of a gateway connection: checked on a fresh connection to the first primary every time
   * (an open node connection proves nothing: Redis keeps connections authenticated after
   * `ACL SETUSER` changed the password).
   */
  private async auth(user: RedisUser): Promise<Buffer> {
    const addr = this.o.topology.primaries()[0]?.addr;
    if (!addr) return encodeError('TRYAGAIN svc: no primary is known (failover in progress?), retry shortly');
    try {
      (await RedisConnection.connect(this.o.access.endpointOf(addr), user, 1000)).close();
      return OK_RAW;
    } catch (err) {
      return encodeError(err instanceof KvError && err.code === 'aclAuthFailed' ? err.message : `TRYAGAIN svc: ${(err as Error).message}`);
    }
  }

  /** Keys of `args`, from the table or, when it cannot tell, `COMMAND GETKEYS` on a primary. */
  private async keysOf(user: RedisUser, args: Arg[]): Promise<{ write: boolean; keys: Arg[] }> {
    const l = this.keys!.lookup(args);
    if (l.keys !== undefined) return { write: l.write, keys: l.keys };
    const r = await this.at(user, this.anyPrimary(), [['COMMAND', 'GETKEYS', ...args]], false);
    const k = r.replies[0];
    // no keys (or an error, e.g. a wrong arity): the node answers the command itself
    return { write: l.write, keys: Array.isArray(k) ? (k as Arg[]) : [] };
  }

  private anyPrimary(): string | undefined {
    return this.o.topology.primaries()[0]?.addr;
  }

  /** Runs one command outside a transaction: routed, split, or sent to every primary. */
  private async run(user: RedisUser, args: Arg[]): Promise<One> {
    const name = lower(args[0]);
    const sub = args.length > 1 ? `${name}|${lower(args[1])}` : name;
    const sharded = this.o.topology.sharded;
    switch (sharded ? name : '') {
      case 'dbsize':
        return this.everyPrimary(user, args, false, (rs) => one(rs.reduce<number>((a, r) => a + Number(r), 0)));
      case 'keys':
        return this.everyPrimary(user, args, false, (rs) => one(rs.flat() as Reply[]));
      case 'scan':
        return this.scan(user, args, 1);
      case 'eval_ro':
        // the gateway's `SCAN … WITHTYPE` (`emulate.ts`): a keyless script around SCAN that walks every primary too
        if (text(args[2] ?? '') === '0' && text(args[1]).startsWith(SCAN_SCRIPT_START)) return this.scan(user, args, 3);
        break;
      case 'randomkey':
        return this.randomKey(user, args);
      case 'flushdb':
      case 'flushall':
        return this.everyPrimary(user, args, true, (rs) => one(rs[0]));
      case 'info':
        return this.everyPrimary(user, args, false, (rs, addrs) =>
          one(Buffer.from(rs.map((r, i) => `# svc node ${addrs[i]}\r\n${text(r)}`).join('\r\n'))),
        );
    }
    switch (sub) {
      case 'script|load':
      case 'script|flush':
      case 'function|delete':
      case 'function|flush':
      case 'function|restore':
        return this.everyPrimary(user, args, true, (rs) => one(rs[0]));
      case 'function|load': {
        const r = await this.everyPrimary(user, args, true, (rs) => one(rs[0]));
        if (!(r.reply instanceof RespError)) this.libraries.set(text(r.reply), Buffer.from(args[args.length - 1]));
        return r;
      }
      case 'script|exists':
        return this.everyPrimary(user, args, false, (rs) => one((rs[0] as Reply[]).map((_, i) => (rs.every((r) => Array.isArray(r) && Number(r[i]) === 1) ? 1 : 0))));
      case 'script|kill':
      case 'function|kill':
        return this.everyPrimary(user, args, false, (rs) => one(rs[0]), true);
      case 'acl|setuser':
      case 'acl|deluser': {
        const r = await this.everyNode(user, args);
        if (!(r.reply instanceof RespError)) this.aclChanges.push(args);
        // node connections of the changed users authenticate anew (a changed password stops the old one)
        for (const u of sub === 'acl|deluser' ? args.slice(2) : args.slice(2, 3)) this.forgetUser(text(u));
        return r;
      }
    }
    if (!sharded) return this.routed(user, 0, args, isWrite(this.keys!, args));
    const { write, keys } = await this.keysOf(user, args);
    if (keys.length === 0) return this.routed(user, undefined, args, write);
    const slot = keySlot(keys[0]);
    let same = true;
    for (let i = 1; i < keys.length && same; i++) same = keySlot(keys[i]) === slot;
    if (same) return this.routed(user, slot, args, write);
    return this.split(user, name, args, write);
  }

  /** A command over keys of several slots: split where the answer can be merged, else `CROSSSLOT`. */
  private async split(user: RedisUser, name: string, args: Arg[], write: boolean): Promise<One> {
    const pairs = name === 'mset';
    if (!['mget', 'del', 'unlink', 'exists', 'touch', 'mset'].includes(name)) return errorOne(CROSSSLOT);
    const step = pairs ? 2 : 1;
    if ((args.length - 1) % step !== 0) return this.routed(user, undefined, args, write); // the node answers the arity error
    const groups = new Map<number, number[]>();
    for (let i = 1; i < args.length; i += step) {
      const slot = keySlot(args[i]);
      let g = groups.get(slot);
      if (!g) groups.set(slot, (g = []));
      g.push(i);
    }
    const parts = await Promise.all(
      [...groups].map(([slot, idx]) => this.routed(user, slot, [args[0], ...idx.flatMap((i) => args.slice(i, i + step))], write).then((o) => ({ idx, o }))),
    );
    const failed = parts.find((p) => p.o.reply instanceof RespError);
    if (failed) return failed.o;
    if (name === 'mget') {
      const out: Reply[] = new Array((args.length - 1) / step);
      for (const { idx, o } of parts) (o.reply as Reply[]).forEach((v, k) => (out[idx[k] - 1] = v));
      return one(out);
    }
    if (pairs) return { reply: new SimpleString('OK'), raw: OK_RAW };
    return one(parts.reduce((a, p) => a + Number(p.o.reply), 0));
  }

  /** One command on the primary of `slot` (undefined: keyless, the first primary), with WAIT when it writes. */
  private async routed(user: RedisUser, slot: number | undefined, args: Arg[], write: boolean): Promise<One> {
    const wait = write && this.o.waitReplicas > 0;
    const cmds = wait ? [args, this.waitCommand()] : [args];
    const r = await this.send(user, slot, cmds, write, false, wait);
    return wait ? this.checkWait(r.replies[0], r.raws![0], r.replies[1], slot) : { reply: r.replies[0], raw: r.raws![0] };
  }

  /**
   * With `waitReplicas`: the refusal of a write BEFORE it runs when its primary cannot have enough
   * replicas (fewer in the topology, or a `WAIT` on it came back short less than a second ago).
   * Without this, each write would hold its node connection for the whole `WAIT` timeout and the
   * writes behind it would queue (e.g. a promoted replica that has no replica yet).
   */
  private tooFewReplicas(addr: string): string | undefined {
    const short = this.shortWait.get(addr);
    const known = this.o.topology.replicasOf(addr);
    if (known >= this.o.waitReplicas && (short === undefined || Date.now() - short > 1000)) return undefined;
    return `NOREPLICAS svc: the primary ${addr} has ${known < this.o.waitReplicas ? `${known} healthy replicas` : 'not confirmed recent writes on enough replicas'}, ${this.o.waitReplicas} are required (SVC_KV_WAIT_REPLICAS); the write was not run`;
  }

  /** Primaries whose last `WAIT` came back short, with the time (ms since epoch). */
  private readonly shortWait = new Map<string, number>();

  private waitCommand(): Arg[] {
    return ['WAIT', String(this.o.waitReplicas), String(this.o.waitTimeoutMs)];
  }

  /** The answer of a write followed by WAIT: an error when fewer replicas than asked confirmed it. */
  private checkWait(reply: Reply, raw: Buffer, waited: Reply, slot: number | undefined): One {
    if (reply instanceof RespError || (typeof waited === 'number' && waited >= this.o.waitReplicas)) return { reply, raw };
    const got = typeof waited === 'number' ? waited : 0;
    const addr = slot === undefined ? this.anyPrimary() : this.o.topology.primaryFor(slot);
    if (addr !== undefined) this.shortWait.set(addr, Date.now());
    void this.o.topology.refresh();
    return errorOne(
      `NOREPLICAS svc: the write was applied on the primary, but only ${got} of ${this.o.waitReplicas} replicas confirmed it within ${this.o.waitTimeoutMs} ms (SVC_KV_WAIT_REPLICAS)`,
    );
  }

  /**
   * Sends `cmds` in one write to the primary of `slot` (undefined: the first primary) and follows
   * the topology: see the module comment for what is retried. `multi`: the batch is a transaction
   * (a redirect or not-run answer of any command means EXEC aborted: nothing ran).
   */
  private async send(user: RedisUser, slot: number | undefined, cmds: Arg[][], write: boolean, multi: boolean, wait = false): Promise<BatchResult> {
    const deadline = Date.now() + this.failoverWaitMs;
    let askAt: string | undefined;
    let redirects = 0;
    for (let attempt = 1; ; attempt++) {
      const addr = askAt ?? (slot === undefined ? this.anyPrimary() : this.o.topology.primaryFor(slot));
      let why: string;
      const refused = wait && addr !== undefined && askAt === undefined ? this.tooFewReplicas(addr) : undefined;
      if (refused) return failAll(cmds.length, refused);
      if (addr === undefined) why = slot === undefined ? 'no primary is known' : `no primary serves slot ${slot}`;
      else {
        let conn: RedisConnection | undefined;
        try {
          const c = this.pool(user, addr).get();
          conn = c instanceof RedisConnection ? c : await c;
        } catch (err) {
          if (err instanceof KvError && err.code === 'aclAuthFailed') return failAll(cmds.length, err.message);
          why = `${addr} is unreachable`;
        }
        if (conn !== undefined) {
          const asking = askAt !== undefined;
          askAt = undefined;
          let r: BatchResult | undefined;
          try {
            r = await conn.batch(asking ? [['ASKING'], ...cmds] : cmds, true);
          } catch (err) {
            if (isTimeout(err)) return failAll(cmds.length, this.hung(addr, write));
            if (write) {
              return failAll(cmds.length, `TRYAGAIN svc: the connection to ${addr} was lost with a write in flight; it may or may not have been applied`);
            }
            why = `the connection to ${addr} was lost`;
          }
          if (r !== undefined) {
            if (asking) {
              r.replies.shift();
              r.raws!.shift();
            }
            const bad = r.replies.find((x): x is RespError => x instanceof RespError && (x.message.startsWith('MOVED ') || x.message.startsWith('ASK ') || NOT_RUN.test(x.message)));
            if (bad === undefined) return r;
            const [kind, slotText, to] = bad.message.split(' ');
            if ((kind === 'MOVED' || kind === 'ASK') && redirects++ < 5 && to) {
              if (kind === 'MOVED') this.o.topology.moved(Number(slotText), to);
              else if (!multi) askAt = to;
              if (kind === 'MOVED' || !multi) continue;
            }
            why = bad.message;
          } else why ??= 'unknown';
        } else why ??= 'unknown';
      }
      if (Date.now() >= deadline) return failAll(cmds.length, `TRYAGAIN svc: ${why} (failover in progress?), retry shortly`);
      await this.o.topology.refresh();
      await sleep(Math.min(50 * attempt, 250));
    }
  }

  /** The answer to commands that `addr` left unanswered for {@link nodeTimeoutMs}; the topology is read again. */
  private hung(addr: string, write: boolean): string {
    void this.o.topology.refresh();
    return `TRYAGAIN svc: ${addr} did not answer within ${this.nodeTimeoutMs} ms (SVC_KV_NODE_TIMEOUT_MS), the connection to it is reopened${write ? '; the write may or may not have been applied' : ''}, retry shortly`;
  }

  /** One batch on a given node, no redirects followed (whole-database commands). */
  private async at(user: RedisUser, addr: string | undefined, cmds: Arg[][], write: boolean): Promise<BatchResult> {
    if (addr === undefined) return failAll(cmds.length, 'TRYAGAIN svc: no primary is known (failover in progress?), retry shortly');
    try {
      const c = this.pool(user, addr).get();
      return await (c instanceof RedisConnection ? c : await c).batch(cmds, true);
    } catch (err) {
      if (err instanceof KvError && err.code === 'aclAuthFailed') return failAll(cmds.length, err.message);
      void this.o.topology.refresh();
      return failAll(cmds.length, `TRYAGAIN svc: ${addr}: ${(err as Error).message}${write ? ' (the command may have run on some nodes)' : ''}, retry shortly`);
    }
  }

  /** `args` on every primary; the first error answers (unless `anyOk`: the first success), else `merge` of the replies. */
  private async everyPrimary(
    user: RedisUser,
    args: Arg[],
    write: boolean,
    merge: (replies: Reply[], addrs: string[]) => One,
    anyOk = false,
  ): Promise<One> {
    const addrs = this.o.topology.primaries().map((p) => p.addr);
    if (addrs.length === 0) return errorOne('TRYAGAIN svc: no primary is known (failover in progress?), retry shortly');
    const rs = (await Promise.all(addrs.map((a) => this.at(user, a, [args], write)))).map((r) => r.replies[0]);
    const ok = rs.filter((r) => !(r instanceof RespError));
    if (anyOk && ok.length) return one(ok[0]);
    const err = rs.find((r) => r instanceof RespError);
    if (err) return one(err);
    return merge(rs, addrs);
  }

  /** `args` on every node (ACL changes: replicas keep their own users). */
  private async everyNode(user: RedisUser, args: Arg[]): Promise<One> {
    const nodes = this.o.topology.nodes();
    const rs = (await Promise.all(nodes.map((a) => this.at(user, a, [args], true)))).map((r) => r.replies[0]);
    return one(rs.find((r) => r instanceof RespError) ?? rs[0] ?? null);
  }

  /** Node connections of `name` are retired (requests in flight finish; later ones connect anew). */
  private forgetUser(name: string): void {
    for (const [k, p] of this.upstream) {
      if (k.startsWith(`${name}\0`)) {
        p.retire();
        this.upstream.delete(k);
        this.poolsGeneration++;
      }
    }
  }

  /**
   * `SCAN cursor ...` over every primary (the cursor at `args[at]`): the cursor is node cursor x
   * 16384 + the node's lowest slot. The reply of each node is `[cursor, items]`.
   */
  private async scan(user: RedisUser, args: Arg[], at: number): Promise<One> {
    let cursor: bigint;
    try {
      cursor = BigInt(text(args[at] ?? ''));
      if (cursor < 0n) throw new Error();
    } catch {
      return errorOne('ERR invalid cursor');
    }
    const primaries = this.o.topology.primaries();
    const slot = Number(cursor % BigInt(SLOTS));
    const nodeCursor = cursor / BigInt(SLOTS);
    const addr = this.o.topology.primaryFor(slot);
    const r = (await this.at(user, addr, [[...args.slice(0, at), String(nodeCursor), ...args.slice(at + 1)]], false)).replies[0];
    if (!Array.isArray(r) || r.length !== 2) return one(r);
    const next = BigInt(text(r[0]));
    let out: bigint;
    if (next !== 0n) out = next * BigInt(SLOTS) + BigInt(slot);
    else {
      const after = primaries.find((p) => p.firstSlot > slot);
      out = after === undefined ? 0n : BigInt(after.firstSlot);
    }
    return one([Buffer.from(String(out)), r[1]]);
  }

  /** `RANDOMKEY`: a random key of a random primary that has one. */
  private async randomKey(user: RedisUser, args: Arg[]): Promise<One> {
    const addrs = this.o.topology.primaries().map((p) => p.addr);
    for (let i = addrs.length - 1; i > 0; i--) {
      const j = Math.floor(Math.random() * (i + 1));
      [addrs[i], addrs[j]] = [addrs[j], addrs[i]];
    }
    for (const a of addrs) {
      const r = (await this.at(user, a, [args], false)).replies[0];
      if (r !== null) return one(r);
    }
    return one(null);
  }

  /** `EXEC`: the held commands in one slot go at once to its primary; several slots: CROSSSLOT, nothing runs. */
  private async exec(s: Session, queued: Queued[], multiCell: Cell, execCell: Cell): Promise<void> {
    let slot: number | undefined;
    let write = false;
    let crossAt = -1;
    try {
      for (let i = 0; i < queued.length; i++) {
        const { write: w, keys } = this.o.topology.sharded ? await this.keysOf(s.user, queued[i].args) : { write: isWrite(this.keys!, queued[i].args), keys: [] };
        write ||= w;
        for (const k of keys) {
          const ks = keySlot(k);
          if (slot === undefined) slot = ks;
          else if (ks !== slot && crossAt < 0) crossAt = i;
        }
      }
    } catch (err) {
      s.fill(multiCell, OK_RAW);
      for (const q of queued) s.fill(q.cell, QUEUED_RAW);
      return s.fill(execCell, encodeError(`ERR svc router: ${(err as Error).message}`));
    }
    if (crossAt >= 0) {
      s.fill(multiCell, OK_RAW);
      queued.forEach((q, i) => s.fill(q.cell, i === crossAt ? encodeError(CROSSSLOT) : QUEUED_RAW));
      return s.fill(execCell, encodeError(EXECABORT));
    }
    const wait = write && this.o.waitReplicas > 0;
    const cmds = [['MULTI'], ...queued.map((q) => q.args), ['EXEC'], ...(wait ? [this.waitCommand()] : [])];
    const r = await this.send(s.user, this.o.topology.sharded ? slot : 0, cmds, write, true, wait);
    s.fill(multiCell, r.raws![0]);
    queued.forEach((q, i) => s.fill(q.cell, r.raws![i + 1]));
    const e = queued.length + 1;
    s.fill(execCell, wait ? this.checkWait(r.replies[e], r.raws![e], r.replies[e + 1], this.o.topology.sharded ? slot : 0).raw : r.raws![e]);
  }

  /** SUBSCRIBE / PSUBSCRIBE / SSUBSCRIBE / MONITOR: the rest of this connection goes to one node. */
  private async startPassthrough(s: Session, cell: Cell, args: Arg[]): Promise<void> {
    const name = lower(args[0]);
    const addr = name === 'ssubscribe' && args.length > 1 && this.o.topology.sharded ? this.o.topology.primaryFor(keySlot(args[1])) : this.anyPrimary();
    if (addr === undefined) return s.fill(cell, encodeError('TRYAGAIN svc: no primary is known (failover in progress?), retry shortly'));
    const p = RedisConnection.connect(this.o.access.endpointOf(addr), s.user, 1000);
    s.passthrough = p;
    let c: RedisConnection;
    try {
      c = await p;
    } catch (err) {
      s.passthrough = undefined;
      return s.fill(cell, encodeError(err instanceof KvError && err.code === 'aclAuthFailed' ? err.message : `TRYAGAIN svc: ${(err as Error).message}`));
    }
    if (s.socket.destroyed) return c.close();
    s.passthrough = c;
    c.onClose(() => s.socket.destroy());
    c.onPush = (r) => {
      s.send(encodeReply(r));
    };
    c.sendCb(args, true, (err, _r, raw) => {
      s.fill(cell, err ? encodeError(`TRYAGAIN svc: ${err.message}`) : raw!);
      // after the first node's +OK, so that no line comes before it
      if (err === null && name === 'monitor' && this.o.topology.sharded) this.monitorOthers(s, addr);
    });
  }

  /**
   * MONITOR on every primary but `first`, each line written to the session as it comes (the lines of
   * different nodes interleave in arrival order; each node's own order is kept). A node that cannot
   * be reached or drops its connection ends the stream, as the first node's does.
   */
  private monitorOthers(s: Session, first: string): void {
    s.monitors = this.o.topology
      .primaries()
      .filter((p) => p.addr !== first)
      .map(async (p) => {
        const c = await RedisConnection.connect(this.o.access.endpointOf(p.addr), s.user, 1000);
        if (s.socket.destroyed) {
          c.close();
          return c;
        }
        c.onClose(() => s.socket.destroy());
        c.onPush = (r) => {
          s.send(encodeReply(r));
        };
        // refused there (an error reply): the stream would miss that node's lines, so it ends
        c.sendCb(['MONITOR'], false, (err, r) => {
          if (err !== null || r instanceof RespError) s.socket.destroy();
        });
        return c;
      });
    for (const m of s.monitors) m.catch(() => s.socket.destroy());
  }

  /** A command on a connection handed to a node (UNSUBSCRIBE, PING, ...). */
  private forwardPassthrough(s: Session, args: Arg[]): void {
    const p = s.passthrough!;
    const go = (c: RedisConnection) =>
      c.sendCb(args, true, (err, _r, raw) => {
        s.send(err ? encodeError(`ERR ${err.message}`) : raw!);
      });
    if (p instanceof RedisConnection) go(p);
    else p.then(go, () => s.socket.destroy());
  }

  /** Nodes new to the topology get the libraries and ACL changes made through svc; pools of gone nodes close. */
  private nodesAdded(added: string[]): void {
    if (this.closed) return;
    const live = new Set(this.o.topology.nodes());
    for (const [k, p] of this.upstream) {
      if (!live.has(k.slice(k.lastIndexOf('\0') + 1))) {
        p.retire();
        this.upstream.delete(k);
        this.poolsGeneration++;
      }
    }
    const primaries = new Set(this.o.topology.primaries().map((p) => p.addr));
    for (const addr of added) {
      const cmds: Arg[][] = [...this.aclChanges];
      if (primaries.has(addr)) for (const code of this.libraries.values()) cmds.push(['FUNCTION', 'LOAD', 'REPLACE', code]);
      if (cmds.length === 0) continue;
      this.at(this.o.access.admin, addr, cmds, true).then(
        (r) => {
          const err = r.replies.find((x) => x instanceof RespError);
          if (err) this.o.logger.warn({ node: addr, error: (err as RespError).message }, 'kv: replaying ACL users / libraries on a new node failed');
        },
        () => undefined,
      );
    }
  }
}

/** `write` flag of `args` in the table. */
function isWrite(t: KeyTable, args: Arg[]): boolean {
  return t.lookup(args).write;
}

/** True for the error of a node connection closed by its {@link RedisConnection.timeoutAfter} watchdog. */
function isTimeout(err: unknown): boolean {
  return err instanceof KvError && err.code === 'databaseTimeout';
}

/** A batch result of `n` copies of one error. */
function failAll(n: number, message: string): BatchResult {
  const raw = encodeError(message);
  return { replies: new Array(n).fill(new RespError(message)), raws: new Array(n).fill(raw) };
}

