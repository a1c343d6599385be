/**
 * The kv area's Prometheus families (registered on `AreaContext.metrics`, `src/metrics.ts`). Every
 * process that serves kv requests (the primary, and each worker process with `SVC_KV_WORKERS` > 0)
 * has its own {@link KvMetrics}; the primary merges the workers' values into its scrape
 * (`cluster/workers.ts` `collectMetrics`), so counters are sums over the processes.
 *
 *   svc_http_requests_total{area="kv",route,status_class}, svc_http_request_duration_seconds{area="kv",route}
 *       route: command (path or JSON body form), pipeline, multi-exec, stream (SSE)
 *   svc_kv_commands_total{outcome}        ok | error (the database answered with an error) |
 *                                         rejected (refused before the database: bad request,
 *                                         policy, daily limit, auth, database unavailable)
 *   svc_kv_backend_duration_seconds       round trip of one write to the database until its last
 *                                         reply (a single command, a pipeline or a transaction)
 *   svc_kv_sse_streams                    open SSE streams (MONITOR, SUBSCRIBE, PSUBSCRIBE)
 *   svc_kv_backend_up                     1 when the database answers, 0 while it is down (primary)
 *   svc_kv_redis_restarts_total           restarts of the supervised redis-server (primary)
 */
import type { CounterCell, HistogramCell, Metrics, RouteMeter } from '../metrics.js';

export type KvRoute = 'command' | 'pipeline' | 'multi-exec' | 'stream';

/** The pre-bound kv cells of one process. */
export class KvMetrics {
  readonly ok: CounterCell;
  readonly error: CounterCell;
  readonly rejected: CounterCell;
  /** Undefined with `SVC_METRICS=false`: the connections then read no clock for it. */
  readonly backendRtt: HistogramCell | undefined;
  private readonly routes: Record<KvRoute, RouteMeter>;

  constructor(readonly metrics: Metrics) {
    const commands = metrics.counter('svc_kv_commands_total', 'kv commands by outcome: ok, error (database error reply), rejected (refused before the database)', ['outcome']);
    this.ok = commands.labels('ok');
    this.error = commands.labels('error');
    this.rejected = commands.labels('rejected');
    const rtt = metrics.histogram('svc_kv_backend_duration_seconds', 'Round trip of one write to the database (command, pipeline or transaction) until its last reply').labels();
    this.backendRtt = metrics.enabled ? rtt : undefined;
    const http = metrics.httpMeter('kv');
    this.routes = { command: http.route('command'), pipeline: http.route('pipeline'), 'multi-exec': http.route('multi-exec'), stream: http.route('stream') };
  }

  /** The route meter of a request target (`/pipeline`, `/multi-exec`, SSE paths, else a command). */
  route(url: string): RouteMeter {
    return this.routes[kvRoute(url)];
  }

  /** Reports the open SSE streams of a front (`svc_kv_sse_streams`). */
  addStreams(streams: { readonly size: number }): void {
    this.metrics.gauge('svc_kv_sse_streams', 'Open kv SSE streams (MONITOR, SUBSCRIBE, PSUBSCRIBE)').addReader(() => [[[], streams.size]]);
  }
}

/**
 * The route of a kv request target: only first path segments of 7 to 10 characters can name a
 * non-command route, so the common short command names are classified without a string copy.
 */
export function kvRoute(url: string): KvRoute {
  let end = url.length;
  for (let i = 1; i < url.length; i++) {
    const c = url.charCodeAt(i);
    if (c === 47 /* / */ || c === 63 /* ? */) {
      end = i;
      break;
    }
  }
  const len = end - 1;
  if (len < 7 || len > 10) return 'command';
  const first = url.slice(1, end).toLowerCase();
  if (first === 'pipeline') return 'pipeline';
  if (first === 'multi-exec') return 'multi-exec';
  if (first === 'monitor' || ((first === 'subscribe' || first === 'psubscribe') && end < url.length && url.charCodeAt(end) === 47)) return 'stream';
  return 'command';
}
