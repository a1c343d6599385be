/**
 * The `Svc-` / `Upstash-` compatibility rule: every `Svc-X` request header is also
 * accepted as `Upstash-X` (case-insensitive; `Svc-X` wins when both are present), and headers svc
 * emits are sent under both prefixes.
 */
import type { FastifyReply, IncomingHttpHeaders } from './types.js';

/**
 * The value of request header `Svc-<name>` or its alias `Upstash-<name>` (`name` without prefix,
 * any case, e.g. `Encoding`). Repeated headers are joined with `, ` as Node does.
 */
export function svcHeader(headers: IncomingHttpHeaders, name: string): string | undefined {
  const lower = name.toLowerCase();
  const v = headers[`svc-${lower}`] ?? headers[`upstash-${lower}`];
  if (v === undefined) return undefined;
  return Array.isArray(v) ? v.join(', ') : v;
}

/** True when the request carries `Svc-<name>` or `Upstash-<name>`. */
export function hasSvcHeader(headers: IncomingHttpHeaders, name: string): boolean {
  const lower = name.toLowerCase();
  return headers[`svc-${lower}`] !== undefined || headers[`upstash-${lower}`] !== undefined;
}

/**
 * Every request header whose name starts with `Svc-<prefix>` or `Upstash-<prefix>`, keyed by the
 * rest of the name in lower case (`Svc-Forward-X-Id` with prefix `Forward-` -> `x-id`). `Svc-` wins.
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

/** Both names of an emitted header: `['Svc-X', 'Upstash-X']`. */
export function bothNames(name: string): [string, string] {
  return [`Svc-${name}`, `Upstash-${name}`];
}

/** Sets `Svc-<name>` and `Upstash-<name>` on a reply. */
export function setSvcHeader(reply: FastifyReply, name: string, value: string): void {
  reply.header(`Svc-${name}`, value);
  reply.header(`Upstash-${name}`, value);
}
