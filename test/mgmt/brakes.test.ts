/**
 * Brute-force brakes of the management port, measured with real clients on many loopback
 * addresses (127.0.0.x, each its own TCP peer):
 *
 * - `/metrics` with `SVC_METRICS_TOKEN`: after 10 wrong bearer tokens from one address, 429 with
 *   `Retry-After` for that address (the right token included); another address is not affected.
 * - Sign-in per account: 50 addresses x 10 wrong passwords for the management user (half through
 *   the console form, half through Basic auth), each address under its own limit of 10: past 30
 *   failures for the account the rest are refused with 429, and so is the right password from an
 *   address that never failed; a wrong user name is not counted for the account.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { Agent, request } from 'undici';
import { MAX_ACCOUNT_FAILURES, MAX_METRICS_FAILURES } from '../../src/mgmt/index.js';
import { startTestSvc } from '../helpers/env.js';
import { account, basic } from './helpers.js';

type Svc = Awaited<ReturnType<typeof startTestSvc>>;

const agents = new Map<string, Agent>();
/** An HTTP client whose connections leave from `localAddress`. */
function from(localAddress: string): Agent {
  let a = agents.get(localAddress);
  if (!a) agents.set(localAddress, (a = new Agent({ localAddress })));
  return a;
}
after(async () => {
  await Promise.all([...agents.values()].map((a) => a.close()));
});

async function call(url: string, localAddress: string, init: { method?: string; headers?: Record<string, string>; body?: string } = {}): Promise<{ status: number; retryAfter: string | undefined }> {
  const r = await request(url, { method: (init.method ?? 'GET') as 'GET', headers: init.headers, body: init.body, dispatcher: from(localAddress) });
  await r.body.dump();
  const ra = r.headers['retry-after'];
  return { status: r.statusCode, retryAfter: Array.isArray(ra) ? ra[0] : ra };
}

describe('mgmt: /metrics brake', () => {
  let svc: Svc;
  before(async () => {
    svc = await startTestSvc(['mgmt'], { env: { SVC_METRICS_TOKEN: 'the-metrics-token' } });
  });
  after(() => svc?.close());

  test(`${MAX_METRICS_FAILURES} wrong tokens from an address, then 429 with Retry-After for it (right token included); other addresses unaffected`, async () => {
    const url = `${svc.urls.mgmt}/metrics`;
    const statuses: number[] = [];
    for (let i = 0; i < MAX_METRICS_FAILURES + 5; i++) statuses.push((await call(url, '127.0.0.2', { headers: { authorization: `Bearer guess-${i}` } })).status);
    assert.deepEqual(statuses, [...Array(MAX_METRICS_FAILURES).fill(401), ...Array(5).fill(429)]);
    const right = await call(url, '127.0.0.2', { headers: { authorization: 'Bearer the-metrics-token' } });
    assert.equal(right.status, 429);
    assert.ok(Number(right.retryAfter) >= 1 && Number(right.retryAfter) <= 60, right.retryAfter);
    assert.equal((await call(url, '127.0.0.3', { headers: { authorization: 'Bearer the-metrics-token' } })).status, 200);
    // no token at all is not a guess: not counted
    for (let i = 0; i < MAX_METRICS_FAILURES + 2; i++) assert.equal((await call(url, '127.0.0.4')).status, 401);
    assert.equal((await call(url, '127.0.0.4', { headers: { authorization: 'Bearer the-metrics-token' } })).status, 200);
  });
});

describe('mgmt: sign-in brake per account', () => {
  let svc: Svc;
  before(async () => {
    svc = await startTestSvc(['mgmt']);
  });
  after(() => svc?.close());

  test('50 addresses x 10 wrong passwords (console form and Basic auth): 429 past the account limit, right password included', async () => {
    const { user, password } = account(svc);
    const login = (addr: string, u: string, p: string) =>
      call(`${svc.urls.mgmt}/console/api/login`, addr, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ user: u, password: p }) });
    const viaBasic = (addr: string, u: string, p: string) => call(`${svc.urls.mgmt}/v2/mq/ipv4`, addr, { headers: { authorization: basic(u, p) } });

    // a wrong user name is counted for its address only
    for (let i = 0; i < MAX_ACCOUNT_FAILURES + 5; i++) assert.equal((await viaBasic(`127.0.1.${1 + (i % 9)}`, 'someone-else', `p${i}`)).status, 401);

    const counts = new Map<number, number>();
    await Promise.all(
      Array.from({ length: 50 }, async (_, a) => {
        const addr = `127.0.2.${a + 1}`;
        for (let g = 0; g < 10; g++) {
          const r = await (g % 2 ? viaBasic : login)(addr, user, `guess-${a}-${g}`);
          counts.set(r.status, (counts.get(r.status) ?? 0) + 1);
        }
      }),
    );
    console.log(`# 500 guesses from 50 addresses: ${JSON.stringify(Object.fromEntries(counts))}`);
    assert.deepEqual([...counts.keys()].sort(), [401, 429]);
    assert.ok(counts.get(401)! <= MAX_ACCOUNT_FAILURES + 10, `at most the account limit answered (plus a few interleaved): ${counts.get(401)}`);
    assert.ok(counts.get(429)! >= 500 - MAX_ACCOUNT_FAILURES - 10);

    // the right password from an address that never failed: refused for the rest of the window
    const right = await login('127.0.3.1', user, password);
    assert.equal(right.status, 429);
    assert.ok(Number(right.retryAfter) >= 1 && Number(right.retryAfter) <= 60, right.retryAfter);
    assert.equal((await viaBasic('127.0.3.2', user, password)).status, 429);
  });
});
