/**
 * The web console, served by the management area under `/console/` (`SVC_CONSOLE`, default on).
 * Browser code: `public/` (Preact + htm, no build step; see this folder's README.md).
 *
 *   GET  /console/                      the page (also /console and /console/index.html)
 *   GET  /console/app/<file>            the console's own scripts and styles
 *   GET  /console/vendor/<file>         Preact, htm, uPlot (from their npm packages)
 *   POST /console/api/login             {user, password} -> 200 {user, csrf, readonly, expiresAt} + session cookie;
 *                                       401 wrong; 429 + Retry-After past the mgmt brute-force brake
 *   POST /console/api/logout            ends the session, clears the cookie (CSRF token required)
 *   GET  /console/api/session           {signedIn: true, user, csrf, readonly, expiresAt, areas, vectorIndexes} or {signedIn: false}
 *   GET  /console/api/overview          {health, samples, queue, backup}: the overview page's data (queue: the last sample's
 *                                       counters; backup: {running, last} of this process's backups, `src/backup.ts`)
 *   ANY  /console/api/{queue,kv,vector}/... forwarded to that area's public HTTP API (`proxy.ts`)
 *
 * Every `/console/api/*` route but login needs a live session cookie (401 `{error}` otherwise);
 * every method but GET/HEAD also needs the session's CSRF token in `X-CSRF-Token` (403) and, when
 * the browser sends `Origin`, an origin equal to the request's own host (403). Pages are sent with
 * a strict Content-Security-Policy (scripts only from this origin, no inline script), so even a
 * rendering bug cannot run a script that stored data smuggles in.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { AreaContext } from '../../area.js';
import { isMgmtAccount, type AuthBrake } from '../auth.js';
import { loadAssets } from './assets.js';
import { MgmtError, sendCaught, sendError, type MgmtErrorCode, type MgmtMessageArgs } from '../errors.js';
import { forward, PROXIED_AREAS, proxyTarget, vectorIndexes, type ProxiedArea } from './proxy.js';
import { OverviewSampler } from './sampler.js';
import { readCookie, SESSION_COOKIE, sessionCookie, SessionStore, type Session } from './session.js';

/** Largest request body the console forwards, in bytes (kv values, vector batches). */
export const CONSOLE_BODY_LIMIT = 10 * 1024 * 1024;

const CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self' 'unsafe-inline'",
  "img-src 'self' data:",
  "connect-src 'self'",
  "font-src 'self'",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'",
].join('; ');

function securityHeaders(reply: FastifyReply): FastifyReply {
  return reply
    .header('Content-Security-Policy', CSP)
    .header('X-Content-Type-Options', 'nosniff')
    .header('X-Frame-Options', 'DENY')
    .header('Referrer-Policy', 'no-referrer');
}

/** The console's security headers on an error answer, which is never cached. */
function errorHeaders(reply: FastifyReply): FastifyReply {
  return securityHeaders(reply).header('Cache-Control', 'no-store');
}

/** Sends catalogue error `code` (`../errors.ts`) with {@link errorHeaders}. */
function consoleError<C extends MgmtErrorCode>(reply: FastifyReply, code: C, ...args: MgmtMessageArgs<C>): FastifyReply {
  return sendError(errorHeaders(reply), code, ...args);
}

const SAFE_METHODS = new Set(['GET', 'HEAD']);

/** True when the request's `Origin` (if any) is this server's own origin. */
function sameOrigin(req: FastifyRequest): boolean {
  const origin = req.headers.origin;
  if (origin === undefined) return true;
  try {
    return new URL(origin).host === req.headers.host;
  } catch {
    return false;
  }
}

export interface Console {
  sampler: OverviewSampler;
  sessions: SessionStore;
  close(): Promise<void>;
}

/** Registers every console route on the management app; `brake` is the Basic auth brake. */
export function registerConsole(app: FastifyInstance, ctx: AreaContext, brake: AuthBrake): Console {
  const assets = loadAssets();
  const sessions = new SessionStore();
  const sampler = new OverviewSampler(ctx, () => sessions.anyLive());
  const readonly = ctx.config.mgmt.consoleReadonly;

  const sendAsset = (reply: FastifyReply, key: string) => {
    const a = assets.get(key);
    if (!a) return consoleError(reply, 'notFound');
    const cache = key.startsWith('vendor/') ? 'public, max-age=86400' : 'no-cache';
    return securityHeaders(reply).header('Cache-Control', cache).type(a.type).send(a.body);
  };
  app.get('/console', (_req, reply) => reply.redirect('/console/', 302));
  app.get('/console/', (_req, reply) => sendAsset(reply, 'app/index.html'));
  app.get('/console/index.html', (_req, reply) => sendAsset(reply, 'app/index.html'));
  app.get<{ Params: { '*': string } }>('/console/app/*', (req, reply) => sendAsset(reply, `app/${req.params['*']}`));
  app.get<{ Params: { '*': string } }>('/console/vendor/*', (req, reply) => sendAsset(reply, `vendor/${req.params['*']}`));

  const sessionInfo = (s: Session) => ({
    user: s.user,
    csrf: s.csrf,
    readonly,
    expiresAt: s.expiresAt,
    areas: [...ctx.urls.keys()],
    vectorIndexes: ctx.urls.has('vector') ? vectorIndexes(ctx) : [],
  });

  /** The request's session, or an answer (401/403) already sent and undefined returned. */
  const guard = (req: FastifyRequest, reply: FastifyReply): Session | undefined => {
    const session = sessions.get(readCookie(req.headers.cookie, SESSION_COOKIE));
    if (!session) {
      consoleError(reply, 'consoleNotSignedIn');
      return undefined;
    }
    if (!SAFE_METHODS.has(req.method)) {
      if (!sameOrigin(req)) {
        consoleError(reply, 'crossOrigin');
        return undefined;
      }
      if (!SessionStore.csrfMatches(session, req.headers['x-csrf-token'])) {
        consoleError(reply, 'csrfMismatch');
        return undefined;
      }
    }
    return session;
  };

  app.post('/console/api/login', async (req, reply) => {
    if (!sameOrigin(req)) return consoleError(reply, 'crossOrigin');
    const wait = await brake.blockedFor(req);
    if (wait !== undefined) {
      reply.header('Retry-After', String(wait));
      return consoleError(reply, 'consoleTooManyFailures', wait);
    }
    let given: { user?: unknown; password?: unknown } = {};
    try {
      given = JSON.parse((req.body as Buffer | undefined)?.toString('utf8') ?? '{}') ?? {};
    } catch {
      /* treated as empty credentials */
    }
    const user = typeof given.user === 'string' ? given.user : '';
    const password = typeof given.password === 'string' ? given.password : '';
    if (!user || !isMgmtAccount(ctx.credentials, user, password)) {
      if (user || password) await brake.fail(req);
      return consoleError(reply, 'consoleWrongPassword');
    }
    const { id, session } = sessions.create(user);
    ctx.logger.info({ user }, 'console: signed in');
    return securityHeaders(reply)
      .header('Set-Cookie', sessionCookie(id, session.expiresAt - Date.now()))
      .header('Cache-Control', 'no-store')
      .send(sessionInfo(session));
  });

  app.post('/console/api/logout', async (req, reply) => {
    if (!guard(req, reply)) return reply;
    sessions.delete(readCookie(req.headers.cookie, SESSION_COOKIE));
    return securityHeaders(reply).header('Set-Cookie', sessionCookie('', 0)).header('Cache-Control', 'no-store').send({ ok: true });
  });

  // 200 either way: the page asks on load whether it is signed in (a 401 would be logged as an error)
  app.get('/console/api/session', async (req, reply) => {
    const s = sessions.get(readCookie(req.headers.cookie, SESSION_COOKIE));
    return securityHeaders(reply).header('Cache-Control', 'no-store').send(s ? { signedIn: true, ...sessionInfo(s) } : { signedIn: false });
  });

  app.get('/console/api/overview', async (req, reply) => {
    if (!guard(req, reply)) return reply;
    const [health, queue] = await Promise.all([sampler.health(), sampler.recentQueueStats()]);
    const backup = ctx.backups ? { running: ctx.backups.busy, last: ctx.backups.last ?? null } : null;
    return securityHeaders(reply).header('Cache-Control', 'no-store').send({ health, queue: queue ?? null, backup, samples: sampler.series(), intervalMs: 10_000 });
  });

  for (const area of PROXIED_AREAS) {
    app.route<{ Params: { '*': string } }>({
      method: ['GET', 'POST', 'PUT', 'PATCH', 'DELETE'],
      url: `/console/api/${area}/*`,
      bodyLimit: CONSOLE_BODY_LIMIT,
      handler: async (req, reply) => {
        if (!guard(req, reply)) return reply;
        const raw = req.raw.url ?? '';
        const rest = raw.slice(raw.indexOf(`/console/api/${area}/`) + `/console/api/${area}/`.length);
        try {
          const target = proxyTarget(ctx, area as ProxiedArea, rest, req.method);
          const r = await forward(target, req.method, req.headers, req.body as Buffer | undefined);
          return securityHeaders(reply).code(r.status).header('Cache-Control', 'no-store').type(r.contentType).send(r.body);
        } catch (err) {
          if (err instanceof MgmtError) return sendCaught(errorHeaders(reply), err);
          throw err;
        }
      },
    });
  }

  // anything else under /console: a plain 404 (not the management API's Basic challenge, which
  // would make the browser show its own sign-in dialog)
  app.all('/console/*', (_req, reply) => consoleError(reply, 'notFound'));

  sampler.start();
  return { sampler, sessions, close: () => sampler.stop() };
}
