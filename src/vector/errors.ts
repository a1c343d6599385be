/**
 * The vector area's error catalogue: every error the wire can carry, once, with its HTTP status
 * and its text. The body is always `{"error": message, "status": status}` (the hosted service's
 * shape); the official `@upstash/vector` SDK throws an `UpstashError` with `error` as its message,
 * and some texts are exactly the hosted service's (its SDK tests match them), so a text here is a
 * wire contract.
 *
 * Callers throw {@link vectorError}`(code, ...args)`; `http/routes.ts` turns a thrown value into
 * the answer ({@link errorBody}; anything else is `internal`). `docs/readme/vector.md` ("Errors")
 * lists every code; `test/errors-docs.test.ts` keeps the two in step.
 */
import { catalogue, CatalogueError, type CatalogueEntry, type MessageArgs } from '../error-catalogue.js';

/** A 400 whose text is `<where><text>` (`where` names the field, e.g. `upsert[2].vector`). */
function field(text: string) {
  return { status: 400, message: (where: string) => `${where}${text}` } as const;
}

/** A 422 from the embedding endpoint of an index with an external embedder. */
function embedding<M extends CatalogueEntry['message']>(message: M) {
  return { status: 422, message } as const;
}

export const VECTOR_ERRORS = {
  // --- routing and authentication
  /** No token, or not a token of this index (the hosted service's text). */
  unauthorized: { status: 401, message: 'Unauthorized: Invalid auth token' },
  /** A write with the read-only token (the hosted service's text). */
  readonlyToken: { status: 401, message: 'Unauthorized: This operation is not allowed with a read-only token' },
  /** The path of an index created through the management API that no longer exists (deleted). */
  indexNotFound: { status: 404, message: 'Index not found: it was deleted' },
  endpointNotFound: { status: 404, message: (endpoint: string) => `Endpoint not found: /${endpoint}` },
  methodNotAllowed: { status: 405, message: (method: string) => `Method ${method} is not allowed; use GET, POST, PUT or DELETE` },
  namespaceEncoding: { status: 400, message: 'Invalid namespace: bad percent-encoding' },
  /** A body over 128 MB (`VECTOR_BODY_LIMIT`). */
  bodyTooLarge: { status: 413, message: 'Request body is too large' },
  invalidJson: { status: 400, message: (why: string) => `Invalid JSON body: ${why}` },
  jsonTooDeep: { status: 400, message: (max: number) => `Invalid JSON body: nested deeper than ${max} levels` },
  /** An unexpected failure (logged). */
  internal: { status: 500, message: 'Internal server error' },
  /** A connection past `SVC_HTTP_MAX_CONNECTIONS` (answered with `Retry-After` and closed). */
  tooManyConnections: { status: 503, message: 'Too many connections, retry shortly' },

  // --- request bodies
  requestArrayEmpty: { status: 400, message: (what: string) => `${what}: the request array is empty` },
  requestNotObjectOrArray: { status: 400, message: (what: string) => `${what}: expected a JSON object or an array of objects` },
  bodyNotObject: { status: 400, message: (what: string) => `${what}: expected a JSON object` },
  itemNotObject: field(': expected an object'),
  invalidId: field(' must be a non-empty string or a number'),
  invalidVector: field(' must be a non-empty array of numbers'),
  nonFiniteVector: field(' must contain only finite numbers'),
  invalidSparseVector: field(' must be an object with indices and values arrays'),
  sparseLengthMismatch: field(': indices and values must have the same length'),
  sparseTooLarge: { status: 400, message: (where: string, max: number, got: number) => `${where}: at most ${max} non-zero values are allowed, got ${got}` },
  invalidSparseIndex: field(': indices must be non-negative 32-bit integers'),
  invalidSparseValue: field(': values must be finite numbers'),
  invalidMetadata: field('.metadata must be a JSON object'),
  invalidData: field('.data must be a string'),
  upsertNeedsVector: field(': vector or sparseVector is required for /upsert (use /upsert-data for raw data)'),
  upsertDataNeedsData: field('.data is required for /upsert-data'),
  upsertDataNoVectors: field(': vectors are not allowed in /upsert-data'),
  notBoolean: { status: 400, message: (name: string) => `${name} must be a boolean` },
  filterNotString: { status: 400, message: 'filter must be a string' },
  /** A metadata filter that does not parse (the message names the position). */
  filterSyntax: { status: 400, message: (why: string) => why },
  invalidTopK: { status: 400, message: 'topK must be a non-negative integer' },
  /** `topK` (or a resumable query's `additionalK`) above `SVC_VECTOR_MAX_TOP_K`. */
  topKTooLarge: {
    status: 400,
    message: (name: string, got: number, max: number) =>
      `${name} ${got} is above the maximum of ${max} (SVC_VECTOR_MAX_TOP_K); ${name === 'topK' ? 'page through more results with a resumable query' : 'fetch more results in several batches'}`,
  },
  /** An array of queries longer than `SVC_VECTOR_MAX_BATCH_QUERIES`. */
  tooManyQueries: {
    status: 400,
    message: (got: number, max: number) => `query: ${got} queries in one request, at most ${max} are allowed (SVC_VECTOR_MAX_BATCH_QUERIES); send them in several requests`,
  },
  /** An array of queries whose `topK` add up to more than `SVC_VECTOR_MAX_BATCH_RESULTS`. */
  tooManyResults: {
    status: 400,
    message: (queries: number, got: number, max: number) =>
      `query: ${queries} queries ask for ${got} results in all, at most ${max} are allowed (SVC_VECTOR_MAX_BATCH_RESULTS); send them in several requests or lower topK`,
  },
  /** A `fetch` naming more ids than `SVC_VECTOR_MAX_FETCH_IDS`. */
  tooManyIds: {
    status: 400,
    message: (got: number, max: number) => `fetch: ${got} ids in one request, at most ${max} are allowed (SVC_VECTOR_MAX_FETCH_IDS); fetch them in several requests, or page with range`,
  },
  invalidWeightingStrategy: { status: 400, message: 'weightingStrategy must be IDF' },
  invalidFusion: { status: 400, message: 'fusionAlgorithm must be RRF or DBSF' },
  invalidQueryMode: { status: 400, message: 'queryMode must be HYBRID, DENSE or SPARSE' },
  dataNotString: { status: 400, message: 'data must be a string' },
  queryNeedsVector: { status: 400, message: 'vector or sparseVector is required (use /query-data for raw data)' },
  cursorType: { status: 400, message: 'invalid cursor: expected a string or a number' },
  invalidCursor: { status: 400, message: (value: string) => `invalid cursor: ${JSON.stringify(value)}` },
  invalidLimit: { status: 400, message: 'limit must be a non-negative integer' },
  /** `/fetch` with both ids and prefix (the hosted service's text). */
  fetchOneOf: { status: 400, message: 'Only one of ids or prefix must be provided.' },
  fetchNeedsIdsOrPrefix: { status: 400, message: 'Either ids or prefix must be provided.' },
  /** `/delete` without exactly one of ids, prefix, filter (the hosted service's text). */
  deleteOneOf: { status: 400, message: 'Only and only one of the ids, prefix, or filter must be provided.' },
  prefixNotString: { status: 400, message: 'prefix must be a string' },
  invalidUpdateMode: { status: 400, message: 'metadataUpdateMode must be PATCH or OVERWRITE' },
  metadataNotObject: { status: 400, message: 'metadata must be a JSON object' },
  renameNamesNotStrings: { status: 400, message: 'namespace and newNamespace must be strings' },
  deleteExistingNotBoolean: { status: 400, message: 'deleteExisting must be a boolean' },

  // --- the index
  /** A vector of another length than the index's dimension (the hosted service's text). */
  dimensionMismatch: { status: 422, message: (got: number, expected: number) => `Invalid vector dimension: ${got}, expected: ${expected}` },
  denseNeedsVector: field('vector is required for a DENSE index'),
  denseNoSparse: field('sparseVector is not allowed for a DENSE index'),
  sparseNeedsSparse: field('sparseVector is required for a SPARSE index'),
  sparseNoDense: field('vector is not allowed for a SPARSE index'),
  hybridNeedsBoth: field('both vector and sparseVector are required for a HYBRID index'),
  /** Raw data for an index without an embedding model (the hosted service's text). */
  noEmbedder: {
    status: 422,
    message: 'Embedding data for this index is not allowed. The index must be created with an embedding model to use it.',
  },
  /** An operation on a namespace that does not exist (the hosted service's text). */
  namespaceNotFound: { status: 404, message: (ns: string, index: string) => `Namespace ${ns} for the index ${index} does not exist` },
  defaultNamespaceDelete: { status: 400, message: 'The default namespace cannot be deleted' },
  defaultNamespaceRename: { status: 400, message: 'The default namespace cannot be renamed' },
  namespaceExists: { status: 400, message: (ns: string) => `Namespace ${ns} already exists` },
  /** A request that arrives while the index is closing. */
  indexClosing: { status: 500, message: 'index is closing' },
  /** A commit that failed for another reason than a full disk (logged). */
  commitFailed: { status: 500, message: 'commit failed' },
  /** The disk holding the index is full: nothing of the request was stored (with `Retry-After`). */
  diskFull: {
    status: 507,
    message: 'Insufficient storage: the disk holding the vector index is full; nothing of this request was stored, retry once space is freed',
  },

  /**
   * The shared PostgreSQL store (`SVC_VECTOR_DATABASE_URL`) cannot be reached or refused the
   * commit: nothing of the request was stored (with `Retry-After`).
   */
  databaseUnavailable: {
    status: 503,
    message: 'Service unavailable: the vector database (PostgreSQL) cannot be reached; nothing of this request was stored, retry shortly',
  },
  /**
   * A record's dense vector is not in this node's copy yet (a node that joined from a publication
   * without them fills them in the background) and the shared store cannot be reached to read it
   * (with `Retry-After`).
   */
  vectorsUnavailable: {
    status: 503,
    message: 'Service unavailable: a vector of this answer is still being copied from the vector database (PostgreSQL), which cannot be reached; retry shortly',
  },

  // --- resumable queries
  invalidMaxIdle: { status: 400, message: 'maxIdle must be a positive number of seconds' },
  tooManySessions: {
    status: 429,
    message: (max: number) =>
      `Too many active resumable queries for this index (max ${max}): end them with resumable-query-end or wait until they expire`,
  },
  uuidNotString: { status: 400, message: 'uuid must be a string' },
  resumableExpired: { status: 400, message: (uuid: string) => `Resumable query ${uuid} does not exist or has expired` },
  invalidAdditionalK: { status: 400, message: 'additionalK must be a non-negative integer' },

  // --- external embedders
  embeddingRequestFailed: embedding((why: string) => `Embedding request failed: ${why}`),
  embeddingStatus: embedding((status: number, text: string) => `Embedding endpoint answered ${status}: ${text}`),
  embeddingInvalidJson: embedding('Embedding endpoint answered with invalid JSON'),
  embeddingCount: embedding('Embedding endpoint answered without one embedding per input'),
  embeddingNotNumeric: embedding('Embedding endpoint answered a non-numeric embedding'),
} as const satisfies Record<string, CatalogueEntry>;

export type VectorErrorCode = keyof typeof VECTOR_ERRORS;

/** The arguments of the message builder of `C` (none for a fixed text). */
export type VectorMessageArgs<C extends VectorErrorCode> = MessageArgs<(typeof VECTOR_ERRORS)[C]>;

/** A catalogued vector failure: answered as `{error, status}` with HTTP `status`. */
export class VectorError extends CatalogueError<VectorErrorCode> {}

/**
 * Thrown by a reader of records' dense vectors (`query/records.ts`, `query/execute.ts`, an update
 * keeping its vector) that found some not filled yet (`engine/vector-index.ts` `fill`): the
 * records of namespace id `ns` at `positions`. `http/routes.ts` reads them from the shared store
 * and runs the request again; escaping, it is answered as `vectorsUnavailable` (503).
 */
export class VectorsMissing extends VectorError {
  constructor(
    readonly ns: number,
    readonly positions: number[],
  ) {
    super('vectorsUnavailable', VECTOR_ERRORS.vectorsUnavailable.status, VECTOR_ERRORS.vectorsUnavailable.message);
  }
}

/** `vectorMessage(code, ...args)`: the text of entry `code`; `vectorError(code, ...args)`: the entry as a {@link VectorError}. */
export const { message: vectorMessage, error: vectorError } = catalogue(VECTOR_ERRORS, (code, status, message) => new VectorError(code, status, message));

/** The wire body of an error: `{"error": message, "status": status}`. */
export function errorBody(status: number, message: string): string {
  return JSON.stringify({ error: message, status });
}

/** Seconds a client is asked to wait (`Retry-After`) after a disk-full answer. */
export const DISK_FULL_RETRY_AFTER_S = 30;
/** Seconds a client is asked to wait (`Retry-After`) after a 503 (the shared database is unavailable). */
export const UNAVAILABLE_RETRY_AFTER_S = 1;

/** `Retry-After` seconds of an answer with `status` (507, 503), or undefined. */
export function retryAfter(status: number): number | undefined {
  return status === 507 ? DISK_FULL_RETRY_AFTER_S : status === 503 ? UNAVAILABLE_RETRY_AFTER_S : undefined;
}
