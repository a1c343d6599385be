/**
 * Model -> JSON wire shapes (spec "DLQ message" / "Event entry"): `Message`,
 * `DlqMessage`, log entries; Go-canonical header keys; `body` vs `bodyBase64`; redaction
 * (`REDACTED:<sha256 hex>`).
 */
import { createHash } from 'node:crypto';
import type { DlqEntry, HeaderMap, LogEntry, StoredMessage } from './model.js';

/** Go's `http.CanonicalHeaderKey`: `content-type` -> `Content-Type`. */
export function canonicalHeader(name: string): string {
  return name
    .toLowerCase()
    .split('-')
    .map((p) => (p ? p[0].toUpperCase() + p.slice(1) : p))
    .join('-');
}

const utf8 = new TextDecoder('utf-8', { fatal: true });

/** `{body}` when the bytes are valid UTF-8, else `{bodyBase64}` (spec "DLQ message"). */
export function bodyFields(body: Buffer | undefined, field = 'body'): Record<string, string> {
  if (!body || body.length === 0) return {};
  try {
    return { [field]: utf8.decode(body) };
  } catch {
    return { [`${field}Base64`]: body.toString('base64') };
  }
}

const redacted = (v: string | Buffer) => `REDACTED:${createHash('sha256').update(v).digest('hex')}`;

/** Headers with `Upstash-Redact-Fields` applied (values replaced, names kept). */
export function visibleHeaders(m: StoredMessage): HeaderMap {
  const spec = m.redact?.header;
  if (!spec) return m.headers;
  const names = spec === true ? undefined : new Set(spec.map((n) => n.toLowerCase()));
  const out: HeaderMap = {};
  for (const [k, vs] of Object.entries(m.headers)) {
    out[k] = !names || names.has(k.toLowerCase()) ? vs.map(redacted) : vs;
  }
  return out;
}

/** The body as the API may show it (redacted when asked). */
export function visibleBody(m: StoredMessage): Buffer {
  return m.redact?.body && m.body.length ? Buffer.from(redacted(m.body)) : m.body;
}

/** The wire `Message` (GET /v2/messages/{id}). */
export function messageJson(m: StoredMessage): Record<string, unknown> {
  const fc = m.flowControl;
  const out: Record<string, unknown> = {
    messageId: m.id,
    url: m.url,
    topicName: m.topicName,
    endpointName: m.endpointName,
    method: m.method,
    header: visibleHeaders(m),
    ...bodyFields(visibleBody(m)),
    maxRetries: m.maxRetries,
    retryDelayExpression: m.retryDelay,
    notBefore: m.notBefore ?? m.dueAt,
    createdAt: m.createdAt,
    callback: m.callback,
    failureCallback: m.failureCallback,
    queueName: m.queueName,
    scheduleId: m.scheduleId,
    callerIP: m.callerIp,
    callerIp: m.callerIp,
    label: m.labels?.[0],
    labels: m.labels,
    flowControlKey: m.flowControlKey,
    parallelism: fc?.parallelism,
    rate: fc?.rate,
    // seconds; the default 1 s also for keys stored before every value carried it
    period: m.flowControlKey !== undefined ? (fc?.period ?? 1) : undefined,
  };
  if (m.timeoutMs !== undefined) out.timeout = m.timeoutMs;
  return out;
}

/** The wire `DlqMessage`. */
export function dlqJson(e: DlqEntry): Record<string, unknown> {
  return {
    ...messageJson(e.message),
    dlqId: e.dlqId,
    responseStatus: e.outcome.status,
    responseHeader: e.outcome.headers,
    ...bodyFields(e.outcome.body, 'responseBody'),
    error: e.outcome.error,
  };
}

function callbackHeaders(opts: StoredMessage['callbackOptions']): HeaderMap | undefined {
  return opts && Object.keys(opts.headers).length ? opts.headers : undefined;
}

/** A log entry (spec "Event entry"): `body` is base64, response fields only on ERROR. */
export function logJson(l: LogEntry): Record<string, unknown> {
  const m = l.message;
  const body = visibleBody(m);
  return {
    time: l.time,
    state: l.state,
    messageId: m.id,
    header: visibleHeaders(m),
    body: body.length ? body.toString('base64') : undefined,
    error: l.error,
    nextDeliveryTime: l.nextDeliveryTime,
    url: m.url,
    topicName: m.topicName,
    endpointName: m.endpointName,
    scheduleId: m.scheduleId,
    queueName: m.queueName,
    label: m.labels?.[0],
    labels: m.labels,
    flowControlKey: m.flowControlKey,
    callerIp: m.callerIp,
    responseStatus: l.state === 'ERROR' ? l.outcome?.status : undefined,
    responseBody: l.state === 'ERROR' && l.outcome?.body?.length ? l.outcome.body.toString('base64') : undefined,
    responseHeaders: l.state === 'ERROR' ? l.outcome?.headers : undefined,
    timeout: m.timeoutMs,
    method: m.method,
    callback: m.callback,
    callbackHeaders: callbackHeaders(m.callbackOptions),
    failureCallback: m.failureCallback,
    failureCallbackHeaders: callbackHeaders(m.failureCallbackOptions),
    maxRetries: m.maxRetries,
    // Both spellings: `retryDelayExpression` as on messages, DLQ entries and schedules (the JS
    // SDK's types, qstash-py's message parser), `retryDelayExpr` as qstash-py's log parser reads it.
    retryDelayExpression: m.retryDelay,
    retryDelayExpr: m.retryDelay,
  };
}
