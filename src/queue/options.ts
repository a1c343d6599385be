/**
 * Publish headers -> {@link PublishOptions}. Input is a map of configuration
 * headers with the `Svc-`/`Upstash-` prefix already removed (lower-case keys, `Svc-` winning, as
 * `svcHeadersWithPrefix` gives), plus the request's `Content-Type`. Callback and failure-callback
 * configuration (`Upstash-Callback-Retries`, `...-Forward-X`, nested `...-Failure-Callback-...`) is
 * parsed by the same function on the sub-map, recursively.
 *
 * @throws QueueError 400 naming the bad header; 412 for a retry count above the maximum.
 */
import { queueError } from './errors.js';
import type { FlowControl, HeaderMap, PublishOptions, RedactSpec } from './model.js';
import { compileExpression } from './delivery/expr.js';
import { blockedHost } from '../private-address.js';
import { parseDuration } from './delivery/backoff.js';
import { NOT_FORWARDED } from './delivery/http.js';
import { MAX_TIMEOUT_MS } from './delivery/dispatcher.js';
import { canonicalHeader } from './message-json.js';

export const DEFAULT_RETRIES = 3;
/**
 * Largest retry count when the caller names none: 20, the "Max Retry Count" of QStash's top
 * published plan (its free plan allows 3, pay-as-you-go 5). `SVC_QUEUE_MAX_RETRIES` overrides it.
 */
export const DEFAULT_MAX_RETRIES = 20;

/**
 * An `Upstash-Retries` value (also `Callback-Retries`, workflow restart/resume overrides).
 * @throws QueueError 400 `invalidRetries` when it is not a non-negative integer; 412
 *   `retriesAboveMax` when it is above `max`, as the hosted service answers a count over the
 *   plan's maximum (the workflow SDK turns exactly a 412 into a non-retryable failure).
 */
export function parseRetries(raw: string, max: number): number {
  const v = raw.trim();
  if (!/^\d+$/.test(v)) throw queueError('invalidRetries', v);
  const n = Number(v);
  if (n > max) throw queueError('retriesAboveMax', v, max);
  return n;
}
const METHODS = new Set(['GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'HEAD', 'OPTIONS']);
const MAX_DEPTH = 4;

/**
 * The largest flow-control parallelism, rate and period (s), and pinned ones: PostgreSQL's
 * INTEGER, the columns that keep them (2^31 - 1). A larger value is refused (400).
 */
export const MAX_FLOW_CONTROL_NUMBER = 2_147_483_647;

/** The latest `Upstash-Not-Before` (unix seconds): 9999-12-31T23:59:59Z, the last ISO 8601 second. */
export const MAX_NOT_BEFORE_S = 253_402_300_799;

/** How {@link parseOptions} checks what it parses. */
export interface ParseSettings {
  /** Refuse callback / failure-callback URLs to non-public addresses (`SVC_QUEUE_BLOCK_PRIVATE_DESTINATIONS`). */
  blockPrivate?: boolean;
  /** Retries when the header is absent: 3 for messages, the parent's retries for callbacks. */
  defaultRetries?: number;
  /** Largest `Retries` accepted (`SVC_QUEUE_MAX_RETRIES`); default {@link DEFAULT_MAX_RETRIES}. */
  maxRetries?: number;
  /** Nesting depth of callback options (internal). */
  depth?: number;
}

/**
 * Parses options from `cfg` (prefix-less config headers) and `contentType`.
 * @throws QueueError 400 naming the bad header, also for a callback URL the SSRF switch refuses.
 */
export function parseOptions(cfg: Record<string, string>, contentType: string | undefined, now: number, settings: ParseSettings = {}): PublishOptions {
  const { defaultRetries = DEFAULT_RETRIES, depth = 0, blockPrivate = false, maxRetries = DEFAULT_MAX_RETRIES } = settings;
  const headers: HeaderMap = {};
  for (const [k, v] of Object.entries(cfg)) {
    if (k.startsWith('forward-') && k.length > 8) {
      if (NOT_FORWARDED.has(k.slice(8))) continue; // svc frames and routes the delivery itself
      const name = canonicalHeader(k.slice(8));
      headers[name] = [v];
    }
  }
  if (contentType) headers['Content-Type'] = [contentType];

  const method = (cfg['method'] ?? 'POST').toUpperCase();
  if (!METHODS.has(method)) throw queueError('invalidMethod', cfg['method']);

  const opts: PublishOptions = { method, headers, maxRetries: defaultRetries };

  if (cfg['not-before'] !== undefined) {
    const v = cfg['not-before'].trim();
    if (!/^\d+$/.test(v) || Number(v) > MAX_NOT_BEFORE_S) throw queueError('invalidNotBefore', v);
    opts.notBefore = Number(v) * 1000;
  } else if (cfg['delay'] !== undefined) {
    const ms = parseDuration(cfg['delay']);
    if (ms === undefined) throw queueError('invalidDelay', cfg['delay']);
    if (ms > 0) opts.delayMs = ms;
  }
  if (cfg['retries'] !== undefined) opts.maxRetries = parseRetries(cfg['retries'], maxRetries);
  if (cfg['retry-delay'] !== undefined) {
    try {
      compileExpression(cfg['retry-delay']);
    } catch (err) {
      throw queueError('invalidRetryDelay', cfg['retry-delay'], (err as Error).message);
    }
    opts.retryDelay = cfg['retry-delay'];
  }
  if (cfg['timeout'] !== undefined) {
    const ms = parseDuration(cfg['timeout']);
    if (ms === undefined || ms <= 0 || ms > MAX_TIMEOUT_MS) {
      throw queueError('invalidTimeout', cfg['timeout']);
    }
    opts.timeoutMs = ms;
  }
  if (depth < MAX_DEPTH) {
    for (const [key, field] of [
      ['callback', 'callback'],
      ['failure-callback', 'failureCallback'],
    ] as const) {
      const url = cfg[key];
      if (url === undefined) continue;
      checkUrl(url, key === 'callback' ? 'Callback' : 'Failure-Callback', blockPrivate);
      opts[field] = url;
      const sub: Record<string, string> = {};
      for (const [k, v] of Object.entries(cfg)) if (k.startsWith(`${key}-`)) sub[k.slice(key.length + 1)] = v;
      const subOpts = parseOptions(sub, sub['content-type'], now, { defaultRetries: opts.maxRetries, depth: depth + 1, blockPrivate, maxRetries });
      if (key === 'callback') opts.callbackOptions = subOpts;
      else opts.failureCallbackOptions = subOpts;
    }
  }
  if (cfg['deduplication-id'] !== undefined) opts.deduplicationId = cfg['deduplication-id'];
  if (cfg['content-based-deduplication'] !== undefined) opts.contentBasedDeduplication = cfg['content-based-deduplication'].toLowerCase() === 'true';
  if (cfg['label'] !== undefined) {
    const labels = cfg['label'].split(',').map((s) => s.trim()).filter(Boolean);
    if (labels.length) opts.labels = labels;
  }
  if (cfg['redact-fields'] !== undefined) opts.redact = parseRedact(cfg['redact-fields']);
  if (cfg['flow-control-key'] !== undefined) {
    opts.flowControlKey = cfg['flow-control-key'];
    opts.flowControl = parseFlowControl(cfg['flow-control-value'] ?? '');
  }
  return opts;
}

function checkUrl(url: string, header: string, blockPrivate: boolean): void {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    throw queueError('invalidCallbackUrl', header, url);
  }
  if (u.protocol !== 'http:' && u.protocol !== 'https:') throw queueError('invalidCallbackUrl', header, url);
  const why = blockPrivate ? blockedHost(u.hostname) : undefined;
  if (why) throw queueError('privateDestination', `Upstash-${header} url`, url, why);
}

/** `body`, `header`/`headers`, `header[Name]` comma list. */
export function parseRedact(v: string): RedactSpec {
  const spec: RedactSpec = {};
  for (const part of v.split(',').map((s) => s.trim()).filter(Boolean)) {
    if (part === 'body') spec.body = true;
    else if (part === 'header' || part === 'headers') spec.header = true;
    else {
      const m = /^headers?\[(.+)\]$/.exec(part);
      if (!m) throw queueError('invalidRedactFields', v);
      if (spec.header !== true) spec.header = [...(spec.header ?? []), canonicalHeader(m[1].trim())];
    }
  }
  return spec;
}

/** The flow-control period (seconds) of a value that names none. */
export const DEFAULT_FLOW_PERIOD_S = 1;

/** `parallelism=N, rate=N, period=P` (period: seconds or a duration; default {@link DEFAULT_FLOW_PERIOD_S} s). */
export function parseFlowControl(v: string): FlowControl {
  const fc: FlowControl = {};
  for (const part of v.split(',').map((s) => s.trim()).filter(Boolean)) {
    const m = /^(parallelism|rate|period)=(.+)$/.exec(part);
    if (!m) throw queueError('invalidFlowControlValue');
    if (m[1] === 'period') {
      const ms = parseDuration(m[2]);
      if (ms === undefined || ms <= 0 || Math.round(ms / 1000) > MAX_FLOW_CONTROL_NUMBER) throw queueError('invalidFlowControlPeriod', m[2]);
      fc.period = Math.round(ms / 1000);
    } else {
      if (!/^\d+$/.test(m[2]) || Number(m[2]) <= 0 || Number(m[2]) > MAX_FLOW_CONTROL_NUMBER) throw queueError('invalidFlowControlNumber', m[1], m[2]);
      fc[m[1] as 'parallelism' | 'rate'] = Number(m[2]);
    }
  }
  if (fc.parallelism === undefined && fc.rate === undefined) {
    throw queueError('invalidFlowControlValue');
  }
  // The default period (1 s) is reported whatever the value sets: the SDKs read `period` back
  // from messages and schedules as seconds (qstash-py `FlowControlProperties.period`).
  if (fc.period === undefined) fc.period = DEFAULT_FLOW_PERIOD_S;
  return fc;
}
