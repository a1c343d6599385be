/**
 * The vector area's error catalogue: every error the wire can
 * carry, with its HTTP status. The body is always `{"error": message, "status": status}`.
 */

/** An error answered to the client as `{error, status}` with HTTP `status`. */
export class VectorError extends Error {
  constructor(readonly status: 400 | 401 | 403 | 404 | 405 | 413 | 422 | 429 | 500 | 503 | 507, message: string) {
    super(message);
    this.name = 'VectorError';
  }
}

/** Exact strings the hosted service answers and the JS SDK tests expect. */
export const MESSAGES = {
  unauthorized: 'Unauthorized: Invalid auth token',
  readonly: 'Unauthorized: This operation is not allowed with a read-only token',
  deleteOneOf: 'Only and only one of the ids, prefix, or filter must be provided.',
  fetchOneOf: 'Only one of ids or prefix must be provided.',
  noEmbedder:
    'Embedding data for this index is not allowed. The index must be created with an embedding model to use it.',
  dimension: (got: number, expected: number) => `Invalid vector dimension: ${got}, expected: ${expected}`,
  namespaceMissing: (ns: string, index: string) => `Namespace ${ns} for the index ${index} does not exist`,
} as const;

export const badRequest = (msg: string) => new VectorError(400, msg);
export const unprocessable = (msg: string) => new VectorError(422, msg);

/** Seconds a client is asked to wait (`Retry-After`) after a disk-full answer. */
export const DISK_FULL_RETRY_AFTER_S = 30;

/** The answer to a write that failed because the disk is full: 507, nothing of it stored. */
export const diskFull = () =>
  new VectorError(507, 'Insufficient storage: the disk holding the vector index is full; nothing of this request was stored, retry once space is freed');
