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
  const upstash = `upstash-${p}`;
  const svc = `svc-${p}`;
  // one walk over the headers (it runs per publish); `Svc-` names are applied after every
  // `Upstash-` one, so they win and the keys keep the order two passes gave
  let svcNames: string[] | undefined;
  for (const k in headers) {
    const c = k.charCodeAt(0);
    if (c === 117 /* u */ && k.startsWith(upstash)) {
      const v = headers[k];
      if (v !== undefined) out[k.slice(upstash.length)] = Array.isArray(v) ? v.join(', ') : v;
    } else if (c === 115 /* s */ && k.startsWith(svc) && headers[k] !== undefined) (svcNames ??= []).push(k);
  }
  if (svcNames) {
    for (const k of svcNames) {
      const v = headers[k]!;
      out[k.slice(svc.length)] = Array.isArray(v) ? v.join(', ') : v;
    }
  }
  return out;
}
