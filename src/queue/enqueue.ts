/**
 * The one way new messages enter the queue. Every producer — publish, batch, `/v2/enqueue`,
 * `/v2/trigger`, the workflow engine's own steps (notify, wait timeout, invoke results), workflow
 * restart/resume, the scheduler — goes through {@link EnqueueService}, which runs, in order:
 *
 * 1. prepare hooks: the workflow engine (`workflows/run-engine.ts`: turns messages carrying
 *    `Upstash-Workflow-*` headers into run steps) then the admission gate (`flow-control/gate.ts`:
 *    marks queue / flow-control messages `held`, creates missing queues, records limits);
 * 2. reserve: the dispatcher picks the due messages it has room for (direct hand-off);
 * 3. store: one transaction (`QueueStore.enqueue`, deduplication inside it), answered after commit;
 * 4. accept: the dispatcher takes the messages handed off claimed in that transaction;
 * 5. notify: the dispatcher is woken for the earliest due message it did not take;
 * 6. kick: the admission gate is told new held messages exist.
 *
 * Producers that store their messages in another transaction (a DLQ entry replaced by its retry,
 * a schedule's firing) call {@link EnqueueService.prepare} before and {@link EnqueueService.stored}
 * after it. Times are Unix ms.
 */
import type { CounterCell } from '../metrics.js';
import type { Clock } from './clock.js';
import type { Dispatcher } from './delivery/dispatcher.js';
import type { EnqueueResult, NewMessage, StoredMessage } from './model.js';
import type { QueueStore } from './store/types.js';

/**
 * A step run on new messages before they are stored; may change them; throws QueueError (or
 * rejects with one) to refuse them. Returns undefined when it had nothing to do, which it decided
 * synchronously: the publish hot path then awaits nothing for it.
 */
export interface EnqueueHook {
  prepare(msgs: NewMessage[], now: number): Promise<void> | undefined;
}

/** The admission gate's hook: `prepare` marks held messages, `kick` tells it new ones were stored. */
export interface AdmissionHook extends EnqueueHook {
  kick(): void;
}

export interface EnqueueOptions {
  /** The time the messages are stored at (ms); default the service's clock. */
  now?: number;
  /** false: store the messages as built, without the prepare hooks (a failure callback sent again). */
  prepare?: boolean;
  /** Count the stored messages in the publish metric (messages a client published). */
  published?: boolean;
}

export interface EnqueueServiceOptions {
  store: QueueStore;
  dispatcher: Dispatcher;
  clock: Clock;
  /** Deduplication window (ms) of `SVC_QUEUE_DEDUP_WINDOW_MS`. */
  dedupWindowMs: number;
  /** Counts stored (not deduplicated) published messages (metrics). */
  published?: CounterCell;
}

export class EnqueueService {
  /** Workflow runs: set by the server when the store keeps workflow runs. */
  workflows?: EnqueueHook;
  /** Queues and flow control: set by the server when the store keeps them. */
  admission?: AdmissionHook;

  constructor(private readonly o: EnqueueServiceOptions) {}

  /**
   * Runs the prepare hooks (workflow runs first, then admission) on `msgs`; undefined when neither
   * had anything to do ({@link EnqueueHook}). @throws QueueError from a hook (or rejects with it).
   */
  prepare(msgs: NewMessage[], now: number): Promise<void> | undefined {
    const w = this.workflows?.prepare(msgs, now);
    if (w) return w.then(() => this.admission?.prepare(msgs, now));
    return this.admission?.prepare(msgs, now);
  }

  /**
   * Prepares and stores `msgs` (one group-committed transaction, acknowledged after its commit)
   * and hands the due ones straight to the dispatcher, claimed in that same transaction (one commit
   * on the hot path, no re-read); the rest wait in the store and the dispatcher is told when.
   * Returns one result per message, in order. @throws QueueError from a hook or the store.
   */
  async enqueue(msgs: NewMessage[], opts: EnqueueOptions = {}): Promise<EnqueueResult[]> {
    const now = opts.now ?? this.o.clock.now();
    if (opts.prepare !== false) {
      const p = this.prepare(msgs, now);
      if (p) await p;
    }
    const { dispatcher } = this.o;
    const claim = dispatcher.reserve(msgs, now);
    let results: EnqueueResult[];
    try {
      results = await this.o.store.enqueue(msgs, now, this.o.dedupWindowMs, claim);
    } catch (err) {
      dispatcher.accept(claim, []);
      throw err;
    }
    const claimed: StoredMessage[] = [];
    const waiting: NewMessage[] = [];
    for (let i = 0; i < msgs.length; i++) {
      const r = results[i];
      if (r.claimed) claimed.push(r.claimed);
      else if (!r.deduplicated) waiting.push(msgs[i]);
    }
    dispatcher.accept(claim, claimed);
    if (opts.published) this.o.published?.inc(claimed.length + waiting.length);
    this.stored(waiting, now);
    return results;
  }

  /**
   * `msgs` were stored (by {@link enqueue} or another transaction): wakes the dispatcher for the
   * earliest one that is not held (not before `now`) and the admission gate when any is held.
   */
  stored(msgs: readonly NewMessage[], now: number): void {
    let first = Infinity;
    let held = false;
    for (const m of msgs) {
      if (m.held) held = true;
      else first = Math.min(first, m.dueAt);
    }
    if (first < Infinity) this.o.dispatcher.notify(Math.max(first, now));
    if (held) this.admission?.kick();
  }
}
