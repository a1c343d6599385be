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
 */
import fs from 'node:fs';
import path from 'node:path';
import type { Config } from '../../config.js';
import type { CredentialStore } from '../../credentials.js';
import type { Logger } from '../../logger.js';
import { createReadonlyUser, READONLY_USER, type Backend } from './backend.js';
import type { Endpoint, RedisUser } from './connection.js';
import { TopologyRouter } from './router.js';
import { ClusterTopology, SentinelTopology, splitAddr, type NodeAccess, type Topology } from './topology.js';

export class DistributedBackend implements Backend {
  readonly endpoint: Endpoint;
  readonly admin: RedisUser;
  readonly standard: RedisUser;
  readonly readonly: RedisUser;
  readonly protectedUsers: ReadonlySet<string>;
  readonly description: string;
  /** The topology (tests read the primaries from it). */
  readonly topology: Topology;
  private readonly router: TopologyRouter;
  private readonly upHandlers: (() => Promise<void>)[] = [];
  private started = false;

  /**
   * @param kv the kv configuration with `redisCluster` or `redisSentinels` set
   * @throws Error when the TLS CA file cannot be read
   */
  constructor(kv: Config['kv'], dataDir: string, credentials: CredentialStore, private readonly logger: Logger) {
    const ca = kv.redisTlsCaFile ? fs.readFileSync(kv.redisTlsCaFile) : undefined;
    const tls = kv.redisTls;
    const user: RedisUser = kv.redisPassword !== undefined ? { user: kv.redisUsername, password: kv.redisPassword } : {};
    const access: NodeAccess = {
      admin: user,
      endpointOf: (addr) => {
        const { host, port } = splitAddr(addr);
        return { host, port, tls, ca };
      },
    };
    this.admin = user;
    this.standard = user;
    this.readonly = { user: READONLY_USER, password: credentials.get('kv.readonlyAclPassword') };
    this.protectedUsers = new Set([user.user ?? 'default', READONLY_USER]);
    const dir = path.join(dataDir, 'kv');
    this.endpoint = { path: path.join(dir, 'router.sock') };
    if (kv.redisCluster) {
      this.topology = new ClusterTopology(kv.redisCluster, access, logger);
      this.description = `Redis Cluster (seeds ${kv.redisCluster.join(',')})`;
    } else {
      const sentinelUser: RedisUser = kv.redisSentinelPassword !== undefined ? { user: kv.redisSentinelUsername, password: kv.redisSentinelPassword } : {};
      this.topology = new SentinelTopology({ sentinels: kv.redisSentinels!, masterName: kv.redisSentinelMaster!, sentinelUser }, access, logger);
      this.description = `Redis Sentinel master ${kv.redisSentinelMaster} (sentinels ${kv.redisSentinels!.join(',')})`;
    }
    this.router = new TopologyRouter({ topology: this.topology, access, logger, waitReplicas: kv.waitReplicas, waitTimeoutMs: kv.waitTimeoutMs, nodeTimeoutMs: kv.nodeTimeoutMs });
  }

  /** Up once started: a node that fails is the router's to handle (503 per command, not for all). */
  get up(): boolean {
    return this.started;
  }

  /** Reads the topology, starts the router, creates the read-only user on every node. @throws Error when no node answers. */
  async start(): Promise<void> {
    fs.mkdirSync(path.dirname(this.endpoint.path!), { recursive: true, mode: 0o700 });
    if (this.endpoint.path!.length > 100) throw new Error(`kv: the router socket path is too long for a unix socket: ${this.endpoint.path}`);
    await this.topology.start();
    await this.router.start(this.endpoint.path!);
    await createReadonlyUser(this.endpoint, this.admin, this.readonly, this.logger);
    for (const fn of this.upHandlers) await fn();
    this.started = true;
  }

  async stop(): Promise<void> {
    this.started = false;
    this.topology.stop();
    await this.router.close();
  }

  onUp(fn: () => Promise<void>): void {
    this.upHandlers.push(fn);
  }
}

