/**
 * The contract between `main.ts` and each area: an area module exports one
 * {@link AreaModule}; `create` builds its server, which listens on the area's port.
 */
import type { BackupRunner, BackupTarget, StoredSchema } from './backup.js';
import type { AreaName, Config } from './config.js';
import type { CredentialStore } from './credentials.js';
import type { Logger } from './logger.js';
import type { Metrics } from './metrics.js';

export interface AreaContext {
  config: Config;
  credentials: CredentialStore;
  logger: Logger;
  /**
   * Readiness of every started area, filled by `main.ts` after each area is created (the
   * management area's `/v2/health` reads it without importing other areas).
   */
  health: Map<AreaName, () => boolean | Promise<boolean>>;
  /**
   * Base URL of every area listening in this process (e.g. `http://127.0.0.1:8080`), filled by
   * `main.ts` as each area starts: the console (mgmt) forwards to the other areas' public HTTP APIs
   * through them without importing those areas.
   */
  urls: Map<AreaName, string>;
  /**
   * The process's Prometheus registry (`src/metrics.ts`): each area registers its own families;
   * the management area serves it as `GET /metrics`.
   */
  metrics: Metrics;
  /**
   * Online backups of this process's stores (`src/backup.ts`), set by `main.ts` once the areas are
   * started: the management area's `POST /v2/backup` runs them without importing other areas.
   */
  backups?: BackupRunner;
  /**
   * Management of the vector indexes (list, create, rename, new tokens, delete), set by the vector
   * area when it is created: the management area's `/v2/vector/index` routes call it without
   * importing the vector area. Absent when the vector area does not run in this process.
   */
  vectorIndexes?: VectorIndexAdmin;
}

/**
 * One vector index as the management API shows it (snake_case, shaped after the hosted developer
 * API's vector index). `creation_time` is in seconds since the epoch (0 for the default index and
 * the `SVC_VECTOR_INDEXES` ones). `origin`: `runtime` (created through the API), `env` (the default
 * index), `file` (`SVC_VECTOR_INDEXES`); only `runtime` indexes may be renamed or deleted.
 */
export interface VectorIndexView {
  id: string;
  name: string;
  /** The URL the `@upstash/vector` SDK takes as `url`. */
  endpoint: string;
  token: string;
  read_only_token: string;
  creation_time: number;
  similarity_function: string;
  /** 0 for a SPARSE index, or a dense index whose dimension the first upsert fixes. */
  dimension_count: number;
  type: string;
  embedding_model?: string;
  sparse_embedding_model?: string;
  origin: 'runtime' | 'env' | 'file';
  hnsw?: { m: number; ef_construction: number; ef_search: number };
  quantization: string;
  embedder?: { url: string; model: string };
  /** Records over every namespace, and the size of the index's stored data in bytes (`GET` one only). */
  vector_count?: number;
  index_size?: number;
}

/**
 * Outcome of a vector index operation: the index, or a refusal the management area turns into its
 * error shape: `invalid` (400, the message names the field), `notFound` (404), `fixed` (409: the
 * default or an `SVC_VECTOR_INDEXES` index, which only the operator changes), `unavailable` (503: not loaded yet).
 */
export type VectorIndexResult<T = VectorIndexView> =
  | { ok: true; value: T }
  | { ok: false; code: 'invalid' | 'notFound' | 'fixed' | 'unavailable'; message: string };

/** What the vector area offers the management area (`AreaContext.vectorIndexes`). */
export interface VectorIndexAdmin {
  list(): Promise<VectorIndexResult<VectorIndexView[]>>;
  get(id: string): Promise<VectorIndexResult>;
  /** `body`: the request's parsed JSON, validated by the vector area. */
  create(body: unknown): Promise<VectorIndexResult>;
  rename(id: string, body: unknown): Promise<VectorIndexResult>;
  resetPassword(id: string): Promise<VectorIndexResult>;
  delete(id: string): Promise<VectorIndexResult<{ id: string; name: string }>>;
}

export interface AreaServer {
  /** Starts listening on the area's configured port (0 = free port); resolves to the base URL. */
  listen(): Promise<string>;
  /**
   * Loads the area's stored state (kv: the database; vector: the indexes), called once every
   * started area's port is bound, so a start that cannot bind touches nothing stored. Until it
   * resolves the port answers 503 with `Retry-After` and `ready()` is false. Absent: nothing to load.
   * @throws Error when the state cannot be loaded (start-up then fails and every area is closed)
   */
  start?(): Promise<void>;
  /** Stops accepting, drains in-flight work, releases child processes and files. Idempotent. */
  close(): Promise<void>;
  /** Readiness: true when the area can serve requests (e.g. kv: the database answers). */
  ready?(): boolean | Promise<boolean>;
  /**
   * Writes a consistent copy of the area's embedded stores into `target` (`src/backup.ts`) while
   * the area keeps serving; lists each file with what it holds and its schema version, and notes
   * (`target.skip`) the stores it does not copy (a PostgreSQL database, an external Redis) with the
   * tools that do. Every write acknowledged before the call is in the copy. Absent: nothing to copy.
   * @throws Error when a store cannot be copied (the backup fails as a whole)
   */
  backup?(target: BackupTarget): Promise<void>;
}

export interface AreaModule {
  name: AreaName;
  /**
   * Builds the area; does not listen yet. Areas with a `start` open their stores there, after
   * every port is bound; the others open them here (queue: its store; its dispatcher, which
   * changes stored leases, only starts in `listen`).
   */
  create(ctx: AreaContext): Promise<AreaServer>;
  /**
   * The `.env` lines for this area given its base URL: the names the official SDKs read and the
   * `SVC_*` names (e.g. `UPSTASH_REDIS_REST_URL`, `UPSTASH_REDIS_REST_TOKEN`, `SVC_KV_TOKEN`).
   */
  env(ctx: AreaContext, url: string): Record<string, string>;
  /** Extra human-readable start-up lines (e.g. read-only token, more vector indexes); asked after `start`. */
  banner?(ctx: AreaContext, url: string): string[];
  /**
   * Reads what `env`/`banner` list from stores outside the data dir, for `svc env` (no running
   * area): vector on PostgreSQL reads its created indexes and tokens in one short read-only
   * session. Resolves to warnings for stderr (e.g. the database cannot be reached); never rejects.
   */
  prepareEnv?(ctx: AreaContext): Promise<string[]>;
  /** Newest schema version this build reads and writes, per store the area owns (e.g. `{ queue: 4 }`). */
  schemas?(): Record<string, number>;
  /**
   * The schema versions recorded by the area's store files in `config.dataDir`, read without
   * opening or changing them (`main.ts` refuses a newer one and backs up an older one before any
   * area opens its stores). Stores not in the data directory (PostgreSQL) are not listed.
   */
  storedSchemas?(config: Config): StoredSchema[];
}
