/**
 * Shared authentication helpers (spec "Authentication"): bearer token from the header or a query
 * parameter, HTTP Basic credentials, and constant-time comparison. Areas decide which tokens are
 * valid; these helpers only extract and compare.
 */
import { hash, timingSafeEqual } from 'node:crypto';
import type { FastifyRequest } from 'fastify';

/** SHA-256 of a secret (32 bytes): what the constant-time comparisons below compare. */
export function secretDigest(s: string): Buffer {
  return hash('sha256', s, 'buffer');
}

/**
 * Compares two secrets in constant time (independent of where they differ and of their lengths:
 * both sides are hashed to 32 bytes first).
 */
export function constantTimeEqual(a: string, b: string): boolean {
  return timingSafeEqual(secretDigest(a), secretDigest(b)) && a.length === b.length;
}

/**
 * The rule of {@link constantTimeEqual} for hot paths: the digest of each valid token is computed
 * once per token value (valid tokens change only on rotation; at most 64 are cached) and the
 * caller hashes the presented token once per request, however many valid tokens it is checked
 * against.
 */
export class SecretMatcher {
  private readonly digests = new Map<string, Buffer>();

  /** True when `presented` (whose {@link secretDigest} is `presentedDigest`) equals `valid`. */
  same(presented: string, presentedDigest: Buffer, valid: string): boolean {
    let d = this.digests.get(valid);
    if (!d) {
      if (this.digests.size >= 64) this.digests.clear();
      this.digests.set(valid, (d = secretDigest(valid)));
    }
    return timingSafeEqual(presentedDigest, d) && presented.length === valid.length;
  }
}

/**
 * Whether `presented` equals `valid`, compared in constant time without hashing (for per-request
 * checks: a SHA-256 of the presented token, its Buffer and `timingSafeEqual` cost ~8,000 CPU
 * instructions per publish, `docs/readme/queue-bench.md`). Every UTF-16 code unit of `valid` is
 * XORed with the presented one at the same index (0 past its end) and the differences ORed
 * together with the lengths' XOR: no branch on either string's content, so the time depends on
 * `valid`'s length (and whether the presented one is shorter, which its sender knows), never on
 * where the two differ.
 */
export function sameSecret(presented: string, valid: string): boolean {
  const n = valid.length;
  const m = presented.length;
  let diff = n ^ m;
  for (let i = 0; i < n; i++) diff |= valid.charCodeAt(i) ^ (i < m ? presented.charCodeAt(i) : 0);
  return diff === 0;
}

/** True when `candidate` equals one of `valid` (each compared in constant time, all compared). */
export function matchesAny(candidate: string, valid: readonly string[]): boolean {
  let ok = false;
  for (const v of valid) ok = constantTimeEqual(candidate, v) || ok;
  return ok;
}

/**
 * The token of a request: `Authorization: Bearer <t>` first, else the first present query
 * parameter of `queryNames` (e.g. `['_token']` for kv, `['svc_token', 'qstash_token']` for the queue).
 * Returns undefined when there is none.
 */
export function requestToken(req: FastifyRequest, queryNames: readonly string[] = []): string | undefined {
  const h = req.headers.authorization;
  if (typeof h === 'string') {
    const m = /^Bearer\s+(.+)$/i.exec(h.trim());
    if (m) return m[1].trim();
  }
  if (queryNames.length) {
    const q = req.query as Record<string, unknown> | undefined;
    for (const n of queryNames) {
      const v = q?.[n];
      if (typeof v === 'string' && v) return v;
      if (Array.isArray(v) && typeof v[0] === 'string') return v[0];
    }
  }
  return undefined;
}

/** `Authorization: Basic base64(user:password)` parsed; undefined when absent or malformed. */
export function basicCredentials(req: FastifyRequest): { user: string; password: string } | undefined {
  const h = req.headers.authorization;
  if (typeof h !== 'string') return undefined;
  const m = /^Basic\s+([A-Za-z0-9+/=]+)$/i.exec(h.trim());
  if (!m) return undefined;
  const decoded = Buffer.from(m[1], 'base64').toString('utf8');
  const i = decoded.indexOf(':');
  if (i < 0) return undefined;
  return { user: decoded.slice(0, i), password: decoded.slice(i + 1) };
}
