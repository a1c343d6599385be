/**
 * The `Svc-` / `Upstash-` compatibility rule: every `Svc-X` request header is also
 * accepted as `Upstash-X` (case-insensitive; `Svc-X` wins when both are present), and headers svc
 * emits are sent under both prefixes.
 */
import type { IncomingHttpHeaders } from './types.js';

/**
 * Every request header whose name starts with `Svc-<prefix>` or `Upstash-<prefix>`, keyed by the
 * rest of the name in lower case (`Svc-Forward-X-Id` with prefix `Forward-` -> `x-id`). `Svc-` wins.
 * Repeated headers are joined with `, ` as Node does.
 */
export function svcHeadersWithPrefix(headers: IncomingHttpHeaders, prefix: string): Record<string, string> {
  const out: Record<string, string> = {};
  const p = prefix.toLowerCase();
  for (const pass of ['upstash-', 'svc-']) {
    for (const [k, v] of Object.entries(headers)) {
      if (v === undefined || !k.startsWith(pass + p)) continue;
      out[k.slice(pass.length + p.length)] = Array.isArray(v) ? v.join(', ') : v;
    }
  }
  return out;
}
