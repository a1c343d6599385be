/**
 * Parsed destination URLs, memoised: every delivery needs its URL's origin (fairness buckets in
 * the dispatcher, the delivery client's pool key) and path, and `new URL()` per attempt showed in the bench
 * profile, as did the publish's destination check. A bounded map (cleared when full) keyed by the
 * exact URL string; the parse is WHATWG `URL` as before, so results are identical.
 */

/** The parts of a destination URL delivery needs. */
export interface UrlParts {
  /** `scheme://host[:port]` (WHATWG `URL.origin`). */
  origin: string;
  /** `URL.hostname` (IPv6 literals keep their brackets). */
  hostname: string;
  /** Path and query as sent (`URL.pathname + URL.search`). */
  path: string;
}

const MAX_ENTRIES = 4096;
/** Longer URLs are parsed each time, not kept (bounds the map's memory to ~4096 * 2 KiB). */
const MAX_KEPT_LENGTH = 2048;
const cache = new Map<string, UrlParts | null>();

/** `url` split into origin/hostname/path; undefined when it is not an absolute URL. */
export function splitUrl(url: string): UrlParts | undefined {
  let parts = cache.get(url);
  if (parts === undefined) {
    try {
      const u = new URL(url);
      parts = { origin: u.origin, hostname: u.hostname, path: `${u.pathname}${u.search}` };
    } catch {
      parts = null;
    }
    if (url.length > MAX_KEPT_LENGTH) return parts ?? undefined;
    if (cache.size >= MAX_ENTRIES) cache.clear();
    cache.set(url, parts);
  }
  return parts ?? undefined;
}

/** The origin of `url` (`''` when it does not parse: one shared fairness bucket). */
export function originOf(url: string): string {
  return splitUrl(url)?.origin ?? '';
}
