/**
 * The supervised `redis-server`: a child
 * process with its data in `<dataDir>/kv/` (appendonly yes), listening only on a unix socket in
 * that directory (`port 0`, `unixsocketperm 700`), or on a free loopback port when the socket path
 * would exceed the 107-byte `sun_path` limit. ACL: `default` is off; svc's users have generated
 * passwords (credential store `kv.adminPassword`, `kv.standardPassword`, `kv.readonlyAclPassword`).
 *
 * Restarts: when the child dies it is restarted after a capped, jittered exponential backoff
 * (100 ms doubling up to 5 s, times 0.5..1); the counter resets after 30 s of uptime. While it is
 * down `up` is false and the gateway fails requests fast with 503.
 *
 * No orphan: each redis-server has a watchdog ({@link WATCHDOG_SCRIPT}), a `/bin/sh` child whose
 * stdin is a pipe from svc that svc never writes to. The kernel closes the pipe when svc's process
 * ends in any way — `stop()`, a crash, SIGKILL, an out-of-memory abort — and the watchdog, reading
 * end-of-file, stops that redis-server (SIGTERM, SIGKILL after 5 s). Linux's parent-death signal
 * (`prctl(PR_SET_PDEATHSIG)`) cannot be asked for from Node, and a redis-server left running would
 * keep the AOF and the socket of the data dir. The watchdog runs in its own process group (a
 * terminal's Ctrl-C does not reach it) and is killed by svc when its redis-server exits or is
 * stopped, so it never signals a reused pid.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import type { CredentialStore } from '../../credentials.js';
import type { Logger } from '../../logger.js';
import { READONLY_RULES, READONLY_USER, type Backend } from './backend.js';
import { RespError } from '../resp.js';
import { RedisConnection, type Endpoint, type RedisUser } from './connection.js';

export const ADMIN_USER = 'svc-admin';
export const STANDARD_USER = 'svc-standard';

/** Commands the standard token's ACL user may not run (host/process takeover). */
export const STANDARD_DENIED = [
  '-config|set', '-config|rewrite', '-config|resetstat', '-shutdown', '-debug', '-module', '-replicaof',
  '-slaveof', '-sync', '-psync', '-failover', '-migrate',
];

const MAX_SUN_PATH = 107;

/**
 * The watchdog of one redis-server (pid `$1`): waits for end-of-file on stdin (svc's end), then
 * SIGTERM, up to 5 s for it to exit (Redis flushes the AOF), SIGKILL.
 */
export const WATCHDOG_SCRIPT =
  'read _ ; kill -TERM "$1" 2>/dev/null; i=0; while kill -0 "$1" 2>/dev/null && [ $i -lt 50 ]; do sleep 0.1; i=$((i+1)); done; kill -KILL "$1" 2>/dev/null';
const START_TIMEOUT_MS = 15_000;

/** Backoff before restart attempt `n` (0-based), in ms: capped exponential with jitter. */
export function restartDelayMs(n: number, random: () => number = Math.random): number {
  const base = Math.min(5000, 100 * 2 ** n);
  return Math.round(base * (0.5 + random() * 0.5));
}

export class SupervisedBackend implements Backend {
  endpoint: Endpoint;
  readonly admin: RedisUser;
  readonly standard: RedisUser;
  readonly readonly: RedisUser;
  readonly protectedUsers: ReadonlySet<string> = new Set([ADMIN_USER, STANDARD_USER, READONLY_USER, 'default']);
  up = false;
  /** Called each time a restart of a died redis-server begins (metrics). */
  onRestart: (() => void) | undefined;
  private child: ChildProcess | undefined;
  /** The watchdog of {@link child} (see the module doc). */
  private watchdog: ChildProcess | undefined;
  private stopping = false;
  private attempts = 0;
  private startedAt = 0;
  private everUp = false;
  private restartTimer: NodeJS.Timeout | undefined;
  private readonly upHandlers: (() => Promise<void>)[] = [];
  private readonly downHandlers: (() => void)[] = [];
  private readonly dir: string;

  constructor(
    dataDir: string,
    private readonly bin: string,
    credentials: CredentialStore,
    private readonly logger: Logger,
    /**
     * Redis's `busy-reply-threshold` in ms: how long a script runs before Redis answers other
     * clients `BUSY` and reads `SCRIPT KILL` (svc passes `SVC_KV_SCRIPT_TIMEOUT_MS`, so its kill is
     * read at once; undefined/0 = Redis's default, 5000).
     */
    private readonly busyReplyThresholdMs?: number,
  ) {
    this.dir = path.join(dataDir, 'kv');
    this.admin = { user: ADMIN_USER, password: credentials.get('kv.adminPassword') };
    this.standard = { user: STANDARD_USER, password: credentials.get('kv.standardPassword') };
    this.readonly = { user: READONLY_USER, password: credentials.get('kv.readonlyAclPassword') };
    const sock = path.join(this.dir, 'redis.sock');
    this.endpoint = Buffer.byteLength(sock) <= MAX_SUN_PATH ? { path: sock } : { host: '127.0.0.1', port: 0 };
  }

  get description(): string {
    const where = this.endpoint.path ?? `127.0.0.1:${this.endpoint.port}`;
    return `supervised redis-server (${this.bin}) on ${where}, data ${this.dir}`;
  }

  /** Child pid (tests kill it to exercise the restart path). */
  get pid(): number | undefined {
    return this.child?.pid;
  }

  /** Starts the first child and waits until it answers. @throws Error when it cannot start. */
  async start(): Promise<void> {
    fs.mkdirSync(this.dir, { recursive: true, mode: 0o700 });
    await this.killStale();
    try {
      await this.spawnOnce();
    } catch (err) {
      await this.stop();
      throw err;
    }
  }

  onUp(fn: () => Promise<void>): void {
    this.upHandlers.push(fn);
  }

  onDown(fn: () => void): void {
    this.downHandlers.push(fn);
  }

  private config(): string {
    const q = (s: string) => `"${s.replace(/\\/g, '\\\\').replace(/"/g, '\\"')}"`;
    const lines = [
      `dir ${q(this.dir)}`,
      'daemonize no',
      `pidfile ${q(path.join(this.dir, 'redis.pid'))}`,
      `logfile ${q(path.join(this.dir, 'redis.log'))}`,
      'appendonly yes',
      'appendfsync everysec',
      'protected-mode yes',
      'user default off nopass resetchannels -@all',
      `user ${ADMIN_USER} on >${this.admin.password} ~* &* +@all`,
      `user ${STANDARD_USER} on >${this.standard.password} ~* &* +@all ${STANDARD_DENIED.join(' ')}`,
      `user ${READONLY_USER} >${this.readonly.password} ${READONLY_RULES.join(' ')}`,
    ];
    if (this.busyReplyThresholdMs) lines.push(`busy-reply-threshold ${this.busyReplyThresholdMs}`);
    if (this.endpoint.path) lines.push('port 0', `unixsocket ${q(this.endpoint.path)}`, 'unixsocketperm 700');
    else lines.push('bind 127.0.0.1', `port ${this.endpoint.port}`);
    return lines.join('\n') + '\n';
  }

  private async spawnOnce(): Promise<void> {
    if (!this.endpoint.path) this.endpoint = { host: '127.0.0.1', port: await freePort() };
    const conf = path.join(this.dir, 'redis.conf');
    fs.writeFileSync(conf, this.config(), { mode: 0o600 });
    fs.chmodSync(conf, 0o600);
    const child = spawn(this.bin, [conf], { stdio: ['ignore', 'ignore', 'pipe'] });
    this.child = child;
    if (child.pid !== undefined) this.watch(child.pid);
    let stderr = '';
    child.stderr?.on('data', (d: Buffer) => {
      if (stderr.length < 4000) stderr += d.toString();
    });
    const exited = new Promise<string>((resolve) => {
      child.once('error', (err) =>
        resolve(`cannot run ${this.bin}: ${err.message} (install Redis >= 7, e.g. \`apt-get install redis-server\`, set SVC_KV_REDIS_SERVER_BIN, or use SVC_KV_REDIS_URL)`),
      );
      child.once('exit', (code, signal) => resolve(`redis-server exited (code ${code}, signal ${signal}) ${stderr.trim()}`));
    });
    child.once('exit', () => this.onExit(child));
    child.once('error', () => {
      if (this.child === child && child.pid === undefined) this.onExit(child);
    });
    const deadline = Date.now() + START_TIMEOUT_MS;
    let exitReason: string | undefined;
    void exited.then((r) => (exitReason = r));
    for (;;) {
      if (exitReason !== undefined) throw new Error(`kv: ${exitReason}; see ${path.join(this.dir, 'redis.log')}`);
      try {
        const c = await RedisConnection.connect(this.endpoint, this.admin, 1000);
        c.close();
        break;
      } catch (err) {
        if (Date.now() > deadline) {
          child.kill('SIGKILL');
          throw new Error(`kv: redis-server did not answer within ${START_TIMEOUT_MS} ms: ${(err as Error).message}`);
        }
        await new Promise((r) => setTimeout(r, 25));
      }
    }
    this.startedAt = Date.now();
    for (const fn of this.upHandlers) {
      try {
        await fn();
      } catch (err) {
        this.logger.error({ err: (err as Error).message }, 'kv: start-up step after redis-server start failed');
      }
    }
    this.everUp = true;
    this.up = true;
    this.logger.info({ pid: child.pid }, 'kv: redis-server is up');
  }

  /** Starts the watchdog of redis-server `pid` (the module doc). */
  private watch(pid: number): void {
    this.unwatch();
    try {
      const w = spawn('/bin/sh', ['-c', WATCHDOG_SCRIPT, 'svc-redis-watchdog', String(pid)], { stdio: ['pipe', 'ignore', 'ignore'], detached: true });
      w.on('error', (err) => this.logger.warn({ err: err.message }, 'kv: the redis-server watchdog could not start'));
      w.stdin?.on('error', () => undefined);
      // neither the watchdog nor its pipe keeps svc running
      w.unref();
      (w.stdin as unknown as { unref?: () => void } | null)?.unref?.();
      this.watchdog = w;
    } catch (err) {
      this.logger.warn({ err: (err as Error).message }, 'kv: the redis-server watchdog could not start');
    }
  }

  /** Ends the watchdog without letting it signal (its redis-server exited or is being stopped by svc). */
  private unwatch(): void {
    const w = this.watchdog;
    this.watchdog = undefined;
    if (w && w.exitCode === null && w.signalCode === null) w.kill('SIGKILL');
  }

  private onExit(child: ChildProcess): void {
    if (this.child !== child) return;
    this.unwatch();
    this.up = false;
    this.child = undefined;
    for (const fn of this.downHandlers) {
      try {
        fn();
      } catch (err) {
        this.logger.error({ err: (err as Error).message }, 'kv: redis-server down handler failed');
      }
    }
    if (this.stopping || !this.everUp) return;
    this.logger.warn('kv: redis-server died; restarting');
    this.scheduleRestart();
  }

  private scheduleRestart(): void {
    if (this.restartTimer || this.stopping) return;
    if (Date.now() - this.startedAt > 30_000) this.attempts = 0;
    const delay = restartDelayMs(this.attempts++);
    this.restartTimer = setTimeout(() => {
      this.restartTimer = undefined;
      if (this.stopping) return;
      this.onRestart?.();
      this.spawnOnce().catch((err: Error) => {
        this.logger.error({ err: err.message }, 'kv: redis-server restart failed');
        // a child that exited already scheduled the next attempt through onExit
        if (this.child && this.child.exitCode === null) this.child.kill('SIGKILL');
        else if (!this.child) this.scheduleRestart();
      });
    }, delay);
  }

  /** A redis-server left over from a crashed svc (pidfile) would share our AOF: stop it first. */
  private async killStale(): Promise<void> {
    const pidFile = path.join(this.dir, 'redis.pid');
    let pid: number;
    try {
      pid = Number(fs.readFileSync(pidFile, 'utf8').trim());
      const cmd = fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8');
      // only a redis-server working in OUR data dir (redis chdirs to `dir`), never a reused pid
      if (!/redis-server/.test(cmd) || fs.readlinkSync(`/proc/${pid}/cwd`) !== fs.realpathSync(this.dir)) return;
    } catch {
      return;
    }
    this.logger.warn({ pid }, 'kv: stopping a stale redis-server of this data dir');
    try {
      process.kill(pid, 'SIGTERM');
    } catch {
      return;
    }
    for (let i = 0; i < 100 && alive(pid); i++) await new Promise((r) => setTimeout(r, 50));
    if (alive(pid)) process.kill(pid, 'SIGKILL');
  }

  /**
   * A point-in-time copy of the database for a backup: `BGSAVE SCHEDULE` (it waits for an AOF
   * rewrite in progress instead of failing), then `INFO persistence` is polled until a save that
   * started after the request has finished (`rdb_saves` grew, nothing in progress), and the RDB
   * file it wrote (`dump.rdb`, replaced by rename, so the copy is never torn) is copied to `dest`.
   * The point in time is the fork of that save: every write acknowledged before the call is in it.
   * Resolves to the time the save was requested and the RDB's format version.
   * @throws Error when redis-server is down, the save fails (`rdb_last_bgsave_status:err`) or takes
   *   longer than `timeoutMs`
   */
  async saveTo(dest: string, timeoutMs = 30 * 60_000): Promise<{ requestedAt: string; rdbVersion: number }> {
    if (!this.up) throw new Error('kv: redis-server is down');
    const c = await RedisConnection.connect(this.endpoint, this.admin, 5000, 'svc-backup');
    try {
      const info = async () => {
        const r = await c.send(['INFO', 'persistence']);
        const text = r instanceof Buffer ? r.toString() : String(r);
        const field = (name: string) => new RegExp(`^${name}:(.*)$`, 'm').exec(text)?.[1]?.trim();
        return { saves: Number(field('rdb_saves')), inProgress: field('rdb_bgsave_in_progress') === '1', status: field('rdb_last_bgsave_status') };
      };
      const deadline = Date.now() + timeoutMs;
      const pause = () => {
        if (Date.now() > deadline) throw new Error(`kv: BGSAVE did not finish within ${timeoutMs} ms`);
        return new Promise((r) => setTimeout(r, 50));
      };
      // a save already running forked before this call: let it end, then ask for ours
      while ((await info()).inProgress) await pause();
      const before = (await info()).saves;
      const requestedAt = new Date().toISOString();
      const reply = await c.send(['BGSAVE', 'SCHEDULE']);
      if (reply instanceof RespError) throw new Error(`kv: BGSAVE refused: ${reply.message}`);
      for (;;) {
        const i = await info();
        if (!i.inProgress && i.saves > before) break;
        if (!i.inProgress && i.status === 'err') throw new Error('kv: BGSAVE failed (rdb_last_bgsave_status:err); see redis.log');
        await pause();
      }
      await fs.promises.copyFile(path.join(this.dir, 'dump.rdb'), dest);
      const head = Buffer.alloc(9);
      const fh = await fs.promises.open(dest, 'r');
      try {
        await fh.read(head, 0, 9, 0);
      } finally {
        await fh.close();
      }
      return { requestedAt, rdbVersion: Number(head.toString('latin1', 5, 9)) };
    } finally {
      c.close();
    }
  }

  /** SIGTERM, wait up to 5 s (Redis flushes the AOF), then SIGKILL. Idempotent. */
  async stop(): Promise<void> {
    this.stopping = true;
    this.up = false;
    if (this.restartTimer) clearTimeout(this.restartTimer);
    const child = this.child;
    this.unwatch();
    if (!child || child.exitCode !== null || child.pid === undefined) return;
    const gone = new Promise<void>((r) => child.once('exit', () => r()));
    child.kill('SIGTERM');
    const t = setTimeout(() => child.kill('SIGKILL'), 5000);
    await gone;
    clearTimeout(t);
  }
}

/** True while process `pid` exists (signal 0 probe). */
export function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** A free loopback TCP port (bound then released). */
function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as net.AddressInfo).port;
      s.close(() => resolve(port));
    });
  });
}
