/**
 * The dispatcher: claims due messages from the store, delivers them with bounded concurrency and
 * per-origin fairness, and records each outcome.
 *
 * Memory: pending messages live in the store. The dispatcher holds only the messages it has
 * claimed (at most `maxConcurrent` in flight plus a ready buffer of the same size), and asks the
 * store for the earliest due time (an index lookup) to know when to wake up. A million delayed
 * messages therefore cost no memory here.
 *
 * Fairness: one origin (scheme://host:port) may hold at most `perOriginLimit` slots (in flight +
 * ready); claims skip origins at their cap, so one slow destination cannot take every slot.
 *
 * Crash safety: every claim is a lease (owner = this dispatcher's id). On start all leases are
 * released (this process owns the store), so messages in flight at a crash are delivered again.
 * On a store shared by several nodes (PostgreSQL) leases are short and renewed while held
 * ({@link DispatcherOptions.leaseMs}), and only leases that expired or whose owner died are
 * released.
 */
import { randomBytes } from 'node:crypto';
import type { Logger } from '../../logger.js';
import { buildCallback, type CallbackHooks } from '../build.js';
import { systemClock, type Clock } from '../clock.js';
import { crashPoint } from '../crash-point.js';
import type { AttemptOutcome, MessageTrace, NewMessage, StoredMessage } from '../model.js';
import type { EnqueueClaim, QueueStore, RunFailure } from '../store/types.js';
import type { DeliveryMetrics } from '../metrics.js';
import { retryAfterMs, retryDelayMs } from './backoff.js';
import { NOT_FORWARDED, type HttpSender } from './http.js';
import { signDelivery } from './signing.js';
import { endAttemptSpan, endSpan, spanTraceContext, startAttemptSpan, startDeadLetterSpan, tracingOn } from './trace.js';
import { originOf } from './url-cache.js';

/** Default per-attempt timeout when the message has none (15 min on the free plan). */
export const DEFAULT_TIMEOUT_MS = 15 * 60_000;
/** Longest per-attempt timeout a message may ask for (2 h on pay-as-you-go). */
export const MAX_TIMEOUT_MS = 2 * 3_600_000;
/** Lease margin past the longest attempt before the lease may be reaped. */
const LEASE_MARGIN_MS = 60_000;
/** Longest sleep between store polls when nothing is due (also covers missed notifications). */
const MAX_IDLE_MS = 1000;
/** Most messages claimed per store round trip. */
const CLAIM_BATCH = 512;
/**
 * Waits (ms) between tries of recording an attempt's outcome when the store write fails (a full
 * disk, an I/O error): the outcome is known, so it is written again rather than left to the lease
 * (which would deliver the message once more after 2 h). After the last try the message stays
 * leased and is delivered again when the lease expires (at-least-once). ~81 s in all.
 */
export const RECORD_RETRY_MS: readonly number[] = [50, 250, 1000, 5000, 15_000, 60_000];

export interface DispatcherOptions {
  store: QueueStore;
  sender: HttpSender;
  logger: Logger;
  clock?: Clock;
  maxConcurrent: number;
  /** Slots one origin may hold; default half of `maxConcurrent` (at least 1). */
  perOriginLimit?: number;
  /** The current signing key, read at delivery time (rotations apply at once). */
  signingKey: () => string;
  /** `Upstash-Region` value, e.g. `EU-CENTRAL-1`. */
  region: string;
  /** Observer for tests/bench: called after an outcome is recorded. */
  onOutcome?: (m: StoredMessage, outcome: AttemptOutcome) => void;
  /** Waits between tries of a failing outcome write (ms); default {@link RECORD_RETRY_MS}. */
  recordRetryMs?: readonly number[];
  /** Attempt counters and durations (`src/queue/metrics.ts`). */
  metrics?: DeliveryMetrics;
  /** What features add to callback messages (workflow runs: `workflows/callback-fields.ts`). */
  callbacks?: CallbackHooks;
  /**
   * Short, renewed leases (ms; `SVC_QUEUE_LEASE_MS`) for a store shared by several nodes: every
   * claimed message (ready or in flight) is leased for this long and renewed every third of it
   * while held, and expired leases of any node are reaped as often, so the messages of a node that
   * died are claimed by another within about one lease. Needs `store.renewLeases`. Undefined:
   * one lease covering the longest attempt (single process owning its store).
   */
  leaseMs?: number;
}

export class Dispatcher {
  readonly owner = `d_${randomBytes(6).toString('hex')}`;
  /**
   * Set by the workflow engine: the end of the workflow run a message that moves to the DLQ
   * belongs to, written in the move's transaction (undefined = none). Never throws into delivery.
   */
  deadLetterRun?: (m: StoredMessage, outcome: AttemptOutcome, now: number) => Promise<RunFailure | undefined>;
  private readonly clock: Clock;
  private readonly perOriginLimit: number;
  private inFlight = 0;
  /** In flight + ready, per origin. */
  private readonly perOrigin = new Map<string, number>();
  /** In flight only, per origin. */
  private readonly flying = new Map<string, number>();
  private readonly ready = new Map<string, StoredMessage[]>();
  private readyCount = 0;
  /** Slots promised to enqueues whose hand-off has not come back yet. */
  private reserved = 0;
  private readonly reservedOrigins = new Map<EnqueueClaim, string[]>();
  private pumping = false;
  private again = false;
  /**
   * The store may hold due, unclaimed messages this dispatcher has not claimed yet. Set by
   * {@link notify} with a due time <= now, by the wake-up timer (at most {@link MAX_IDLE_MS} apart,
   * which also covers writers that never notify, e.g. lease reaping), by start, and after a claim
   * that may have left some behind (full batch, or origins skipped at their cap). A finishing
   * delivery frees a slot but claims only when this is set: messages handed off at enqueue never
   * touch the store on their way to the wire, and the claim query per delivery (half the store's
   * time in the bench profile) is gone.
   */
  private maybeDue = true;
  private timer: NodeJS.Timeout | undefined;
  private timerAt = Infinity;
  private stopped = true;
  private abandoned = false;
  /** Messages this dispatcher holds claimed (ready or in flight), by id: their leases are renewed. */
  private readonly leased = new Map<string, StoredMessage>();
  private leaseTimer: NodeJS.Timeout | undefined;
  private readonly active = new Set<Promise<void>>();

  constructor(private readonly o: DispatcherOptions) {
    this.clock = o.clock ?? systemClock;
    this.perOriginLimit = o.perOriginLimit ?? Math.max(1, Math.ceil(o.maxConcurrent / 2));
  }

  /** Releases every lease (crash recovery) and starts delivering. */
  async start(): Promise<void> {
    this.abandoned = false;
    await this.o.store.holdOwner?.(this.owner);
    const n = await this.o.store.releaseLeases(this.clock.now(), true);
    if (n) this.o.logger.info({ released: n }, 'queue: re-queued messages that were in flight at the last stop');
    this.stopped = false;
    this.maybeDue = true;
    if (this.o.leaseMs !== undefined && this.o.store.renewLeases) {
      this.leaseTimer = setInterval(() => {
        this.renewLeases().catch((err) => this.o.logger.warn({ err }, 'queue: lease renewal failed'));
      }, Math.max(100, Math.floor(this.o.leaseMs / 3)));
      this.leaseTimer.unref?.();
    }
    this.kick();
  }

  /** Lease length (ms) of a claim made now. */
  private get leaseLength(): number {
    return this.o.leaseMs ?? MAX_TIMEOUT_MS + LEASE_MARGIN_MS;
  }

  /**
   * Renews the leases of the messages held here and hands expired leases of any node back (the
   * short-lease mode of {@link DispatcherOptions.leaseMs}).
   */
  private async renewLeases(): Promise<void> {
    if (this.stopped || !this.o.store.renewLeases) return;
    const now = this.clock.now();
    const ids = [...this.leased.keys()];
    if (ids.length) {
      const kept = new Set(await this.o.store.renewLeases(this.owner, ids, now + this.leaseLength));
      const lost = ids.filter((id) => !kept.has(id) && this.leased.has(id));
      if (lost.length) this.o.logger.warn({ lost: lost.length }, 'queue: leases lapsed before renewal; those messages may be delivered again');
    }
    const released = await this.o.store.releaseLeases(this.clock.now());
    if (released) {
      this.maybeDue = true;
      this.kick();
    }
  }

  /** Tells the dispatcher a message becomes due at `dueAt` (ms) so it can wake up early. */
  notify(dueAt: number): void {
    if (this.stopped) return;
    if (dueAt <= this.clock.now()) {
      this.maybeDue = true;
      this.kick();
    } else this.wakeAt(dueAt);
  }

  /**
   * Chooses which of `msgs` (about to be enqueued at `now`) this dispatcher takes at once, claimed
   * in the enqueue transaction: those due now, within the free slots and each origin's cap (so a
   * burst to one destination cannot fill the buffer). Undefined when none. Pair every claim with
   * {@link accept}.
   */
  reserve(msgs: readonly NewMessage[], now: number): EnqueueClaim | undefined {
    if (this.stopped) return undefined;
    let room = this.o.maxConcurrent * 2 - this.inFlight - this.readyCount - this.reserved;
    const ids = new Set<string>();
    const origins: string[] = [];
    for (const m of msgs) {
      if (room <= 0) break;
      if (m.dueAt > now || m.held) continue;
      const origin = originOf(m.url);
      const load = this.load(origin);
      if (load >= this.perOriginLimit) continue;
      this.perOrigin.set(origin, load + 1);
      ids.add(m.id);
      origins.push(origin);
      room--;
    }
    if (!ids.size) return undefined;
    this.reserved += ids.size;
    const claim: EnqueueClaim = { owner: this.owner, leaseUntil: now + this.leaseLength, ids };
    this.reservedOrigins.set(claim, origins);
    return claim;
  }

  /** Takes the messages an enqueue handed off (claimed by us) and releases the reservation. */
  accept(claim: EnqueueClaim | undefined, messages: StoredMessage[]): void {
    if (!claim) return;
    this.reserved -= claim.ids.size;
    for (const origin of this.reservedOrigins.get(claim) ?? []) {
      const left = (this.perOrigin.get(origin) ?? 1) - 1;
      if (left <= 0) this.perOrigin.delete(origin);
      else this.perOrigin.set(origin, left);
    }
    this.reservedOrigins.delete(claim);
    if (this.stopped) return; // still leased to us in the store; released at the next start
    for (const m of messages) this.addReady(m);
    this.startReady();
  }

  private addReady(m: StoredMessage): void {
    if (this.o.leaseMs !== undefined) this.leased.set(m.id, m);
    const origin = originOf(m.url);
    const q = this.ready.get(origin);
    if (q) q.push(m);
    else this.ready.set(origin, [m]);
    this.readyCount++;
    this.perOrigin.set(origin, (this.perOrigin.get(origin) ?? 0) + 1);
  }

  /**
   * Stops claiming and waits up to `graceMs` for in-flight deliveries (their outcomes are
   * recorded). Deliveries still running after that are abandoned: their outcome is not recorded,
   * their lease stays, and the next start delivers them again (at-least-once).
   */
  async stop(graceMs = 5000): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    if (this.leaseTimer) clearInterval(this.leaseTimer);
    this.leaseTimer = undefined;
    let t: NodeJS.Timeout | undefined;
    await Promise.race([Promise.allSettled([...this.active]), new Promise((r) => (t = setTimeout(r, graceMs)))]);
    clearTimeout(t);
    this.abandoned = true;
  }

  private readonly outcomeListeners: ((m: StoredMessage, outcome: AttemptOutcome) => void)[] = [];

  /**
   * Registers a listener called after each attempt's outcome is recorded in the store
   * the workflow engine advances the run); not called when recording failed (see
   * {@link addEndListener}). Listeners must not throw.
   */
  addOutcomeListener(fn: (m: StoredMessage, outcome: AttemptOutcome) => void): void {
    this.outcomeListeners.push(fn);
  }

  private readonly startListeners: ((m: StoredMessage, at: number) => void)[] = [];

  /** Registers a listener called as each attempt starts (`at`, ms; flow-control rate). Must not throw. */
  addStartListener(fn: (m: StoredMessage, at: number) => void): void {
    this.startListeners.push(fn);
  }

  private readonly endListeners: ((m: StoredMessage, at: number) => void)[] = [];

  /**
   * Registers a listener called once for every started attempt when it ends (`at`, ms), after its
   * outcome listeners — also when recording the outcome failed (e.g. a full disk: the message
   * stays leased and is delivered again after its lease), so that a per-key running count paired
   * with {@link addStartListener} never leaks (flow-control parallelism). Must not throw.
   */
  addEndListener(fn: (m: StoredMessage, at: number) => void): void {
    this.endListeners.push(fn);
  }

  /** Deliveries in flight now (for tests and health). */
  get busy(): number {
    return this.inFlight;
  }

  private wakeAt(at: number): void {
    if (at >= this.timerAt) return;
    if (this.timer) clearTimeout(this.timer);
    this.timerAt = at;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.timerAt = Infinity;
      this.maybeDue = true;
      this.kick();
    }, Math.max(0, at - this.clock.now()));
    this.timer.unref?.();
  }

  private kick(): void {
    if (this.stopped) return;
    if (this.pumping) {
      this.again = true;
      return;
    }
    if (!this.maybeDue) {
      // nothing to claim: start what is ready without a pump round (no promises per delivery)
      this.startReady();
      return;
    }
    this.pumping = true;
    this.pump()
      .catch((err) => this.o.logger.error({ err }, 'queue: dispatcher error'))
      .finally(() => {
        this.pumping = false;
        if (this.again) {
          this.again = false;
          this.kick();
        }
      });
  }

  private async pump(): Promise<void> {
    for (;;) {
      this.again = false;
      this.startReady();
      const free = this.o.maxConcurrent * 2 - this.inFlight - this.readyCount - this.reserved;
      if (this.stopped || free <= 0 || !this.maybeDue) return;
      const exclude = [...this.perOrigin.keys()].filter((k) => this.load(k) >= this.perOriginLimit);
      const now = this.clock.now();
      // At most perOriginLimit per claim, so one origin's load stays under 2x its cap.
      const limit = Math.min(free, CLAIM_BATCH, this.perOriginLimit);
      // Cleared before the claim: a notify() while it runs sets it again (and `again`).
      this.maybeDue = false;
      let batch: StoredMessage[];
      try {
        batch = await this.o.store.claimDue({
          owner: this.owner,
          now,
          limit,
          leaseUntil: now + this.leaseLength,
          excludeOrigins: exclude,
        });
      } catch (err) {
        this.maybeDue = true; // try again at the next kick or wake-up
        this.wakeAt(this.clock.now() + MAX_IDLE_MS);
        throw err;
      }
      for (const m of batch) this.addReady(m);
      this.startReady();
      if (batch.length >= limit || exclude.length > 0) this.maybeDue = true; // some may be left
      if (batch.length < limit) {
        const next = await this.o.store.nextDueAt();
        const t = this.clock.now();
        const cap = t + MAX_IDLE_MS;
        // Due but not claimable (origins at their cap): a finishing delivery kicks us.
        this.wakeAt(next === undefined || next <= t ? cap : Math.min(next, cap));
        if (!this.again) return;
      }
    }
  }

  /** In flight + ready for an origin. */
  private load(origin: string): number {
    return this.perOrigin.get(origin) ?? 0;
  }

  /** Starts ready messages round-robin over origins while slots are free. */
  private startReady(): void {
    let progressed = true;
    while (progressed && this.inFlight < this.o.maxConcurrent && this.readyCount > 0) {
      progressed = false;
      for (const [origin, q] of this.ready) {
        if (this.inFlight >= this.o.maxConcurrent) break;
        if ((this.flying.get(origin) ?? 0) >= this.perOriginLimit) continue;
        const m = q.shift();
        if (!m) continue;
        if (q.length === 0) this.ready.delete(origin);
        this.readyCount--;
        progressed = true;
        this.inFlight++;
        this.flying.set(origin, (this.flying.get(origin) ?? 0) + 1);
        const done = (err?: unknown) => {
          if (err !== undefined) this.o.logger.error({ err, messageId: m.id }, 'queue: recording a delivery outcome failed');
          if (this.endListeners.length) {
            const at = this.clock.now();
            for (const fn of this.endListeners) fn(m, at);
          }
          this.inFlight--;
          this.leased.delete(m.id);
          const fl = (this.flying.get(origin) ?? 1) - 1;
          if (fl <= 0) this.flying.delete(origin);
          else this.flying.set(origin, fl);
          const left = (this.perOrigin.get(origin) ?? 1) - 1;
          if (left <= 0) this.perOrigin.delete(origin);
          else this.perOrigin.set(origin, left);
          this.active.delete(p);
          this.kick();
        };
        // one settled promise per attempt (a .catch().finally() chain allocated two more)
        const p: Promise<void> = this.deliver(m).then(() => done(), (err: unknown) => done(err ?? new Error('delivery failed')));
        this.active.add(p);
      }
    }
  }

  /** One attempt of `m`, then the matching store transition. */
  private async deliver(m: StoredMessage): Promise<void> {
    const start = this.clock.now();
    for (const fn of this.startListeners) fn(m, start);
    // tracing on: the attempt's span is the parent the destination (and the callbacks) continue
    const span = tracingOn() ? startAttemptSpan(m) : undefined;
    const trace: MessageTrace | undefined = span ? spanTraceContext(span) : m.trace;
    const signature = signDelivery(this.o.signingKey(), m.url, m.body, start);
    const headers = deliveryHeaders(m, signature, this.o.region, trace);
    const timeoutMs = m.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    const sentAt = performance.now();
    const outcome = await this.o.sender.send({ url: m.url, method: m.method, headers, trusted: signature, body: m.body, timeoutMs });
    const metrics = this.o.metrics;
    metrics?.duration.since(sentAt);
    if (this.abandoned) {
      if (span) endSpan(span, 'abandoned at shutdown');
      return;
    }
    const now = this.clock.now();
    const ok = outcome.status !== undefined && outcome.status >= 200 && outcome.status < 300;
    metrics?.[ok ? 'success' : 'failure'].inc();
    const followUps: NewMessage[] = [];
    const cb = buildCallback(m, 'callback', outcome, now, undefined, this.o.callbacks);
    if (cb) {
      if (trace) cb.trace = trace;
      followUps.push(cb);
    }
    let recorded: boolean;
    if (ok) {
      if (span) endAttemptSpan(span, outcome, 'delivered');
      recorded = await this.record(m, () => this.o.store.complete(m.id, this.owner, now, outcome, followUps));
    } else {
      const nonRetryable =
        outcome.status === 489 && headerValue(outcome.headers, 'upstash-nonretryable-error')?.toLowerCase() === 'true';
      const failed = m.retried + 1;
      if (!nonRetryable && failed <= m.maxRetries) {
        const wait = retryAfterMs(lowerHeaders(outcome.headers), now) ?? retryDelayMs(failed, m.retryDelay);
        if (span) endAttemptSpan(span, outcome, 'retry', now + wait);
        recorded = await this.record(m, () => this.o.store.reschedule(m.id, this.owner, now, outcome, now + wait, followUps));
        metrics?.retries.inc();
        this.notify(now + wait);
      } else {
        const dlqId = `${now}-${m.seq}`;
        const fcb = buildCallback(m, 'failure_callback', outcome, now, dlqId, this.o.callbacks);
        if (fcb) {
          if (trace) fcb.trace = trace;
          followUps.push(fcb);
        }
        if (nonRetryable && !outcome.error?.includes('non-retryable')) outcome.error = `${outcome.error ?? ''} (non-retryable)`.trim();
        const dlqSpan = span ? startDeadLetterSpan(span, m, dlqId) : undefined;
        if (span) endAttemptSpan(span, outcome, 'dead-letter');
        // the workflow run the message ends is written in the DLQ move's transaction
        const run = await this.deadLetterRun?.(m, outcome, now).catch((err: unknown) => {
          this.o.logger.error({ err, messageId: m.id }, 'queue: reading the workflow run of a failed message failed');
          return undefined;
        });
        try {
          recorded = await this.record(m, () => this.o.store.moveToDlq(m.id, this.owner, now, outcome, dlqId, followUps, run));
        } catch (err) {
          endSpan(dlqSpan, err);
          throw err;
        }
        endSpan(dlqSpan);
        crashPoint('dlq-moved');
        metrics?.deadLettered.inc();
      }
    }
    if (!recorded) this.o.logger.warn({ messageId: m.id }, 'queue: lease lost before the outcome was recorded');
    for (const f of followUps) this.notify(f.dueAt);
    this.o.onOutcome?.(m, outcome);
    for (const fn of this.outcomeListeners) fn(m, outcome);
  }

  /**
   * Runs `write` (the outcome transition of `m`), writing again after each wait of
   * `recordRetryMs` while it throws (e.g. SQLITE_FULL); rethrows after the last wait, or at once
   * when the dispatcher is stopping.
   */
  private record(m: StoredMessage, write: () => Promise<boolean>): Promise<boolean> {
    // the first write's promise as is (no async frame per outcome); the retries only on a failure
    return write().catch((err: unknown) => this.recordAgain(m, write, err));
  }

  /** {@link record} after its first write failed with `first`. */
  private async recordAgain(m: StoredMessage, write: () => Promise<boolean>, first: unknown): Promise<boolean> {
    const waits = this.o.recordRetryMs ?? RECORD_RETRY_MS;
    for (let i = 0; ; i++) {
      try {
        if (i > 0) return await write();
        throw first;
      } catch (err) {
        if (i >= waits.length || this.stopped) throw err;
        this.o.logger.warn({ err, messageId: m.id, retryInMs: waits[i] }, 'queue: recording a delivery outcome failed; writing it again');
        await new Promise((r) => setTimeout(r, waits[i]));
        if (this.stopped) throw err;
      }
    }
  }
}

function headerValue(h: Record<string, string[]> | undefined, lowerName: string): string | undefined {
  if (!h) return undefined;
  for (const [k, v] of Object.entries(h)) if (k.toLowerCase() === lowerName) return v[0];
  return undefined;
}

function lowerHeaders(h: Record<string, string[]> | undefined): Record<string, string[]> {
  const out: Record<string, string[]> = {};
  for (const [k, v] of Object.entries(h ?? {})) out[k.toLowerCase()] = v;
  return out;
}

/**
 * The headers of a delivery as the delivery client's flat `[name, value, name, value, ...]` list
 * (`delivery/client.ts` writes them in this order and spelling; a header
 * with several values appears once per value, in order): forwarded headers, `Svc-`/`Upstash-`
 * `Message-Id`, `Retried`, `Max-Retries`, `Signature`, `Caller-Ip`, `Topic-Name`, `Schedule-Id`,
 * `Queue-Name`, `Region`, `User-Agent: Upstash-QStash`, and the W3C `traceparent`/`tracestate` of
 * `trace` (in place of forwarded ones; `delivery/trace.ts`). A list, not an object: an object
 * with these 20-odd names was built by adding properties one at a time (hidden-class transitions
 * from V8's runtime per property) and read back with megamorphic keyed loads.
 */
export function deliveryHeaders(m: StoredMessage, signature: string, region: string, trace?: MessageTrace): string[] {
  const h: string[] = [];
  for (const k in m.headers) {
    if (!forwarded(k)) continue; // stored before such headers were dropped at publish
    if (trace !== undefined && isTraceHeader(k)) continue; // replaced below
    if (OWN_NAMES.has(k)) continue; // set below (a name svc sets replaces a forwarded one spelled the same)
    const v = m.headers[k];
    if (v.length === 1) h.push(k, v[0]);
    else for (const one of v) h.push(k, one);
  }
  if (trace !== undefined) {
    h.push('traceparent', trace.traceparent);
    if (trace.tracestate !== undefined) h.push('tracestate', trace.tracestate);
  }
  // constant names (no name strings built per delivery), each Upstash- then Svc-, in this order
  h.push('User-Agent', 'Upstash-QStash');
  both(h, 'Upstash-Message-Id', 'Svc-Message-Id', m.id);
  both(h, 'Upstash-Retried', 'Svc-Retried', String(m.retried));
  both(h, 'Upstash-Max-Retries', 'Svc-Max-Retries', String(m.maxRetries));
  both(h, 'Upstash-Signature', 'Svc-Signature', signature);
  both(h, 'Upstash-Caller-Ip', 'Svc-Caller-Ip', m.callerIp);
  both(h, 'Upstash-Topic-Name', 'Svc-Topic-Name', m.topicName);
  both(h, 'Upstash-Endpoint-Name', 'Svc-Endpoint-Name', m.endpointName);
  both(h, 'Upstash-Schedule-Id', 'Svc-Schedule-Id', m.scheduleId);
  both(h, 'Upstash-Queue-Name', 'Svc-Queue-Name', m.queueName);
  both(h, 'Upstash-Region', 'Svc-Region', region);
  both(h, 'Upstash-Retry-Delay', 'Svc-Retry-Delay', m.retryDelay);
  return h;
}

/** The header names {@link deliveryHeaders} sets itself, as it spells them. */
const OWN_NAMES = new Set([
  'User-Agent',
  ...['Message-Id', 'Retried', 'Max-Retries', 'Signature', 'Caller-Ip', 'Topic-Name', 'Endpoint-Name', 'Schedule-Id', 'Queue-Name', 'Region', 'Retry-Delay'].flatMap((n) => [`Upstash-${n}`, `Svc-${n}`]),
]);

/** Whether a stored header name is a W3C trace-context header (any case). */
function isTraceHeader(name: string): boolean {
  const lower = name.toLowerCase();
  return lower === 'traceparent' || lower === 'tracestate';
}

/** Adds the `Upstash-` and `Svc-` names of one delivery header with `value` (none when undefined). */
function both(h: string[], upstash: string, svc: string, value: string | undefined): void {
  if (value === undefined) return;
  h.push(upstash, value, svc, value);
}

/** Whether a stored header name is forwarded ({@link NOT_FORWARDED}), by name as stored (bounded cache: the same few names repeat). */
const forwardedNames = new Map<string, boolean>();
function forwarded(name: string): boolean {
  let ok = forwardedNames.get(name);
  if (ok === undefined) {
    ok = !NOT_FORWARDED.has(name.toLowerCase());
    if (forwardedNames.size >= 1024) forwardedNames.clear();
    forwardedNames.set(name, ok);
  }
  return ok;
}
