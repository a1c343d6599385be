/**
 * Environment -> one typed, validated {@link Config}.
 *
 * The env names are documented in README.md's configuration table; every variable is
 * validated at start-up and all problems are reported together by {@link ConfigError}, one line
 * per bad variable. Credentials are not part of the config: they live in the credential store
 * (`src/credentials.ts`), which takes env-given values first and generates the rest.
 *
 * Units: every duration here is in milliseconds unless the name says otherwise; sizes in bytes.
 */
import os from 'node:os';
import path from 'node:path';

export const AREAS = ['queue', 'kv', 'vector', 'mgmt'] as const;
export type AreaName = (typeof AREAS)[number];

export interface Config {
  /** Bind address of the queue, kv and vector listeners (`SVC_HOST`). */
  host: string;
  /** Bind address of the management listener (`SVC_MGMT_HOST`; default {@link host}): the console, `/metrics` and the management API can stay on a private address while the SDK ports are public. */
  mgmtHost: string;
  dataDir: string;
  areas: AreaName[];
  logLevel: string;
  ports: Record<AreaName, number>;
  /**
   * Resource bounds of the HTTP fronts of the kv, vector and queue ports (`src/http/fast.ts` and the
   * `node:http` servers behind it).
   */
  http: {
    /** A request head must be complete this many ms after its first byte (`SVC_HTTP_HEADERS_TIMEOUT_MS`; else 408 and close). */
    headersTimeoutMs: number;
    /** A whole request (head and body) must be received this many ms after its first byte (`SVC_HTTP_REQUEST_TIMEOUT_MS`; else 408 and close). */
    requestTimeoutMs: number;
    /** Open connections per port and process (`SVC_HTTP_MAX_CONNECTIONS`); past it a new one gets 503 + `Retry-After` and is closed. */
    maxConnections: number;
  };
  kv: {
    /** External Redis/Valkey (`redis://` / `rediss://`); undefined = supervise our own redis-server. */
    redisUrl?: string;
    /** Path of the redis-server binary for the supervised mode. */
    redisServerBin: string;
    /** PEM file of extra CA certificates trusted for `rediss://` (self-signed servers). */
    redisTlsCaFile?: string;
    /** Redis Cluster seed nodes `host:port` (`SVC_KV_REDIS_CLUSTER`); undefined = not a cluster. */
    redisCluster?: string[];
    /** Sentinels `host:port` (`SVC_KV_REDIS_SENTINELS`) and the master name they watch (`SVC_KV_REDIS_SENTINEL_MASTER`). */
    redisSentinels?: string[];
    redisSentinelMaster?: string;
    /** Credentials of the sentinels (`SVC_KV_REDIS_SENTINEL_USERNAME` / `_PASSWORD`). */
    redisSentinelUsername?: string;
    redisSentinelPassword?: string;
    /** Credentials on the data nodes of a cluster or sentinel setup (`SVC_KV_REDIS_USERNAME` / `_PASSWORD`). */
    redisUsername?: string;
    redisPassword?: string;
    /** TLS to the nodes and sentinels of a cluster or sentinel setup (`SVC_KV_REDIS_TLS`). */
    redisTls: boolean;
    /** Replicas each write waits for with `WAIT` in cluster / sentinel mode (`SVC_KV_WAIT_REPLICAS`, 0 = none). */
    waitReplicas: number;
    /** Timeout of that `WAIT` in ms (`SVC_KV_WAIT_TIMEOUT_MS`, default 1000). */
    waitTimeoutMs: number;
    /**
     * Cluster / sentinel: how long a node may leave commands unanswered before they are answered
     * 503 and the connection to it is reopened, in ms (`SVC_KV_NODE_TIMEOUT_MS`, default 10 000).
     */
    nodeTimeoutMs: number;
    /** Cluster / sentinel: the topology router runs in its own worker thread (`SVC_KV_ROUTER_THREAD`, default true). */
    routerThread: boolean;
    /** Maximum request body in bytes (`ERR max request size exceeded`). */
    maxRequestBytes: number;
    /** Requests per UTC day for the database; 0 = unlimited. */
    dailyRequestLimit: number;
    /** kv worker processes (`SVC_KV_WORKERS`); 0 = serve in the main process. Default: {@link defaultKvWorkers}. */
    workers: number;
    /** Interval of the SSE heartbeat comments in ms (`SVC_KV_SSE_HEARTBEAT_MS`, default 15 000). */
    sseHeartbeatMs: number;
    /**
     * Scripts and functions (EVAL*, FCALL*) running longer than this many ms are killed with
     * `SCRIPT KILL` / `FUNCTION KILL` (`SVC_KV_SCRIPT_TIMEOUT_MS`, default 5000; 0 = never).
     */
    scriptTimeoutMs: number;
    /**
     * Output limit of one SSE stream, as Redis's `client-output-buffer-limit pubsub`: the stream is
     * closed when its unsent output exceeds `sseHardLimitBytes` (`SVC_KV_SSE_HARD_LIMIT_BYTES`,
     * default 32 MiB), or stays above `sseSoftLimitBytes` (`SVC_KV_SSE_SOFT_LIMIT_BYTES`, default
     * 8 MiB; 0 = no soft limit) for longer than `sseSoftLimitMs` (`SVC_KV_SSE_SOFT_LIMIT_MS`,
     * default 60 000).
     */
    sseHardLimitBytes: number;
    sseSoftLimitBytes: number;
    sseSoftLimitMs: number;
  };
  queue: {
    region: 'eu-central-1' | 'us-east-1';
    /** Maximum message body in bytes. */
    maxMessageBytes: number;
    /**
     * Byte bound of one page of `GET /v2/logs`, `/v2/events`, `/v2/dlq`, `/v2/workflows/logs` (`SVC_QUEUE_MAX_PAGE_BYTES`,
     * default 1 MiB): message and response bodies counted; a page holds at least one entry and
     * its cursor continues after the last one it holds.
     */
    maxPageBytes: number;
    /**
     * Largest `Upstash-Retries` a message may ask for (`SVC_QUEUE_MAX_RETRIES`, default 20: the
     * "Max Retry Count" of QStash's top published plan); above it the request answers 412.
     */
    maxRetries: number;
    /** Refuse loopback/private destinations (SSRF protection). */
    blockPrivateDestinations: boolean;
    /** Source address for outgoing deliveries (undici `localAddress`). */
    egressAddress?: string;
    /** Deduplication window in ms. */
    dedupWindowMs: number;
    /** How long logs (events) are kept, in ms. */
    logRetentionMs: number;
    /** How long ended workflow runs (with their steps and waiters) are kept, in ms. */
    workflowRetentionMs: number;
    /** How long a workflow notify that reached no waiter is kept for a later wait, in ms (0 = not kept). */
    workflowNotifyLookbackMs: number;
    /**
     * Most steps one workflow run may have (`SVC_QUEUE_WORKFLOW_MAX_STEPS`, default 1000, the hosted
     * service's hard limit); a step past it fails the run.
     */
    workflowMaxSteps: number;
    /**
     * Largest context of one workflow run in bytes: its initial body plus every step's body
     * (`SVC_QUEUE_WORKFLOW_MAX_CONTEXT_BYTES`, default 100 MiB, the hosted service's hard limit); a
     * step past it fails the run.
     */
    workflowMaxContextBytes: number;
    /** Concurrent outgoing delivery requests. */
    maxConcurrentDeliveries: number;
    /**
     * When acknowledged writes reach the disk (`SVC_QUEUE_FSYNC`): `always` (default) = the WAL is
     * fsynced before a publish is answered; `everysec` = answered at COMMIT, WAL fsynced once a
     * second (Redis's `appendfsync everysec`: kill -9 loses nothing, a power loss ~1 s).
     */
    fsync: (typeof FSYNC_POLICIES)[number];
    /**
     * `SVC_QUEUE_DATABASE_URL`: `postgres://` / `postgresql://` URL of the PostgreSQL store shared
     * by every node (parts left out fall back to libpq's `PG*` variables); undefined = SQLite in
     * `dataDir`.
     */
    databaseUrl?: string;
    /** `SVC_QUEUE_DATABASE_SCHEMA`: PostgreSQL schema of the queue tables (default `public`; created when missing). */
    databaseSchema: string;
    /** `SVC_QUEUE_LEASE_MS`: lease of a claimed message on the PostgreSQL store, renewed while it is delivered (default 30 000). */
    leaseMs: number;
    /** `SVC_QUEUE_DLQ_RETENTION_MS`: how long DLQ entries are kept (default 7 days). */
    dlqRetentionMs: number;
    /**
     * `SVC_QUEUE_LISTEN_BACKLOG`: `listen(2)` backlog of the queue port, connections whose
     * handshake completed that wait to be accepted (default 4096; Linux caps it at
     * `net.core.somaxconn`). Past it the kernel drops SYNs and clients retry after 1, 3, 7 s.
     */
    listenBacklog: number;
    /**
     * `SVC_QUEUE_ACCEPT_HANDLES`: listening handles on the queue port (default 8; 1 = one as plain
     * Node). Each accepts at most one connection per event-loop iteration (`src/http/accept.ts`).
     */
    acceptHandles: number;
  };
  vector: {
    dimension?: number;
    metric: 'COSINE' | 'EUCLIDEAN' | 'DOT_PRODUCT';
    type: 'DENSE' | 'SPARSE' | 'HYBRID';
    /** Path of a JSON file describing more indexes (`SVC_VECTOR_INDEXES`). */
    indexesFile?: string;
    /**
     * `SVC_VECTOR_DATABASE_URL`: `postgres://` / `postgresql://` URL of the PostgreSQL store shared
     * by every vector node (same rules as `SVC_QUEUE_DATABASE_URL`); undefined = SQLite in `dataDir`.
     */
    databaseUrl?: string;
    /** `SVC_VECTOR_DATABASE_SCHEMA`: PostgreSQL schema of the vector tables (default `public`; created when missing). */
    databaseSchema: string;
    /**
     * `SVC_VECTOR_BLOCK_PRIVATE_EMBEDDERS` (default: `SVC_QUEUE_BLOCK_PRIVATE_DESTINATIONS`): the
     * dense embedder URL of an index created through the management API must not be a loopback or
     * private address, at create time and on every connection (SSRF protection). Indexes from
     * `SVC_VECTOR_INDEXES` are the operator's and may use any address.
     */
    blockPrivateEmbedders: boolean;
    /**
     * `SVC_VECTOR_PUBLISH_MS`: with the PostgreSQL store, how often (ms) a node publishes a copy of
     * its cache of each changed index (SQLite file + graph snapshots) for joining nodes; 0 = never.
     */
    publishMs: number;
    /**
     * `SVC_VECTOR_MAX_TOP_K` (default 10 000): the largest `topK` of a query or resumable query and
     * `additionalK` of a resumable query's next batch; a larger one is answered 400.
     */
    maxTopK: number;
    /**
     * `SVC_VECTOR_MAX_RANGE_LIMIT` (default 10 000): the most records one `range` page returns; a
     * larger `limit` is clamped to it (the answer's `nextCursor` continues after the page).
     */
    maxRangeLimit: number;
    /** `SVC_VECTOR_MAX_BATCH_QUERIES` (default 1 000): the most queries in one array of queries; more is answered 400. */
    maxBatchQueries: number;
    /**
     * `SVC_VECTOR_MAX_BATCH_RESULTS` (default 100 000): the most results one array of queries may ask
     * for in all (the sum of its `topK`); more is answered 400.
     */
    maxBatchResults: number;
    /** `SVC_VECTOR_MAX_FETCH_IDS` (default 10 000): the most ids one `fetch` may name; more is answered 400. */
    maxFetchIds: number;
  };
  mgmt: {
    /** Explicit sender blocks; undefined = detect from interfaces. */
    ipv4Cidrs?: string[];
    /** Serve the web console under `/console/` on the management port (`SVC_CONSOLE`, default true). */
    console: boolean;
    /** Console without actions: every action hidden and refused (`SVC_CONSOLE_READONLY`, default false). */
    consoleReadonly: boolean;
  };
  backup: {
    /** `SVC_BACKUP_DIR`: where scheduled backups go (and pre-upgrade backups; default `<dataDir>/backups` for those). */
    dir?: string;
    /** `SVC_BACKUP_INTERVAL` in ms (given as `30m`, `6h`, `1d`, ...); undefined = no scheduled backups. */
    intervalMs?: number;
    /** `SVC_BACKUP_KEEP`: complete scheduled backups kept in `dir` (older ones removed after each new one). */
    keep: number;
  };
  metrics: {
    /** `SVC_METRICS` (default true): false = no `/metrics`, no counting, no process metrics. */
    enabled: boolean;
    /** `SVC_METRICS_TOKEN`: when set, `/metrics` needs `Authorization: Bearer <token>`; unset = no auth. */
    token?: string;
  };
}

/** Thrown by {@link loadConfig}; `problems` holds one human-readable line per bad variable. */
export class ConfigError extends Error {
  constructor(readonly problems: string[]) {
    super(`invalid configuration:\n  - ${problems.join('\n  - ')}`);
    this.name = 'ConfigError';
  }
}

type Env = Record<string, string | undefined>;

/** Reads and validates the env contract; throws {@link ConfigError} listing every problem. */
export function loadConfig(env: Env = process.env): Config {
  const problems: string[] = [];
  const str = (name: string): string | undefined => {
    const v = env[name];
    return v === undefined || v.trim() === '' ? undefined : v.trim();
  };
  const int = (name: string, def: number, min: number, max: number): number => {
    const v = str(name);
    if (v === undefined) return def;
    if (!/^-?\d+$/.test(v) || Number(v) < min || Number(v) > max) {
      problems.push(`${name}=${JSON.stringify(v)}: expected an integer from ${min} to ${max}`);
      return def;
    }
    return Number(v);
  };
  const bool = (name: string, def: boolean): boolean => {
    const v = str(name);
    if (v === undefined) return def;
    if (/^(1|true|yes|on)$/i.test(v)) return true;
    if (/^(0|false|no|off)$/i.test(v)) return false;
    problems.push(`${name}=${JSON.stringify(v)}: expected true or false`);
    return def;
  };
  const oneOf = <T extends string>(name: string, def: T, allowed: readonly T[], upper = false): T => {
    let v = str(name);
    if (v === undefined) return def;
    if (upper) v = v.toUpperCase();
    if (!(allowed as readonly string[]).includes(v)) {
      problems.push(`${name}=${JSON.stringify(v)}: expected one of ${allowed.join(', ')}`);
      return def;
    }
    return v as T;
  };
  /** A PostgreSQL schema name (`SVC_*_DATABASE_SCHEMA`, default `public`). */
  const schemaName = (name: string): string => {
    const v = str(name) ?? 'public';
    if (!/^[a-z_][a-z0-9_]{0,62}$/.test(v)) problems.push(`${name}=${JSON.stringify(v)}: expected a lower-case SQL identifier (letters, digits, _)`);
    return v;
  };

  let areas: AreaName[] = [...AREAS];
  const areasRaw = str('SVC_AREAS');
  if (areasRaw !== undefined && areasRaw.toLowerCase() !== 'all') {
    const list = areasRaw.split(',').map((s) => s.trim().toLowerCase()).filter(Boolean);
    const bad = list.filter((a) => !(AREAS as readonly string[]).includes(a));
    if (bad.length || list.length === 0) {
      problems.push(`SVC_AREAS=${JSON.stringify(areasRaw)}: expected a comma list of ${AREAS.join(', ')} (or "all")`);
    } else {
      areas = AREAS.filter((a) => list.includes(a));
    }
  }

  const redisUrl = str('SVC_KV_REDIS_URL');
  if (redisUrl !== undefined && !/^rediss?:\/\/[^\s]+$/.test(redisUrl)) {
    problems.push(`SVC_KV_REDIS_URL: expected redis://[user:password@]host:port[/db] or rediss://...`);
  }

  const addressList = (name: string): string[] | undefined => {
    const v = str(name);
    if (v === undefined) return undefined;
    const list = v.split(',').map((a) => a.trim()).filter(Boolean);
    if (list.length === 0 || list.some((a) => !/^(\[[0-9a-fA-F:.]+\]|[^\s:,\[\]]+):\d{1,5}$/.test(a))) {
      problems.push(`${name}=${JSON.stringify(v)}: expected host:port[,host:port...]`);
      return undefined;
    }
    return list;
  };
  const redisCluster = addressList('SVC_KV_REDIS_CLUSTER');
  const redisSentinels = addressList('SVC_KV_REDIS_SENTINELS');
  const redisSentinelMaster = str('SVC_KV_REDIS_SENTINEL_MASTER');
  if (redisSentinels && !redisSentinelMaster) problems.push('SVC_KV_REDIS_SENTINEL_MASTER: required with SVC_KV_REDIS_SENTINELS (the master name the sentinels monitor)');
  if ([redisUrl, redisCluster, redisSentinels].filter((x) => x !== undefined).length > 1) {
    problems.push('SVC_KV_REDIS_URL, SVC_KV_REDIS_CLUSTER, SVC_KV_REDIS_SENTINELS: set at most one of them');
  }

  const dimension = str('SVC_VECTOR_DIMENSION');
  let vectorDimension: number | undefined;
  if (dimension !== undefined) vectorDimension = int('SVC_VECTOR_DIMENSION', 0, 1, 65536);

  let ipv4Cidrs: string[] | undefined;
  const cidrs = str('SVC_MGMT_IPV4_CIDRS');
  if (cidrs !== undefined) {
    ipv4Cidrs = cidrs.split(',').map((s) => s.trim()).filter(Boolean);
    const bad = ipv4Cidrs.filter((c) => !isIpv4Cidr(c));
    if (bad.length || ipv4Cidrs.length === 0) {
      problems.push(`SVC_MGMT_IPV4_CIDRS: not IPv4 CIDR blocks: ${bad.join(', ') || '(empty)'} (example: 203.0.113.0/24,198.51.100.7/32)`);
    }
  }

  const egress = str('SVC_QUEUE_EGRESS_ADDRESS');
  if (egress !== undefined && !isIpv4(egress)) {
    problems.push(`SVC_QUEUE_EGRESS_ADDRESS=${JSON.stringify(egress)}: expected an IPv4 address of this host`);
  }

  const databaseUrl = str('SVC_QUEUE_DATABASE_URL');
  if (databaseUrl !== undefined) {
    const problem = databaseUrlProblem(databaseUrl);
    if (problem) problems.push(`SVC_QUEUE_DATABASE_URL: ${problem}`); // never the value: it holds the password
  }

  const databaseSchema = schemaName('SVC_QUEUE_DATABASE_SCHEMA');

  const vectorDatabaseUrl = str('SVC_VECTOR_DATABASE_URL');
  if (vectorDatabaseUrl !== undefined) {
    const problem = databaseUrlProblem(vectorDatabaseUrl);
    if (problem) problems.push(`SVC_VECTOR_DATABASE_URL: ${problem}`); // never the value: it holds the password
  }
  const vectorDatabaseSchema = schemaName('SVC_VECTOR_DATABASE_SCHEMA');
  const blockPrivateDestinations = bool('SVC_QUEUE_BLOCK_PRIVATE_DESTINATIONS', false);

  const backupDir = str('SVC_BACKUP_DIR');
  const intervalRaw = str('SVC_BACKUP_INTERVAL');
  let backupIntervalMs: number | undefined;
  if (intervalRaw !== undefined) {
    backupIntervalMs = parseDuration(intervalRaw);
    if (backupIntervalMs === undefined || backupIntervalMs < 1000) {
      problems.push(`SVC_BACKUP_INTERVAL=${JSON.stringify(intervalRaw)}: expected a duration of at least 1 s: a number with a unit s, m, h or d (e.g. 30m, 6h, 1d)`);
      backupIntervalMs = undefined;
    } else if (backupDir === undefined) problems.push('SVC_BACKUP_INTERVAL needs SVC_BACKUP_DIR (where the scheduled backups go)');
  }

  const config: Config = {
    host: str('SVC_HOST') ?? '127.0.0.1',
    mgmtHost: str('SVC_MGMT_HOST') ?? str('SVC_HOST') ?? '127.0.0.1',
    dataDir: path.resolve(str('SVC_DATA_DIR') ?? './data'),
    areas,
    logLevel: oneOf('SVC_LOG_LEVEL', 'info', ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']),
    ports: {
      queue: int('SVC_QUEUE_PORT', 8080, 0, 65535),
      kv: int('SVC_KV_PORT', 8079, 0, 65535),
      vector: int('SVC_VECTOR_PORT', 8078, 0, 65535),
      mgmt: int('SVC_MGMT_PORT', 8077, 0, 65535),
    },
    http: {
      headersTimeoutMs: int('SVC_HTTP_HEADERS_TIMEOUT_MS', 60_000, 100, 3_600_000),
      requestTimeoutMs: int('SVC_HTTP_REQUEST_TIMEOUT_MS', 300_000, 100, 86_400_000),
      maxConnections: int('SVC_HTTP_MAX_CONNECTIONS', 10_000, 1, 1_000_000),
    },
    kv: {
      redisUrl,
      redisServerBin: str('SVC_KV_REDIS_SERVER_BIN') ?? 'redis-server',
      redisTlsCaFile: str('SVC_KV_REDIS_TLS_CA_FILE'),
      redisCluster,
      redisSentinels,
      redisSentinelMaster,
      redisSentinelUsername: str('SVC_KV_REDIS_SENTINEL_USERNAME'),
      redisSentinelPassword: str('SVC_KV_REDIS_SENTINEL_PASSWORD'),
      redisUsername: str('SVC_KV_REDIS_USERNAME'),
      redisPassword: str('SVC_KV_REDIS_PASSWORD'),
      redisTls: bool('SVC_KV_REDIS_TLS', false),
      waitReplicas: int('SVC_KV_WAIT_REPLICAS', 0, 0, 100),
      waitTimeoutMs: int('SVC_KV_WAIT_TIMEOUT_MS', 1000, 1, 600_000),
      nodeTimeoutMs: int('SVC_KV_NODE_TIMEOUT_MS', 10_000, 100, 3_600_000),
      routerThread: bool('SVC_KV_ROUTER_THREAD', true),
      maxRequestBytes: int('SVC_KV_MAX_REQUEST_BYTES', 10 * 1024 * 1024, 1024, 1024 * 1024 * 1024),
      dailyRequestLimit: int('SVC_KV_DAILY_REQUEST_LIMIT', 0, 0, Number.MAX_SAFE_INTEGER),
      workers: int('SVC_KV_WORKERS', defaultKvWorkers(), 0, 63),
      sseHeartbeatMs: int('SVC_KV_SSE_HEARTBEAT_MS', 15_000, 10, 3_600_000),
      scriptTimeoutMs: int('SVC_KV_SCRIPT_TIMEOUT_MS', 5000, 0, 3_600_000),
      sseHardLimitBytes: int('SVC_KV_SSE_HARD_LIMIT_BYTES', 32 * 1024 * 1024, 1024, 1024 * 1024 * 1024),
      sseSoftLimitBytes: int('SVC_KV_SSE_SOFT_LIMIT_BYTES', 8 * 1024 * 1024, 0, 1024 * 1024 * 1024),
      sseSoftLimitMs: int('SVC_KV_SSE_SOFT_LIMIT_MS', 60_000, 0, 3_600_000),
    },
    queue: {
      region: oneOf('SVC_QUEUE_REGION', 'eu-central-1', ['eu-central-1', 'us-east-1'] as const),
      maxMessageBytes: int('SVC_QUEUE_MAX_MESSAGE_BYTES', 1024 * 1024, 1024, 1024 * 1024 * 1024),
      maxPageBytes: int('SVC_QUEUE_MAX_PAGE_BYTES', 1024 * 1024, 64 * 1024, 1024 * 1024 * 1024),
      maxRetries: int('SVC_QUEUE_MAX_RETRIES', 20, 0, 1000),
      blockPrivateDestinations,
      egressAddress: egress,
      dedupWindowMs: int('SVC_QUEUE_DEDUP_WINDOW_MS', 10 * 60 * 1000, 0, 365 * 86_400_000),
      logRetentionMs: int('SVC_QUEUE_LOG_RETENTION_MS', 7 * 86_400_000, 60_000, 3650 * 86_400_000),
      workflowRetentionMs: int('SVC_QUEUE_WORKFLOW_RETENTION_MS', 7 * 86_400_000, 1000, 3650 * 86_400_000),
      workflowNotifyLookbackMs: int('SVC_QUEUE_WORKFLOW_NOTIFY_LOOKBACK_MS', 5 * 60_000, 0, 7 * 86_400_000),
      workflowMaxSteps: int('SVC_QUEUE_WORKFLOW_MAX_STEPS', 1000, 1, 1_000_000),
      workflowMaxContextBytes: int('SVC_QUEUE_WORKFLOW_MAX_CONTEXT_BYTES', 100 * 1024 * 1024, 1024, 2 ** 40),
      maxConcurrentDeliveries: int('SVC_QUEUE_MAX_CONCURRENT_DELIVERIES', 256, 1, 100_000),
      fsync: oneOf('SVC_QUEUE_FSYNC', 'always', FSYNC_POLICIES),
      databaseUrl,
      databaseSchema,
      leaseMs: int('SVC_QUEUE_LEASE_MS', 30_000, 1000, 3_600_000),
      dlqRetentionMs: int('SVC_QUEUE_DLQ_RETENTION_MS', 7 * 86_400_000, 60_000, 3650 * 86_400_000),
      listenBacklog: int('SVC_QUEUE_LISTEN_BACKLOG', 4096, 1, 65535),
      acceptHandles: int('SVC_QUEUE_ACCEPT_HANDLES', 8, 1, 64),
    },
    vector: {
      dimension: vectorDimension,
      metric: oneOf('SVC_VECTOR_METRIC', 'COSINE', ['COSINE', 'EUCLIDEAN', 'DOT_PRODUCT'] as const, true),
      type: oneOf('SVC_VECTOR_TYPE', 'DENSE', ['DENSE', 'SPARSE', 'HYBRID'] as const, true),
      indexesFile: str('SVC_VECTOR_INDEXES'),
      databaseUrl: vectorDatabaseUrl,
      databaseSchema: vectorDatabaseSchema,
      blockPrivateEmbedders: bool('SVC_VECTOR_BLOCK_PRIVATE_EMBEDDERS', blockPrivateDestinations),
      publishMs: int('SVC_VECTOR_PUBLISH_MS', 300_000, 0, 86_400_000),
      maxTopK: int('SVC_VECTOR_MAX_TOP_K', 10_000, 1, 1_000_000),
      maxRangeLimit: int('SVC_VECTOR_MAX_RANGE_LIMIT', 10_000, 1, 1_000_000),
      maxBatchQueries: int('SVC_VECTOR_MAX_BATCH_QUERIES', 1000, 1, 100_000),
      maxBatchResults: int('SVC_VECTOR_MAX_BATCH_RESULTS', 100_000, 1, 100_000_000),
      maxFetchIds: int('SVC_VECTOR_MAX_FETCH_IDS', 10_000, 1, 1_000_000),
    },
    mgmt: {
      ipv4Cidrs,
      console: bool('SVC_CONSOLE', true),
      consoleReadonly: bool('SVC_CONSOLE_READONLY', false),
    },
    backup: {
      dir: backupDir === undefined ? undefined : path.resolve(backupDir),
      intervalMs: backupIntervalMs,
      keep: int('SVC_BACKUP_KEEP', 7, 1, 10_000),
    },
    metrics: { enabled: bool('SVC_METRICS', true), token: str('SVC_METRICS_TOKEN') },
  };

  if (config.http.headersTimeoutMs > config.http.requestTimeoutMs) {
    // node:http's own rule for headersTimeout and requestTimeout
    problems.push(`SVC_HTTP_HEADERS_TIMEOUT_MS=${config.http.headersTimeoutMs}: must not exceed SVC_HTTP_REQUEST_TIMEOUT_MS (${config.http.requestTimeoutMs})`);
  }
  if (problems.length) throw new ConfigError(problems);
  return config;
}

/**
 * Checks the shape of a PostgreSQL URL (`SVC_QUEUE_DATABASE_URL`, `SVC_VECTOR_DATABASE_URL`): `postgres://` or
 * `postgresql://`, a known `sslmode`. Returns the problem in words (never echoing the URL, which
 * holds the password) or undefined.
 */
export function databaseUrlProblem(url: string): string | undefined {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    return 'expected postgres://user:password@host:port/database (or postgresql://...)';
  }
  if (u.protocol !== 'postgres:' && u.protocol !== 'postgresql:') return `expected a postgres:// or postgresql:// URL, got ${u.protocol}//`;
  const sslmode = u.searchParams.get('sslmode');
  if (sslmode !== null && !['disable', 'prefer', 'require', 'no-verify', 'verify-ca', 'verify-full'].includes(sslmode)) {
    return `sslmode=${sslmode}: expected disable, prefer, require, no-verify, verify-ca or verify-full`;
  }
  return undefined;
}

/** A duration `<number><unit>` (unit `s`, `m`, `h` or `d`) in ms; undefined when malformed. */
export function parseDuration(s: string): number | undefined {
  const m = /^(\d+(?:\.\d+)?)\s*(s|m|h|d)$/i.exec(s.trim());
  if (!m) return undefined;
  const unit = { s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 }[m[2].toLowerCase() as 's' | 'm' | 'h' | 'd'];
  return Math.round(Number(m[1]) * unit);
}

/** The values of `SVC_QUEUE_FSYNC` (the queue store's `FsyncPolicy`). */
export const FSYNC_POLICIES = ['always', 'everysec'] as const;

/**
 * Default of `SVC_KV_WORKERS` for a machine with `cpus` CPUs (default `os.availableParallelism()`):
 * 0 (kv served in the main process) below 4 CPUs, else one worker per CPU, at most 8. Below 4
 * CPUs the load generator, redis-server and the workers compete for the same cores and the
 * hand-off costs more than it gains: on the 2-core bench machine 2 workers were slower than the
 * one process in every cell (`docs/readme/kv-bench.md`, "Worker processes").
 */
export function defaultKvWorkers(cpus: number = os.availableParallelism()): number {
  return cpus < 4 ? 0 : Math.min(8, cpus);
}

/** True for dotted-quad IPv4 (`10.0.0.1`). */
export function isIpv4(s: string): boolean {
  const parts = s.split('.');
  return parts.length === 4 && parts.every((p) => /^\d{1,3}$/.test(p) && Number(p) <= 255 && String(Number(p)) === p);
}

/** True for an IPv4 CIDR block (`10.0.0.0/8`) whose address has no bits set past the prefix. */
export function isIpv4Cidr(s: string): boolean {
  const m = /^([^/]+)\/(\d{1,2})$/.exec(s);
  if (!m || !isIpv4(m[1]) || Number(m[2]) > 32) return false;
  const bits = Number(m[2]);
  const n = m[1].split('.').reduce((acc, p) => acc * 256 + Number(p), 0);
  const hostBits = 2 ** (32 - bits);
  return n % hostBits === 0;
}
