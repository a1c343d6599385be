/**
 * HTTP Basic authentication of the management API (spec "Authentication": `Authorization: Basic
 * <base64(username:password)>`; RFC 7617), with limits on failed attempts per address and per account.
 *
 * - The expected user and password are the credentials `mgmt.user` and `mgmt.password`
 *   (`SVC_MGMT_USER` / `SVC_MGMT_PASSWORD`, else generated once and kept in credentials.json),
 *   read from the store on every request. User and password are both compared, each in constant
 *   time (`constantTimeEqual`), so timing reveals neither which one was wrong nor a prefix.
 * - 401 with `WWW-Authenticate: Basic realm="svc"` and `{error}` when credentials are missing,
 *   malformed or wrong.
 * - Brute-force brake (`@fastify/rate-limit`, in-memory LRU keyed by client address): every
 *   presented-but-wrong credential (malformed or mismatching; a request with no `Authorization`
 *   header is not a guess and is not counted) counts one failure. Once an address has
 *   `maxFailures` failures in the current window of `windowMs`, EVERY protected request from it —
 *   even with the right credentials, otherwise the limit would still answer guesses — gets 429
 *   `{error}` with `Retry-After` (seconds) until the window (started at the first failure) ends.
 *   Successful requests are never counted: one in-memory read per request.
 *   The address is the TCP peer (`trustProxy` is off): behind a reverse proxy all clients share it.
 * - Per-account brake: a guess of the password with the management user name counts one failure
 *   for the account too, from whatever address. Past `maxAccountFailures` in the window, every
 *   sign-in AS that user (Basic auth and the console form, right password included) gets 429 with
 *   `Retry-After` until the window ends: guesses spread over many addresses (each under its own
 *   limit) are capped as a whole. The price is the usual one of account throttling: while such an
 *   attack goes on, the account cannot sign in either (console sessions already open keep working).
 *   Guesses with another user name cannot succeed and count per address only.
 *   The peek, the comparison and the increment of one request run without I/O in between, so
 *   requests can only slip past the limit when their hooks interleave at microtask level (several
 *   pipelined requests parsed from one socket read): a few extra guesses per window at most.
 */
import rateLimit from '@fastify/rate-limit';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { basicCredentials, constantTimeEqual } from '../http/auth.js';
import { closeAfterAnswer } from '../http/close-after-answer.js';
import { generateSecret, type CredentialStore } from '../credentials.js';
import { sendError } from './errors.js';

/** Default user name when `SVC_MGMT_USER` is not set (stored on first start; editable there). */
export const DEFAULT_MGMT_USER = 'admin';

/** The management user name (created as {@link DEFAULT_MGMT_USER} when absent). */
export function mgmtUser(store: CredentialStore): string {
  return store.get('mgmt.user', () => DEFAULT_MGMT_USER);
}

/** The management password (created as a 24-byte random base64url string, 32 chars, when absent). */
export function mgmtPassword(store: CredentialStore): string {
  return store.get('mgmt.password', () => generateSecret(24));
}

/** `reply`, set to close its connection after the answer (`closeAfterAnswer`): for refusals decided before the body is read. */
export function closing(reply: FastifyReply): FastifyReply {
  closeAfterAnswer(reply.request.raw, reply.raw);
  return reply;
}

export interface BasicAuthOptions {
  credentials: CredentialStore;
  /** Failed attempts allowed per address per window; the next request is refused with 429. */
  maxFailures: number;
  /** Failed attempts allowed for the management account per window (all addresses together); then 429 for sign-ins as it. */
  maxAccountFailures: number;
  /** Window length in ms, counted from an address's first failure. */
  windowMs: number;
  /** Routes that need no credentials (e.g. health checks). */
  isPublic(req: FastifyRequest): boolean;
  /** Called for each refused sign-in (Basic auth and the console form): wrong credentials, or refused while locked out (429). */
  onFailure?(reason: 'invalid' | 'locked_out'): void;
}

/** A failure counter of the brute-force brakes (`@fastify/rate-limit`, in memory). */
export interface Brake {
  /** Seconds until the request's key (address, or account) may try again when it is over the limit; undefined when it may try now. */
  blockedFor(req: FastifyRequest): Promise<number | undefined>;
  /** Counts one failed attempt for the request's key. */
  fail(req: FastifyRequest): Promise<void>;
}

/**
 * A {@link Brake} on `app` (which has the rate-limit plugin registered): `max` failures per window
 * of `windowMs` ms from the first, per client address — or per `key(req)` when given.
 */
export function createBrake(app: FastifyInstance, max: number, windowMs: number, key?: (req: FastifyRequest) => string): Brake {
  const failures = app.createRateLimit({ max, timeWindow: windowMs, ...(key ? { keyGenerator: key } : {}) });
  return {
    async blockedFor(req) {
      const seen = await failures(req, { increment: false });
      if (seen.isAllowed || seen.remaining !== 0) return undefined;
      return Math.max(1, seen.ttlInSeconds);
    },
    async fail(req) {
      await failures(req);
    },
  };
}

/**
 * The brute-force brake shared by Basic auth and the console's sign-in form: one failure count per
 * client address and one for the management account (see the module comment).
 */
export interface AuthBrake {
  /**
   * Seconds until the request may try again: its address over the limit, or — when `user` is
   * given and is the management user — the account over its limit; undefined when it may try now.
   */
  blockedFor(req: FastifyRequest, user?: string): Promise<number | undefined>;
  /** Counts one failed attempt for the request's address, and for the account when `user` is the management user. */
  fail(req: FastifyRequest, user?: string): Promise<void>;
}

/** True when `user` and `password` are the management account (each compared in constant time). */
export function isMgmtAccount(store: CredentialStore, user: string, password: string): boolean {
  const userOk = constantTimeEqual(user, mgmtUser(store));
  const passwordOk = constantTimeEqual(password, mgmtPassword(store));
  return userOk && passwordOk;
}

/**
 * Registers the rate-limit plugin (not global: it only counts what this hook tells it) and an
 * `onRequest` hook that authenticates every non-public request, including unknown routes (so an
 * unauthenticated client cannot probe which routes exist). Returns the brake so that other sign-in
 * paths (the console's form) count against the same limit.
 */
export async function registerBasicAuth(app: FastifyInstance, opts: BasicAuthOptions): Promise<AuthBrake> {
  await app.register(rateLimit, { global: false, cache: 10_000 });
  const perAddress = createBrake(app, opts.maxFailures, opts.windowMs);
  const perAccount = createBrake(app, opts.maxAccountFailures, opts.windowMs, () => 'mgmt-account');
  const isUser = (user: string | undefined) => user !== undefined && constantTimeEqual(user, mgmtUser(opts.credentials));
  const brake: AuthBrake = {
    async blockedFor(req, user) {
      const wait = (await perAddress.blockedFor(req)) ?? (isUser(user) ? await perAccount.blockedFor(req) : undefined);
      if (wait !== undefined) opts.onFailure?.('locked_out');
      return wait;
    },
    async fail(req, user) {
      await perAddress.fail(req);
      if (isUser(user)) await perAccount.fail(req);
      opts.onFailure?.('invalid');
    },
  };

  // onRequest: decided from the headers before any body is read; a refusal closes the connection,
  // so an unauthenticated client cannot make svc read (or hold) its body
  app.addHook('onRequest', async (req, reply) => {
    if (opts.isPublic(req)) return;
    const wait = await brake.blockedFor(req);
    if (wait !== undefined) {
      reply.header('Retry-After', String(wait));
      return sendError(closing(reply), 'tooManyFailures');
    }
    const header = req.headers.authorization;
    if (typeof header !== 'string' || header.trim() === '') return sendError(closing(reply), 'missingCredentials');
    const given = basicCredentials(req);
    const accountWait = given ? await brake.blockedFor(req, given.user) : undefined;
    if (accountWait !== undefined) {
      reply.header('Retry-After', String(accountWait));
      return sendError(closing(reply), 'accountTooManyFailures');
    }
    if (given && isMgmtAccount(opts.credentials, given.user, given.password)) return;
    await brake.fail(req, given?.user);
    return sendError(closing(reply), 'invalidCredentials');
  });
  return brake;
}
