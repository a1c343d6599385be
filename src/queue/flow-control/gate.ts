/**
 * The admission gate for queues and flow-control keys.
 *
 * A message of a queue or with a `Flow-Control-Key` is stored *held*: the dispatcher never sees
 * it (held rows are outside the due index), so waiting messages cost the dispatcher nothing and
 * cannot starve other destinations. An admission round (one store transaction) releases held
 * messages while their queue and key have room:
 *
 * - queue: at most `parallelism` admitted messages not yet DELIVERED/FAILED/CANCELLED, their
 *   retries and their callback / failure-callback messages included (callbacks carry the queue
 *   name); FIFO by enqueue order among due messages; nothing while paused.
 * - flow-control key: at most `parallelism` admitted, unfinished messages with the key (a
 *   message keeps its slot through its retry waits), and at most `rate` deliveries reach the
 *   destination in any window of `period` seconds. A message is admitted only while
 *   (attempts that *ended* in the last period) + (attempts running) + (admitted, not started)
 *   < rate. Counting an attempt until one period after its end (not its start) makes the limit
 *   hold as the destination observes it, whatever the delivery latency: an attempt the
 *   destination received at r ended at e >= r, and nothing new is admitted before e + period.
 *   The state lives in memory (a restart starts a fresh window), or, on a
 *   store shared by several nodes, in the store (`flow_control_attempts`: every node's attempts
 *   count; a round counts and records its releases under the admission lock, a claim turns the
 *   admitted row into a running one in the same statement, and the outcome's transaction ends
 *   it, so no moment exists where a node's attempt is invisible to another node's round);
 *   nothing while paused. Pinned limits win over the ones of incoming messages.
 *
 * In-flight counts are read from the store in the round itself, so they survive restarts and
 * stay exact when messages are cancelled. Rounds run when messages are held, after every
 * recorded delivery outcome, when a rate window or a delayed held message comes due, and every
 * {@link SAFETY_TICK_MS} while anything is held. Rounds never overlap.
 */
import type { Logger } from '../../logger.js';
import type { Clock } from '../clock.js';
import type { FlowControl, NewMessage } from '../model.js';
import { effectiveLimits, type AdmissionTx, type FlowKeyState, type FlowControlStore, type QueueAdmissionStore } from '../store/resource-types.js';

export { effectiveLimits };

/** Re-check period while messages are held (covers cancellations and missed kicks). */
const SAFETY_TICK_MS = 1000;
/** Most messages released per queue or key in one round. */
const MAX_RELEASE_PER_KEY = 1000;

export interface GateOptions {
  /** Queues and the admission rounds. */
  queues: QueueAdmissionStore;
  /** Flow-control keys (and, on a shared store, their rate windows). */
  flows: FlowControlStore;
  clock: Clock;
  logger: Logger;
  /** Called after a round released messages (wake the dispatcher). */
  onRelease: (now: number) => void;
  /**
   * Id of this node's dispatcher: set when the store keeps the rate windows (several nodes share
   * them, `FlowControlStore.attemptEnded`); then the store records starts and ends (with the claim
   * and the outcome) and rounds read the rate use from it instead of this process's memory.
   */
  owner?: string;
}

export class AdmissionGate {
  /** End times (ms) of attempts per key within the current rate window, oldest first. */
  private readonly ended = new Map<string, number[]>();
  /** Per key: admitted messages whose first attempt has not started yet. */
  private readonly pending = new Map<string, number>();
  /** Per key: attempts running now (those started before the key's last `resetRate` excepted). */
  private readonly runningAttempts = new Map<string, number>();
  /** Key of each running attempt, by message id (what `resetRate` forgives). */
  private readonly runningKeyById = new Map<string, string>();
  /** Message ids whose running attempt started before a `resetRate` of its key: it no longer counts. */
  private readonly forgiven = new Set<string>();
  private running = false;
  private again = false;
  private timer: NodeJS.Timeout | undefined;
  private timerAt = Infinity;
  private stopped = true;

  constructor(private readonly o: GateOptions) {}

  start(): void {
    this.stopped = false;
    this.kick();
  }

  stop(): void {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    this.timerAt = Infinity;
  }

  /**
   * Marks `msgs` that need a slot as held, creates their missing queues and records the limits
   * of their flow-control keys (pinned fields are kept by the effective-limit rule).
   */
  prepare(msgs: NewMessage[], now: number): Promise<void> | undefined {
    // messages outside queues and flow control (the common case): nothing to do, nothing awaited
    for (const m of msgs) if (m.queueName !== undefined || m.flowControlKey !== undefined) return this.prepareHeld(msgs, now);
    return undefined;
  }

  /** {@link prepare} when some of `msgs` are in a queue or under flow control. */
  private async prepareHeld(msgs: NewMessage[], now: number): Promise<void> {
    const queues = new Set<string>();
    const keys = new Map<string, FlowControl>();
    for (const m of msgs) {
      if (m.queueName === undefined && m.flowControlKey === undefined) continue;
      m.held = true;
      if (m.queueName !== undefined) queues.add(m.queueName);
      if (m.flowControlKey !== undefined && m.flowControl) keys.set(m.flowControlKey, m.flowControl);
    }
    // Skip the extra commits when nothing changed (the common case on the publish hot path).
    const newQueues = [...queues].filter((q) => !this.knownQueues.has(q));
    const changed = [...keys].filter(([k, fc]) => this.knownLimits.get(k) !== JSON.stringify(fc));
    if (newQueues.length) {
      await this.o.queues.ensureQueues(newQueues, now);
      for (const q of newQueues) this.knownQueues.add(q);
    }
    if (changed.length) {
      await this.o.flows.recordFlowControl(changed.map(([key, fc]) => ({ key, fc })), now);
      for (const [k, fc] of changed) this.knownLimits.set(k, JSON.stringify(fc));
    }
  }

  /** Forgets a deleted queue so the next message re-creates it. */
  forgetQueue(name: string): void {
    this.knownQueues.delete(name);
  }

  private readonly knownQueues = new Set<string>();
  private readonly knownLimits = new Map<string, string>();

  /** Rate state of a key for `GET /v2/flowControl/{key}`: starts in the window (+ admitted, not started) and its start. */
  rateState(key: string, periodS: number, now: number): { count: number; periodStart: number } {
    const arr = this.prune(key, periodS, now);
    return { count: arr.length + (this.pending.get(key) ?? 0) + (this.runningAttempts.get(key) ?? 0), periodStart: arr.length ? arr[0] : now };
  }

  /**
   * A delivery attempt of `m` started (dispatcher start listener): it counts as running against
   * the key's rate until it ends ({@link onEnd}); a first attempt leaves the admitted-not-started
   * count. Retries are not gated again but do count against the rate of later admissions.
   */
  onStart(m: { id?: string; flowControlKey?: string; retried: number }, at: number = this.o.clock.now()): void {
    const k = m.flowControlKey;
    if (k === undefined) return;
    this.runningAttempts.set(k, (this.runningAttempts.get(k) ?? 0) + 1);
    if (m.id !== undefined) this.runningKeyById.set(m.id, k);
    const p = this.pending.get(k) ?? 0;
    if (m.retried === 0 && p > 0) {
      if (p === 1) this.pending.delete(k);
      else this.pending.set(k, p - 1);
    }
  }

  /** An attempt of `m` ended (its outcome recorded, or recording it failed) at `at` ms: it stays in the rate window one period. */
  onEnd(m: { id?: string; flowControlKey?: string }, at: number): void {
    const k = m.flowControlKey;
    if (k === undefined) return;
    if (this.shared && m.id !== undefined) {
      this.o.flows.attemptEnded!(m.id, this.o.owner!, at).catch((err) => this.o.logger.warn({ err, key: k }, 'queue: recording a flow-control attempt end failed'));
    }
    if (m.id !== undefined) {
      this.runningKeyById.delete(m.id);
      if (this.forgiven.delete(m.id)) return; // started before a resetRate: counted neither running nor ended
    }
    const r = (this.runningAttempts.get(k) ?? 1) - 1;
    if (r > 0) this.runningAttempts.set(k, r);
    else this.runningAttempts.delete(k);
    const arr = this.ended.get(k) ?? [];
    arr.push(at);
    this.ended.set(k, arr);
  }

  /**
   * Forgets the rate window of a key (`resetRate`, `pin`): the SDK's "clears the current rate
   * count and immediately ends the current period". Attempts that ended and attempts running
   * now stop counting (the rate count reads 0 even while a delivery runs); admitted messages
   * whose first attempt has not started count in the new window, where they will arrive.
   */
  resetRate(key: string): void {
    this.ended.delete(key);
    for (const [id, k] of this.runningKeyById) {
      if (k !== key || this.forgiven.has(id)) continue;
      this.forgiven.add(id);
      const r = (this.runningAttempts.get(k) ?? 1) - 1;
      if (r > 0) this.runningAttempts.set(k, r);
      else this.runningAttempts.delete(k);
    }
    if (this.shared) {
      this.o.flows.resetRateWindow!(key).then(
        () => this.kick(),
        (err) => this.o.logger.warn({ err, key }, 'queue: resetting a flow-control rate window failed'),
      );
      return;
    }
    this.kick();
  }

  /** The store keeps the rate windows (shared by several nodes). */
  private get shared(): boolean {
    return this.o.owner !== undefined && this.o.flows.attemptEnded !== undefined;
  }

  /** Rate state of a key for the API: from the store when it keeps the windows, else {@link rateState}. */
  async sharedRateState(key: string, periodS: number, now: number): Promise<{ count: number; periodStart: number }> {
    if (this.shared && this.o.flows.rateState) return this.o.flows.rateState(key, periodS, now);
    return this.rateState(key, periodS, now);
  }

  /** Requests an admission round (coalesced; never overlapping). */
  kick(): void {
    if (this.stopped) return;
    if (this.running) {
      this.again = true;
      return;
    }
    this.running = true;
    this.round()
      .catch((err) => this.o.logger.error({ err }, 'queue: admission round failed'))
      .finally(() => {
        this.running = false;
        if (this.again) {
          this.again = false;
          this.kick();
        }
      });
  }

  private prune(key: string, periodS: number, now: number): number[] {
    const arr = this.ended.get(key) ?? [];
    const from = now - periodS * 1000;
    let i = 0;
    while (i < arr.length && arr[i] <= from) i++;
    if (i) arr.splice(0, i);
    if (arr.length) this.ended.set(key, arr);
    else this.ended.delete(key);
    return arr;
  }

  private async round(): Promise<void> {
    const now = this.o.clock.now();
    const { released, wake, held } = await this.o.queues.admit((tx) => this.decide(tx, now), now);
    if (released) this.o.onRelease(now);
    let at = wake ?? Infinity;
    if (held) at = Math.min(at, now + SAFETY_TICK_MS);
    if (at < Infinity) this.wakeAt(at);
  }

  /** One round inside the store transaction: which held messages may go now. */
  private decide(tx: AdmissionTx, now: number): { released: number; wake?: number; held: boolean } {
    let released = 0;
    let wake = Infinity;
    const keyCache = new Map<string, FlowKeyState | undefined>();
    const key = (k: string) => {
      if (!keyCache.has(k)) keyCache.set(k, tx.flowKey(k));
      return keyCache.get(k);
    };
    /** How many more messages of key `k` may be admitted now (admitted counted from the store). */
    const room = (k: string): number => {
      const st = key(k);
      if (!st) return MAX_RELEASE_PER_KEY;
      if (st.paused) return 0;
      const lim = effectiveLimits(st);
      let r = MAX_RELEASE_PER_KEY;
      if (lim.parallelism !== undefined) r = Math.min(r, lim.parallelism - tx.admittedForKey(k));
      if (lim.rate !== undefined && tx.rateUsage) {
        // windows kept in the store (every node's attempts): admitted or running + ended within the period
        const use = tx.rateUsage(k, lim.periodS);
        const left = lim.rate - use.used - (takenNow.get(k) ?? 0);
        if (left <= 0) wake = Math.min(wake, use.oldestEnd !== undefined ? use.oldestEnd + lim.periodS * 1000 + 1 : now + 50);
        r = Math.min(r, left);
      } else if (lim.rate !== undefined) {
        const arr = this.prune(k, lim.periodS, now);
        // Running attempts always count: one whose outcome is already committed (the message has
        // left the store's admitted count) is still running here until `onEnd` records its end,
        // a few microtasks later; a round in between must not see a free slot (bounding the
        // running count by the store's admitted count let a 4th arrival into a rate-3 window).
        // Only the admitted-not-started count is bounded by the store (cancelled ones drop out).
        const admitted = tx.admittedForKey(k);
        if (admitted === 0) this.pending.delete(k);
        const busy = (this.runningAttempts.get(k) ?? 0) + Math.min(this.pending.get(k) ?? 0, admitted);
        const left = lim.rate - arr.length - busy;
        if (left <= 0) wake = Math.min(wake, arr.length ? arr[0] + lim.periodS * 1000 + 1 : now + 50);
        r = Math.min(r, left);
      }
      return Math.max(0, r);
    };
    /** Messages of a key released in this round (counted against its rate when the store keeps the windows). */
    const takenNow = new Map<string, number>();
    const take = (k: string) => {
      takenNow.set(k, (takenNow.get(k) ?? 0) + 1);
      this.pending.set(k, (this.pending.get(k) ?? 0) + 1);
    };

    const queues = tx.heldQueues();
    for (const q of queues) {
      const cfg = tx.queueConfig(q) ?? { parallelism: 1, paused: false };
      if (cfg.paused) continue;
      const free = Math.min(MAX_RELEASE_PER_KEY, cfg.parallelism - tx.admittedInQueue(q));
      if (free <= 0) continue;
      const go: number[] = [];
      for (const h of tx.queueHeads(q, free, now)) {
        if (h.flowControlKey !== undefined) {
          if (room(h.flowControlKey) <= 0) break; // FIFO: the queue waits for its head
          take(h.flowControlKey);
        }
        go.push(h.seq);
        tx.release([h.seq]);
      }
      released += go.length;
    }
    const keys = tx.heldKeys();
    for (const k of keys) {
      const n = room(k);
      if (n <= 0) continue;
      const heads = tx.keyHeads(k, n, now);
      for (const h of heads) take(k);
      tx.release(heads.map((h) => h.seq));
      released += heads.length;
    }
    const nextDue = tx.nextHeldDue(now);
    if (nextDue !== undefined) wake = Math.min(wake, nextDue);
    return { released, wake: wake < Infinity ? wake : undefined, held: queues.length > 0 || keys.length > 0 };
  }

  private wakeAt(at: number): void {
    if (this.stopped || at >= this.timerAt) return;
    if (this.timer) clearTimeout(this.timer);
    this.timerAt = at;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.timerAt = Infinity;
      this.kick();
    }, Math.max(0, at - this.o.clock.now()));
    this.timer.unref?.();
  }
}
