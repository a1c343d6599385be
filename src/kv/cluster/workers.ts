/**
 * The kv primary's worker processes (`SVC_KV_WORKERS`, default `defaultKvWorkers()` in
 * `src/config.ts`: 0 below 4 CPUs, else CPUs capped at 8): the primary accepts client connections (`pauseOnConnect`) and passes each one, as a socket
 * handle, to the next ready worker in turn (the scheme of `node:cluster`'s round-robin mode, but
 * per kv server: two svc instances in one process — tests — never share workers or ports). While
 * no worker is ready (start-up, restart after a crash) the primary serves the connection itself.
 *
 * The primary keeps what must be single: the supervised redis-server and its restarts (workers get
 * `backend` states), the credential store (`kv.*` changes are forwarded as `cred` messages before
 * the management API answers), and the daily count (workers take leases; `quota.ts`). A script
 * killed in one process is passed to the others (`scriptKill`), so a token's script cool-down
 * holds on every worker.
 *
 * Workers run TypeScript through tsx: `execArgv` is explicit (`--import <tsx loader URL>`, plus
 * `--cpu-prof*` flags when the primary has them), never the parent's flags (a test runner's). A
 * worker that exits unexpectedly is restarted after a capped exponential backoff (100 ms doubling
 * up to 5 s; reset after 30 s of uptime). Workers exit when the IPC channel closes, so none
 * outlives the primary.
 */
import { fork, type ChildProcess } from 'node:child_process';
import type net from 'node:net';
import { fileURLToPath } from 'node:url';
import type { AreaContext } from '../../area.js';
import type { Logger } from '../../logger.js';
import type { KvGateway } from '../gateway.js';
import type { DailyQuota } from '../quota.js';
import type { Backend } from '../redis/backend.js';
import type { MetricSnapshot } from '../../metrics.js';
import { endpointToIpc, type BackendState, type FromWorker, type ToWorker } from './ipc.js';

/** How long `start()` waits for the workers' first `ready`, in ms. */
const START_TIMEOUT_MS = 30_000;
/** How long a scrape waits for a worker's metric families, in ms (a late worker is left out). */
const METRICS_TIMEOUT_MS = 2_000;
/** How long `close()` waits for a worker to exit before SIGKILL, in ms. */
const CLOSE_TIMEOUT_MS = 5_000;

interface Worker {
  index: number;
  child: ChildProcess;
  ready: boolean;
  startedAt: number;
}

/** The entry file and `execArgv` of a worker (TypeScript through tsx, or a built `.js`). */
function workerCommand(): { entry: string; execArgv: string[] } {
  const ts = import.meta.url.endsWith('.ts');
  const entry = fileURLToPath(new URL(ts ? './worker.ts' : './worker.js', import.meta.url));
  const execArgv = ts ? ['--import', import.meta.resolve('tsx')] : [];
  for (const a of process.execArgv) if (a.startsWith('--cpu-prof')) execArgv.push(a);
  return { entry, execArgv };
}

export class KvWorkers {
  private readonly workers: (Worker | undefined)[];
  private readonly attempts: number[];
  private readonly timers = new Set<NodeJS.Timeout>();
  private next = 0;
  private closing = false;
  private nextRid = 1;
  private readonly metricRequests = new Map<number, (families: MetricSnapshot[]) => void>();
  private readonly unsubscribe: () => void;
  private readonly logger: Logger;

  /**
   * @param count number of worker processes (>= 1)
   * @param fallback serves a connection in the primary when no worker is ready
   * @param syncClockFile the shared read-your-writes clock (`sync.ts`; slot `count` is the primary's)
   * @param scriptAliasFile the shared script alias file (`scripts.ts`)
   */
  constructor(
    private readonly count: number,
    private readonly ctx: AreaContext,
    private readonly gateway: KvGateway,
    private readonly backend: Backend,
    private readonly quota: DailyQuota,
    private readonly fallback: (socket: net.Socket) => void,
    private readonly syncClockFile: string,
    private readonly scriptAliasFile: string,
  ) {
    this.logger = ctx.logger;
    this.workers = new Array<Worker | undefined>(count).fill(undefined);
    this.attempts = new Array<number>(count).fill(0);
    quota.setWorkers(count + 1);
    this.unsubscribe = ctx.credentials.onChange((name, value) => {
      if (name.startsWith('kv.')) this.broadcast({ t: 'cred', name, value });
    });
    backend.onUp(async () => this.broadcast({ t: 'backend', backend: this.state(true) }));
    backend.onDown?.(() => this.broadcast({ t: 'backend', backend: this.state(false) }));
  }

  /** Pids of the worker processes that are ready (serving connections). */
  pids(): number[] {
    return this.workers.filter((w): w is Worker => w !== undefined && w.ready && w.child.pid !== undefined).map((w) => w.child.pid!);
  }

  /** Number of workers that are ready. */
  get readyCount(): number {
    return this.workers.filter((w) => w?.ready).length;
  }

  /** Forks every worker; resolves when all are ready, or after 30 s with those that are (logged). */
  async start(): Promise<void> {
    const ready: Promise<void>[] = [];
    for (let i = 0; i < this.count; i++) ready.push(this.spawn(i));
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<void>((resolve) => (timer = setTimeout(resolve, START_TIMEOUT_MS)));
    await Promise.race([Promise.allSettled(ready), timeout]);
    clearTimeout(timer);
    if (this.readyCount < this.count) {
      this.logger.warn({ ready: this.readyCount, wanted: this.count }, 'kv: not every worker process started; the primary serves meanwhile');
    }
  }

  /** The database state workers get (`up` as given: the supervisor's `up` flips after its up-steps). */
  private state(up: boolean): BackendState {
    const b = this.backend;
    return {
      up,
      endpoint: endpointToIpc(b.endpoint),
      admin: b.admin,
      standard: b.standard,
      readonly: b.readonly,
      protectedUsers: [...b.protectedUsers],
      jsonMode: this.gateway.policy.jsonMode,
    };
  }

  private credentials(): Record<string, string> {
    const out: Record<string, string> = {};
    for (const name of ['kv.token', 'kv.readonlyToken', 'kv.aclTokenSecret']) out[name] = this.ctx.credentials.get(name);
    for (const name of ['kv.adminPassword', 'kv.standardPassword', 'kv.readonlyAclPassword']) {
      const v = this.ctx.credentials.peek(name);
      if (v !== undefined) out[name] = v;
    }
    return out;
  }

  /** Forks worker `index`; resolves when it is ready, rejects when it exits first. */
  private spawn(index: number): Promise<void> {
    const { entry, execArgv } = workerCommand();
    const child = fork(entry, [], { execArgv, stdio: ['ignore', 'inherit', 'inherit', 'ipc'], serialization: 'json' });
    const w: Worker = { index, child, ready: false, startedAt: Date.now() };
    this.workers[index] = w;
    return new Promise<void>((resolve, reject) => {
      child.on('message', (m: FromWorker) => {
        if (m.t === 'ready') {
          w.ready = true;
          resolve();
        } else if (m.t === 'lease') {
          const r = this.quota.grant(m.need);
          this.sendTo(w, { t: 'lease', rid: m.rid, ...r });
        } else if (m.t === 'metrics') {
          const done = this.metricRequests.get(m.rid);
          this.metricRequests.delete(m.rid);
          done?.(m.families);
        } else if (m.t === 'scriptKill') {
          this.gateway.scriptKilledElsewhere(m.key);
          this.scriptKilled(m.key, w);
        }
      });
      child.on('error', (err) => this.logger.error({ err: err.message, worker: index }, 'kv: worker process error'));
      child.once('exit', (code, signal) => {
        w.ready = false;
        reject(new Error(`kv worker ${index} exited (code ${code}, signal ${signal})`));
        if (this.workers[index] === w) this.workers[index] = undefined;
        if (this.closing) return;
        this.logger.warn({ worker: index, pid: child.pid, code, signal }, 'kv: worker process exited; restarting');
        this.restart(index, w);
      });
      this.sendTo(w, {
        t: 'init',
        index,
        config: this.ctx.config,
        credentials: this.credentials(),
        backend: this.state(this.backend.up),
        syncClockFile: this.syncClockFile,
        syncClockSlots: this.count + 1,
        scriptAliasFile: this.scriptAliasFile,
      });
    });
  }

  /**
   * A script of identity `key` was killed in the primary or in worker `from`: every other worker
   * counts it too, so the token's script cool-down holds on all of them (`watchdog.ts`).
   */
  scriptKilled(key: string, from?: Worker): void {
    for (const w of this.workers) if (w && w !== from) this.sendTo(w, { t: 'scriptKill', key });
  }

  private restart(index: number, old: Worker): void {
    if (Date.now() - old.startedAt > 30_000) this.attempts[index] = 0;
    const n = this.attempts[index]++;
    const delay = Math.round(Math.min(5000, 100 * 2 ** n) * (0.5 + Math.random() * 0.5));
    const t = setTimeout(() => {
      this.timers.delete(t);
      if (this.closing) return;
      this.spawn(index).catch(() => {
        /* its exit handler schedules the next attempt */
      });
    }, delay);
    this.timers.add(t);
  }

  private sendTo(w: Worker, m: ToWorker, handle?: net.Socket): boolean {
    if (!w.child.connected) return false;
    try {
      w.child.send(m, handle as net.Socket, (err) => {
        if (err && handle && !handle.destroyed) handle.destroy();
      });
      return true;
    } catch {
      return false;
    }
  }

  private broadcast(m: ToWorker): void {
    for (const w of this.workers) if (w) this.sendTo(w, m);
  }

  /** Passes an accepted connection to the next ready worker (the primary serves it when none is). */
  dispatch(socket: net.Socket): void {
    if (this.closing) {
      socket.destroy();
      return;
    }
    for (let k = 0; k < this.count; k++) {
      const w = this.workers[this.next];
      this.next = (this.next + 1) % this.count;
      if (w?.ready && this.sendTo(w, { t: 'conn' }, socket)) return;
    }
    this.fallback(socket);
  }

  /**
   * The metric families of every ready worker (one array per worker), for the primary's scrape.
   * A worker that does not answer within {@link METRICS_TIMEOUT_MS} is left out of this scrape.
   */
  async collectMetrics(): Promise<MetricSnapshot[][]> {
    const answers = await Promise.all(
      this.workers.map((w) => {
        if (!w?.ready) return undefined;
        const rid = this.nextRid++;
        return new Promise<MetricSnapshot[] | undefined>((resolve) => {
          const timer = setTimeout(() => {
            this.metricRequests.delete(rid);
            resolve(undefined);
          }, METRICS_TIMEOUT_MS);
          this.metricRequests.set(rid, (families) => {
            clearTimeout(timer);
            resolve(families);
          });
          if (!this.sendTo(w, { t: 'metrics', rid })) {
            clearTimeout(timer);
            this.metricRequests.delete(rid);
            resolve(undefined);
          }
        });
      }),
    );
    return answers.filter((a): a is MetricSnapshot[] => a !== undefined);
  }

  /** Asks every worker to close, waits up to 5 s each, then SIGKILL. Resolves when all exited. */
  async close(): Promise<void> {
    this.closing = true;
    this.unsubscribe();
    for (const t of this.timers) clearTimeout(t);
    this.timers.clear();
    await Promise.all(
      this.workers.map(async (w) => {
        if (!w || w.child.exitCode !== null || w.child.signalCode !== null) return;
        const exited = new Promise<void>((resolve) => w.child.once('exit', () => resolve()));
        if (!this.sendTo(w, { t: 'close' })) w.child.kill('SIGTERM');
        const t = setTimeout(() => w.child.kill('SIGKILL'), CLOSE_TIMEOUT_MS);
        await exited;
        clearTimeout(t);
      }),
    );
  }
}
