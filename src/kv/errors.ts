/** Whole-request failures of the kv gateway (spec "Errors"): HTTP `status` and the `{error}` text. */
export class KvError extends Error {
  constructor(
    message: string,
    readonly status: number,
  ) {
    super(message);
  }
}

/**
 * Redis error codes that mean "the server cannot do this now, the same request will work later":
 * `LOADING` (dataset being loaded), `BUSY` (a script runs past `busy-reply-threshold`), `MISCONF`
 * (writes stopped after a failed RDB save, e.g. disk full), `TRYAGAIN` (cluster resharding),
 * `MASTERDOWN` (replica lost its primary). Such a reply is answered 503 with `Retry-After`, which
 * the SDKs retry; other Redis errors are the client's (400). Not `BUSYKEY` (RESTORE onto an
 * existing key), `BUSYGROUP`: those are client errors.
 */
const TEMPORARY = /^(LOADING|BUSY|MISCONF|TRYAGAIN|MASTERDOWN)( |$)/;

/** True when a Redis error text is a temporary server condition (see {@link TEMPORARY}). */
export function isTemporaryRedisError(message: string): boolean {
  return TEMPORARY.test(message);
}

/** Seconds a client is asked to wait (`Retry-After`) before retrying a 503. */
export const RETRY_AFTER_SECONDS = 1;
