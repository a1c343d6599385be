/**
 * Area B: the key-value REST gateway. `kvArea` plugs into `main.ts`; `createKvServer`
 * builds the server: the database backend (supervised redis-server or `SVC_KV_REDIS_URL`), the
 * gateway core and its HTTP front (`front.ts`: a minimal HTTP/1.1 server for the hot path in front
 * of a raw `node:http` server for everything else; see `docs/readme/kv-perf.md`).
 *
 * With `SVC_KV_WORKERS` > 0 (the default on 4+ CPUs: one per CPU, at most 8; below 4 CPUs the
 * default is 0, `defaultKvWorkers` in `src/config.ts`) this process is the primary: it
 * owns the backend, the credentials and the daily count, accepts connections and passes them to
 * worker processes (`cluster/workers.ts`); it serves them itself only while no worker is ready.
 * With 0 it serves everything itself, as before.
 */
import fs from 'node:fs';
import path from 'node:path';
import type { AreaContext, AreaModule, AreaServer } from '../area.js';
import { listenRaw } from '../http/raw.js';
import { KvWorkers } from './cluster/workers.js';
import { startingGate } from '../http/starting.js';
import { createKvFront, type KvFront } from './front.js';
import { KvGateway } from './gateway.js';
import { KvMetrics } from './metrics.js';
import { DailyQuota } from './quota.js';
import { ExternalBackend, type Backend } from './redis/backend.js';
import { DistributedBackend } from './redis/distributed.js';
import { SupervisedBackend } from './redis/supervisor.js';
import { AliasFile } from './scripts.js';
import { MAX_CLOCK_SLOTS, SharedSyncClock } from './sync.js';
import { KvTokens } from './tokens.js';

/** Names of the AOF base and manifest in the supervised redis-server's `appendonlydir` (Redis >= 7 defaults). */
const AOF_BASE = 'appendonly.aof.1.base.rdb';
const AOF_MANIFEST = 'appendonly.aof.manifest';

/** A running kv server plus handles for tests (the gateway and its backend, the workers' pids). */
export interface KvServer extends AreaServer {
  gateway: KvGateway;
  backend: Backend;
  /** Pids of the worker processes that are ready ([] without workers). */
  workerPids(): number[];
}

/**
 * Creates the kv area without touching stored state: its port's listening socket (a
 * {@link startingGate}: 503 + `Retry-After` until loaded) and the database backend object. `start`
 * (called once every area's port is bound, `src/main.ts`) starts (or connects to) the database,
 * loads its command table, creates the workers' shared files and forks the worker processes
 * (`config.kv.workers`; resolves once they are ready).
 * `start` @throws Error when redis-server cannot be started or the external database cannot be reached.
 */
export async function createKvServer(ctx: AreaContext): Promise<KvServer> {
  const { config, credentials, logger } = ctx;
  const backend: Backend = config.kv.redisCluster || config.kv.redisSentinels
    ? new DistributedBackend(config.kv, config.dataDir, credentials, logger)
    : config.kv.redisUrl
    ? new ExternalBackend(config.kv.redisUrl, credentials, logger, config.kv.redisTlsCaFile)
    : new SupervisedBackend(config.dataDir, config.kv.redisServerBin, credentials, logger, config.kv.scriptTimeoutMs);
  const tokens = new KvTokens(credentials);
  const quota = new DailyQuota(config.kv.dailyRequestLimit);
  const workerCount = Math.min(config.kv.workers, MAX_CLOCK_SLOTS - 1);
  const kvMetrics = new KvMetrics(ctx.metrics);
  ctx.metrics.gauge('svc_kv_backend_up', 'kv database state: 1 up, 0 down (restarting or unreachable)').addReader(() => [[[], loaded && backend.up ? 1 : 0]]);
  if (backend instanceof SupervisedBackend) {
    const restarts = ctx.metrics.counter('svc_kv_redis_restarts_total', 'Restarts of the supervised redis-server after it died').labels();
    backend.onRestart = () => restarts.inc();
  }
  // the port's socket: every request is answered 503 until start() has loaded the database
  const gate = startingGate('{"error":"ERR svc is starting: the database is not ready yet, retry shortly"}');
  let loaded = false;
  let gateway: KvGateway | undefined;
  let front: KvFront | undefined;
  let workers: KvWorkers | undefined;
  let clock: SharedSyncClock | undefined;
  let aliases: AliasFile | undefined;
  let starting: Promise<void> | undefined;
  let releasing: Promise<void> | undefined;
  /** Closes what start() opened (once: after a failed start, close() comes here again). */
  let unlistenReset: (() => void) | undefined;
  const release = () =>
    (releasing ??= (async () => {
      unlistenReset?.();
      await workers?.close();
      await front?.close();
      await gateway?.close();
      clock?.close();
      aliases?.close();
    })());
  const load = async () => {
    const clockFile = path.join(config.dataDir, 'kv', 'sync-clock');
    const aliasFile = path.join(config.dataDir, 'kv', 'script-aliases');
    if (workerCount > 0) {
      fs.mkdirSync(path.dirname(clockFile), { recursive: true, mode: 0o700 });
      SharedSyncClock.create(clockFile, workerCount + 1);
      clock = SharedSyncClock.open(clockFile, workerCount, workerCount + 1);
      AliasFile.create(aliasFile);
      aliases = new AliasFile(aliasFile);
    }
    const gw = (gateway = new KvGateway(backend, tokens, config.kv, logger, {
      quota,
      syncClock: clock,
      scriptAliases: aliases,
      backendRtt: kvMetrics.backendRtt,
      // the primary serves connections itself while no worker is ready
      onScriptKill: (key) => workers?.scriptKilled(key),
    }));
    await gw.start();
    // a kv password reset (the management API rotates kv.aclTokenSecret with both tokens) also
    // deletes the ACL users a leaked token may have created; the reset answers after this is done
    unlistenReset = credentials.onChange((name) => {
      if (name !== 'kv.aclTokenSecret') return;
      return gw.deleteAclUsers().then(
        (users) => logger.warn({ users }, `kv: password reset: deleted ${users.length} ACL user(s) not managed by svc`),
        (err: Error) => logger.error({ err: err.message }, 'kv: password reset: deleting the ACL users not managed by svc failed; delete them by hand (ACL USERS, ACL DELUSER)'),
      );
    });
    const f = (front = createKvFront(gw, config, logger, kvMetrics));
    if (workerCount > 0) {
      const pool = (workers = new KvWorkers(workerCount, ctx, gw, backend, quota, (socket) => f.accept(socket), clockFile, aliasFile));
      ctx.metrics.addSource(() => pool.collectMetrics());
      await pool.start();
      // the primary only accepts: each connection goes, unread, to a worker
      gate.open((socket) => pool.dispatch(socket));
    } else gate.open((socket) => f.accept(socket));
    loaded = true;
  };
  let closing: Promise<void> | undefined;
  return {
    get gateway(): KvGateway {
      if (!gateway) throw new Error('kv: not started');
      return gateway;
    },
    backend,
    workerPids: () => workers?.pids() ?? [],
    listen: () => listenRaw(gate.server, config.host, config.ports.kv),
    start: () =>
      (starting ??= load().catch(async (err: unknown) => {
        await release();
        throw err;
      })),
    ready: () => loaded && gateway!.ping(),
    async backup(target) {
      if (!(backend instanceof SupervisedBackend)) {
        const which = config.kv.redisCluster ? 'a Redis Cluster (SVC_KV_REDIS_CLUSTER)' : config.kv.redisSentinels ? 'a Redis Sentinel deployment (SVC_KV_REDIS_SENTINELS)' : 'an external Redis (SVC_KV_REDIS_URL)';
        target.skip('kv', 'kv', `the kv database is ${which}: svc does not copy it; use its own tools (BGSAVE and copy its RDB file on each primary, \`redis-cli --rdb <file>\`, its AOF, or the provider's snapshots)`);
        return;
      }
      // the RDB goes in as the base of a multi-part AOF (Redis >= 7): the restored redis-server,
      // which runs with appendonly yes, loads it and appends to it
      const base = `kv/appendonlydir/${AOF_BASE}`;
      const { requestedAt, rdbVersion } = await backend.saveTo(target.path(base));
      target.add({
        path: base,
        area: 'kv',
        store: 'kv',
        holds: `every key of the supervised redis-server: an RDB file (RDB version ${rdbVersion}) from BGSAVE, requested at ${requestedAt}, placed as the base file of Redis's append-only file`,
      });
      const manifest = `kv/appendonlydir/${AOF_MANIFEST}`;
      fs.writeFileSync(target.path(manifest), `file ${AOF_BASE} seq 1 type b\n`, { mode: 0o600 });
      target.add({ path: manifest, area: 'kv', store: 'kv', holds: "Redis's AOF manifest: the append-only file is the RDB base above, with no increments yet" });
    },
    close: () =>
      (closing ??= (async () => {
        await starting?.catch(() => undefined);
        // stop accepting; the accepting server's close completes once the connections it accepted
        // are gone (for the workers' ones Node asks them over IPC), so it is awaited last
        const accepting = gate.close();
        await release();
        await accepting;
      })()),
  };
}

export const kvArea: AreaModule = {
  name: 'kv',
  create: (ctx) => createKvServer(ctx),
  env: (ctx, url) => {
    const token = ctx.credentials.get('kv.token');
    return {
      UPSTASH_REDIS_REST_URL: url,
      UPSTASH_REDIS_REST_TOKEN: token,
      SVC_KV_URL: url,
      SVC_KV_TOKEN: token,
      SVC_KV_READONLY_TOKEN: ctx.credentials.get('kv.readonlyToken'),
    };
  },
  banner: (ctx) => [
    `token: ${ctx.credentials.get('kv.token')}`,
    `read-only token: ${ctx.credentials.get('kv.readonlyToken')}`,
    `database: ${ctx.config.kv.redisCluster ? `Redis Cluster (seeds ${ctx.config.kv.redisCluster.join(',')})` : ctx.config.kv.redisSentinels ? `Redis Sentinel master ${ctx.config.kv.redisSentinelMaster}` : ctx.config.kv.redisUrl ? `external ${ctx.config.kv.redisUrl.replace(/\/\/[^@/]*@/, '//***@')}` : `supervised ${ctx.config.kv.redisServerBin} (data in ${ctx.config.dataDir}/kv)`}`,
  ],
};
