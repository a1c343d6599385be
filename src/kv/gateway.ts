/**
 * The execution core of the kv gateway, independent of HTTP: runs single commands,
 * pipelines and transactions for an {@link Identity} on connections authenticated as the matching
 * Redis ACL user, applies the command policy, JSON.* translation, the daily limit and the
 * read-your-writes sync token.
 *
 * Whole-request failures are thrown as {@link KvError} (the catalogue in `errors.ts`: status +
 * `{error}` text); a per-command failure is a {@link RespError} in the reply list.
 */
import { KV_ERRORS, KvError, kvError, kvMessage, redisReplyError, type KvErrorCode } from './errors.js';
import { DailyQuota, type Quota } from './quota.js';
import { LocalSyncClock, type SyncClock } from './sync.js';
import type { Config } from '../config.js';
import type { Logger } from '../logger.js';
import type { HistogramCell } from '../metrics.js';
import { JSON_LIBRARY, translateJsonCommand } from './json/index.js';
import { CommandPolicy, hideProtectedPasswords, parseCommandTable } from './policy.js';
import type { Backend } from './redis/backend.js';
import {
  ConnectionPool,
  RedisConnection,
  type RedisUser,
  type ReplyCallback,
} from './redis/connection.js';
import { EMULATED, emulate } from './emulate.js';
import { encodeReply, RespError, type Arg, type Reply } from './resp.js';
import { type AliasFile, SCRIPT_COMMANDS, ScriptShebangs } from './scripts.js';
import { SCRIPT_RUNNERS, ScriptAdmission, ScriptWatchdog, type Watch } from './watchdog.js';
import type { Identity, KvTokens } from './tokens.js';

/** Options of {@link KvGateway} beyond the backend, tokens and config. */
export interface GatewayOptions {
  /** The daily limit's counter (default: a {@link DailyQuota} of this process). */
  quota?: Quota;
  /**
   * Where the JSON.* mode comes from when the server has no native `JSON.GET`: undefined = load
   * the Lua library here (`FUNCTION LOAD REPLACE`; the primary process), else this function gives
   * the mode the primary found (kv worker processes do not load it again).
   */
  jsonMode?: () => 'native' | 'library' | 'none';
  /** The read-your-writes token's clock (default: one of this process only). */
  syncClock?: SyncClock;
  /** The script alias file shared with the other kv processes (`scripts.ts`; workers on). */
  scriptAliases?: AliasFile;
  /** `CLIENT SETNAME` of the pooled Redis connections (default `svc-kv-<pid>`; workers: `svc-kv-w<index>-<pid>`). */
  clientName?: string;
  /** Observes the round trips of the pooled connections (`svc_kv_backend_duration_seconds`). */
  backendRtt?: HistogramCell;
  /**
   * Told when a script of an identity (its {@link ScriptAdmission} key) was killed here; kv worker
   * processes pass it to the other processes ({@link KvGateway.scriptKilledElsewhere}).
   */
  onScriptKill?: (key: string) => void;
}

/** Shared connections per pool (requests are RESP-pipelined on them). */
const SHARED_CONNECTIONS = 2;
const MAX_ACL_POOLS = 64;

/**
 * A command ready to send: `fix` mends Redis's reply into the one clients expect (`emulate.ts`,
 * `scripts.ts`); `script` says it runs a Lua script or function (watched by the {@link ScriptWatchdog}).
 */
type Prepared = { args: Arg[]; write: boolean; fix?: (r: Reply) => Reply; script?: 'eval' | 'function' } | { code: KvErrorCode; error: string } | { resttoken: true };

/** Commands whose arguments or reply svc may change before/after Redis (`COMMAND` names). */
const REWRITTEN: ReadonlySet<string> = new Set([...SCRIPT_COMMANDS, ...EMULATED]);


export class KvGateway {
  readonly policy: CommandPolicy;
  private readonly pools = new Map<string, ConnectionPool>();
  private readonly sync: SyncClock;
  private readonly clientName: string;
  private readonly quota: Quota;
  private readonly scripts: ScriptShebangs;
  private closed = false;
  private jsonReloadPending = false;
  private readonly watchdog: ScriptWatchdog;
  /** Script requests per identity: in-flight cap and cool-down after a kill (none without a script time limit). */
  private readonly admission: ScriptAdmission | undefined;

  constructor(
    readonly backend: Backend,
    readonly tokens: KvTokens,
    private readonly config: Config['kv'],
    private readonly logger: Logger,
    private readonly options: GatewayOptions = {},
  ) {
    this.sync = options.syncClock ?? new LocalSyncClock();
    this.scripts = new ScriptShebangs(options.scriptAliases);
    this.clientName = options.clientName ?? `svc-kv-${process.pid}`;
    this.quota = options.quota ?? new DailyQuota(config.dailyRequestLimit);
    this.policy = new CommandPolicy(new Map(), backend.protectedUsers);
    this.watchdog = new ScriptWatchdog(config.scriptTimeoutMs, (cmd) => this.adminCommand(cmd), (err) =>
      this.logger.warn({ err: (err as Error).message }, 'kv: killing a long-running script failed'),
    );
    this.admission = config.scriptTimeoutMs > 0 ? new ScriptAdmission(config.scriptTimeoutMs, options.onScriptKill) : undefined;
    backend.onUp(() => this.refresh());
  }

  /** Starts the backend (and loads the command table). @throws Error when the database cannot start. */
  async start(): Promise<void> {
    await this.backend.start();
  }

  /**
   * Reads `COMMAND` into the policy table and sets up JSON.*: native when the server has
   * `JSON.GET`, else the Lua library via `FUNCTION LOAD REPLACE` when available.
   */
  private async refresh(): Promise<void> {
    for (const p of this.pools.values()) p.close();
    this.pools.clear();
    const conn = await RedisConnection.connect(this.backend.endpoint, this.backend.admin);
    try {
      const table = parseCommandTable(await conn.send(['COMMAND']));
      this.policy.setTable(table);
      if (table.has('json.get')) this.policy.jsonMode = 'native';
      else if (this.options.jsonMode) this.policy.jsonMode = this.options.jsonMode();
      else if (JSON_LIBRARY !== '') {
        const r = await conn.send(['FUNCTION', 'LOAD', 'REPLACE', JSON_LIBRARY]);
        if (r instanceof RespError) {
          this.logger.error({ error: r.message }, 'kv: loading the JSON function library failed');
          this.policy.jsonMode = 'none';
        } else this.policy.jsonMode = 'library';
      } else this.policy.jsonMode = 'none';
    } finally {
      conn.close();
    }
  }

  /** The current read-your-writes token (changes after every request that wrote). */
  get syncToken(): string {
    return this.sync.current();
  }

  /** A request that writes was accepted: the token of this write (the responses to it carry it). */
  private wrote(): string {
    return this.sync.wrote();
  }

  private userOf(id: Identity): RedisUser {
    if (id.kind === 'standard') return this.backend.standard;
    if (id.kind === 'readonly') return this.backend.readonly;
    return { user: id.user, password: id.password };
  }

  private pool(id: Identity): ConnectionPool {
    if (this.closed) throw kvError('shuttingDown');
    if (!this.backend.up) throw kvError('databaseRestarting');
    const key = id.kind === 'acl' ? `acl:${id.user}\0${id.password}` : id.kind;
    let p = this.pools.get(key);
    if (p === undefined) {
      if (id.kind === 'acl' && this.pools.size >= MAX_ACL_POOLS + 2) this.evictAclPool();
      const who = this.userOf(id);
      const open = () =>
        // named on the standard user only (the read-only and clients' ACL users may lack CLIENT)
        RedisConnection.connect(this.backend.endpoint, who, undefined, id.kind === 'standard' ? this.clientName : undefined).then((c) => {
          c.onCallbackError = this.logCallbackError;
          c.rtt = this.options.backendRtt;
          return c;
        });
      p = new ConnectionPool(open, id.kind === 'acl' ? 1 : SHARED_CONNECTIONS);
      this.pools.set(key, p);
    }
    return p;
  }

  /**
   * Makes room for one more ACL-token pool: the least recently used one is retired (requests in
   * flight on it finish; its connections close once idle).
   */
  private evictAclPool(): void {
    let oldest: [string, ConnectionPool] | undefined;
    for (const e of this.pools) if (e[0].startsWith('acl:') && (oldest === undefined || e[1].lastUse < oldest[1].lastUse)) oldest = e;
    if (oldest === undefined) return;
    this.pools.delete(oldest[0]);
    oldest[1].retire();
  }

  /**
   * Before `ACL SETUSER` / `DELUSER` / `LOAD` runs: the pools of the ACL users it may change are
   * retired, so the next request of such a user authenticates anew (a changed password stops the
   * old token at once; a deleted and re-created user gets a fresh connection instead of one Redis
   * is about to close). Requests already in flight finish on the old connections.
   */
  private aclChanging(args: readonly Arg[]): void {
    const sub = String(args[1] ?? '').toLowerCase();
    const users = sub === 'setuser' ? args.slice(2, 3).map(String) : sub === 'deluser' ? args.slice(2).map(String) : sub === 'load' ? undefined : [];
    if (users !== undefined && users.length === 0) return;
    for (const [k, p] of this.pools) {
      if (!k.startsWith('acl:')) continue;
      if (users === undefined || users.includes(k.slice(4, k.indexOf('\0')))) {
        this.pools.delete(k);
        p.retire();
      }
    }
  }

  /** Counts `n` commands against the daily limit: undefined, a KvError (400 past it) or a Promise of either. */
  private count(n: number): KvError | undefined | Promise<KvError | undefined> {
    return this.quota.take(n);
  }

  /**
   * After a client ran FUNCTION FLUSH / DELETE / RESTORE, the JSON library may be gone: load it
   * again (REPLACE keeps it idempotent). Errors are logged.
   */
  private reloadJsonSoon(): void {
    if (this.policy.jsonMode !== 'library' || this.jsonReloadPending) return;
    this.jsonReloadPending = true;
    setImmediate(() => {
      this.jsonReloadPending = false;
      void this.loadJsonLibrary().catch((err: Error) => this.logger.error({ err: err.message }, 'kv: reloading the JSON library failed'));
    });
  }

  private async loadJsonLibrary(): Promise<void> {
    const conn = await RedisConnection.connect(this.backend.endpoint, this.backend.admin);
    try {
      const r = await conn.send(['FUNCTION', 'LOAD', 'REPLACE', JSON_LIBRARY]);
      if (r instanceof RespError) throw new Error(r.message);
    } finally {
      conn.close();
    }
  }

  /** Policy + JSON translation for one command. */
  private prepare(args: Arg[]): Prepared {
    const v = this.policy.check(args);
    switch (v.kind) {
      case 'forward': {
        const name = v.info?.name;
        if (name === undefined) return { args, write: v.write };
        if (name.startsWith('function|') && /^function\|(flush|delete|restore)$/.test(name)) this.reloadJsonSoon();
        if (name === 'acl|setuser' || name === 'acl|deluser' || name === 'acl|load') this.aclChanging(args);
        if (name === 'acl|list' || name === 'acl|getuser') return { args, write: v.write, fix: hideProtectedPasswords(name, args, this.backend.protectedUsers) };
        const script = SCRIPT_RUNNERS.has(name) ? (name.startsWith('fcall') ? 'function' : 'eval') : undefined;
        if (!REWRITTEN.has(name)) return { args, write: v.write, script };
        const r = SCRIPT_COMMANDS.has(name) ? this.scripts.prepare(name, args) : emulate(name, args);
        return r === undefined ? { args, write: v.write, script } : { args: r.args, write: r.write ?? v.write, fix: r.fix, script };
      }
      case 'refuse':
        return { code: v.code, error: v.error };
      case 'resttoken':
        return { resttoken: true };
      case 'json':
        try {
          const t = translateJsonCommand(args.map((a) => (typeof a === 'string' ? Buffer.from(a) : a)));
          if (!t) return { code: 'unknownCommand', error: kvMessage('unknownCommand', String(args[0])) };
          return { args: t, write: true };
        } catch (err) {
          if (err instanceof KvError) return { code: err.code, error: err.message };
          throw err;
        }
    }
  }

  private async conn(id: Identity): Promise<{ pool: ConnectionPool; c: RedisConnection }> {
    const pool = this.pool(id);
    return { pool, c: await pool.get() };
  }

  /**
   * Runs one command without Promises or per-request closures (the hot path): `cb` runs exactly
   * once, with the reply (a Redis error is a {@link RespError} reply) and its raw bytes when
   * `wantRaw`, or with an error: a {@link KvError} (400 refused/limit, 401 ACL user auth failed,
   * 503 database unavailable), or an unexpected one (answered `internal`, 500). An
   * exception thrown by `cb` is logged, never propagated into the Redis connection's reader.
   * When the command writes, `cb`'s last argument is its read-your-writes token (`sync.ts`).
   * Commands whose reply svc mends (`emulate.ts`, `scripts.ts`) take one closure.
   */
  singleCb(id: Identity, args: Arg[], wantRaw: boolean, cb: ReplyCallback): void {
    let p: Prepared;
    let q: KvError | undefined | Promise<KvError | undefined>;
    try {
      p = this.prepare(args);
      if ('error' in p) throw new KvError(p.code, KV_ERRORS[p.code].status, p.error);
      q = this.count(1);
    } catch (err) {
      return this.fire(cb, err as Error);
    }
    if (q === undefined) return this.runSingle(id, p, args, wantRaw, cb);
    if (q instanceof KvError) return this.fire(cb, q);
    const prepared = p;
    q.then((e) => (e ? this.fire(cb, e) : this.runSingle(id, prepared, args, wantRaw, cb)));
  }

  /** Calls `cb` with an error; what it throws is logged. */
  private fire(cb: ReplyCallback, err: Error | null, reply: Reply = null): void {
    try {
      cb(err, reply, undefined);
    } catch (e) {
      this.logCallbackError(e);
    }
  }

  private readonly logCallbackError = (e: unknown): void => {
    this.logger.error({ err: e }, 'kv: response callback failed');
  };

  /**
   * The part of {@link singleCb} after the policy check and the daily count: a script waits for
   * (or is refused) its identity's admission first ({@link ScriptAdmission}).
   */
  private runSingle(id: Identity, p: Prepared, args: Arg[], wantRaw: boolean, cb: ReplyCallback): void {
    if (!('script' in p) || p.script === undefined || this.admission === undefined) return this.sendSingle(id, p, args, wantRaw, cb, undefined);
    const key = scriptKey(id);
    const a = this.admission.enter(key);
    if (a === undefined) return this.sendSingle(id, p, args, wantRaw, cb, key);
    if (a instanceof KvError) return this.fire(cb, a);
    a.then((e) => (e ? this.fire(cb, e) : this.sendSingle(id, p, args, wantRaw, cb, key)));
  }

  /** Sends one prepared command; `admitted`: the script admission key to release when it is answered. */
  private sendSingle(id: Identity, p: Prepared, args: Arg[], wantRaw: boolean, cb: ReplyCallback, admitted: string | undefined): void {
    let c: RedisConnection | Promise<RedisConnection>;
    let cmd: Arg[];
    let done: ReplyCallback = cb;
    let token: string | undefined;
    try {
      if ('resttoken' in p) {
        this.restToken(args).then((r) => this.fire(cb, null, r), (e: unknown) => this.fire(cb, e as Error));
        return;
      }
      if ('error' in p) throw new KvError(p.code, KV_ERRORS[p.code].status, p.error);
      if (p.write) token = this.wrote(); // handed back to `cb` by the connection (no closure per write)
      if (p.fix) done = withFix(cb, p.fix, wantRaw);
      if (p.script) done = this.watched(p.script === 'function', admitted, done);
      c = this.pool(id).get();
      cmd = p.args;
    } catch (err) {
      return this.fire(done, err as Error);
    }
    if (c instanceof RedisConnection) c.sendCb(cmd, wantRaw, done, token);
    else c.then((conn) => conn.sendCb(cmd, wantRaw, done, token), (e: unknown) => this.fire(done, e as Error));
  }

  /**
   * `cb` of a script command, watched by the {@link ScriptWatchdog} until its reply (or error)
   * arrives; then its admission (`admitted`, {@link ScriptAdmission}) is released.
   */
  private watched(fn: boolean, admitted: string | undefined, cb: ReplyCallback): ReplyCallback {
    const watch = this.watchdog.start(fn);
    if (watch === undefined) return cb;
    return (err, reply, raw, token) => {
      const r = this.watchdog.end(watch, reply);
      this.scriptEnded(admitted, watch);
      cb(err, r, r === reply ? raw : undefined, token);
    };
  }

  /** Another kv process killed a script of identity `key` ({@link GatewayOptions.onScriptKill}): counted here too. */
  scriptKilledElsewhere(key: string): void {
    this.admission?.killedElsewhere(key);
  }

  /** Releases a script request's admission; a script svc killed counts against its identity. */
  private scriptEnded(admitted: string | undefined, watch: Watch | undefined): void {
    if (admitted !== undefined) this.admission?.leave(admitted, watch?.struck === true);
  }

  /**
   * Admission of a pipeline or transaction that runs a script: undefined = go (release with
   * {@link scriptEnded}), else the refusal (429).
   */
  private async admitScripts(id: Identity): Promise<{ key?: string; refused?: KvError }> {
    if (this.admission === undefined) return {};
    const key = scriptKey(id);
    const refused = await this.admission.enter(key);
    return refused ? { refused } : { key };
  }

  /**
   * Deletes every ACL user of the database except svc's own ({@link Backend.protectedUsers}) and
   * `default`: what a kv password reset does after the tokens change, so a user created or given a
   * password with a leaked token (`ACL SETUSER`) cannot log in to the database directly, or through
   * `ACL RESTTOKEN` with a new token, once the leak is closed. Sent as the admin user, past the
   * daily limit (through the router, so on every node of a cluster or sentinel deployment).
   * @returns the names deleted (empty when there were none)
   * @throws Error when the database cannot be reached or refuses `ACL USERS` / `ACL DELUSER`
   */
  async deleteAclUsers(): Promise<string[]> {
    const users = await this.adminCommand(['ACL', 'USERS']);
    if (!Array.isArray(users)) throw new Error(`ACL USERS: ${users instanceof RespError ? users.message : 'unexpected reply'}`);
    const names = users.map((u) => String(u)).filter((u) => u !== 'default' && !this.backend.protectedUsers.has(u));
    if (names.length === 0) return [];
    const del: Arg[] = ['ACL', 'DELUSER', ...names];
    this.aclChanging(del);
    const r = await this.adminCommand(del);
    if (r instanceof RespError) throw new Error(`ACL DELUSER: ${r.message}`);
    return names;
  }

  /** Sends one command on a new connection of the admin user (the watchdog's kills); closes it. */
  private async adminCommand(cmd: Arg[]): Promise<Reply> {
    const c = await RedisConnection.connect(this.backend.endpoint, this.backend.admin);
    try {
      return await c.send(cmd);
    } finally {
      c.close();
    }
  }

  /**
   * Runs a pipeline: every allowed command is written at once on one connection; refused ones
   * become error items in place (its scripts too while their identity's scripts are refused,
   * {@link ScriptAdmission}). Non-atomic; all commands run even if some fail.
   * @throws KvError for whole-request failures (limit, database unavailable)
   */
  async pipeline(id: Identity, cmds: Arg[][], wantRaw: boolean): Promise<{ replies: Reply[]; raws?: Buffer[]; token?: string }> {
    const refused = await this.count(cmds.length);
    if (refused) throw refused;
    const replies: Reply[] = new Array(cmds.length);
    const prepared = cmds.map((cmd) => this.prepare(cmd));
    const admit = prepared.some((p) => 'script' in p && p.script !== undefined) ? await this.admitScripts(id) : {};
    const send: Arg[][] = [];
    const at: number[] = [];
    let fixes: Map<number, (r: Reply) => Reply> | undefined;
    let write = false;
    let script: 'eval' | 'function' | undefined;
    for (let i = 0; i < cmds.length; i++) {
      const p = prepared[i];
      if ('error' in p) replies[i] = new RespError(p.error);
      else if ('resttoken' in p) replies[i] = new RespError(kvMessage('restTokenNotSingle'));
      else if (p.script && admit.refused) replies[i] = new RespError(admit.refused.message);
      else {
        if (p.write) write = true;
        if (p.script) script = p.script;
        if (p.fix) (fixes ??= new Map()).set(send.length, p.fix);
        send.push(p.args);
        at.push(i);
      }
    }
    const token = write ? this.wrote() : undefined;
    let raws: Buffer[] | undefined;
    let watch: Watch | undefined;
    try {
      if (send.length) {
        const { c } = await this.conn(id);
        watch = script && this.watchdog.start(script === 'function');
        let r;
        try {
          r = await c.batch(send, wantRaw);
        } finally {
          this.watchdog.end(watch, null);
        }
        if (this.watchdog.killedDuring(watch)) r = { replies: this.watchdog.endAll(watch, r.replies), raws: undefined };
        if (fixes) applyFixes(fixes, r.replies, r.raws);
        if (send.length === cmds.length) return { replies: r.replies, raws: r.raws, token };
        for (let k = 0; k < at.length; k++) replies[at[k]] = r.replies[k];
        if (wantRaw) {
          raws = new Array(cmds.length);
          for (let k = 0; k < at.length; k++) raws[at[k]] = r.raws![k];
        }
      } else if (wantRaw) raws = new Array(cmds.length);
      return { replies, raws, token };
    } finally {
      this.scriptEnded(admit.key, watch);
    }
  }

  /**
   * Runs a transaction (MULTI, commands, EXEC written at once on a dedicated connection).
   * @throws KvError 400 when the transaction is discarded as a whole (refused command, queue-time
   *   error such as wrong arity or NOPERM, daily limit), 503 when the database is unavailable or
   *   the transaction failed on a temporary condition (`BUSY`, `LOADING`, ...: {@link isTemporaryRedisError})
   */
  async multi(id: Identity, cmds: Arg[][]): Promise<{ replies: Reply[]; token?: string }> {
    const prepared: Arg[][] = [['MULTI']];
    let fixes: Map<number, (r: Reply) => Reply> | undefined;
    let write = false;
    let script: 'eval' | 'function' | undefined;
    for (const cmd of cmds) {
      const p = this.prepare(cmd);
      if ('error' in p) throw new KvError(p.code, KV_ERRORS[p.code].status, p.error);
      if ('resttoken' in p) throw kvError('restTokenNotSingle');
      if (p.write) write = true;
      if (p.script) script = p.script;
      if (p.fix) (fixes ??= new Map()).set(prepared.length - 1, p.fix);
      prepared.push(p.args);
    }
    prepared.push(['EXEC']);
    const refused = await this.count(cmds.length);
    if (refused) throw refused;
    const admit = script ? await this.admitScripts(id) : {};
    if (admit.refused) throw admit.refused;
    const token = write ? this.wrote() : undefined;
    let replies: Reply[];
    let watch: Watch | undefined;
    try {
      const pool = this.pool(id);
      const c = await pool.exclusive();
      watch = script && this.watchdog.start(script === 'function');
      try {
        replies = this.watchdog.endAll(watch, (await c.batch(prepared, false)).replies);
      } catch (err) {
        this.watchdog.end(watch, null);
        throw err;
      } finally {
        pool.release(c);
      }
    } finally {
      this.scriptEnded(admit.key, watch);
    }
    const exec = replies[replies.length - 1];
    if (exec instanceof RespError || exec === null || !Array.isArray(exec)) {
      const first = replies.slice(0, -1).find((r): r is RespError => r instanceof RespError);
      if (first) throw redisReplyError(first.message);
      throw exec instanceof RespError ? redisReplyError(exec.message) : kvError('transactionAborted');
    }
    if (fixes) applyFixes(fixes, exec, undefined);
    return { replies: exec, token };
  }

  /** `ACL RESTTOKEN <user> <password>`: verifies the password with AUTH on a fresh connection. */
  private async restToken(args: Arg[]): Promise<Reply> {
    if (!this.backend.up) throw kvError('databaseRestarting');
    const user = String(args[2]);
    const password = String(args[3]);
    try {
      const c = await RedisConnection.connect(this.backend.endpoint, { user, password });
      c.close();
    } catch (err) {
      if (err instanceof KvError && err.code === 'aclAuthFailed') return new RespError(kvMessage('restTokenWrongPassword', user));
      throw err;
    }
    return Buffer.from(this.tokens.mint(user, password));
  }

  /** A new connection of its own for `id` (SSE streams); the caller closes it. */
  async dedicated(id: Identity): Promise<RedisConnection> {
    this.pool(id); // availability check
    return RedisConnection.connect(this.backend.endpoint, this.userOf(id));
  }

  /** Answers PING within 1 s. */
  async ping(): Promise<boolean> {
    if (!this.backend.up || this.closed) return false;
    try {
      const { c } = await this.conn({ kind: 'standard' });
      const r = await Promise.race([c.send(['PING']), new Promise<null>((res) => setTimeout(() => res(null), 1000).unref())]);
      return r !== null && !(r instanceof RespError);
    } catch {
      return false;
    }
  }

  /** Closes every pool and stops the backend. */
  async close(): Promise<void> {
    this.closed = true;
    for (const p of this.pools.values()) p.close();
    this.pools.clear();
    await this.backend.stop();
  }
}

/** Applies the reply fixes (by index) in place; a changed reply's raw bytes are encoded anew. */
function applyFixes(fixes: Map<number, (r: Reply) => Reply>, replies: Reply[], raws: Buffer[] | undefined): void {
  for (const [k, fix] of fixes) {
    const before = replies[k];
    replies[k] = fix(before);
    if (raws && replies[k] !== before) raws[k] = encodeReply(replies[k]);
  }
}

/** `cb` with the reply mended by `fix` (raw bytes encoded anew when it changed). */
function withFix(cb: ReplyCallback, fix: (r: Reply) => Reply, wantRaw: boolean): ReplyCallback {
  return (err, reply, raw, token) => {
    if (err === null) {
      const fixed = fix(reply);
      if (fixed !== reply && wantRaw) raw = encodeReply(fixed);
      reply = fixed;
    }
    cb(err, reply, raw, token);
  };
}

/** The key of an identity in the {@link ScriptAdmission}: the token kind, or the ACL user. */
function scriptKey(id: Identity): string {
  return id.kind === 'acl' ? `acl:${id.user}` : id.kind;
}
