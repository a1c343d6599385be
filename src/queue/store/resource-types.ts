/**
 * The durable state of the queue's user-managed resources, one interface each — URL groups
 * ({@link UrlGroupStore}), queues with the admission primitives of the queue/flow-control gate
 * ({@link QueueAdmissionStore}), flow-control keys ({@link FlowControlStore}), schedules
 * ({@link ScheduleStore}) — all required members of `QueueStore`. Same rules as
 * {@link QueueStore}: one method = one transaction; user actions resolve after commit + fsync
 * (durable), admission bookkeeping after commit (relaxed). Times are Unix ms unless named `_s`.
 *
 * Held messages: a message waiting for a queue or flow-control slot is stored "held" (not
 * claimable by the dispatcher). An admission round releases some of them, making them ordinary
 * due messages.
 */
import type { FlowControl, NewMessage, PublishOptions } from '../model.js';

export interface UrlGroupEndpoint {
  url: string;
  name?: string;
}

/** Wire shape of `GET /v2/topics/{name}`. */
export interface UrlGroup {
  name: string;
  createdAt: number;
  updatedAt: number;
  endpoints: UrlGroupEndpoint[];
}

/** Wire shape of `GET /v2/queues/{name}`; `lag` = messages not yet done. */
export interface QueueInfo {
  name: string;
  createdAt: number;
  updatedAt: number;
  parallelism: number;
  paused: boolean;
  lag: number;
}

/** A flow-control key's stored settings. Effective limits: the pinned ones when pinned. */
export interface FlowKeyState {
  key: string;
  parallelism?: number;
  rate?: number;
  periodS?: number;
  paused: boolean;
  pinnedParallelism?: number;
  pinnedRate?: number;
  pinnedPeriodS?: number;
  /** messages waiting for admission */
  waiting: number;
  /** admitted messages not yet delivered/failed (counted against parallelism) */
  admitted: number;
}

/** Effective limits of a key: pinned fields win. */
export function effectiveLimits(k: FlowKeyState): { parallelism?: number; rate?: number; periodS: number } {
  const parallelism = k.pinnedParallelism ?? k.parallelism;
  const pinnedRate = k.pinnedRate !== undefined;
  return {
    parallelism,
    rate: pinnedRate ? k.pinnedRate : k.rate,
    periodS: (pinnedRate ? k.pinnedPeriodS : k.periodS) ?? 1,
  };
}

/** A stored schedule. */
export interface ScheduleRecord {
  id: string;
  cron: string;
  destination: string;
  options: PublishOptions;
  body: Buffer;
  queueName?: string;
  callerIp?: string;
  paused: boolean;
  createdAt: number;
  lastTime?: number;
  nextTime?: number;
  lastMessageIds: string[];
}

/** A held message as the admission round sees it. */
export interface HeldHead {
  seq: number;
  flowControlKey?: string;
}

/**
 * Reads and releases inside one admission transaction (all synchronous). `queueHeads`/`keyHeads`
 * are asked with the round's `now`.
 */
export interface AdmissionTx {
  /** Queues that have held messages. */
  heldQueues(): string[];
  /** Flow-control keys with held messages outside any queue. */
  heldKeys(): string[];
  queueConfig(name: string): { parallelism: number; paused: boolean } | undefined;
  flowKey(key: string): FlowKeyState | undefined;
  /** Admitted (not held), unfinished messages of a queue, their callbacks included. */
  admittedInQueue(name: string): number;
  /** Admitted (not held), unfinished messages with this flow-control key. */
  admittedForKey(key: string): number;
  /** Oldest held messages of the queue due at `now` (FIFO by sequence). */
  queueHeads(name: string, limit: number, now: number): HeldHead[];
  /** Oldest held messages with the key and no queue, due at `now`. */
  keyHeads(key: string, limit: number, now: number): HeldHead[];
  /** Makes held messages ordinary pending messages (claimable by the dispatcher). */
  release(seqs: number[]): void;
  /** Earliest due time of a held message after `now` (delayed messages), if any. */
  nextHeldDue(now: number): number | undefined;
  /**
   * Rate use of a key shared by several nodes (stores that keep rate windows, see
   * {@link FlowControlStore.attemptEnded}): attempts admitted or running plus attempts that ended
   * within the last `periodS` seconds, and the oldest such end (ms). Absent: the gate keeps the
   * windows in memory.
   */
  rateUsage?(key: string, periodS: number): { used: number; oldestEnd?: number };
}

/** URL groups (topics): `QueueStore.urlGroups()`. */
export interface UrlGroupStore {
  addEndpoints(name: string, endpoints: UrlGroupEndpoint[], now: number): Promise<void>;
  /** false when the group does not exist; the group is deleted when no endpoint is left. */
  removeEndpoints(name: string, endpoints: UrlGroupEndpoint[], now: number): Promise<boolean>;
  listGroups(): Promise<UrlGroup[]>;
  getGroup(name: string): Promise<UrlGroup | undefined>;
  deleteGroup(name: string): Promise<boolean>;
}

/** Queues and the admission rounds over queues and flow-control keys: `QueueStore.queues()`. */
export interface QueueAdmissionStore {
  upsertQueue(name: string, set: { parallelism?: number; paused?: boolean }, now: number): Promise<void>;
  /** Creates the queues that do not exist yet (parallelism 1, not paused). */
  ensureQueues(names: string[], now: number): Promise<void>;
  getQueue(name: string): Promise<QueueInfo | undefined>;
  listQueues(): Promise<QueueInfo[]>;
  /** Deletes the queue and cancels its waiting messages; false when absent. */
  deleteQueue(name: string, now: number): Promise<boolean>;
  /** false when absent. */
  setQueuePaused(name: string, paused: boolean, now: number): Promise<boolean>;

  // admission
  /**
   * Runs one admission round at `now` (ms; default the wall clock) in a single transaction
   * (relaxed durability). `fn` is synchronous: a store may read what a round can need before
   * calling it (the PostgreSQL store does) and applies its releases after it returns.
   */
  admit<T>(fn: (tx: AdmissionTx) => T, now?: number): Promise<T>;
}

/** Flow-control keys: `QueueStore.flowControl()`. */
export interface FlowControlStore {
  /** Records the limits of new messages per key (skipping pinned fields). */
  recordFlowControl(entries: { key: string; fc: FlowControl }[], now: number): Promise<void>;
  getFlowKey(key: string): Promise<FlowKeyState | undefined>;
  listFlowKeys(search?: string): Promise<FlowKeyState[]>;
  /** false when the key is unknown. */
  setFlowPaused(key: string, paused: boolean, now: number): Promise<boolean>;
  pinFlow(key: string, pin: { parallelism?: number; rate?: number; periodS?: number }, now: number): Promise<boolean>;
  unpinFlow(key: string, unpin: { parallelism: boolean; rate: boolean }, now: number): Promise<boolean>;

  // rate windows kept in the store (several nodes); optional
  /**
   * The running attempt of `messageId` on dispatcher `owner` ended at `at` (ms): it counts one more
   * period. Such a store starts attempts in the claim itself and ends them with the recorded
   * outcome (atomically); this call covers an attempt whose outcome could not be recorded.
   */
  attemptEnded?(messageId: string, owner: string, at: number): Promise<void>;
  /** Forgets the ended and running attempts of `key` (resetRate, pin); admitted, not started ones stay. */
  resetRateWindow?(key: string): Promise<void>;
  /** Attempts counted against `key`'s rate now, and the start of its window (for the API). */
  rateState?(key: string, periodS: number, now: number): Promise<{ count: number; periodStart: number }>;
}

/** Schedules: `QueueStore.schedules()`. */
export interface ScheduleStore {
  upsertSchedule(s: ScheduleRecord): Promise<void>;
  getSchedule(id: string): Promise<ScheduleRecord | undefined>;
  listSchedules(): Promise<ScheduleRecord[]>;
  deleteSchedule(id: string): Promise<boolean>;
  setSchedulePaused(id: string, paused: boolean, nextTime: number | undefined): Promise<boolean>;
  /** Unpaused schedules with next_time <= now. */
  dueSchedules(now: number): Promise<ScheduleRecord[]>;
  /** Earliest next_time of an unpaused schedule. */
  nextScheduleTime(): Promise<number | undefined>;
  /**
   * Fires a schedule atomically: only when its next_time is still `expectedNext` and it is not
   * paused (so a firing happens once even across restarts), stores `msgs` (CREATED logged),
   * sets last_time = `now`, next_time = `nextTime`, last_message_ids. Returns false otherwise.
   */
  fireSchedule(id: string, expectedNext: number, msgs: NewMessage[], nextTime: number | undefined, now: number): Promise<boolean>;
  /** Status (`pending|delivered|failed|cancelled`) of messages by id (unknown ids omitted). */
  messageStatuses(ids: string[]): Promise<Record<string, string>>;
}
