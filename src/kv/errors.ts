/**
 * The kv gateway's error catalogue: every error the gateway answers with, once, with its HTTP
 * status and its `{"error": "..."}` text (spec "Errors": the Upstash REST shape; the texts follow
 * Redis's style, `ERR ...`, `WRONGPASS ...`, `NOPERM ...`). The official `@upstash/redis` SDK reads
 * only `error` from a non-2xx body (and from each `/pipeline` item), and retries nothing on a status;
 * tests match the texts, so a text here is a wire contract. Errors Redis itself answers are passed
 * through unchanged as {@link KV_ERRORS.redisError} / {@link KV_ERRORS.redisTemporary}.
 *
 * Every failure is a {@link KvError} built with {@link kvError} (or a text with {@link kvMessage}
 * where a per-command error item is needed, e.g. the command policy's refusals inside a pipeline);
 * {@link errorAnswer} is the one place that turns a thrown value into status and text.
 * `docs/readme/kv.md` ("Errors") lists every code; `test/errors-docs.test.ts` keeps the two in step.
 */
import { catalogue, CatalogueError, type CatalogueEntry, type MessageArgs } from '../error-catalogue.js';

export const KV_ERRORS = {
  // --- the request
  /** Missing or unknown token (header `Authorization: Bearer` or `?_token=`). */
  unauthorized: { status: 401, message: 'WRONGPASS invalid or missing auth token' },
  /** A method other than GET, HEAD, POST, PUT (OPTIONS only as a CORS preflight). */
  methodNotAllowed: { status: 405, message: (method: string) => `ERR method ${method} not allowed` },
  /** A request target that is not a path (e.g. `*` or an absolute URL). */
  notFound: { status: 404, message: 'ERR not found' },
  /** A request Node's HTTP parser refuses (malformed request line or headers). */
  badHttpRequest: { status: 400, message: 'ERR bad HTTP request' },
  /** A body over `SVC_KV_MAX_REQUEST_BYTES`. */
  requestTooLarge: { status: 400, message: 'ERR max request size exceeded' },
  /** `Svc-Response-Format` / `Upstash-Response-Format` other than `json` or `resp2`. */
  invalidResponseFormat: { status: 400, message: (format: string) => `ERR invalid response format '${format}': expected json or resp2` },
  /** `resp2` together with `Svc-Encoding: base64`. */
  resp2WithBase64: { status: 400, message: 'ERR resp2 response format cannot be combined with base64 encoding' },
  /** `POST /` without a body. */
  noCommand: { status: 400, message: 'ERR no command: send a JSON array body or put the command in the path' },
  /** `/pipeline` or `/multi-exec` without a body. */
  missingBody: { status: 400, message: 'ERR missing request body: expected a JSON array' },
  /** A body that is not JSON; `why` is the parser's message. */
  invalidJson: { status: 400, message: (why: string) => `ERR invalid JSON body: ${why}` },
  /** A command body that is not a JSON array. */
  invalidCommand: { status: 400, message: 'ERR invalid command: expected a JSON array of a command name and its arguments' },
  /** A command argument that is `null`, an object or an array. */
  invalidArgument: {
    status: 400,
    message: (index: number, got: string) => `ERR invalid command: argument ${index} must be a string, number or boolean, got ${got}`,
  },
  /** `[]` as a command. */
  emptyCommand: { status: 400, message: 'ERR empty command' },
  /** A `/pipeline` or `/multi-exec` body that is not an array of arrays. */
  invalidPipeline: { status: 400, message: 'ERR invalid request: expected a two-dimensional JSON array of commands' },
  /** `[]` as a pipeline or transaction. */
  emptyPipeline: { status: 400, message: 'ERR empty pipeline: expected at least one command' },
  /** An SSE path reached on a connection that cannot stream (internal hand-over only). */
  streamUnavailable: { status: 400, message: 'ERR streams are not served on this connection' },

  // --- the command policy (a single command's answer, or an error item of a pipeline)
  /** A JSON.* command while the database has neither RedisJSON nor svc's JSON library. */
  jsonUnavailable: {
    status: 400,
    message: (name: string) => `ERR Command is not supported by this server: '${name}' (JSON.* needs the RedisJSON module or svc's JSON library)`,
  },
  /** A command (or `command subcommand`) svc never forwards (server administration, persistence, ...). */
  commandNotAllowed: { status: 400, message: (name: string) => `ERR Command is not allowed: '${name}'` },
  /** A command that is an endpoint of its own (`SUBSCRIBE` -> `/subscribe/<channel>`, ...). */
  endpointOnly: { status: 400, message: (name: string, hint: string) => `ERR Command is not supported as a command: '${name}' (${hint})` },
  /** MULTI, EXEC, DISCARD, WATCH, UNWATCH: transactions go through `/multi-exec`. */
  transactionCommand: { status: 400, message: (name: string) => `ERR Command is not supported: '${name}' (use the /multi-exec endpoint for transactions)` },
  /** CLUSTER, READONLY, ...: there is no cluster. */
  clusterCommand: { status: 400, message: (name: string) => `ERR Command is not supported: '${name}' (cluster commands are not available)` },
  /** A connection command other than PING and ECHO (AUTH, SELECT, CLIENT ...). */
  connectionCommand: {
    status: 400,
    message: (name: string) => `ERR Command is not supported: '${name}' (of the connection commands only PING and ECHO are)`,
  },
  /** A blocking command (BLPOP, XREAD with BLOCK, ...). */
  blockingCommand: {
    status: 400,
    message: (name: string) => `ERR Command is not supported: '${name}' (blocking commands are not available over REST)`,
  },
  /** `ACL SETUSER/DELUSER` of one of the users svc manages. */
  aclGrantRefused: { status: 400, message: (names: string) => `ERR ACL SETUSER would let the user run ${names}, which svc refuses for every token (the user could log in to the database directly); add a '-' rule for each` },
  protectedUser: { status: 400, message: (user: string) => `ERR ACL user '${user}' is managed by svc and cannot be changed` },
  /** Redis's arity error, for the commands svc checks itself (JSON.* in library mode, ACL RESTTOKEN). */
  wrongArity: { status: 400, message: (name: string) => `ERR wrong number of arguments for '${name}' command` },
  /** A JSON.* command svc's JSON library does not provide (Redis's text). */
  unknownCommand: { status: 400, message: (name: string) => `ERR unknown command '${name}'` },
  /** `ACL RESTTOKEN` inside a pipeline or transaction. */
  restTokenNotSingle: { status: 400, message: 'ERR ACL RESTTOKEN is only supported as a single command' },
  /** `ACL RESTTOKEN user password` with a wrong password or an unknown user. */
  restTokenWrongPassword: { status: 400, message: (user: string) => `ERR Wrong password or user "${user}" does not exist` },
  /** `SCAN ... WITHTYPE` (run as a read-only script) by a user without SCAN permission: Redis's NOPERM text for SCAN itself. */
  scanNotPermitted: { status: 400, message: "NOPERM this user has no permissions to run the 'scan' command" },
  /** A script svc killed after `SVC_KV_SCRIPT_TIMEOUT_MS`. */
  scriptKilled: { status: 400, message: (limitMs: number) => `ERR script killed by svc: it ran longer than ${limitMs} ms (SVC_KV_SCRIPT_TIMEOUT_MS)` },
  /** A script of a token whose script svc killed recently, during the cool-down that followed (`watchdog.ts`). */
  scriptCoolDown: {
    status: 429,
    message: (seconds: number, strikes: number, limitMs: number) =>
      `ERR scripts of this token are refused for another ${seconds} s: svc killed a script of it that ran longer than ${limitMs} ms (SVC_KV_SCRIPT_TIMEOUT_MS; kill ${strikes} in a row, each one doubles the wait)`,
  },
  /** Too many script requests of one token waiting for their turn (`watchdog.ts`). */
  scriptsWaiting: { status: 429, message: (waiting: number) => `ERR too many scripts of this token waiting to run (${waiting}); retry later` },

  // --- limits
  /** Past `SVC_KV_DAILY_REQUEST_LIMIT` commands in the current UTC day (the hosted service's text). */
  dailyLimitExceeded: { status: 400, message: (limit: number, usage: number) => `ERR max daily request limit exceeded. Limit: ${limit}, Usage: ${usage}` },
  /** A kv worker process could not reach the primary to take daily-limit quota. */
  dailyLimitUnavailable: { status: 503, message: (why: string) => `ERR daily request limit unavailable: ${why}` },

  // --- the database
  /** A request that arrives while the gateway is closing. */
  shuttingDown: { status: 503, message: 'ERR server is shutting down' },
  /** A connection past `SVC_HTTP_MAX_CONNECTIONS` (answered with `Retry-After` and closed). */
  tooManyConnections: { status: 503, message: 'ERR too many connections, retry shortly' },
  /** The supervised redis-server is being restarted. */
  databaseRestarting: { status: 503, message: 'ERR database unavailable: redis-server is restarting, retry shortly' },
  /** Connecting to the database failed; `why` is the socket error. */
  databaseUnreachable: { status: 503, message: (why: string) => `ERR database unavailable: ${why}` },
  /** Connecting to the database took too long. */
  databaseTimeout: { status: 503, message: 'ERR database connection timed out' },
  /** The connection broke while the request was in flight. */
  databaseConnectionLost: { status: 503, message: 'ERR database connection lost' },
  /** The connection was closed by svc (pool retired, shutdown) while the request was in flight. */
  databaseConnectionClosed: { status: 503, message: 'ERR database connection closed' },
  /** The database answered bytes that are not RESP; the connection is dropped. */
  databaseProtocolError: { status: 503, message: (why: string) => `ERR protocol error from database: ${why}` },
  /** The database refused AUTH for the token's ACL user (Redis's text, e.g. `WRONGPASS ...`). */
  aclAuthFailed: { status: 401, message: (redisText: string) => redisText },
  /** A transaction EXEC answered nil (aborted) without an error of its own. */
  transactionAborted: { status: 400, message: 'ERR transaction aborted' },
  /** An error Redis answered (syntax, WRONGTYPE, NOPERM, ...), verbatim. */
  redisError: { status: 400, message: (redisText: string) => redisText },
  /**
   * An error Redis answered for a temporary condition (`LOADING`, `BUSY`, `MISCONF`, `TRYAGAIN`,
   * `MASTERDOWN`, `NOREPLICAS`: {@link isTemporaryRedisError}), verbatim; the SDK's caller may retry.
   */
  redisTemporary: { status: 503, message: (redisText: string) => redisText },
  /** An unexpected failure (logged). */
  internal: { status: 500, message: (why: string) => `ERR internal error: ${why}` },
} as const satisfies Record<string, CatalogueEntry>;

export type KvErrorCode = keyof typeof KV_ERRORS;

/** The arguments of the message builder of `C` (none for a fixed text). */
export type KvMessageArgs<C extends KvErrorCode> = MessageArgs<(typeof KV_ERRORS)[C]>;

/** A catalogued kv failure: answered with HTTP `status` and `{"error": message}`. */
export class KvError extends CatalogueError<KvErrorCode> {
  /**
   * Seconds the client is asked to wait before retrying (`Retry-After`), for a refusal that knows
   * when it ends (a 429 of the script watchdog); a 503 without it is answered with
   * {@link RETRY_AFTER_SECONDS}.
   */
  retryAfterSeconds?: number;
}

/** `kvMessage(code, ...args)`: the text of entry `code`; `kvError(code, ...args)`: the entry as a {@link KvError}. */
export const { message: kvMessage, error: kvError } = catalogue(KV_ERRORS, (code, status, message) => new KvError(code, status, message));

/**
 * Redis error codes that mean "the server cannot do this now, the same request will work later":
 * `LOADING` (dataset being loaded), `BUSY` (a script runs past `busy-reply-threshold`), `MISCONF`
 * (writes stopped after a failed RDB save, e.g. disk full), `TRYAGAIN` (cluster resharding),
 * `MASTERDOWN` (replica lost its primary), `NOREPLICAS` (too few replicas: Redis's
 * `min-replicas-to-write`, or svc's `SVC_KV_WAIT_REPLICAS` check). Such a reply is answered 503 with `Retry-After`, which
 * the SDKs retry; other Redis errors are the client's (400). Not `BUSYKEY` (RESTORE onto an
 * existing key), `BUSYGROUP`: those are client errors.
 */
const TEMPORARY = /^(LOADING|BUSY|MISCONF|TRYAGAIN|MASTERDOWN|NOREPLICAS)( |$)/;

/** True when a Redis error text is a temporary server condition (see {@link TEMPORARY}). */
export function isTemporaryRedisError(message: string): boolean {
  return TEMPORARY.test(message);
}

/** A Redis error text as a whole-request error: `redisTemporary` (503) or `redisError` (400). */
export function redisReplyError(redisText: string): KvError {
  return kvError(isTemporaryRedisError(redisText) ? 'redisTemporary' : 'redisError', redisText);
}

/** Seconds a client is asked to wait (`Retry-After`) before retrying a 503. */
export const RETRY_AFTER_SECONDS = 1;

/**
 * The one mapping of a failure to its answer: a {@link KvError} keeps its status, text and
 * `retryAfterSeconds`; anything else is `internal` (500) and is to be logged (`log`).
 */
export function errorAnswer(err: unknown): { status: number; message: string; log: boolean; retryAfterSeconds?: number } {
  if (err instanceof KvError) return { status: err.status, message: err.message, log: false, retryAfterSeconds: err.retryAfterSeconds };
  return { status: 500, message: kvMessage('internal', err instanceof Error ? err.message : String(err)), log: true };
}
