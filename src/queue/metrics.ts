/**
 * The queue area's Prometheus families (registered on `AreaContext.metrics`, `src/metrics.ts`):
 *
 *   svc_http_requests_total{area="queue",route,status_class}, svc_http_request_duration_seconds{area="queue",route}
 *       route: the Fastify route pattern; the fast publish path counts as `/v2/publish/*`
 *   svc_queue_messages{state}            stored messages not finished, read at scrape time:
 *                                        ready (due, waiting for a delivery slot), delayed (due
 *                                        later: delay or retry backoff), held (waiting for queue
 *                                        parallelism or flow-control capacity), in_flight (claimed
 *                                        by a delivery attempt)
 *   svc_queue_flow_control_waiting       messages held until their queue or flow-control key has room
 *   svc_queue_dlq_messages               DLQ entries
 *   svc_queue_inflight_deliveries        delivery attempts running now
 *   svc_queue_published_messages_total   messages stored by publish/batch/enqueue (duplicates not counted)
 *   svc_queue_deliveries_total{outcome}  finished attempts: success (2xx) or failure
 *   svc_queue_retries_total              failed attempts rescheduled for another try
 *   svc_queue_dead_lettered_total        messages moved to the DLQ (retries exhausted or non-retryable)
 *   svc_queue_delivery_duration_seconds  one HTTP attempt, request start to response read
 *   svc_queue_fsync_duration_seconds     one group-commit WAL fdatasync
 *   svc_queue_schedule_fires_total       schedule occurrences fired
 *
 * The store counts (`QueueStore.counts`, also behind the console's `/v2/stats`) are SQL counts over
 * partial indexes whose cost grows with the number of pending messages, so a scrape reuses them
 * for {@link COUNTS_MAX_AGE_MS}.
 */
import type { CounterCell, HistogramCell, Metrics } from '../metrics.js';
import type { MessageCounts } from './store/types.js';

/** Scrapes within this many ms reuse the last store counts. */
export const COUNTS_MAX_AGE_MS = 5_000;

/** Cells the dispatcher updates per attempt. */
export interface DeliveryMetrics {
  success: CounterCell;
  failure: CounterCell;
  retries: CounterCell;
  deadLettered: CounterCell;
  duration: HistogramCell;
}

/** The pre-bound queue cells. */
export class QueueMetrics {
  readonly published: CounterCell;
  readonly delivery: DeliveryMetrics;
  readonly fsync: HistogramCell;
  readonly scheduleFires: CounterCell;

  constructor(private readonly metrics: Metrics) {
    this.published = metrics.counter('svc_queue_published_messages_total', 'Messages stored by publish, batch and enqueue (deduplicated ones not counted)').labels();
    const deliveries = metrics.counter('svc_queue_deliveries_total', 'Finished delivery attempts by outcome: success (2xx) or failure', ['outcome']);
    this.delivery = {
      success: deliveries.labels('success'),
      failure: deliveries.labels('failure'),
      retries: metrics.counter('svc_queue_retries_total', 'Failed delivery attempts rescheduled for another try').labels(),
      deadLettered: metrics.counter('svc_queue_dead_lettered_total', 'Messages moved to the dead-letter queue (retries exhausted or non-retryable)').labels(),
      duration: metrics.histogram('svc_queue_delivery_duration_seconds', 'One delivery attempt: HTTP request start to response read').labels(),
    };
    this.fsync = metrics.histogram('svc_queue_fsync_duration_seconds', 'One group-commit fdatasync of the queue store WAL').labels();
    this.scheduleFires = metrics.counter('svc_queue_schedule_fires_total', 'Schedule occurrences fired').labels();
  }

  /**
   * Registers the gauges read at scrape time: store counts (`counts`, cached for
   * {@link COUNTS_MAX_AGE_MS}; absent for a store without counts) and the running attempts (`inflight`).
   */
  addGauges(counts: (() => Promise<MessageCounts>) | undefined, inflight: () => number): void {
    const m = this.metrics;
    m.gauge('svc_queue_inflight_deliveries', 'Delivery attempts running now').addReader(() => [[[], inflight()]]);
    if (!counts) return;
    let cached: { at: number; value: Promise<MessageCounts> } | undefined;
    const read = (): Promise<MessageCounts> => {
      const now = Date.now();
      if (!cached || now - cached.at > COUNTS_MAX_AGE_MS) cached = { at: now, value: counts() };
      return cached.value;
    };
    m.gauge('svc_queue_messages', 'Stored messages not finished, by state: ready, delayed, held (waiting for queue or flow-control capacity), in_flight', ['state']).addReader(async () => {
      const c = await read();
      return [[['ready'], c.ready], [['delayed'], c.delayed], [['held'], c.held], [['in_flight'], c.inFlight]];
    });
    m.gauge('svc_queue_flow_control_waiting', 'Messages held until their queue or flow-control key has room').addReader(async () => [[[], (await read()).held]]);
    m.gauge('svc_queue_dlq_messages', 'Entries in the dead-letter queue').addReader(async () => [[[], (await read()).dlq]]);
  }
}
