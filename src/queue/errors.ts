/**
 * The queue area's error catalogue: every error the API answers with, its status,
 * and the wire body `{"error": "<message>"}` (OpenAPI `Error`).
 */

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
