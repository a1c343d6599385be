/**
 * The overview's time series: every {@link SAMPLE_INTERVAL_MS} the console samples each area's
 * health and request counters (`svc_http_requests_total` of the process's metrics registry,
 * `src/metrics.ts`) and, when the queue area runs and someone
 * is signed in, its counters from the queue's public `GET /v2/stats` (through the same forwarding
 * as the browser's calls). The last hour ({@link MAX_SAMPLES} samples) is kept in memory; lost on restart.
 *
 * Rates are per second over the interval between two samples: `requests` (all responses),
 * `errors` (status >= 500) and `clientErrors` (4xx); queue `deliveries` (attempts that ended
 * delivered) and `failures` (attempts that ended in an error or a non-2xx answer).
 */
import type { AreaContext } from '../../area.js';
import type { AreaName } from '../../config.js';
import { healthReport, type HealthReport } from '../health.js';
import { forward, proxyTarget } from './proxy.js';

/** Interval between two samples in ms. */
export const SAMPLE_INTERVAL_MS = 10_000;
/** Samples kept: one hour. */
export const MAX_SAMPLES = 360;

/** Responses answered by one area since start (from `svc_http_requests_total`). */
export interface TrafficTotals {
  requests: number;
  /** Status 400..499. */
  clientErrors: number;
  /** Status >= 500. */
  serverErrors: number;
}

/**
 * Per-area totals of `svc_http_requests_total{area,route,status_class}` in this process's
 * registry (kv worker processes, `SVC_KV_WORKERS` > 0, are not included; with `SVC_METRICS=false`
 * nothing is counted).
 */
export async function trafficTotals(ctx: AreaContext): Promise<Record<string, TrafficTotals>> {
  const out: Record<string, TrafficTotals> = {};
  const family = (await ctx.metrics.snapshot()).find((f) => f.name === 'svc_http_requests_total');
  for (const v of family?.values ?? []) {
    const area = String(v.labels.area);
    const t = (out[area] ??= { requests: 0, clientErrors: 0, serverErrors: 0 });
    t.requests += v.value;
    if (v.labels.status_class === '4xx') t.clientErrors += v.value;
    if (v.labels.status_class === '5xx') t.serverErrors += v.value;
  }
  return out;
}

/** The queue's `GET /v2/stats` answer (see docs/readme/queue.md). */
export interface QueueStats {
  messages?: Record<string, number>;
  dlq?: number;
  deliveries: { delivered: number; failed: number };
}

export interface Sample {
  /** Epoch ms. */
  t: number;
  /** Per area: requests/s, 5xx/s, 4xx/s since the previous sample. */
  rates: Record<string, { requests: number; errors: number; clientErrors: number }>;
  /** Queue: delivered and failed attempts per second, depth by state, DLQ size. */
  queue?: { deliveries: number; failures: number; messages: Record<string, number>; dlq: number };
}

export class OverviewSampler {
  private readonly samples: Sample[] = [];
  private timer: NodeJS.Timeout | undefined;
  private lastTraffic: { t: number; totals: Record<string, TrafficTotals> } | undefined;
  private lastQueue: { t: number; stats: QueueStats } | undefined;
  private running: Promise<void> | undefined;

  /**
   * `wanted()` says whether anyone looks: the queue's counters (COUNT queries, a few hundred ms
   * with a million waiting messages) are only read while it is true, so an svc nobody watches
   * pays nothing but the request counters.
   */
  constructor(
    private readonly ctx: AreaContext,
    private readonly wanted: () => boolean = () => true,
    private readonly intervalMs = SAMPLE_INTERVAL_MS,
  ) {}

  /** Starts sampling (first sample at once). The timer does not keep the process alive. */
  start(): void {
    if (this.timer) return;
    void this.sample();
    this.timer = setInterval(() => void this.sample(), this.intervalMs);
    this.timer.unref();
  }

  /** Stops sampling and waits for a sample in progress. */
  async stop(): Promise<void> {
    clearInterval(this.timer);
    this.timer = undefined;
    await this.running;
  }

  /** The kept samples, oldest first. */
  series(): Sample[] {
    return this.samples;
  }

  /**
   * The queue's counters as of the last sample when it is at most `maxAgeMs` old (the overview
   * page then costs the queue nothing: its COUNT queries run once per interval), else fresh ones.
   */
  async recentQueueStats(maxAgeMs = this.intervalMs + 5_000): Promise<QueueStats | undefined> {
    if (this.lastQueue && Date.now() - this.lastQueue.t <= maxAgeMs) return this.lastQueue.stats;
    return this.queueStats();
  }

  /** The queue's current counters, or undefined when the queue area does not run here / fails. */
  async queueStats(): Promise<QueueStats | undefined> {
    if (!this.ctx.urls.has('queue')) return undefined;
    try {
      const r = await forward(proxyTarget(this.ctx, 'queue', 'v2/stats', 'GET'), 'GET', {}, undefined);
      if (r.status !== 200) return undefined;
      return JSON.parse(r.body.toString('utf8')) as QueueStats;
    } catch {
      return undefined;
    }
  }

  /** Health of every area started in this process. */
  health(): Promise<HealthReport> {
    return healthReport(this.ctx.health as Map<AreaName, () => boolean | Promise<boolean>>);
  }

  /** Takes one sample now (also used by tests). */
  sample(): Promise<void> {
    if (this.running) return this.running;
    this.running = this.take().finally(() => (this.running = undefined));
    return this.running;
  }

  private async take(): Promise<void> {
    const now = Date.now();
    const totals = await trafficTotals(this.ctx);
    const s: Sample = { t: now, rates: {} };
    if (this.lastTraffic) {
      const dt = Math.max(1, now - this.lastTraffic.t) / 1000;
      for (const [area, cur] of Object.entries(totals)) {
        const prev = this.lastTraffic.totals[area] ?? { requests: 0, clientErrors: 0, serverErrors: 0 };
        s.rates[area] = {
          requests: (cur.requests - prev.requests) / dt,
          errors: (cur.serverErrors - prev.serverErrors) / dt,
          clientErrors: (cur.clientErrors - prev.clientErrors) / dt,
        };
      }
    }
    this.lastTraffic = { t: now, totals };
    const stats = this.wanted() ? await this.queueStats() : undefined;
    if (!stats) this.lastQueue = undefined;
    if (stats) {
      const prev = this.lastQueue;
      const dt = prev ? Math.max(1, now - prev.t) / 1000 : 1;
      s.queue = {
        deliveries: prev ? Math.max(0, stats.deliveries.delivered - prev.stats.deliveries.delivered) / dt : 0,
        failures: prev ? Math.max(0, stats.deliveries.failed - prev.stats.deliveries.failed) / dt : 0,
        messages: stats.messages ?? {},
        dlq: stats.dlq ?? 0,
      };
      this.lastQueue = { t: now, stats };
    }
    // the first sample only sets the baseline for the rates
    if (Object.keys(s.rates).length || this.samples.length) {
      this.samples.push(s);
      if (this.samples.length > MAX_SAMPLES) this.samples.shift();
    }
  }
}
