/**
 * `GET /v2/stats` (a svc extension, used by the web console's overview): how many messages wait
 * by state, the DLQ size, and delivery attempts since start-up.
 *
 *   {messages: {ready, delayed, inFlight, held}, dlq, deliveries: {delivered, failed}}
 *
 * (`messages` and `dlq` are left out for a store without `QueueStore.counts`.)
 *
 * `GET /v2/stats/events?fromDate=&toDate=&buckets=` (ms; default the last hour, 60 buckets, at
 * most 500): events (log entries) per state over time, for the logs page's histogram, in buckets
 * of whole minutes aligned to the clock (so `fromDate`/`toDate` in the answer are the covered
 * range, which may be wider than asked and hold fewer buckets than asked):
 *
 *   {fromDate, toDate, bucketMs, states: {DELIVERED: [n, ...], ERROR: [...], ...}}
 *
 * `deliveries` are counters since the process started (in memory): `delivered` = attempts whose
 * outcome was recorded as a 2xx answer, `failed` = attempts that ended in an error (non-2xx answer,
 * timeout, connection error). Rates come from two readings. The counts are COUNT queries on
 * partial indexes (see `QueueStore.counts`); they are read at most once a second (cached).
 */
import type { FastifyInstance } from 'fastify';
import { queueError } from '../errors.js';
import type { MessageCounts } from '../store/types.js';
import type { QueueApiContext } from './context.js';

/** How long a COUNT reading is reused, in ms. */
const COUNTS_TTL_MS = 1_000;

export function registerStatsRoutes(app: FastifyInstance, ctx: QueueApiContext): void {
  const deliveries = { delivered: 0, failed: 0 };
  ctx.dispatcher.addOutcomeListener((_m, outcome) => {
    if (!outcome.error && outcome.status !== undefined && outcome.status >= 200 && outcome.status < 300) deliveries.delivered++;
    else deliveries.failed++;
  });
  let cached: { at: number; counts: Promise<MessageCounts> } | undefined;
  const histogram = new EventHistogram(ctx.store);
  app.get('/v2/stats', async () => {
    const store = ctx.store;
    if (!store.counts) return { deliveries: { ...deliveries } };
    const now = ctx.clock.now();
    if (!cached || now - cached.at >= COUNTS_TTL_MS) cached = { at: now, counts: store.counts(now) };
    const { dlq, ...messages } = await cached.counts;
    return { messages, dlq, deliveries: { ...deliveries } };
  });

  app.get('/v2/stats/events', async (req) => {
    const q = req.query as Record<string, string | undefined>;
    const int = (name: string, def: number, min: number, max: number): number => {
      const v = q[name];
      if (v === undefined || v === '') return def;
      if (!/^\d+$/.test(v) || Number(v) < min || Number(v) > max) throw queueError('invalidRange', name, min, max);
      return Number(v);
    };
    const now = ctx.clock.now();
    const toDate = int('toDate', now, 0, Number.MAX_SAFE_INTEGER);
    const fromDate = int('fromDate', toDate - 3_600_000, 0, toDate);
    const buckets = int('buckets', 60, 1, 500);
    return histogram.read(fromDate, toDate, buckets, now);
  });
}

/** A finished bucket is cached once its end is this far in the past (ms): late commits land first. */
const SETTLED_MS = 5_000;
/** Cached buckets kept at most. */
const MAX_CACHED = 20_000;

/**
 * The events histogram without blocking the event loop: buckets are whole minutes (or multiples),
 * aligned to the clock, each counted by its own query over the `logs_time` index with a yield
 * (`setImmediate`) in between, so other requests are served between two buckets (one bucket of a
 * busy minute is a few ms; one GROUP BY over an hour of a million events was about a second).
 * Buckets that ended more than {@link SETTLED_MS} ago never change and are cached.
 */
class EventHistogram {
  private readonly cache = new Map<string, Record<string, number>>();

  constructor(private readonly store: QueueApiContext['store']) {}

  async read(fromDate: number, toDate: number, buckets: number, now: number) {
    const width = Math.max(60_000, Math.ceil((toDate - fromDate) / buckets / 60_000) * 60_000);
    const first = Math.floor(fromDate / width) * width;
    const n = Math.max(1, Math.ceil((toDate - first) / width));
    const states: Record<string, number[]> = {};
    if (!this.store.eventHistogram) return { fromDate: first, toDate: first + n * width, bucketMs: width, states };
    for (let i = 0; i < n; i++) {
      const start = first + i * width;
      const key = `${start}:${width}`;
      let counts = this.cache.get(key);
      if (!counts) {
        const r = await this.store.eventHistogram(start, start + width, 1);
        counts = Object.fromEntries(Object.entries(r).map(([state, a]) => [state, a[0]]));
        if (start + width <= now - SETTLED_MS) {
          if (this.cache.size >= MAX_CACHED) this.cache.delete(this.cache.keys().next().value!);
          this.cache.set(key, counts);
        }
        await new Promise((resolve) => setImmediate(resolve));
      }
      for (const [state, c] of Object.entries(counts)) (states[state] ??= new Array<number>(n).fill(0))[i] = c;
    }
    return { fromDate: first, toDate: first + n * width, bucketMs: width, states };
  }
}
