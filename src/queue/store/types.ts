/**
 * `QueueStore`: every durable operation of the queue, in queue terms (habits
 * 1-4). No connection or transaction type leaks out, so a PostgreSQL implementation can follow
 * without touching the API or the dispatcher; `test/queue/store.test.ts` is the conformance suite
 * every backend must pass (parameterised by a store factory).
 *
 * Every method is one atomic state transition (one transaction). Every promise resolves only
 * after the change is committed and durable ("an acknowledged write is on disk").
 * Times are Unix ms.
 *
 * Leases (habit 4): `claimDue` hands messages to an `owner` until `leaseUntil`; `complete`,
 * `reschedule` and `moveToDlq` only touch a message the caller still owns (they return false
 * otherwise); `releaseLeases` hands expired (or, at start-up, all) leases back, so a crash
 * mid-delivery costs one attempt and never loses the message.
 */
import type { SharedCredentials } from '../../credential-sync.js';
import type {
  AttemptOutcome,
  DlqEntry,
  EnqueueResult,
  LogEntry,
  MessageFilter,
  NewMessage,
  Page,
  PageResult,
  StoredMessage,
} from '../model.js';
import type { FlowControlStore, QueueAdmissionStore, ScheduleStore, UrlGroupStore } from './resource-types.js';
import type { WorkflowStore } from './workflow-types.js';

/**
 * The end of a workflow run whose step message moves to the DLQ, written in the move's
 * transaction (`moveToDlq`): while the run is RUN_STARTED it becomes RUN_FAILED with the DLQ id,
 * its `next` (the failed step) and, when given and none is set yet, its failure-function state.
 * JSON values as in `workflow-types.ts` (`NextStepInfo`, `FailureInfo`).
 */
export interface RunFailure {
  runSeq: number;
  next: unknown;
  failure?: unknown;
}

export interface ClaimOptions {
  owner: string;
  now: number;
  limit: number;
  leaseUntil: number;
  /** Origins (scheme://host:port) not to claim from now (they are at their fairness cap). */
  excludeOrigins?: string[];
}

/**
 * Direct hand-off at enqueue: the new messages whose ids are in `ids` (chosen by the dispatcher:
 * due now, within its free slots and per-origin caps) are stored claimed by `owner` (CREATED +
 * ACTIVE logged in the same transaction) and returned, so the dispatcher delivers them without a
 * separate claim round trip (one commit on the hot path). Deduplicated ones are not claimed.
 */
export interface EnqueueClaim {
  owner: string;
  leaseUntil: number;
  ids: ReadonlySet<string>;
}

/**
 * How many messages wait, by state: `ready` (due, not claimed), `delayed` (due later: delay or
 * retry backoff), `inFlight` (claimed by a delivery attempt), `held` (waiting for queue or
 * flow-control capacity); `dlq` = entries in the dead-letter queue.
 */
export interface MessageCounts {
  ready: number;
  delayed: number;
  inFlight: number;
  held: number;
  dlq: number;
}

export interface QueueStore {
  /**
   * Stores new messages and their CREATED log entries. Messages with a `dedupKey` seen within
   * `dedupWindowMs` are not stored; their result carries the earlier message id and
   * `deduplicated: true`. Concurrent calls are group-committed. With `claim`, due messages are
   * handed off claimed (see {@link EnqueueClaim}) in `claimed`.
   */
  enqueue(
    messages: NewMessage[],
    now: number,
    dedupWindowMs: number,
    claim?: EnqueueClaim,
  ): Promise<EnqueueResult[]>;

  /** A pending (not yet delivered/failed/cancelled) message, or undefined. */
  getMessage(id: string): Promise<StoredMessage | undefined>;

  /** Earliest due time among unclaimed pending messages, or undefined when none. */
  nextDueAt(): Promise<number | undefined>;

  /** Claims up to `limit` due messages (due_at <= now), earliest first, and logs ACTIVE. */
  claimDue(opts: ClaimOptions): Promise<StoredMessage[]>;

  /**
   * Attempt succeeded: message becomes `delivered` (DELIVERED logged; CANCELLED instead when a
   * cancel was requested meanwhile); `followUps` (callback messages) are enqueued atomically.
   */
  complete(id: string, owner: string, now: number, outcome: AttemptOutcome, followUps: NewMessage[]): Promise<boolean>;

  /**
   * Attempt failed with retries left: `retried` + 1, due again at `dueAt`, lease released
   * (ERROR and RETRY logged). A message with a pending cancel request is cancelled instead.
   */
  reschedule(id: string, owner: string, now: number, outcome: AttemptOutcome, dueAt: number, followUps: NewMessage[]): Promise<boolean>;

  /**
   * Attempt failed for the last time: message becomes `failed`, a DLQ entry `dlqId` keeps it
   * with the outcome (ERROR and FAILED logged), `followUps` are enqueued atomically, and so is
   * the end of the workflow run `run` the message belonged to ({@link RunFailure}).
   */
  moveToDlq(id: string, owner: string, now: number, outcome: AttemptOutcome, dlqId: string, followUps: NewMessage[], run?: RunFailure): Promise<boolean>;

  /**
   * Hands leases back: those expired at `now`, or every lease when `all` (start-up of the single
   * process that owns the store). A store shared by several nodes hands back the expired leases
   * and those of owners that are no longer alive (see `holdOwner`), `all` or not. Returns how many.
   */
  releaseLeases(now: number, all?: boolean): Promise<number>;

  /**
   * Cancels pending messages by filter (messageIds or other fields; `{}` = all). Unclaimed ones
   * become `cancelled` at once (CANCEL_REQUESTED + CANCELLED logged); ones being delivered get a
   * cancel request honoured when the attempt ends. Returns how many were cancelled/requested.
   */
  cancel(filter: MessageFilter, now: number): Promise<number>;

  /** DLQ entries matching `filter`, paged (cursor absent on the last page). */
  listDlq(filter: MessageFilter, page: Page): Promise<PageResult<DlqEntry>>;

  getDlq(dlqId: string): Promise<DlqEntry | undefined>;

  /** Deletes entries matching `filter` (at most `limit`); returns deleted ids, cursor if more. */
  deleteDlq(filter: MessageFilter, limit: number): Promise<{ deleted: number; more: boolean }>;

  /**
   * Atomically removes the DLQ entries matching `filter` (at most `limit`) and enqueues the new
   * messages `build` makes from them (DLQ retry). Returns the new message ids in entry order.
   */
  retryDlq(
    filter: MessageFilter,
    limit: number,
    now: number,
    build: (entry: DlqEntry) => NewMessage,
  ): Promise<{ messageIds: string[]; more: boolean }>;

  /** Log entries matching `filter` (state included), paged. */
  listLogs(filter: MessageFilter, page: Page): Promise<PageResult<LogEntry>>;

  /**
   * Messages waiting, by state, and the DLQ size at `now` (ms); see {@link MessageCounts}.
   * Optional: a store without it makes `GET /v2/stats` answer only the delivery counters.
   */
  counts?(now: number): Promise<MessageCounts>;

  /**
   * Log entries per state in `buckets` equal time slices of `[from, to)` (ms): for each state,
   * an array of `buckets` counts. Optional, like {@link counts}.
   */
  eventHistogram?(from: number, to: number, buckets: number): Promise<Record<string, number[]>>;

  /**
   * Drops log entries older than `logsBefore`, DLQ entries created before `dlqBefore` (when
   * given), finished messages no log or DLQ entry refers to any more, and expired dedup keys.
   * Deletes in short batches so it never holds up publishes and deliveries.
   */
  prune(now: number, logsBefore: number, dlqBefore?: number): Promise<void>;

  /**
   * Readiness: resolves true when the store answers a read on its handle; false once it is
   * closed or the read fails.
   */
  ping?(): Promise<boolean>;

  /** Reports the duration of each WAL fsync in seconds (metrics). Optional: a store without a WAL. */
  observeFsync?(observe: (seconds: number) => void): void;

  close(): Promise<void>;

  /**
   * Writes an online copy of the store to the new file `file` while it keeps serving (the SQLite
   * store: `src/sqlite-backup.ts`); every write acknowledged before the call is in the copy.
   * Resolves to the copy's schema version. Absent: the store is not a file svc can copy (PostgreSQL).
   */
  backup?(file: string): Promise<{ schemaVersion: number }>;

  /**
   * Extends the leases `owner` holds on `ids` to `leaseUntil` (ms); returns the ids still owned.
   * Stores shared by several nodes implement it: their leases are short and renewed while a
   * delivery runs (`SVC_QUEUE_LEASE_MS`), so a dead node's messages go to the others quickly.
   */
  renewLeases?(owner: string, ids: string[], leaseUntil: number): Promise<string[]>;

  /**
   * Marks `owner` (a dispatcher id) alive for as long as this store is open, so other nodes can
   * tell its leases from those of a node that died (shared stores; see `releaseLeases`).
   */
  holdOwner?(owner: string): Promise<void>;

  /**
   * Subscribes to wake-ups: messages became due at `dueAt` (ms), e.g. published on another node.
   * Returns the unsubscribe function.
   */
  onWake?(fn: (dueAt: number) => void): () => void;

  /**
   * The queue's credentials kept in the store, shared by every node (PostgreSQL); absent: each
   * node keeps its own (`credentials.json`).
   */
  sharedCredentials?(): SharedCredentials;

  /** URL groups (topics), `resource-types.ts`. */
  urlGroups(): UrlGroupStore;
  /** Queues and the admission rounds of the queue/flow-control gate, `resource-types.ts`. */
  queues(): QueueAdmissionStore;
  /** Flow-control keys, `resource-types.ts`. */
  flowControl(): FlowControlStore;
  /** Schedules, `resource-types.ts`. */
  schedules(): ScheduleStore;

  /** Workflow runs and their steps (`workflow-types.ts`). */
  workflows?(): WorkflowStore;
}


export type { SharedCredentialEntry, SharedCredentials } from '../../credential-sync.js';
