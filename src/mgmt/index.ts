/**
 * Area D, the management API (spec "Get sender IPv4 blocks", "Authentication"): sender
 * IPv4 blocks, credential rotation for the other areas, and health. One Fastify instance on
 * `SVC_MGMT_PORT` (default 8077); routes in `routes.ts`, Basic auth in `auth.ts`.
 */
import type { FastifyError, FastifyInstance } from 'fastify';
import type { AreaContext, AreaModule, AreaServer } from '../area.js';
import { meterFastify } from '../http/metrics.js';
import { createHttpServer, listenOn } from '../http/server.js';
import { createBrake, mgmtPassword, mgmtUser, registerBasicAuth } from './auth.js';
import { sendError } from './errors.js';
import { registerConsole, type Console } from './console/index.js';
import { PUBLIC_ROUTES, registerRoutes } from './routes.js';

/** Failed authentication attempts allowed per client address per window, then 429. */
export const MAX_AUTH_FAILURES = 10;
/** Failed sign-ins as the management user allowed per window from all addresses together, then 429 for sign-ins as it. */
export const MAX_ACCOUNT_FAILURES = 30;
/** Wrong `GET /metrics` bearer tokens allowed per client address per window, then 429. */
export const MAX_METRICS_FAILURES = 10;
/** The failure-count window in ms (from an address's, or the account's, first failure). */
export const AUTH_FAILURE_WINDOW_MS = 60_000;
/** Request body limit in bytes: only `POST /v2/backup` reads one (`{"dir": ...}`); the console's forwarding has its own limit. */
const BODY_LIMIT = 64 * 1024;

/**
 * Builds the management server: JSON `{error}` for every failure (including 404 and body
 * errors), Basic auth on every route but the health checks and the web console (which has its own
 * sign-in, `console/`). Request bodies are accepted with any content type (or none) as raw bytes;
 * the management API routes ignore them (except `POST /v2/backup`, which parses its JSON itself),
 * so `curl -X POST` and clients that send `{}` both work.
 */
async function buildApp(ctx: AreaContext): Promise<{ app: FastifyInstance; console?: Console }> {
  const app = createHttpServer({ logger: ctx.logger, bodyLimit: BODY_LIMIT });
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', { parseAs: 'buffer' }, (_req, body, done) => done(null, body));
  app.setErrorHandler((err: FastifyError, req, reply) => {
    const status = typeof err.statusCode === 'number' && err.statusCode >= 400 ? err.statusCode : 500;
    if (status >= 500) {
      req.log.error({ err }, 'management API: request failed');
      return sendError(reply, 'internal');
    }
    if (err.code === 'FST_ERR_CTP_BODY_TOO_LARGE') return sendError(reply, 'bodyTooLarge');
    return reply.code(status).type('application/json; charset=utf-8').send({ error: err.message });
  });
  app.setNotFoundHandler((_req, reply) => sendError(reply, 'notFound'));
  meterFastify(app, ctx.metrics.httpMeter('mgmt'));
  const signInFailures = ctx.metrics.counter('svc_mgmt_sign_in_failures_total', 'Refused management sign-ins: wrong credentials (invalid) or refused while locked out after too many (locked_out)', ['reason']);
  const failed = { invalid: signInFailures.labels('invalid'), locked_out: signInFailures.labels('locked_out') };
  const consoleOn = ctx.config.mgmt.console;
  const brake = await registerBasicAuth(app, {
    credentials: ctx.credentials,
    maxFailures: MAX_AUTH_FAILURES,
    maxAccountFailures: MAX_ACCOUNT_FAILURES,
    windowMs: AUTH_FAILURE_WINDOW_MS,
    isPublic: (req) => {
      const url = req.routeOptions.url ?? '';
      return PUBLIC_ROUTES.has(url) || (consoleOn && (url === '/console' || url.startsWith('/console/')));
    },
    onFailure: (reason) => failed[reason].inc(),
  });
  registerRoutes(app, ctx, createBrake(app, MAX_METRICS_FAILURES, AUTH_FAILURE_WINDOW_MS));
  return { app, console: consoleOn ? registerConsole(app, ctx, brake) : undefined };
}

/** The management area for `main.ts` (`SVC_AREAS` name `mgmt`). */
export const mgmtArea: AreaModule = {
  name: 'mgmt',

  async create(ctx: AreaContext): Promise<AreaServer> {
    // Create the account before listening so it is printed and persisted on first start.
    mgmtUser(ctx.credentials);
    mgmtPassword(ctx.credentials);
    const { app, console: web } = await buildApp(ctx);
    let listening = false;
    let closing: Promise<void> | undefined;
    return {
      async listen() {
        const url = await listenOn(app, ctx.config.mgmtHost, ctx.config.ports.mgmt);
        listening = true;
        return url;
      },
      close() {
        return (closing ??= (async () => {
          listening = false;
          await web?.close();
          await app.close();
        })());
      },
      ready: () => listening,
    };
  },

  env(ctx, url) {
    return {
      SVC_MGMT_URL: url,
      SVC_MGMT_USER: mgmtUser(ctx.credentials),
      SVC_MGMT_PASSWORD: mgmtPassword(ctx.credentials),
    };
  },

  banner(ctx, url) {
    return [
      `sender blocks: GET ${url}/v2/mq/ipv4 (Basic auth, user ${mgmtUser(ctx.credentials)})`,
      `health:        GET ${url}/v2/health (no auth)`,
      ...(ctx.config.mgmt.console ? [`web console:   ${url}/console/ (sign in as ${mgmtUser(ctx.credentials)}${ctx.config.mgmt.consoleReadonly ? ', read-only' : ''})`] : []),
    ];
  },
};
