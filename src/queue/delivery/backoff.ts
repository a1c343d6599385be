/**
 * Business retry timing, as pure functions.
 *
 * - Default backoff after the n-th failed attempt (n >= 1): `min(86400, e^(2.5·n))` seconds
 *   (n=1 -> 12 s, 2 -> 2 min 28 s, 3 -> 30 min 8 s, 4 -> 6 h 7 min, 5+ -> 24 h).
 * - With a retry delay expression: its value in ms, `retried` = n - 1 (0 for the first retry).
 * - A destination's `Retry-After` / `X-RateLimit-Reset` / `-Requests` / `-Tokens` header sets the
 *   delay: seconds, an HTTP date, or a Go duration (`6m5s`); beyond one day it is ignored.
 */
import { compileExpression } from './expr.js';

export const MAX_BACKOFF_MS = 86_400_000;

/** Default backoff in ms after `failedAttempts` (>= 1) failed attempts. */
export function defaultBackoffMs(failedAttempts: number): number {
  return Math.round(Math.min(86_400, Math.exp(2.5 * Math.max(1, failedAttempts))) * 1000);
}

const compiled = new Map<string, (retried: number) => number>();

/**
 * Delay in ms before the next attempt after `failedAttempts` (>= 1) failures. A bad or
 * non-finite expression result falls back to the default backoff; results are clamped to
 * [0, 1 day].
 */
export function retryDelayMs(failedAttempts: number, expression?: string): number {
  if (expression === undefined) return defaultBackoffMs(failedAttempts);
  let fn = compiled.get(expression);
  if (!fn) {
    try {
      fn = compileExpression(expression);
    } catch {
      return defaultBackoffMs(failedAttempts);
    }
    if (compiled.size > 10_000) compiled.clear();
    compiled.set(expression, fn);
  }
  const v = fn(failedAttempts - 1);
  if (!Number.isFinite(v)) return defaultBackoffMs(failedAttempts);
  return Math.min(MAX_BACKOFF_MS, Math.max(0, Math.round(v)));
}

/** Response headers, lower-case names, that can set the next retry time. */
export const RETRY_AFTER_HEADERS = ['retry-after', 'x-ratelimit-reset', 'x-ratelimit-reset-requests', 'x-ratelimit-reset-tokens'];

/**
 * The delay in ms asked for by a destination's response headers, or undefined when none is
 * present, parseable and at most one day away. `now` in ms (for HTTP dates).
 */
export function retryAfterMs(headers: Record<string, string | string[] | undefined>, now: number): number | undefined {
  for (const name of RETRY_AFTER_HEADERS) {
    const raw = headers[name];
    const v = Array.isArray(raw) ? raw[0] : raw;
    if (v === undefined) continue;
    const ms = parseRetryAfter(v.trim(), now);
    if (ms !== undefined && ms >= 0 && ms <= MAX_BACKOFF_MS) return ms;
  }
  return undefined;
}

const GO_UNITS: Record<string, number> = { ns: 1e-6, us: 1e-3, 'µs': 1e-3, ms: 1, s: 1000, m: 60_000, h: 3_600_000 };

/** Seconds (`"120"`, `"1.5"`), HTTP date, or Go duration (`"6m5s"`, `"300ms"`) -> ms; undefined if none. */
export function parseRetryAfter(v: string, now: number): number | undefined {
  if (/^\d+(\.\d+)?$/.test(v)) return Math.round(Number(v) * 1000);
  if (/^(\d+(\.\d+)?(ns|us|µs|ms|s|m|h))+$/.test(v)) {
    let total = 0;
    for (const m of v.matchAll(/(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)/g)) total += Number(m[1]) * GO_UNITS[m[2]];
    return Math.round(total);
  }
  if (/[a-z]/i.test(v)) {
    const t = Date.parse(v);
    if (Number.isFinite(t)) return Math.max(0, t - now);
  }
  return undefined;
}

/**
 * The longest duration {@link parseDuration} accepts: 100 years in ms. Past it a delay, wait
 * timeout or flow-control period is refused, not turned into a deadline beyond any calendar
 * (`9…9d` reached `Infinity`, stored as null) or beyond PostgreSQL's BIGINT columns.
 */
export const MAX_DURATION_MS = 100 * 365 * 86_400_000;

/**
 * Parses a publish duration (`Upstash-Delay`, `Upstash-Timeout`, a workflow wait timeout, a
 * flow-control period): `<n><unit>` with units `ms s m h d`, compound allowed (`1d10h30m`), or a
 * bare number = seconds (workflow `context.call` sends `"10"`). Returns ms (an integer), or
 * undefined when malformed or longer than {@link MAX_DURATION_MS}.
 */
export function parseDuration(v: string): number | undefined {
  const s = v.trim();
  let total = 0;
  if (/^\d+$/.test(s)) total = Number(s) * 1000;
  else {
    if (!/^(\d+(\.\d+)?(ms|s|m|h|d))+$/.test(s)) return undefined;
    const units: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };
    for (const m of s.matchAll(/(\d+(?:\.\d+)?)(ms|s|m|h|d)/g)) total += Number(m[1]) * units[m[2]];
  }
  return total <= MAX_DURATION_MS ? Math.round(total) : undefined;
}
