/**
 * The vector area's Prometheus families (registered on `AreaContext.metrics`, `src/metrics.ts`):
 *
 *   svc_http_requests_total{area="vector",route,status_class}, svc_http_request_duration_seconds{area="vector",route}
 *       route: the endpoint (`query`, `upsert`, `fetch`, ...); requests refused before an endpoint
 *       is known (bad token, unknown path) count as `unmatched`
 *   svc_vector_vectors{index}                       records per index (all namespaces), read at scrape time
 *   svc_vector_namespaces{index}                    namespaces per index, read at scrape time
 *   svc_vector_namespace_vectors{index,namespace}   records of the {@link MAX_NAMESPACE_SERIES}
 *                                                   largest namespaces of each index; only with
 *                                                   `SVC_METRICS_TOKEN` set (`Metrics.nameLabels`):
 *                                                   namespace names are chosen by API clients, so
 *                                                   an open `/metrics` would show them to anyone
 *                                                   reaching the management port, and a client
 *                                                   upserting into ever new namespaces would add
 *                                                   a series each
 *   svc_vector_query_duration_seconds{index}        one query request (`query`, `query-data`,
 *                                                   resumable starts), embedding included
 *   svc_vector_upsert_duration_seconds{index}       one upsert request until its group commit
 *   svc_vector_snapshot_duration_seconds{index}     writing one namespace's graph snapshot
 */
import type { HistogramCell, HttpMeter, Metrics, RouteMeter } from '../metrics.js';
import type { VectorIndex } from './engine/vector-index.js';

/** Per index, at most this many namespaces get their own `svc_vector_namespace_vectors` series (the largest, ties by name). */
export const MAX_NAMESPACE_SERIES = 20;

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
    metrics.gauge('svc_vector_vectors', 'Vectors (records) per index, all namespaces', ['index']).addReader(() => {
      const out: [string[], number][] = [];
      for (const [name, index] of indexes) {
        let n = 0;
        for (const ns of index.namespaces.values()) n += ns.count;
        out.push([[name], n]);
      }
      return out;
    });
    metrics.gauge('svc_vector_namespaces', 'Namespaces per index', ['index']).addReader(() => [...indexes].map(([name, index]) => [[name], index.namespaces.size] as const));
    if (metrics.nameLabels) {
      metrics.gauge('svc_vector_namespace_vectors', `Vectors (records) of the ${MAX_NAMESPACE_SERIES} largest namespaces of each index`, ['index', 'namespace']).addReader(() => {
        const out: [string[], number][] = [];
        for (const [name, index] of indexes) {
          for (const ns of largest(index.namespaces.values(), MAX_NAMESPACE_SERIES)) out.push([[name, ns.name], ns.count]);
        }
        return out;
      });
    }
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

/** The `k` namespaces with the most records (ties: the smaller name first), largest first. */
function largest<N extends { name: string; count: number }>(all: Iterable<N>, k: number): N[] {
  const order = (a: N, b: N): number => b.count - a.count || (a.name < b.name ? -1 : a.name > b.name ? 1 : 0);
  const top: N[] = [];
  for (const ns of all) {
    if (top.length === k && order(ns, top[k - 1]) >= 0) continue;
    let i = top.length;
    while (i > 0 && order(ns, top[i - 1]) < 0) i--;
    top.splice(i, 0, ns);
    if (top.length > k) top.pop();
  }
  return top;
}
