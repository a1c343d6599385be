/**
 * The shared Fastify factory: one instance per area port, with the project's defaults. Each area
 * registers its own content-type parsers, auth hook and error handler on it (the four
 * wire formats differ; no global error handler guesses).
 */
import Fastify, { LogController, type FastifyError, type FastifyInstance, type FastifyReply } from 'fastify';
import type { Logger } from '../logger.js';
import { baseUrl } from './raw.js';

export interface HttpServerOptions {
  logger: Logger;
  /** Maximum body size in bytes (Fastify answers 413 past it unless the area handles it). */
  bodyLimit: number;
  /**
   * The area's error body for errors Fastify answers before any route or error handler runs (a
   * malformed percent-escape in the path: 400, `FST_ERR_BAD_URL`), e.g. `(m) => ({ error: m })`.
   * Default: Fastify's own `{statusCode, code, error, message}`.
   */
  errorBody?: (message: string) => unknown;
}

/** A Fastify instance with svc's defaults (no request logging at info level, trusted proxy off). */
export function createHttpServer(opts: HttpServerOptions): FastifyInstance {
  return Fastify({
    loggerInstance: opts.logger,
    logController: new LogController({ disableRequestLogging: true }),
    bodyLimit: opts.bodyLimit,
    keepAliveTimeout: 72_000,
    forceCloseConnections: true,
    // Keep `//` and percent-encoding as sent: the queue puts raw URLs in the path.
    routerOptions: { ignoreDuplicateSlashes: false, ignoreTrailingSlash: false, maxParamLength: 100_000 },
    ...(opts.errorBody
      ? { frameworkErrors: (err: FastifyError, _req: unknown, reply: FastifyReply) => void reply.code(err.statusCode ?? 400).send(opts.errorBody!(err.message)) }
      : {}),
  }) as unknown as FastifyInstance;
}

/** Listens on `host:port` (0 = a free port) and returns the base URL, e.g. `http://127.0.0.1:8079`. */
export async function listenOn(app: FastifyInstance, host: string, port: number): Promise<string> {
  await app.listen({ host, port });
  const addr = app.server.address();
  const actual = typeof addr === 'object' && addr ? addr.port : port;
  return baseUrl(host, actual);
}
