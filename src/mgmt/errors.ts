/**
 * The management API's error catalogue: every error it answers, once, with its
 * status and exact body. Bodies are `{error: string}` (spec "Errors": the queue/kv shape; the
 * management endpoint's own error format is "not shown" in the spec, so svc uses the same one).
 * `docs/readme/mgmt.md` ("Errors") lists every entry; `test/errors-docs.test.ts` keeps the two in step.
 */
import type { FastifyReply } from 'fastify';

/** The Basic challenge sent with the management API's 401s (RFC 7617). */
const BASIC_CHALLENGE = 'Basic realm="svc", charset="UTF-8"';

/** The Bearer challenge sent with a refused `GET /metrics` (RFC 6750). */
const METRICS_CHALLENGE = 'Bearer realm="svc metrics"';

export const MGMT_ERRORS = {
  /** No `Authorization` header (or an empty one). */
  missingCredentials: {
    status: 401,
    error: 'Unauthorized: Basic credentials required (Authorization: Basic base64(user:password))',
    challenge: BASIC_CHALLENGE,
  },
  /** A header that is not `Basic <base64(user:password)>`, or a wrong user or password. */
  invalidCredentials: { status: 401, error: 'Unauthorized: invalid user or password', challenge: BASIC_CHALLENGE },
  /** `GET /metrics` without `Authorization: Bearer <SVC_METRICS_TOKEN>` when that token is set. */
  metricsUnauthorized: { status: 401, error: 'missing or wrong bearer token (SVC_METRICS_TOKEN)', challenge: METRICS_CHALLENGE },
  /** Too many failed attempts from the client's address in the current window. */
  tooManyFailures: { status: 429, error: 'Too many failed authentication attempts from this address; retry later' },
  /** `POST /v2/credentials/vector/{index}/rotate` for an index without tokens in the store. */
  unknownVectorIndex: { status: 404, error: 'vector index not found' },
  /**
   * A rotation in effect on this node that could not be written to the database the nodes share
   * yet (the queue's PostgreSQL store unreachable); written when it is back. Sent with `Retry-After`.
   */
  notShared: { status: 503, error: 'the new credential is in effect on this node but the shared database is unreachable; it is written there when the database is back' },
  /** Any route that does not exist. */
  notFound: { status: 404, error: 'Not Found' },
  /** A request body over the management API's 64 KiB limit (Fastify's text). */
  bodyTooLarge: { status: 413, error: 'Request body is too large' },
  /** An unexpected failure (details are logged, not returned). */
  internal: { status: 500, error: 'Internal Server Error' },
} as const satisfies Record<string, { status: number; error: string; challenge?: string }>;

export type MgmtErrorName = keyof typeof MGMT_ERRORS;

/**
 * Sends catalogue error `name` (optionally with a more specific message) as JSON, with its
 * `WWW-Authenticate` challenge when it has one.
 */
export function sendError(reply: FastifyReply, name: MgmtErrorName, message?: string): FastifyReply {
  const e: { status: number; error: string; challenge?: string } = MGMT_ERRORS[name];
  if (e.challenge !== undefined) reply.header('WWW-Authenticate', e.challenge);
  if (e.status === 503) reply.header('Retry-After', '5');
  return reply.code(e.status).type('application/json; charset=utf-8').send({ error: message ?? e.error });
}
