/**
 * The web console, served by the management area under `/console/` (`SVC_CONSOLE`, default on).
 * Browser code: `public/` (Preact + htm, no build step; see this folder's README.md).
 *
 *   GET  /console/                      the page (also /console and /console/index.html)
 *   GET  /console/app/<file>            the console's own scripts and styles
 *   GET  /console/vendor/<file>         Preact, htm, uPlot (from their npm packages)
 *   POST /console/api/login             {user, password} -> 200 {user, csrf, readonly, expiresAt} + session cookie;
 *                                       401 wrong; 429 + Retry-After past the mgmt brute-force brake
 *   POST /console/api/logout            ends the session, clears the cookie
 *   GET  /console/api/session           {signedIn: true, user, csrf, readonly, expiresAt, areas, vectorIndexes} or {signedIn: false}
 *   GET  /console/api/overview          {health, samples, queue, backup}: the overview page's data (queue: the last sample's
 *                                       counters; backup: {running, last} of this process's backups, `src/backup.ts`)
 *   *    /console/api/vector-indexes[/...] the management API's vector index routes (`../vector-indexes.ts`);
 *                                       changes refused (403 consoleReadonly) in a read-only console
 *   ANY  /console/api/{queue,kv,vector}/... forwarded to that area's public HTTP API (`proxy.ts`);
 *                                       event streams relayed as they come (`stream.ts`)
 *
 * Access is decided in an `onRequest` hook, from the headers alone, before any body is read (an
 * unauthenticated client can make svc hold nothing but its headers): every `/console/api/*` route
 * but `login` and `session` needs a live session cookie (401), an `Origin` (when sent) equal to the
 * request's own host and a `Sec-Fetch-Site` (when sent) of `same-origin` (403), and the session's
 * CSRF token (403) — in `X-CSRF-Token`, or for a GET in the query parameter `csrf` (an
 * `EventSource` cannot set headers) — whatever the method: the kv REST API runs commands from a GET
 * path (`/set/k/v`), so a method says nothing about what a call changes. Refusals close the
 * connection. `login` checks the origin and the brute-force brake before its (4 KiB at most) body.
 * Pages are sent with a strict Content-Security-Policy (scripts only from this origin, no inline
 * script), so even a rendering bug cannot run a script that stored data smuggles in.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { AreaContext } from '../../area.js';
import { queryParam } from '../../http/raw.js';
import { closing, isMgmtAccount, type AuthBrake } from '../auth.js';
import { loadAssets } from './assets.js';
import { MgmtError, sendCaught, sendError, type MgmtErrorCode, type MgmtMessageArgs } from '../errors.js';
import { open, PROXIED_AREAS, proxyTarget, vectorIndexes, type ProxiedArea } from './proxy.js';
import { OverviewSampler } from './sampler.js';
import { readCookie, SESSION_COOKIE, sessionCookie, SessionStore, type Session } from './session.js';
import { relayStream } from './stream.js';
import { registerVectorIndexRoutes } from '../vector-indexes.js';

/** Largest request body the console forwards, in bytes (kv values, vector batches); read only once the call is admitted. */
export const CONSOLE_BODY_LIMIT = 10 * 1024 * 1024;
/** Largest sign-in body in bytes (`{"user", "password"}`). */
export const LOGIN_BODY_LIMIT = 4 * 1024;
/** Body limit in bytes of the console routes that take none (logout; bodies are ignored). */
const NO_BODY_LIMIT = 1024;

/** The query parameter that may carry the CSRF token of a GET (for `EventSource`); not forwarded. */
export const CSRF_QUERY_PARAM = 'csrf';

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

const SECURITY_HEADERS: Readonly<Record<string, string>> = {
  'content-security-policy': CSP,
  'x-content-type-options': 'nosniff',
  'x-frame-options': 'DENY',
  'referrer-policy': 'no-referrer',
};

function securityHeaders(reply: FastifyReply): FastifyReply {
  return reply.headers(SECURITY_HEADERS);
}

/** The console's security headers on an error answer, which is never cached. */
function errorHeaders(reply: FastifyReply): FastifyReply {
  return securityHeaders(reply).header('Cache-Control', 'no-store');
}

/** Sends catalogue error `code` (`../errors.ts`) with {@link errorHeaders}. */
function consoleError<C extends MgmtErrorCode>(reply: FastifyReply, code: C, ...args: MgmtMessageArgs<C>): FastifyReply {
  return sendError(errorHeaders(reply), code, ...args);
}

/** {@link consoleError} for a call refused before its body was read: the connection is closed after the answer. */
function refuse<C extends MgmtErrorCode>(reply: FastifyReply, code: C, ...args: MgmtMessageArgs<C>): FastifyReply {
  return consoleError(closing(reply), code, ...args);
}

/**
 * True when the request comes from this server's own origin as far as the browser says: its
 * `Origin` (if any) has the request's own host, and its `Sec-Fetch-Site` (if any; Fetch Metadata)
 * is `same-origin` or `none` (typed in the address bar). Another port of the same host is
 * "same-site" for cookies (`SameSite=Strict` does not stop it) but not same-origin here.
 */
function sameOrigin(req: FastifyRequest): boolean {
  const site = req.headers['sec-fetch-site'];
  if (site !== undefined && site !== 'same-origin' && site !== 'none') return false;
  const origin = req.headers.origin;
  if (origin === undefined) return true;
  try {
    return new URL(origin).host === req.headers.host;
  } catch {
    return false;
  }
}

/** The CSRF token a request presents: `X-CSRF-Token`, else (GET/HEAD only) the `csrf` query parameter. */
function presentedCsrf(req: FastifyRequest): string | undefined {
  const h = req.headers['x-csrf-token'];
  if (typeof h === 'string') return h;
  if (req.method !== 'GET' && req.method !== 'HEAD') return undefined;
  const url = req.raw.url ?? '';
  const q = url.indexOf('?');
  return q < 0 ? undefined : queryParam(url.slice(q + 1), CSRF_QUERY_PARAM);
}

/** `rest` (a path with its query string) without the `csrf` query parameter. */
function withoutCsrfParam(rest: string): string {
  const q = rest.indexOf('?');
  if (q < 0) return rest;
  const kept = rest
    .slice(q + 1)
    .split('&')
    .filter((p) => p !== CSRF_QUERY_PARAM && !p.startsWith(`${CSRF_QUERY_PARAM}=`));
  return kept.length ? `${rest.slice(0, q)}?${kept.join('&')}` : rest.slice(0, q);
}

export interface Console {
  sampler: OverviewSampler;
  sessions: SessionStore;
  close(): Promise<void>;
}

/** The catch-all route of unknown console paths. */
const CATCH_ALL = '/console/*';

/** Registers every console route on the management app; `brake` is the Basic auth brake. */
export function registerConsole(app: FastifyInstance, ctx: AreaContext, brake: AuthBrake): Console {
  const assets = loadAssets();
  const sessions = new SessionStore();
  const sampler = new OverviewSampler(ctx, () => sessions.anyLive());
  const readonly = ctx.config.mgmt.consoleReadonly;
  const kvCfg = ctx.config.kv;
  const streamLimit = {
    hardBytes: kvCfg.sseHardLimitBytes,
    softBytes: kvCfg.sseSoftLimitBytes,
    softMs: kvCfg.sseSoftLimitMs,
    onExceeded: (limit: 'hard' | 'soft', unsent: number) =>
      ctx.logger.warn({ limit, unsent }, 'console: event stream closed: the browser does not read fast enough (output limit)'),
  };
  const sessionOf = (req: FastifyRequest): Session | undefined => sessions.get(readCookie(req.headers.cookie, SESSION_COOKIE));

  // Admission from the headers, before Fastify reads a body (it does so after onRequest hooks).
  app.addHook('onRequest', async (req, reply) => {
    const url = req.routeOptions.url;
    if (url === undefined || !url.startsWith('/console')) return;
    if (url === CATCH_ALL) return refuse(reply, 'notFound');
    // pages and assets are public; the session probe answers {signedIn: false} without a session
    if (!url.startsWith('/console/api/') || url === '/console/api/session') return;
    if (url === '/console/api/login') {
      if (!sameOrigin(req)) return refuse(reply, 'crossOrigin');
      const wait = await brake.blockedFor(req);
      if (wait === undefined) return;
      reply.header('Retry-After', String(wait));
      return refuse(reply, 'consoleTooManyFailures', wait);
    }
    const session = sessionOf(req);
    if (!session) return refuse(reply, 'consoleNotSignedIn');
    if (!sameOrigin(req)) return refuse(reply, 'crossOrigin');
    if (!SessionStore.csrfMatches(session, presentedCsrf(req))) return refuse(reply, 'csrfMismatch');
  });

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

  app.post('/console/api/login', { bodyLimit: LOGIN_BODY_LIMIT }, async (req, reply) => {
    let given: { user?: unknown; password?: unknown } = {};
    try {
      given = JSON.parse((req.body as Buffer | undefined)?.toString('utf8') ?? '{}') ?? {};
    } catch {
      /* treated as empty credentials */
    }
    const user = typeof given.user === 'string' ? given.user : '';
    const password = typeof given.password === 'string' ? given.password : '';
    const wait = await brake.blockedFor(req, user);
    if (wait !== undefined) {
      reply.header('Retry-After', String(wait));
      return consoleError(reply, 'accountTooManyFailures');
    }
    if (!user || !isMgmtAccount(ctx.credentials, user, password)) {
      if (user || password) await brake.fail(req, user);
      return consoleError(reply, 'consoleWrongPassword');
    }
    const { id, session } = sessions.create(user);
    ctx.logger.info({ user }, 'console: signed in');
    return securityHeaders(reply)
      .header('Set-Cookie', sessionCookie(id, session.expiresAt - Date.now()))
      .header('Cache-Control', 'no-store')
      .send(sessionInfo(session));
  });

  app.post('/console/api/logout', { bodyLimit: NO_BODY_LIMIT }, async (req, reply) => {
    sessions.delete(readCookie(req.headers.cookie, SESSION_COOKIE));
    return securityHeaders(reply).header('Set-Cookie', sessionCookie('', 0)).header('Cache-Control', 'no-store').send({ ok: true });
  });

  // 200 either way: the page asks on load whether it is signed in (a 401 would be logged as an error)
  app.get('/console/api/session', async (req, reply) => {
    const s = sessionOf(req);
    return securityHeaders(reply).header('Cache-Control', 'no-store').send(s ? { signedIn: true, ...sessionInfo(s) } : { signedIn: false });
  });

  app.get('/console/api/overview', async (_req, reply) => {
    const [health, queue] = await Promise.all([sampler.health(), sampler.recentQueueStats()]);
    const backup = ctx.backups ? { running: ctx.backups.busy, last: ctx.backups.last ?? null } : null;
    return securityHeaders(reply).header('Cache-Control', 'no-store').send({ health, queue: queue ?? null, backup, samples: sampler.series(), intervalMs: 10_000 });
  });

  // the Vector page's index management: the management API's routes behind the console's session
  registerVectorIndexRoutes(app, ctx, { prefix: '/console/api/vector-indexes', readonly, decorate: securityHeaders });

  for (const area of PROXIED_AREAS) {
    app.route<{ Params: { '*': string } }>({
      method: ['GET', 'POST', 'PUT', 'PATCH', 'DELETE'],
      url: `/console/api/${area}/*`,
      bodyLimit: CONSOLE_BODY_LIMIT,
      handler: async (req, reply) => {
        const raw = req.raw.url ?? '';
        const rest = withoutCsrfParam(raw.slice(raw.indexOf(`/console/api/${area}/`) + `/console/api/${area}/`.length));
        try {
          const body = req.body as Buffer | undefined;
          const r = await open(proxyTarget(ctx, area as ProxiedArea, rest, req.method, body), req.method, req.headers, body);
          if (r.contentType.startsWith('text/event-stream')) {
            reply.hijack();
            reply.raw.writeHead(r.status, { ...SECURITY_HEADERS, 'content-type': r.contentType, 'cache-control': 'no-store', 'x-accel-buffering': 'no' });
            reply.raw.flushHeaders();
            relayStream(r.body, reply.raw, streamLimit);
            return reply;
          }
          return securityHeaders(reply).code(r.status).header('Cache-Control', 'no-store').type(r.contentType).send(r.body);
        } catch (err) {
          if (err instanceof MgmtError) return sendCaught(errorHeaders(reply), err);
          throw err;
        }
      },
    });
  }

  // anything else under /console: a plain 404 (not the management API's Basic challenge, which
  // would make the browser show its own sign-in dialog); answered by the onRequest hook
  app.all(CATCH_ALL, { bodyLimit: NO_BODY_LIMIT }, (_req, reply) => consoleError(reply, 'notFound'));

  sampler.start();
  return { sampler, sessions, close: () => sampler.stop() };
}
