/**
 * The queue area's error catalogue: every error the API answers with, its status,
 * and the wire body `{"error": "<message>"}` (OpenAPI `Error`).
 */
import { isDiskFull } from '../disk-full.js';

export class QueueError extends Error {
  constructor(
    readonly statusCode: number,
    message: string,
  ) {
    super(message);
    this.name = 'QueueError';
  }
}

/** Constructors for every error the queue API answers with. */
export const errors = {
  unauthorized: () => new QueueError(401, 'unauthorized'),
  notFound: (what: string) => new QueueError(404, `${what} not found`),
  routeNotFound: (method: string, path: string) => new QueueError(404, `route ${method} ${path} not found`),
  badRequest: (message: string) => new QueueError(400, message),
  invalidHeader: (name: string, value: string, expected: string) =>
    new QueueError(400, `invalid Upstash-${name} header ${JSON.stringify(value)}: ${expected}`),
  invalidDestination: (dest: string, why: string) =>
    new QueueError(400, `invalid destination url ${JSON.stringify(dest)}: ${why}`),
  /** `what` names the URL (`destination`, `Upstash-Callback url`), `why` the address rule it broke. */
  privateDestination: (what: string, url: string, why: string) =>
    new QueueError(400, `${what} ${JSON.stringify(url)} refused: ${why}; this server refuses loopback and private addresses (SVC_QUEUE_BLOCK_PRIVATE_DESTINATIONS)`),
  tooLarge: (size: number, max: number) =>
    new QueueError(413, `message size ${size} bytes exceeds the limit of ${max} bytes`),
  invalidJson: (why: string) => new QueueError(400, `invalid JSON body: ${why}`),
};

/** Seconds a client is asked to wait (`Retry-After`) after a disk-full answer. */
export const DISK_FULL_RETRY_AFTER_S = 30;

/** Seconds a client is asked to wait (`Retry-After`) while the queue's database is unreachable. */
export const STORE_UNAVAILABLE_RETRY_AFTER_S = 5;

/** SQLSTATE classes/codes and socket errors that mean "the database is not reachable right now". */
const UNAVAILABLE_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'EPIPE', 'ETIMEDOUT', '57P01', '57P02', '57P03', '53300']);

/**
 * True when a PostgreSQL store could not reach its database: connection refused/reset, the server
 * shutting down or starting (SQLSTATE 57P0x), too many connections, a connection class error
 * (08xxx), or node-postgres's own "connection terminated" / pool connect timeout errors.
 */
export function isStoreUnavailable(err: unknown): boolean {
  const e = err as { code?: unknown; message?: unknown } | null;
  const code = typeof e?.code === 'string' ? e.code : '';
  if (UNAVAILABLE_CODES.has(code) || code.startsWith('08')) return true;
  const msg = typeof e?.message === 'string' ? e.message : '';
  return /Connection terminated|timeout exceeded when trying to connect|connection error|Client was closed/i.test(msg);
}

/**
 * The answer for an error that escaped a route: the error's own 4xx; 503 with `Retry-After` when
 * the queue's database (PostgreSQL store) is unreachable (the write was not committed, or its
 * commit was not confirmed: the publish is not acknowledged); 507 Insufficient Storage
 * with `Retry-After` when the disk is full (the write was rolled back: nothing was stored, and
 * the same request succeeds once space is freed); otherwise 500 `internal error` (`log` is true).
 */
export function errorAnswer(err: Error & { statusCode?: number }): { status: number; message: string; retryAfterS?: number; log: boolean } {
  if (isDiskFull(err)) {
    return {
      status: 507,
      message: `insufficient storage: the disk holding the queue is full (${(err as { code?: string }).code}); nothing was stored, retry once space is freed`,
      retryAfterS: DISK_FULL_RETRY_AFTER_S,
      log: true,
    };
  }
  if (isStoreUnavailable(err)) {
    return {
      status: 503,
      message: 'the queue database is unavailable; nothing was acknowledged, retry shortly',
      retryAfterS: STORE_UNAVAILABLE_RETRY_AFTER_S,
      log: true,
    };
  }
  const status = err.statusCode ?? 500;
  if (status >= 500) return { status: 500, message: 'internal error', log: true };
  return { status, message: err.message, log: false };
}
