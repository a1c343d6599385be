/**
 * Prometheus metrics shared plumbing: one registry per process, passed to every area through
 * `AreaContext.metrics`; each area registers its own families on it (areas never import each
 * other). The management area serves it as `GET /metrics` (Prometheus text format 0.0.4).
 *
 * Formatting, the default Node.js process metrics (`collectDefaultMetrics`: CPU, RSS, heap, event
 * loop lag, GC, handles) and the merging of other processes' values (`AggregatorRegistry.aggregate`,
 * used for the kv worker processes) come from `prom-client`. The counting itself does not: a
 * prom-client `Counter.labels(...).inc()` hashes its label object on every call, which is too much
 * for the kv and publish hot paths. Here a label combination is bound once at set-up
 * ({@link CounterFamily.labels} returns a {@link CounterCell}, a plain number field) and the hot
 * path only adds to it; {@link HistogramCell.observe} is a short linear bucket scan. Families turn
 * their cells into prom-client's JSON shape only when scraped, and gauges are read at scrape time
 * through a callback (e.g. the queue's message counts).
 *
 * Units follow Prometheus conventions: durations in seconds (`_seconds`), counters end in `_total`.
 * With `SVC_METRICS=false` cells are shared no-ops, no default metrics are collected and
 * `/metrics` answers 404.
 */
import promClient from 'prom-client';

const { AggregatorRegistry, Registry, collectDefaultMetrics } = promClient;

/** One value of a family in prom-client's JSON form (`metricName` for histogram series). */
export interface MetricValue {
  labels: Record<string, string | number>;
  value: number;
  metricName?: string;
}

/** One metric family in prom-client's JSON form (`Registry.getMetricsAsJSON()` items). */
export interface MetricSnapshot {
  name: string;
  help: string;
  type: string;
  aggregator: string;
  values: MetricValue[];
}

/** Histogram buckets (seconds) for request and storage latencies: 0.1 ms .. 10 s. */
export const DURATION_BUCKETS: readonly number[] = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10];

/** A counter for one label combination: a number the hot path adds to. */
export class CounterCell {
  value = 0;
  inc(n = 1): void {
    this.value += n;
  }
}

/**
 * A histogram for one label combination: per-bucket counts (not cumulative; made cumulative when
 * scraped), sum and count. `observe` takes seconds; {@link since} the start of an interval as
 * `performance.now()` milliseconds.
 */
export class HistogramCell {
  readonly counts: Float64Array;
  sum = 0;
  count = 0;
  constructor(readonly bounds: readonly number[]) {
    this.counts = new Float64Array(bounds.length);
  }
  observe(seconds: number): void {
    const b = this.bounds;
    let i = 0;
    while (i < b.length && seconds > b[i]) i++;
    if (i < b.length) this.counts[i]++;
    this.sum += seconds;
    this.count++;
  }
  /** Observes the time since `startMs` (a `performance.now()` value). */
  since(startMs: number): void {
    this.observe((performance.now() - startMs) / 1000);
  }
}

class NoopCounter extends CounterCell {
  override inc(): void {}
}
class NoopHistogram extends HistogramCell {
  override observe(): void {}
  override since(): void {}
}
const NOOP_COUNTER = new NoopCounter();
const NOOP_HISTOGRAM = new NoopHistogram([]);

type Values = MetricValue[];

/** What prom-client's `Registry` needs of a metric (duck-typed: `registerMetric` reads these). */
abstract class Family {
  abstract readonly type: 'counter' | 'gauge' | 'histogram';
  /** How `AggregatorRegistry.aggregate` merges the values of several processes. */
  aggregator: promClient.Aggregator = 'sum';
  constructor(
    readonly name: string,
    readonly help: string,
    readonly labelNames: readonly string[],
  ) {}
  protected labelsOf(values: readonly string[]): Record<string, string> {
    if (values.length !== this.labelNames.length) {
      throw new Error(`metric ${this.name}: expected labels ${this.labelNames.join(', ')}, got ${values.length} values`);
    }
    const out: Record<string, string> = {};
    this.labelNames.forEach((n, i) => (out[n] = values[i]));
    return out;
  }
  protected abstract values(): Values | Promise<Values>;
  async get(): Promise<MetricSnapshot> {
    return { name: this.name, help: this.help, type: this.type, aggregator: this.aggregator, values: await this.values() };
  }
}

/** A counter family; bind label values once with {@link labels}. */
export class CounterFamily extends Family {
  readonly type = 'counter';
  private readonly cells = new Map<string, { labels: Record<string, string>; cell: CounterCell }>();
  constructor(name: string, help: string, labelNames: readonly string[], private readonly enabled: boolean) {
    super(name, help, labelNames);
  }
  /** The cell for these label values (in `labelNames` order); the same cell on every call. Not for hot paths. */
  labels(...values: string[]): CounterCell {
    if (!this.enabled) return NOOP_COUNTER;
    const key = values.join('\u0000');
    let e = this.cells.get(key);
    if (!e) this.cells.set(key, (e = { labels: this.labelsOf(values), cell: new CounterCell() }));
    return e.cell;
  }
  protected values(): Values {
    return [...this.cells.values()].map(({ labels, cell }) => ({ labels, value: cell.value }));
  }
}

/** A histogram family; bind label values once with {@link labels}. */
export class HistogramFamily extends Family {
  readonly type = 'histogram';
  private readonly cells = new Map<string, { labels: Record<string, string>; cell: HistogramCell }>();
  constructor(name: string, help: string, labelNames: readonly string[], private readonly buckets: readonly number[], private readonly enabled: boolean) {
    super(name, help, labelNames);
  }
  /** The cell for these label values; the same cell on every call. Not for hot paths. */
  labels(...values: string[]): HistogramCell {
    if (!this.enabled) return NOOP_HISTOGRAM;
    const key = values.join('\u0000');
    let e = this.cells.get(key);
    if (!e) this.cells.set(key, (e = { labels: this.labelsOf(values), cell: new HistogramCell(this.buckets) }));
    return e.cell;
  }
  protected values(): Values {
    const out: Values = [];
    for (const { labels, cell } of this.cells.values()) {
      let acc = 0;
      cell.bounds.forEach((le, i) => {
        acc += cell.counts[i];
        out.push({ metricName: `${this.name}_bucket`, labels: { ...labels, le }, value: acc });
      });
      out.push({ metricName: `${this.name}_bucket`, labels: { ...labels, le: '+Inf' }, value: cell.count });
      out.push({ metricName: `${this.name}_sum`, labels, value: cell.sum });
      out.push({ metricName: `${this.name}_count`, labels, value: cell.count });
    }
    return out;
  }
}

/** One gauge reading: label values (in `labelNames` order) and the value. */
export type GaugeReading = readonly [labelValues: readonly string[], value: number];

/** A gauge family whose values are read at scrape time by `read` (may be async, e.g. a SQL count). */
export class GaugeFamily extends Family {
  readonly type = 'gauge';
  private readonly readers: (() => Iterable<GaugeReading> | Promise<Iterable<GaugeReading>>)[] = [];
  /** Adds a reader (several components may report into one family, e.g. one per vector index). */
  addReader(read: () => Iterable<GaugeReading> | Promise<Iterable<GaugeReading>>): void {
    this.readers.push(read);
  }
  protected async values(): Promise<Values> {
    const out: Values = [];
    for (const read of this.readers) {
      for (const [labelValues, value] of await read()) out.push({ labels: this.labelsOf(labelValues), value });
    }
    return out;
  }
}

/** Per-route request counts by status class and durations of one HTTP area. */
export class RouteMeter {
  private readonly byClass: CounterCell[];
  constructor(
    requests: CounterFamily,
    private readonly duration: HistogramCell,
    area: string,
    route: string,
  ) {
    this.byClass = ['1xx', '2xx', '3xx', '4xx', '5xx'].map((c) => requests.labels(area, route, c));
  }
  /** Records a finished request: its status and its start (`performance.now()` ms). */
  done(status: number, startMs: number): void {
    this.record(status, (performance.now() - startMs) / 1000);
  }
  /** Records a finished request: its status and its duration in seconds. */
  record(status: number, seconds: number): void {
    const c = (status / 100) | 0;
    this.byClass[c >= 1 && c <= 5 ? c - 1 : 4].inc();
    this.duration.observe(seconds);
  }
}

/** The {@link RouteMeter}s of one area, by route name (bind them at set-up; {@link route} caches). */
export class HttpMeter {
  private readonly routes = new Map<string, RouteMeter>();
  constructor(
    private readonly metrics: Metrics,
    readonly area: string,
  ) {}
  /** The meter of `route` (a route pattern such as `/v2/messages/:id`, never a raw URL). */
  route(route: string): RouteMeter {
    let m = this.routes.get(route);
    if (!m) {
      const { requests, duration } = this.metrics.httpFamilies();
      this.routes.set(route, (m = new RouteMeter(requests, duration.labels(this.area, route), this.area, route)));
    }
    return m;
  }
}

/** A source of metric families of other processes (e.g. the kv workers), merged at scrape time. */
export type MetricSource = () => Promise<MetricSnapshot[][]>;

/** The metrics of one svc process (see module doc). */
export class Metrics {
  readonly registry = new Registry();
  private readonly sources: MetricSource[] = [];
  private http?: { requests: CounterFamily; duration: HistogramFamily };

  /**
   * True when label values may carry names chosen by API clients (e.g. vector namespaces): only
   * when the exposition is behind a bearer token (`SVC_METRICS_TOKEN`). An unauthenticated
   * `/metrics` must not tell whoever reaches the management port what the tenants named their
   * data, and must not grow a series per name a client invents.
   */
  readonly nameLabels: boolean;

  /**
   * @param enabled false (`SVC_METRICS=false`): every cell is a no-op and nothing is collected
   * @param opts.defaultMetrics collect prom-client's Node.js process metrics (default true when enabled)
   * @param opts.nameLabels see {@link nameLabels} (default false)
   */
  constructor(
    readonly enabled: boolean,
    opts: { defaultMetrics?: boolean; nameLabels?: boolean } = {},
  ) {
    this.nameLabels = opts.nameLabels ?? false;
    if (enabled && (opts.defaultMetrics ?? true)) collectDefaultMetrics({ register: this.registry });
  }

  private family<F extends Family>(name: string, make: () => F): F {
    const existing = this.registry.getSingleMetric(name) as unknown;
    if (existing !== undefined) return existing as F;
    const f = make();
    this.registry.registerMetric(f as unknown as promClient.Metric);
    return f;
  }

  /** The counter family `name` (created on first use; the same object afterwards). */
  counter(name: string, help: string, labelNames: readonly string[] = []): CounterFamily {
    return this.family(name, () => new CounterFamily(name, help, labelNames, this.enabled));
  }

  /** The histogram family `name` (buckets in seconds, default {@link DURATION_BUCKETS}). */
  histogram(name: string, help: string, labelNames: readonly string[] = [], buckets: readonly number[] = DURATION_BUCKETS): HistogramFamily {
    return this.family(name, () => new HistogramFamily(name, help, labelNames, buckets, this.enabled));
  }

  /**
   * The gauge family `name`, read at scrape time. `aggregator` says how the values of several
   * processes merge (`sum`, or e.g. `max` for an up/down flag every process reports).
   */
  gauge(name: string, help: string, labelNames: readonly string[] = [], aggregator: promClient.Aggregator = 'sum'): GaugeFamily {
    return this.family(name, () => {
      const g = new GaugeFamily(name, help, labelNames);
      g.aggregator = aggregator;
      return g;
    });
  }

  /** The shared HTTP families: `svc_http_requests_total` and `svc_http_request_duration_seconds`. */
  httpFamilies(): { requests: CounterFamily; duration: HistogramFamily } {
    return (this.http ??= {
      requests: this.counter('svc_http_requests_total', 'HTTP requests answered, by area, route and status class', ['area', 'route', 'status_class']),
      duration: this.histogram('svc_http_request_duration_seconds', 'Time from request head to response written, by area and route', ['area', 'route']),
    });
  }

  /** Request meters of `area` (`svc_http_*{area="<area>"}`). */
  httpMeter(area: string): HttpMeter {
    return new HttpMeter(this, area);
  }

  /** Adds the families of other processes, merged into every scrape (counters and gauges summed). */
  addSource(source: MetricSource): void {
    this.sources.push(source);
  }

  /** This process's families (what a worker process sends to its primary). */
  async snapshot(): Promise<MetricSnapshot[]> {
    return (await this.registry.getMetricsAsJSON()) as unknown as MetricSnapshot[];
  }

  /** The Prometheus text exposition: this process plus every source, merged. */
  async text(): Promise<string> {
    if (this.sources.length === 0) return this.registry.metrics();
    const others = (await Promise.all(this.sources.map((s) => s()))).flat();
    if (others.length === 0) return this.registry.metrics();
    return AggregatorRegistry.aggregate([await this.snapshot(), ...others] as never).metrics();
  }

  /** The `Content-Type` of {@link text}. */
  get contentType(): string {
    return this.registry.contentType;
  }
}
