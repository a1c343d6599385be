/**
 * The queue's side of tracing (`src/tracing.ts`): which W3C trace context a message carries from
 * its publish to its deliveries, and the queue's spans.
 *
 * Propagation (always, tracing on or off): a publish's `traceparent`/`tracestate` request headers
 * (what an instrumented HTTP client sends; else an `Upstash-Forward-Traceparent` the publisher
 * forwards) are kept with the message ({@link MessageTrace}) and sent on every delivery attempt;
 * callbacks and failure callbacks of an attempt, the steps of a workflow run and the messages of a
 * schedule firing carry the context on. With tracing off the context is forwarded as it came.
 *
 * Spans (tracing on): `publish` (PRODUCER) per published message set, child of the publisher's
 * context; one CLIENT span per delivery attempt (`deliver`, `deliver callback`,
 * `deliver failure_callback`, `workflow step`), child of the message's context, whose own context
 * is the `traceparent` the destination receives; `dead-letter` under the attempt that moved a
 * message to the DLQ; `schedule fire` (root) per schedule firing. Attribute names follow the
 * OpenTelemetry semantic conventions (messaging, HTTP client) where one exists, `svc.*` otherwise;
 * `docs/operations.md` lists them.
 */
import type { IncomingHttpHeaders } from 'node:http';
import { endSpan, spanTraceContext, SpanKind, startSpan, traceContextOf, tracingOn, type Attributes, type Span, type TraceContext } from '../../tracing.js';
import type { AttemptOutcome, EnqueueResult, HeaderMap, MessageTrace, NewMessage, StoredMessage } from '../model.js';

/** `messaging.system` of every queue span. */
const SYSTEM = 'svc';

/**
 * The trace context a publish request brings: its own `traceparent`/`tracestate` headers
 * (lower-case names, as Node gives them), else the forwarded ones in `forwarded` (the message's
 * headers, canonical names). Undefined when there is none or it is malformed.
 */
export function publishTraceContext(headers: IncomingHttpHeaders | Record<string, string>, forwarded: HeaderMap): TraceContext | undefined {
  const tp = headers.traceparent;
  if (tp !== undefined) return traceContextOf(tp, headers.tracestate);
  const f = forwarded.Traceparent;
  return f === undefined ? undefined : traceContextOf(f, forwarded.Tracestate);
}

/** The URL without its query and user info (span attributes must not carry credentials). */
function plainUrl(url: string): string {
  const q = url.indexOf('?');
  const u = q < 0 ? url : url.slice(0, q);
  const at = u.indexOf('@');
  if (at < 0) return u;
  const scheme = u.indexOf('://');
  const slash = u.indexOf('/', scheme + 3);
  return at < (slash < 0 ? u.length : slash) ? u.slice(0, scheme + 3) + u.slice(at + 1) : u;
}

/**
 * Gives `msgs` (about to be enqueued together) their trace context and, with tracing on, starts
 * their `publish` span as a child of `incoming` (the messages then continue the span's context).
 * `destination` is the URL, URL group or queue named in the request. Returns the span to end with
 * {@link endPublishSpan}, or undefined (tracing off).
 */
export function tracePublish(msgs: NewMessage[], incoming: TraceContext | undefined, destination: string): Span | undefined {
  if (!tracingOn()) {
    if (incoming) for (const m of msgs) m.trace = incoming;
    return undefined;
  }
  const attributes: Attributes = {
    'messaging.system': SYSTEM,
    'messaging.operation.type': 'send',
    'messaging.operation.name': 'publish',
    'messaging.destination.name': /^[a-z][a-z0-9+.-]*:\/\//i.test(destination) ? plainUrl(destination) : destination,
  };
  if (msgs.length === 1) attributes['messaging.message.id'] = msgs[0].id;
  else attributes['messaging.batch.message_count'] = msgs.length;
  if (msgs[0]?.queueName !== undefined) attributes['svc.queue.name'] = msgs[0].queueName;
  const span = startSpan('publish', SpanKind.PRODUCER, incoming, attributes);
  const ctx: MessageTrace = incoming ? spanTraceContext(span) : { ...spanTraceContext(span), started: true };
  for (const m of msgs) m.trace = ctx;
  return span;
}

/** Ends a {@link tracePublish} span: `results` of the enqueue, or the `error` it threw. */
export function endPublishSpan(span: Span | undefined, results: EnqueueResult[] | undefined, error?: unknown): void {
  if (!span) return;
  if (results && results.length > 0 && results.every((r) => r.deduplicated)) span.setAttribute('svc.queue.deduplicated', true);
  endSpan(span, error);
}

/**
 * Starts the span of one delivery attempt of `m` (tracing on only), child of the message's trace
 * context (a new trace when it has none).
 */
export function startAttemptSpan(m: StoredMessage): Span {
  const name = m.workflow && !m.workflow.call ? 'workflow step' : m.kind === 'message' ? 'deliver' : `deliver ${m.kind}`;
  const attributes: Attributes = {
    'messaging.system': SYSTEM,
    'messaging.operation.type': 'send',
    'messaging.operation.name': 'deliver',
    'messaging.message.id': m.id,
    'svc.message.kind': m.kind,
    'svc.queue.retry': m.retried,
    'svc.queue.max_retries': m.maxRetries,
    'http.request.method': m.method,
    'url.full': plainUrl(m.url),
  };
  if (m.queueName !== undefined) attributes['svc.queue.name'] = m.queueName;
  if (m.scheduleId !== undefined) attributes['svc.schedule.id'] = m.scheduleId;
  if (m.topicName !== undefined) attributes['svc.url_group.name'] = m.topicName;
  if (m.workflow) attributes['svc.workflow.run_id'] = m.workflow.runId;
  return startSpan(name, SpanKind.CLIENT, m.trace, attributes);
}

/**
 * Ends an attempt span with its `outcome` and what follows it (`next`: `delivered`, `retry`
 * (with `retryAtMs`), or `dead-letter`).
 */
export function endAttemptSpan(span: Span, outcome: AttemptOutcome, next: 'delivered' | 'retry' | 'dead-letter', retryAtMs?: number): void {
  if (outcome.status !== undefined) span.setAttribute('http.response.status_code', outcome.status);
  span.setAttribute('svc.queue.outcome', next);
  if (retryAtMs !== undefined) span.setAttribute('svc.queue.retry_at', new Date(retryAtMs).toISOString());
  endSpan(span, next === 'delivered' ? undefined : outcome.error ?? `destination answered ${outcome.status}`);
}

/** A `dead-letter` span under the attempt span `parent` around the DLQ move of `m` (entry `dlqId`). */
export function startDeadLetterSpan(parent: Span, m: StoredMessage, dlqId: string): Span {
  return startSpan('dead-letter', SpanKind.INTERNAL, spanTraceContext(parent), {
    'messaging.system': SYSTEM,
    'messaging.message.id': m.id,
    'svc.queue.dlq_id': dlqId,
  });
}

/**
 * With tracing on, starts the root `schedule fire` span of schedule `scheduleId` (`cron`) and gives
 * `msgs` its context; undefined when tracing is off (the firing's messages then carry none).
 */
export function traceScheduleFire(scheduleId: string, cron: string, msgs: NewMessage[]): Span | undefined {
  if (!tracingOn()) return undefined;
  const span = startSpan('schedule fire', SpanKind.PRODUCER, undefined, {
    'messaging.system': SYSTEM,
    'messaging.operation.type': 'send',
    'messaging.operation.name': 'schedule',
    'svc.schedule.id': scheduleId,
    'svc.schedule.cron': cron,
    'messaging.batch.message_count': msgs.length,
  });
  const ctx = spanTraceContext(span);
  for (const m of msgs) m.trace = ctx;
  return span;
}

export { endSpan, spanTraceContext, tracingOn };
