/**
 * The database as a Redis Cluster (`SVC_KV_REDIS_CLUSTER`) or a Sentinel-managed primary
 * (`SVC_KV_REDIS_SENTINELS` + `SVC_KV_REDIS_SENTINEL_MASTER`): a {@link Backend} whose endpoint is
 * the unix socket of svc's {@link TopologyRouter} (`<data dir>/kv/router.sock`). The gateway and
 * its worker processes connect there exactly as to one redis-server; the router sends each
 * command to the right node (`router.ts`, `topology.ts`).
 *
 * Data-node credentials: `SVC_KV_REDIS_USERNAME` / `SVC_KV_REDIS_PASSWORD` (svc's admin and the
 * standard token's user, on every node); TLS to nodes and sentinels with `SVC_KV_REDIS_TLS`
 * (`SVC_KV_REDIS_TLS_CA_FILE` for a private CA).
 *
 * Where the router runs (`SVC_KV_ROUTER_THREAD`, default true): in its own worker thread
 * (`router-thread.ts`), so that parsing and forwarding every command a second time does not take
 * event-loop time from the gateway's HTTP work (a cluster `/pipeline` costs the router about twice
 * the gateway's CPU per command, `docs/readme/kv-bench.md`); or, with `false`, on the main event
 * loop. A thread that dies is started again after 1 s, and again with a doubling delay (at most
 * 30 s) while starting fails (the gateway answers 503 meanwhile).
 */
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';
import type { Config } from '../../config.js';
import type { CredentialStore } from '../../credentials.js';
import type { Logger } from '../../logger.js';
import { createReadonlyUser, READONLY_USER, type Backend } from './backend.js';
import type { Endpoint, RedisUser } from './connection.js';
import { TopologyRouter } from './router.js';
import { ClusterTopology, SentinelTopology, splitAddr, type NodeAccess, type Topology } from './topology.js';

/** What the router thread gets (`workerData`): the kv settings, its socket, the log level. */
export interface RouterThreadData {
  kv: Config['kv'];
  socketPath: string;
  logLevel: string;
}

/**
 * The topology of `kv` (cluster or sentinel) and the router in front of it, neither started.
 * @throws Error when the TLS CA file cannot be read
 */
export function createTopologyRouter(kv: Config['kv'], logger: Logger): { topology: Topology; router: TopologyRouter } {
  const ca = kv.redisTlsCaFile ? fs.readFileSync(kv.redisTlsCaFile) : undefined;
  const tls = kv.redisTls;
  const access: NodeAccess = {
    admin: adminOf(kv),
    endpointOf: (addr) => {
      const { host, port } = splitAddr(addr);
      return { host, port, tls, ca };
    },
  };
  let topology: Topology;
  if (kv.redisCluster) topology = new ClusterTopology(kv.redisCluster, access, logger);
  else {
    const sentinelUser: RedisUser = kv.redisSentinelPassword !== undefined ? { user: kv.redisSentinelUsername, password: kv.redisSentinelPassword } : {};
    topology = new SentinelTopology({ sentinels: kv.redisSentinels!, masterName: kv.redisSentinelMaster!, sentinelUser }, access, logger);
  }
  const router = new TopologyRouter({ topology, access, logger, waitReplicas: kv.waitReplicas, waitTimeoutMs: kv.waitTimeoutMs, nodeTimeoutMs: kv.nodeTimeoutMs });
  return { topology, router };
}

/** svc's admin user on the data nodes (`SVC_KV_REDIS_USERNAME` / `_PASSWORD`). */
function adminOf(kv: Config['kv']): RedisUser {
  return kv.redisPassword !== undefined ? { user: kv.redisUsername, password: kv.redisPassword } : {};
}

/** Longest wait between two attempts to start a router thread that died (ms). */
const RESTART_MAX_DELAY_MS = 30_000;

/** The router thread's entry: TypeScript through tsx in a source checkout, the built `.js` otherwise. */
function threadCommand(): { entry: URL; execArgv: string[] } {
  const ts = import.meta.url.endsWith('.ts');
  const execArgv = ts ? ['--import', import.meta.resolve('tsx')] : [];
  for (const a of process.execArgv) if (a.startsWith('--cpu-prof')) execArgv.push(a);
  return { entry: new URL(ts ? './router-thread.ts' : './router-thread.js', import.meta.url), execArgv };
}

export class DistributedBackend implements Backend {
  readonly endpoint: Endpoint;
  readonly admin: RedisUser;
  readonly standard: RedisUser;
  readonly readonly: RedisUser;
  readonly protectedUsers: ReadonlySet<string>;
  readonly description: string;
  /** In-process mode (`SVC_KV_ROUTER_THREAD=false`): the topology and the router on this event loop. */
  private readonly inProcess: { topology: Topology; router: TopologyRouter } | undefined;
  /** Thread mode: the router thread while it runs. */
  private thread: Worker | undefined;
  private readonly upHandlers: (() => Promise<void>)[] = [];
  private started = false;
  private stopping = false;

  /**
   * @param kv the kv configuration with `redisCluster` or `redisSentinels` set
   * @throws Error when the TLS CA file cannot be read
   */
  constructor(private readonly kv: Config['kv'], dataDir: string, credentials: CredentialStore, private readonly logger: Logger) {
    if (kv.redisTlsCaFile) fs.accessSync(kv.redisTlsCaFile, fs.constants.R_OK);
    const user = adminOf(kv);
    this.admin = user;
    this.standard = user;
    this.readonly = { user: READONLY_USER, password: credentials.get('kv.readonlyAclPassword') };
    this.protectedUsers = new Set([user.user ?? 'default', READONLY_USER]);
    const dir = path.join(dataDir, 'kv');
    this.endpoint = { path: path.join(dir, 'router.sock') };
    this.description = kv.redisCluster
      ? `Redis Cluster (seeds ${kv.redisCluster.join(',')})`
      : `Redis Sentinel master ${kv.redisSentinelMaster} (sentinels ${kv.redisSentinels!.join(',')})`;
    this.inProcess = kv.routerThread ? undefined : createTopologyRouter(kv, logger);
  }

  /** Up once started: a node that fails is the router's to handle (503 per command, not for all). */
  get up(): boolean {
    return this.started;
  }

  /** Reads the topology, starts the router, creates the read-only user on every node. @throws Error when no node answers. */
  async start(): Promise<void> {
    fs.mkdirSync(path.dirname(this.endpoint.path!), { recursive: true, mode: 0o700 });
    if (this.endpoint.path!.length > 100) throw new Error(`kv: the router socket path is too long for a unix socket: ${this.endpoint.path}`);
    if (this.inProcess) {
      await this.inProcess.topology.start();
      await this.inProcess.router.start(this.endpoint.path!);
    } else await this.startThread();
    await createReadonlyUser(this.endpoint, this.admin, this.readonly, this.logger);
    for (const fn of this.upHandlers) await fn();
    this.started = true;
  }

  /**
   * Starts the router thread; resolves once it listens.
   * @throws Error when it could not start (no node answered, ...)
   */
  private startThread(): Promise<void> {
    const { entry, execArgv } = threadCommand();
    const data: RouterThreadData = { kv: this.kv, socketPath: this.endpoint.path!, logLevel: this.logger.level };
    const w = new Worker(entry, { workerData: data, execArgv });
    this.thread = w;
    return new Promise<void>((resolve, reject) => {
      let ready = false;
      w.on('message', (m: { ready?: true; error?: string }) => {
        if (m.ready) {
          ready = true;
          resolve();
        } else if (m.error !== undefined && !ready) reject(new Error(m.error));
      });
      w.on('error', (err) => {
        this.logger.error({ err }, 'kv: the topology router thread failed');
        if (!ready) reject(err);
      });
      w.on('exit', (code) => {
        if (this.thread === w) this.thread = undefined;
        if (!ready) return reject(new Error(`kv: the topology router thread exited with code ${code} before it listened`));
        if (this.stopping) return;
        this.logger.error({ code }, 'kv: the topology router thread exited; starting it again in 1 s');
        this.restartThread(1000);
      });
    });
  }

  /**
   * Starts the router thread again after `delayMs` ms; when that start fails (no node answered,
   * ...), again after twice the delay, at most {@link RESTART_MAX_DELAY_MS} apart, until it
   * listens or svc stops. Meanwhile the gateway answers 503 (its connections to the router fail).
   */
  private restartThread(delayMs: number): void {
    setTimeout(() => {
      if (this.stopping) return;
      this.startThread().catch((err: Error) => {
        const next = Math.min(delayMs * 2, RESTART_MAX_DELAY_MS);
        this.logger.error({ err, retryInMs: next }, 'kv: restarting the topology router thread failed; trying again');
        this.restartThread(next);
      });
    }, delayMs).unref();
  }

  async stop(): Promise<void> {
    this.started = false;
    this.stopping = true;
    if (this.inProcess) {
      this.inProcess.topology.stop();
      await this.inProcess.router.close();
    }
    const w = this.thread;
    if (w) {
      // the thread closes its sockets itself (clients see them close), then it is ended
      const closed = new Promise<void>((res) => {
        w.on('message', (m: { closed?: true }) => m.closed && res());
        w.once('exit', () => res());
        setTimeout(res, 5000).unref();
      });
      w.postMessage('close');
      await closed;
      await w.terminate();
    }
  }

  onUp(fn: () => Promise<void>): void {
    this.upHandlers.push(fn);
  }
}

