/**
 * HTTP helpers for the console tests: sign in through `POST /console/api/login` and call the
 * console API with the session cookie and CSRF token, as the page does.
 */
import type { RunningSvc } from '../../src/main.js';

/** Payloads that would run if any user data reached the DOM as HTML (they set `window.__xss`). */
export const XSS = [`<script>window.__xss='script'</script>`, `"><img src=x onerror="window.__xss='img'">`];

export interface ConsoleSession {
  cookie: string;
  csrf: string;
  info: { user: string; csrf: string; readonly: boolean; areas: string[]; vectorIndexes: string[] };
}

/** Signs in with the management account; throws unless it succeeds. */
export async function consoleLogin(svc: RunningSvc): Promise<ConsoleSession> {
  const res = await fetch(`${svc.urls.mgmt}/console/api/login`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ user: svc.ctx.credentials.get('mgmt.user'), password: svc.ctx.credentials.get('mgmt.password') }),
  });
  if (res.status !== 200) throw new Error(`login: ${res.status} ${await res.text()}`);
  const cookie = /svc_console=([^;]+)/.exec(res.headers.get('set-cookie') ?? '')?.[1];
  if (!cookie) throw new Error('login: no session cookie');
  const info = (await res.json()) as ConsoleSession['info'];
  return { cookie, csrf: info.csrf, info };
}

/**
 * One console API call (`/console/api/<path>`); `body` is sent as JSON. `csrf: null` leaves the
 * token out, a string replaces it; `origin` sets the Origin header.
 */
export async function consoleCall(
  svc: RunningSvc,
  s: ConsoleSession,
  method: string,
  path: string,
  body?: unknown,
  opts: { csrf?: string | null; origin?: string } = {},
): Promise<{ status: number; body: any }> {
  const headers: Record<string, string> = { cookie: `svc_console=${s.cookie}` };
  const csrf = opts.csrf === undefined ? s.csrf : opts.csrf;
  if (csrf !== null) headers['x-csrf-token'] = csrf;
  if (opts.origin) headers.origin = opts.origin;
  if (body !== undefined) headers['content-type'] = 'application/json';
  const res = await fetch(`${svc.urls.mgmt}/console/api/${path}`, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await res.text();
  let parsed: unknown = text;
  try {
    parsed = JSON.parse(text);
  } catch {
    /* keep text */
  }
  return { status: res.status, body: parsed };
}

/** The environment a workflow endpoint served by `@upstash/workflow` needs to talk to `svc`'s queue. */
export function workflowEnv(svc: RunningSvc): Record<string, string> {
  return {
    QSTASH_URL: svc.urls.queue!,
    QSTASH_TOKEN: svc.ctx.credentials.get('queue.token'),
    QSTASH_CURRENT_SIGNING_KEY: svc.ctx.credentials.get('queue.currentSigningKey'),
    QSTASH_NEXT_SIGNING_KEY: svc.ctx.credentials.get('queue.nextSigningKey'),
  };
}
