/**
 * Sign-in sessions of the web console: an in-memory table of random session ids, each with its
 * own CSRF token and an absolute expiry. Lost on restart (everyone signs in again).
 *
 * - Cookie `svc_console=<id>`: `HttpOnly` (scripts cannot read it), `SameSite=Strict` (never sent
 *   on cross-site requests), `Path=/console`, `Max-Age` = the remaining lifetime in seconds.
 * - CSRF: every console API call but sign-in and the session probe, whatever its method, must carry
 *   the session's token in `X-CSRF-Token` (or, for a GET, the `csrf` query parameter; synchronizer
 *   token pattern, OWASP CSRF cheat sheet; checked in `index.ts`); the token is handed to the page
 *   by `GET /console/api/session`, which a cross-site page cannot read (no CORS headers).
 */
import { randomBytes } from 'node:crypto';
import { constantTimeEqual } from '../../http/auth.js';

/** Name of the session cookie. */
export const SESSION_COOKIE = 'svc_console';
/** Session lifetime in ms from sign-in (absolute: no sliding renewal). */
export const SESSION_TTL_MS = 8 * 60 * 60 * 1000;
/** Sessions kept at most; signing in past it drops the oldest. */
const MAX_SESSIONS = 1_000;

export interface Session {
  user: string;
  csrf: string;
  /** Epoch ms after which the session is refused. */
  expiresAt: number;
}

export class SessionStore {
  private readonly sessions = new Map<string, Session>();

  constructor(private readonly ttlMs = SESSION_TTL_MS, private readonly now: () => number = Date.now) {}

  /** Creates a session for `user`; returns its id (the cookie value) and the session. */
  create(user: string): { id: string; session: Session } {
    this.sweep();
    while (this.sessions.size >= MAX_SESSIONS) this.sessions.delete(this.sessions.keys().next().value!);
    const id = randomBytes(32).toString('base64url');
    const session = { user, csrf: randomBytes(24).toString('base64url'), expiresAt: this.now() + this.ttlMs };
    this.sessions.set(id, session);
    return { id, session };
  }

  /** The live session for a cookie value, or undefined (unknown, malformed or expired). */
  get(id: string | undefined): Session | undefined {
    if (!id) return undefined;
    const s = this.sessions.get(id);
    if (!s) return undefined;
    if (s.expiresAt <= this.now()) {
      this.sessions.delete(id);
      return undefined;
    }
    return s;
  }

  /** True when `token` is the session's CSRF token (constant-time compare). */
  static csrfMatches(session: Session, token: unknown): boolean {
    return typeof token === 'string' && token.length > 0 && constantTimeEqual(token, session.csrf);
  }

  /** True when at least one session is live (someone is signed in). */
  anyLive(): boolean {
    this.sweep();
    return this.sessions.size > 0;
  }

  /** Ends a session (logout). */
  delete(id: string | undefined): void {
    if (id) this.sessions.delete(id);
  }

  private sweep(): void {
    const now = this.now();
    for (const [id, s] of this.sessions) if (s.expiresAt <= now) this.sessions.delete(id);
  }
}

/** The value of cookie `name` in a `Cookie` header (RFC 6265 §5.4 `name=value; ...`), or undefined. */
export function readCookie(header: string | undefined, name: string): string | undefined {
  if (!header) return undefined;
  for (const part of header.split(';')) {
    const eq = part.indexOf('=');
    if (eq > 0 && part.slice(0, eq).trim() === name) return part.slice(eq + 1).trim();
  }
  return undefined;
}

/** `Set-Cookie` value for a session id living `maxAgeMs` more (0 clears the cookie). */
export function sessionCookie(id: string, maxAgeMs: number): string {
  const maxAge = Math.max(0, Math.floor(maxAgeMs / 1000));
  return `${SESSION_COOKIE}=${id}; Path=/console; HttpOnly; SameSite=Strict; Max-Age=${maxAge}`;
}
