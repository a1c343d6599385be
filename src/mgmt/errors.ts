/**
 * The management API's error catalogue: every error it answers, once, with its
 * status and exact body. Bodies are `{error: string}` (spec "Errors": the queue/kv shape; the
 * management endpoint's own error format is "not shown" in the spec, so svc uses the same one).
 * The web console's answers under `/console/api/` are here too (same body, no challenge).
 * `docs/readme/mgmt.md` ("Errors") lists every entry; `test/errors-docs.test.ts` keeps the two in step.
 */
import type { FastifyReply } from 'fastify';
import { catalogue, CatalogueError, type CatalogueEntry, type MessageArgs } from '../error-catalogue.js';

/** The Basic challenge sent with the management API's 401s (RFC 7617). */
const BASIC_CHALLENGE = 'Basic realm="svc", charset="UTF-8"';

/** The Bearer challenge sent with a refused `GET /metrics` (RFC 6750). */
const METRICS_CHALLENGE = 'Bearer realm="svc metrics"';

/** One catalogue entry, and the headers it is sent with. */
interface Entry extends CatalogueEntry {
  /** `WWW-Authenticate` value. */
  challenge?: string;
  /** `Retry-After` seconds. */
  retryAfterS?: number;
}

export const MGMT_ERRORS = {
  // --- the management API
  /** No `Authorization` header (or an empty one). */
  missingCredentials: {
    status: 401,
    message: 'Unauthorized: Basic credentials required (Authorization: Basic base64(user:password))',
    challenge: BASIC_CHALLENGE,
  },
  /** A header that is not `Basic <base64(user:password)>`, or a wrong user or password. */
  invalidCredentials: { status: 401, message: 'Unauthorized: invalid user or password', challenge: BASIC_CHALLENGE },
  /** `GET /metrics` without `Authorization: Bearer <SVC_METRICS_TOKEN>` when that token is set. */
  metricsUnauthorized: { status: 401, message: 'missing or wrong bearer token (SVC_METRICS_TOKEN)', challenge: METRICS_CHALLENGE },
  /** Too many failed attempts from the client's address in the current window. */
  tooManyFailures: { status: 429, message: 'Too many failed authentication attempts from this address; retry later' },
  /** A sign-in (Basic auth or the console form) as the management user after too many failed attempts for it, from any address, in the current window. */
  accountTooManyFailures: { status: 429, message: 'Too many failed sign-in attempts for this account; retry later' },
  /** `GET /metrics` from an address with too many wrong bearer tokens in the current window. */
  metricsTooManyFailures: { status: 429, message: 'Too many wrong metrics tokens from this address; retry later' },
  /** A vector index without tokens in the store (rotation, or a console call to it). */
  unknownVectorIndex: { status: 404, message: (index: string) => `vector index not found: ${JSON.stringify(index.slice(0, 200))}` },
  /**
   * A rotation in effect on this node that could not be written to the database the nodes share
   * yet (the queue's PostgreSQL store unreachable); written when it is back.
   */
  notShared: {
    status: 503,
    message: 'the new credential is in effect on this node but the shared database is unreachable; it is written there when the database is back',
    retryAfterS: 5,
  },
  /** A `/v2/vector/index` body that is not valid: the message names the field (name rules, a name in use, a bad dimension, an unknown model, …). */
  vectorIndexInvalid: { status: 400, message: (why: string) => why },
  /** Rename or delete of the default index or an `SVC_VECTOR_INDEXES` one (the configuration owns them; new tokens are allowed). */
  vectorIndexFixed: { status: 409, message: (why: string) => why },
  /** A `/v2/vector/index` call before the vector area has loaded its indexes. */
  vectorIndexesStarting: { status: 503, message: 'svc is starting: the vector indexes are not loaded yet', retryAfterS: 1 },
  /** `POST /v2/backup` while a backup runs in this process. */
  backupInProgress: { status: 409, message: 'a backup is already running in this svc process; retry when it has finished (GET /v2/backup shows it)' },
  /** `POST /v2/backup` with a body that is not `{"dir": "<absolute path>"}`. */
  backupBadBody: { status: 400, message: 'expected a JSON body {"dir": "<absolute path of the backup to create>"} (or none, with SVC_BACKUP_DIR set)' },
  /** `POST /v2/backup` without a `dir` while `SVC_BACKUP_DIR` is unset. */
  backupNoTarget: { status: 400, message: 'no backup directory: send {"dir": "<absolute path>"} or set SVC_BACKUP_DIR' },
  /** A backup directory that is relative or exists already. */
  backupBadTarget: { status: 400, message: (why: string) => why },
  /** `POST /v2/backup` before every area has started. */
  backupNotReady: { status: 503, message: 'svc is starting: backups are available once every area has started', retryAfterS: 1 },
  /** A store could not be copied (the partial backup was removed; details are logged too). */
  backupFailed: { status: 500, message: (why: string) => `backup failed: ${why}` },
  /** Any route that does not exist. */
  notFound: { status: 404, message: 'Not Found' },
  /** A request body over the management API's 64 KiB limit (Fastify's text). */
  bodyTooLarge: { status: 413, message: 'Request body is too large' },
  /** An unexpected failure (details are logged, not returned). */
  internal: { status: 500, message: 'Internal Server Error' },

  // --- the web console (`/console/api/...`; no challenge: the browser must not show its own dialog)
  /** A console call without a valid session cookie. */
  consoleNotSignedIn: { status: 401, message: 'not signed in (or the session expired): sign in again' },
  /** Console sign-in with a wrong user name or password. */
  consoleWrongPassword: { status: 401, message: 'wrong user name or password' },
  /** Console sign-in refused by the brake after too many failures (`Retry-After` is set by the caller). */
  consoleTooManyFailures: { status: 429, message: (waitS: number) => `too many failed sign-in attempts from this address; retry in ${waitS} s` },
  /** A sign-in or state-changing call whose `Origin` is not the console's own. */
  crossOrigin: { status: 403, message: 'cross-origin request refused' },
  /** A state-changing call without the session's `X-CSRF-Token`. */
  csrfMismatch: { status: 403, message: 'missing or wrong X-CSRF-Token' },
  /** A queue write, or a vector index change, from a read-only console. */
  consoleReadonly: { status: 403, message: 'the console is read-only (SVC_CONSOLE_READONLY=true)' },
  /** A console call to an area this svc process does not run. */
  areaNotRunning: { status: 503, message: (area: string) => `the ${area} area is not running in this svc process` },
  /** A console call to an area whose token is missing from the credential store. */
  missingCredential: { status: 503, message: (name: string) => `no ${name} credential in the store` },
  /** A vector index name with a malformed percent-escape in a console path. */
  vectorIndexEncoding: { status: 400, message: 'vector index name: bad percent-encoding' },
  /** The area a console call was forwarded to could not be reached. */
  areaUnreachable: { status: 502, message: (why: string) => `the area could not be reached: ${why}` },
  /** The area a console call was forwarded to did not answer within the proxy timeout. */
  areaTimeout: { status: 504, message: 'the area did not answer in time' },
} as const satisfies Record<string, Entry>;

export type MgmtErrorCode = keyof typeof MGMT_ERRORS;

/** The arguments of the message builder of `C` (none for a fixed text). */
export type MgmtMessageArgs<C extends MgmtErrorCode> = MessageArgs<(typeof MGMT_ERRORS)[C]>;

/** A catalogued management failure thrown below the routes (the console's forwarding). */
export class MgmtError extends CatalogueError<MgmtErrorCode> {}

/** `mgmtMessage(code, ...args)`: the text of entry `code`; `mgmtError(code, ...args)`: the entry as a {@link MgmtError}. */
export const { message: mgmtMessage, error: mgmtError } = catalogue(MGMT_ERRORS, (code, status, message) => new MgmtError(code, status, message));

/**
 * Sends catalogue error `code` as JSON `{error}`, with its `WWW-Authenticate` challenge and
 * `Retry-After` when it has them.
 */
export function sendError<C extends MgmtErrorCode>(reply: FastifyReply, code: C, ...args: MgmtMessageArgs<C>): FastifyReply {
  return sendCaught(reply, mgmtError(code, ...args));
}

/** Sends a thrown {@link MgmtError} as {@link sendError} does. */
export function sendCaught(reply: FastifyReply, err: MgmtError): FastifyReply {
  const e: Entry = MGMT_ERRORS[err.code];
  if (e.challenge !== undefined) reply.header('WWW-Authenticate', e.challenge);
  if (e.retryAfterS !== undefined) reply.header('Retry-After', String(e.retryAfterS));
  return reply.code(e.status).type('application/json; charset=utf-8').send({ error: err.message });
}
