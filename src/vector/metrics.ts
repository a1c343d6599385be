/**
 * The vector area's Prometheus families (registered on `AreaContext.metrics`, `src/metrics.ts`):
 *
 *   svc_http_requests_total{area="vector",route,status_class}, svc_http_request_duration_seconds{area="vector",route}
 *       route: the endpoint (`query`, `upsert`, `fetch`, ...); requests refused before an endpoint
 *       is known (bad token, unknown path) count as `unmatched`
 *   svc_vector_vectors{index,namespace}             records per namespace, read at scrape time
 *   svc_vector_query_duration_seconds{index}        one query request (`query`, `query-data`,
 *                                                   resumable starts), embedding included
 *   svc_vector_upsert_duration_seconds{index}       one upsert request until its group commit
 *   svc_vector_snapshot_duration_seconds{index}     writing one namespace's graph snapshot
 */
import type { HistogramCell, HttpMeter, Metrics, RouteMeter } from '../metrics.js';
import type { VectorIndex } from './engine/vector-index.js';

const QUERY_ENDPOINTS = new Set(['query', 'query-data', 'resumable-query', 'resumable-query-data']);
const UPSERT_ENDPOINTS = new Set(['upsert', 'upsert-data']);

/** The pre-bound vector cells. */
export class VectorMetrics {
  private readonly http: HttpMeter;
  private readonly unmatched: RouteMeter;
  /** Per index: endpoint -> its duration cell (query and upsert endpoints only). */
  private readonly timers = new Map<string, Map<string, HistogramCell>>();
  private readonly snapshots = new Map<string, HistogramCell>();

  /**
   * @param names every index served (cells are bound for each)
   * @param indexes the loaded indexes, read at scrape time (empty while the area loads)
   */
  constructor(metrics: Metrics, names: readonly string[], indexes: Map<string, VectorIndex>) {
    this.http = metrics.httpMeter('vector');
    this.unmatched = this.http.route('unmatched');
    const query = metrics.histogram('svc_vector_query_duration_seconds', 'One vector query request, embedding included', ['index']);
    const upsert = metrics.histogram('svc_vector_upsert_duration_seconds', 'One vector upsert request until its records are committed', ['index']);
    const snapshot = metrics.histogram('svc_vector_snapshot_duration_seconds', 'Writing the graph snapshot of one namespace', ['index']);
    for (const name of names) {
      const q = query.labels(name);
      const u = upsert.labels(name);
      const byEndpoint = new Map<string, HistogramCell>();
      for (const e of QUERY_ENDPOINTS) byEndpoint.set(e, q);
      for (const e of UPSERT_ENDPOINTS) byEndpoint.set(e, u);
      this.timers.set(name, byEndpoint);
      this.snapshots.set(name, snapshot.labels(name));
    }
    metrics.gauge('svc_vector_vectors', 'Vectors (records) per index and namespace', ['index', 'namespace']).addReader(() => {
      const out: [string[], number][] = [];
      for (const [name, index] of indexes) for (const ns of index.namespaces.values()) out.push([[name, ns.name], ns.count]);
      return out;
    });
  }

  /** The request meter of an endpoint, or of requests refused before routing (`undefined`). */
  route(endpoint: string | undefined): RouteMeter {
    return endpoint === undefined ? this.unmatched : this.http.route(endpoint);
  }

  /** The duration cell of a query or upsert request on `index`; undefined for other endpoints. */
  timer(index: string, endpoint: string): HistogramCell | undefined {
    return this.timers.get(index)?.get(endpoint);
  }

  /** The snapshot duration cell of `index`. */
  snapshot(index: string): HistogramCell | undefined {
    return this.snapshots.get(index);
  }
}
