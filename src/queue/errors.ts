/**
 * The queue area's error catalogue: every error the API answers with, once, with its HTTP status
 * and the text of the wire body `{"error": "<message>"}` (OpenAPI `Error`). The official
 * `@upstash/qstash` and `@upstash/workflow` SDKs read the status (404 ends a workflow's step
 * lookup, 400 ends a step append to a finished run, 412 is non-retryable) and show the body's
 * text to the user; svc's tests match some texts, so a text here is a wire contract.
 *
 * Callers throw {@link queueError}`(code, ...args)`; {@link errorAnswer} is the one mapping of a
 * thrown value to the answer (status, text, `Retry-After`). `docs/readme/queue.md` ("Errors")
 * lists every code; `test/errors-docs.test.ts` keeps the two in step.
 */
import { isDiskFull } from '../disk-full.js';
import { catalogue, CatalogueError, type CatalogueEntry } from '../error-catalogue.js';

/** A 400 for a malformed `Upstash-<name>` header: the value and the expected form are named. */
function header(name: string, expected: string) {
  return { status: 400, message: (value: string) => `invalid Upstash-${name} header ${JSON.stringify(value)}: ${expected}` } as const;
}

/** A 400 for a destination that is not one: the URL and `why` are named. */
function destination(why: string) {
  return { status: 400, message: (dest: string) => `invalid destination url ${JSON.stringify(dest)}: ${why}` } as const;
}

/** A 404 for `<what> <id> not found`. */
function notFound(what: string) {
  return { status: 404, message: (id: string) => `${what} ${id} not found` } as const;
}

export const QUEUE_ERRORS = {
  // --- every route
  /** Missing or wrong token (`Authorization: Bearer` or `?qstash_token=`). */
  unauthorized: { status: 401, message: 'unauthorized' },
  /** A path or method no route serves. */
  routeNotFound: { status: 404, message: (method: string, path: string) => `route ${method} ${path} not found` },
  /** A request body over the HTTP limit (`SVC_QUEUE_MAX_MESSAGE_BYTES` plus headroom for batches). */
  bodyTooLarge: { status: 413, message: (limit: number) => `request body exceeds the limit of ${limit} bytes` },
  /** A body that must be JSON and is not. */
  invalidJson: { status: 400, message: (why: string) => `invalid JSON body: ${why}` },
  /** The disk holding the queue is full: nothing was stored (with `Retry-After`). */
  diskFull: {
    status: 507,
    message: (code: string) => `insufficient storage: the disk holding the queue is full (${code}); nothing was stored, retry once space is freed`,
  },
  /** The PostgreSQL store cannot reach its database: nothing was acknowledged (with `Retry-After`). */
  storeUnavailable: { status: 503, message: 'the queue database is unavailable; nothing was acknowledged, retry shortly' },
  /** A connection past `SVC_HTTP_MAX_CONNECTIONS` (answered with `Retry-After` and closed). */
  tooManyConnections: { status: 503, message: 'too many connections, retry shortly' },
  /** A value the PostgreSQL store refuses (SQLSTATE class 22, e.g. a NUL character in an id or name). */
  invalidValue: { status: 400, message: 'a value in the request cannot be stored (e.g. it contains a NUL character)' },
  /** An unexpected failure (logged). */
  internal: { status: 500, message: 'internal error' },

  // --- publish: destination, size, headers
  missingDestination: destination('missing'),
  destinationNotUrl: destination('not an absolute URL'),
  destinationScheme: destination('only http and https are supported'),
  unknownDestination: destination('not an http(s) URL and no URL group of that name exists'),
  invalidWorkflowUrl: destination('expected the workflow endpoint URL (http or https)'),
  /** A destination or callback URL on a private address while `SVC_QUEUE_BLOCK_PRIVATE_DESTINATIONS` is on. */
  privateDestination: {
    status: 400,
    message: (what: string, url: string, why: string) =>
      `${what} ${JSON.stringify(url)} refused: ${why}; this server refuses loopback and private addresses (SVC_QUEUE_BLOCK_PRIVATE_DESTINATIONS)`,
  },
  /** A message body over `SVC_QUEUE_MAX_MESSAGE_BYTES`. */
  messageTooLarge: { status: 413, message: (size: number, max: number) => `message size ${size} bytes exceeds the limit of ${max} bytes` },
  invalidMethod: header('Method', 'expected GET, POST, PUT, PATCH or DELETE'),
  invalidNotBefore: header('Not-Before', 'expected unix seconds, at most 253402300799 (9999-12-31)'),
  invalidDelay: header('Delay', 'expected a duration such as 10s, 5m, 2h, 1d or 1d10h30m, of at most 100 years'),
  invalidRetries: header('Retries', 'expected a non-negative integer'),
  /** A retry count above `SVC_QUEUE_MAX_RETRIES` (412, as QStash answers a count over the plan's maximum). */
  retriesAboveMax: {
    status: 412,
    message: (value: string, max: number) => `Upstash-Retries ${value} is above the maximum of ${max} retries (SVC_QUEUE_MAX_RETRIES)`,
  },
  invalidTimeout: header('Timeout', 'expected a positive duration up to 2h, such as 30s or 5m'),
  invalidRedactFields: header('Redact-Fields', 'expected a comma list of body, header, header[Name]'),
  invalidScheduleId: header('Schedule-Id', 'expected 1 to 256 characters'),
  /** `Upstash-Retry-Delay` that is not an expression of `retried` (`why` names the problem). */
  invalidRetryDelay: { status: 400, message: (value: string, why: string) => `invalid Upstash-Retry-Delay header ${JSON.stringify(value)}: ${why}` },
  /** `Upstash-Callback` / `Upstash-Failure-Callback` that is not an absolute http(s) URL. */
  invalidCallbackUrl: {
    status: 400,
    message: (name: string, url: string) => `invalid Upstash-${name} header ${JSON.stringify(url)}: expected an absolute http(s) URL`,
  },
  /** `Upstash-Flow-Control-Value` that is neither `rate=X`, `parallelism=Y` nor both. */
  invalidFlowControlValue: { status: 400, message: 'Upstash-Flow-Control-Value should be either rate=X or parallelism=Y, or both as comma-separated values' },
  invalidFlowControlPeriod: { status: 400, message: (value: string) => `invalid flow control period ${JSON.stringify(value)}: expected a duration of 1s to 2147483647s` },
  invalidFlowControlNumber: { status: 400, message: (name: string, value: string) => `invalid flow control ${name} ${JSON.stringify(value)}: expected an integer from 1 to 2147483647` },
  flowControlKeyRequired: { status: 400, message: 'Upstash-Flow-Control-Value needs a flow control key (Upstash-Flow-Control-Key)' },
  flowControlValueRequired: { status: 400, message: 'Upstash-Flow-Control-Key needs a value (Upstash-Flow-Control-Value)' },

  // --- batch publish
  batchNotArray: { status: 400, message: 'batch body must be a JSON array of {destination, headers?, body?}' },
  batchTooManyEntries: { status: 400, message: (n: number, max: number) => `batch has ${n} entries; at most ${max} are accepted in one request: split it` },
  batchEntryNotObject: { status: 400, message: (i: number) => `batch entry ${i} must be an object` },
  batchEntryDestination: { status: 400, message: (i: number) => `batch entry ${i}: "destination" must be a non-empty string` },
  batchEntryBody: { status: 400, message: (i: number) => `batch entry ${i}: "body" must be a string` },
  batchEntryQueue: { status: 400, message: (i: number) => `batch entry ${i}: "queue" must be a queue name (letters, digits, '-', '_', '.')` },
  batchEntryHeaders: { status: 400, message: 'batch entry "headers" must be an object of strings' },
  batchEntryHeader: { status: 400, message: (name: string) => `batch entry header ${JSON.stringify(name)} must be a string` },
  /** A header of a batch (or batch trigger) entry that HTTP cannot carry: a name that is not a token, a value with CR, LF, NUL, another control or a character above U+00FF. */
  batchEntryHeaderInvalid: {
    status: 400,
    message: (name: string) => `batch entry header ${JSON.stringify(name)} is not a valid HTTP header: the name must be a token, the value without CR, LF, NUL, other controls or characters above U+00FF`,
  },

  // --- names, URL groups, queues, schedules, flow control
  /** A URL group or queue name outside `[A-Za-z0-9_.-]`. */
  invalidName: {
    status: 400,
    message: (kind: string, name: string) => `invalid ${kind} name ${JSON.stringify(name)}: only letters, digits, '-', '_' and '.' are allowed`,
  },
  endpointsNotArray: { status: 400, message: '"endpoints" must be a non-empty array of {url, name?}' },
  endpointNotObject: { status: 400, message: (i: number) => `endpoints[${i}] must be an object` },
  endpointUrlType: { status: 400, message: (i: number) => `endpoints[${i}].url must be a string` },
  endpointNameType: { status: 400, message: (i: number) => `endpoints[${i}].name must be a string` },
  endpointUrlRequired: { status: 400, message: (i: number) => `endpoints[${i}].url is required` },
  endpointNeedsUrlOrName: { status: 400, message: (i: number) => `endpoints[${i}] needs a url or a name` },
  enqueuePath: { status: 400, message: 'expected /v2/enqueue/{queueName}/{destination}' },
  queueNameEncoding: { status: 400, message: (raw: string) => `invalid queue name ${JSON.stringify(raw)}: malformed percent-encoding` },
  queueNameRequired: { status: 400, message: '"queueName" must be a non-empty string' },
  invalidParallelism: { status: 400, message: (max: number) => `"parallelism" must be an integer from 1 to ${max}` },
  pausedNotBoolean: { status: 400, message: '"paused" must be a boolean' },
  cronRequired: { status: 400, message: 'the Upstash-Cron header is required' },
  /** `Upstash-Cron` that does not parse (`why`: field count, bad field, unknown zone). */
  invalidCron: { status: 400, message: (value: string, why: string) => `invalid Upstash-Cron ${JSON.stringify(value)}: ${why}` },
  invalidPinNumber: { status: 400, message: (name: string, value: string) => `invalid ${name} ${JSON.stringify(value)}: expected an integer from 1 to 2147483647` },
  invalidPinPeriod: { status: 400, message: (value: string) => `invalid period ${JSON.stringify(value)}: expected seconds or a duration, from 1s to 2147483647s` },
  emptyPin: { status: 400, message: 'pin needs parallelism and/or rate' },

  // --- listings and bulk operations (query strings, bodies)
  invalidTimestamp: {
    status: 400,
    message: (name: string, value: string) => `invalid ${name} ${JSON.stringify(value)}: expected unix milliseconds / a non-negative integer`,
  },
  invalidInteger: { status: 400, message: (name: string, value: string) => `invalid ${name} ${JSON.stringify(value)}: expected a non-negative integer` },
  invalidRange: { status: 400, message: (name: string, min: number, max: number) => `${name} must be an integer from ${min} to ${max}` },
  invalidState: { status: 400, message: (value: string, expected: string) => `invalid state ${JSON.stringify(value)}: expected one of ${expected}` },
  unsupportedFilter: { status: 400, message: (name: string) => `filter field ${JSON.stringify(name)} is not supported on this endpoint` },
  unknownQueryField: { status: 400, message: (name: string, expected: string) => `unknown query field ${JSON.stringify(name)}: expected one of ${expected}` },
  invalidResponseStatus: { status: 400, message: (value: string) => `invalid responseStatus ${JSON.stringify(value)}` },
  invalidCount: { status: 400, message: 'count must be at least 1' },
  invalidCursor: { status: 400, message: (value: string) => `invalid cursor ${JSON.stringify(value)}` },
  invalidOrder: { status: 400, message: (value: string) => `invalid order ${JSON.stringify(value)}: expected latestFirst or earliestFirst` },
  bodyNotObject: { status: 400, message: 'body must be a JSON object' },
  notStringArray: { status: 400, message: (name: string) => `"${name}" must be an array of strings` },

  // --- not found
  messageNotFound: notFound('message'),
  dlqMessageNotFound: notFound('DLQ message'),
  urlGroupNotFound: notFound('URL group'),
  queueNotFound: notFound('queue'),
  scheduleNotFound: notFound('schedule'),
  flowControlKeyNotFound: notFound('flow-control key'),
  workflowRunNotFound: notFound('workflow run'),
  webhookNotFound: notFound('webhook of workflow run'),
  failedRunNotFound: notFound('DLQ entry'),

  // --- workflow runs
  triggerBatchNotArray: { status: 400, message: 'batch trigger body must be a JSON array of {destination, body?, headers?}' },
  triggerEntryNotObject: { status: 400, message: (i: number) => `batch trigger entry ${i} must be an object` },
  triggerEntryDestination: { status: 400, message: (i: number) => `batch trigger entry ${i}: "destination" must be the workflow URL` },
  triggerEntryBody: { status: 400, message: (i: number) => `batch trigger entry ${i}: "body" must be a string` },
  triggerEntryHeaders: { status: 400, message: (i: number) => `batch trigger entry ${i}: "headers" must be an object of strings` },
  /** A step, wait or notify for a run that is not running (the SDK ends the step quietly on 400). */
  runNotActive: { status: 400, message: (runId: string) => `workflow run ${runId} is not active` },
  runFinished: { status: 400, message: (runId: string, state: string) => `workflow run ${runId} is finished (${state})` },
  runMissing: { status: 400, message: (runId: string) => `workflow run ${runId} does not exist` },
  /** A step past `SVC_QUEUE_WORKFLOW_MAX_STEPS` / `_MAX_CONTEXT_BYTES`: the run is failed (the SDK reads 400 as "the run ended"). */
  runLimit: { status: 400, message: (runId: string, limit: string) => `workflow run ${runId} failed: ${limit}` },
  invalidWaitBody: { status: 400, message: 'wait body must be {url, timeout, step, ...}' },
  waitBodyTooDeep: { status: 400, message: (max: number) => `wait body nests deeper than ${max} levels` },
  missingRunId: { status: 400, message: 'missing Upstash-Workflow-RunId header' },
  invalidWaitTimeout: { status: 400, message: (value: unknown) => `invalid wait timeout ${JSON.stringify(value)}: expected a duration (10s, 1h, 7d) of at most 100 years` },
  invokeBodyNotJson: { status: 400, message: (why: string) => `workflow invoke body must be JSON: ${why}` },
  invalidInvokeBody: { status: 400, message: 'workflow invoke body must be {body, headers, workflowRunId, workflowRunCreatedAt, workflowUrl, step}' },
  invalidDlqId: { status: 400, message: (id: string) => `invalid DLQ id ${JSON.stringify(id)}: expected <timestamp>-<sequence>` },
  notWorkflowRun: { status: 400, message: (id: string) => `DLQ entry ${id} is not a failed workflow run` },
  /** Restarting or resuming a failed run whose id is running again. */
  runAlreadyRunning: { status: 409, message: (runId: string) => `workflow run ${runId} is already running` },
  failureNotFailed: { status: 400, message: (id: string, state: string) => `the failure function of DLQ entry ${id} has not failed (state ${state})` },
  noFailureCallback: { status: 400, message: (id: string) => `workflow run of DLQ entry ${id} has no failure callback` },
} as const satisfies Record<string, CatalogueEntry>;

export type QueueErrorCode = keyof typeof QUEUE_ERRORS;

/** A catalogued queue failure: answered with `statusCode` and `{"error": message}`. */
export class QueueError extends CatalogueError<QueueErrorCode> {
  /** The status under the name Fastify's errors use (the error handler reads both kinds). */
  get statusCode(): number {
    return this.status;
  }
}

/** `queueMessage(code, ...args)`: the text of entry `code`; `queueError(code, ...args)`: the entry as a {@link QueueError}. */
export const { message: queueMessage, error: queueError } = catalogue(QUEUE_ERRORS, (code, status, message) => new QueueError(code, status, message));

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
 * The one mapping of an error that escaped a route to its answer: a {@link QueueError}'s (or the
 * HTTP framework's) own 4xx; `storeUnavailable` (503, `Retry-After`) when the queue's database
 * (PostgreSQL store) is unreachable (the write was not committed, or its commit was not confirmed:
 * the publish is not acknowledged); `diskFull` (507 Insufficient Storage, `Retry-After`) when the
 * disk is full (the write was rolled back: nothing was stored, and the same request succeeds once
 * space is freed); `invalidValue` (400) for a value PostgreSQL refuses (SQLSTATE class 22 data
 * exception, e.g. a NUL character in a path parameter); otherwise `internal` (500; `log` is true).
 */
export function errorAnswer(err: Error & { statusCode?: number }): { status: number; message: string; retryAfterS?: number; log: boolean } {
  if (isDiskFull(err)) {
    return {
      status: QUEUE_ERRORS.diskFull.status,
      message: queueMessage('diskFull', String((err as { code?: string }).code)),
      retryAfterS: DISK_FULL_RETRY_AFTER_S,
      log: true,
    };
  }
  if (isStoreUnavailable(err)) {
    return {
      status: QUEUE_ERRORS.storeUnavailable.status,
      message: queueMessage('storeUnavailable'),
      retryAfterS: STORE_UNAVAILABLE_RETRY_AFTER_S,
      log: true,
    };
  }
  // PostgreSQL refuses some values SQLite stores (a NUL in text); they come from the request
  const sqlState = (err as { code?: unknown }).code;
  if (typeof sqlState === 'string' && /^22[0-9A-Z]{3}$/.test(sqlState)) {
    return { status: QUEUE_ERRORS.invalidValue.status, message: queueMessage('invalidValue'), log: false };
  }
  const status = err.statusCode ?? 500;
  if (status >= 500) return { status: QUEUE_ERRORS.internal.status, message: queueMessage('internal'), log: true };
  return { status, message: err.message, log: false };
}
