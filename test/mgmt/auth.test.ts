/**
 * Basic authentication of the management API (spec "Authentication"), end to end over a socket:
 * success, every failure kind (401 + WWW-Authenticate + JSON), env-given accounts, the brake on
 * repeated failures (429) and the public health routes.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { AUTH_FAILURE_WINDOW_MS, MAX_AUTH_FAILURES } from '../../src/mgmt/index.js';
import { startTestSvc } from '../helpers/env.js';
import { account, basic, mgmt } from './helpers.js';

type Svc = Awaited<ReturnType<typeof startTestSvc>>;

function assertUnauthorized(r: { status: number; headers: Headers; body: any }): void {
  assert.equal(r.status, 401);
  assert.match(r.headers.get('www-authenticate') ?? '', /^Basic realm="svc"/);
  assert.match(r.headers.get('content-type') ?? '', /^application\/json/);
  assert.equal(typeof r.body.error, 'string');
  assert.ok(r.body.error.length > 0);
}

describe('Basic auth', () => {
  let svc: Svc;
  before(async () => {
    svc = await startTestSvc(['mgmt']);
  });
  after(() => svc.close());

  test('right user and password: 200', async () => {
    const r = await mgmt(svc, '/v2/mq/ipv4');
    assert.equal(r.status, 200);
    assert.ok(Array.isArray(r.body));
  });

  test('generated account: user admin, 32-char password, printed in the .env block', () => {
    const { user, password } = account(svc);
    assert.equal(user, 'admin');
    assert.match(password, /^[A-Za-z0-9_-]{32}$/);
    assert.match(svc.envBlock, new RegExp(`^SVC_MGMT_URL=${svc.urls.mgmt}$`, 'm'));
    assert.match(svc.envBlock, /^SVC_MGMT_USER=admin$/m);
    assert.match(svc.envBlock, new RegExp(`^SVC_MGMT_PASSWORD=${password}$`, 'm'));
  });

  test('missing Authorization: 401', async () => {
    assertUnauthorized(await mgmt(svc, '/v2/mq/ipv4', { auth: null }));
    assertUnauthorized(await mgmt(svc, '/v2/mq/ipv4', { auth: '' }));
  });

  test('wrong user: 401', async () => {
    assertUnauthorized(await mgmt(svc, '/v2/mq/ipv4', { auth: basic('root', account(svc).password) }));
  });

  test('wrong password: 401 (also a prefix of the right one, and an empty one)', async () => {
    const { user, password } = account(svc);
    assertUnauthorized(await mgmt(svc, '/v2/mq/ipv4', { auth: basic(user, password + 'x') }));
    assertUnauthorized(await mgmt(svc, '/v2/mq/ipv4', { auth: basic(user, password.slice(0, -1)) }));
    assertUnauthorized(await mgmt(svc, '/v2/mq/ipv4', { auth: basic(user, '') }));
  });

  test('malformed headers: 401', async () => {
    const { user, password } = account(svc);
    // Not base64; no colon inside; another scheme carrying the password.
    assertUnauthorized(await mgmt(svc, '/v2/mq/ipv4', { auth: 'Basic !!!not-base64!!!' }));
    assertUnauthorized(await mgmt(svc, '/v2/mq/ipv4', { auth: `Basic ${Buffer.from(user + password).toString('base64')}` }));
    assertUnauthorized(await mgmt(svc, '/v2/mq/ipv4', { auth: `Bearer ${password}` }));
  });

  test('every protected route, and unknown routes, require credentials', async () => {
    for (const [method, path] of [
      ['POST', '/v2/credentials/queue/token/rotate'],
      ['POST', '/v2/credentials/queue/signing-keys/rotate'],
      ['POST', '/v2/credentials/kv/reset-password'],
      ['POST', '/v2/credentials/vector/default/rotate'],
      ['GET', '/v2/no-such-route'],
    ]) {
      assertUnauthorized(await mgmt(svc, path, { method, auth: null }));
    }
    const r = await mgmt(svc, '/v2/no-such-route');
    assert.equal(r.status, 404);
    assert.deepEqual(r.body, { error: 'Not Found' });
  });
});

test('env-given account (SVC_MGMT_USER, SVC_MGMT_PASSWORD with a colon) is the one accepted', async () => {
  const svc = await startTestSvc(['mgmt'], { env: { SVC_MGMT_USER: 'ops', SVC_MGMT_PASSWORD: 'pa:ss wörd' } });
  try {
    assert.equal((await mgmt(svc, '/v2/mq/ipv4', { auth: basic('ops', 'pa:ss wörd') })).status, 200);
    assertUnauthorized(await mgmt(svc, '/v2/mq/ipv4', { auth: basic('admin', 'pa:ss wörd') }));
    assertUnauthorized(await mgmt(svc, '/v2/mq/ipv4', { auth: basic('ops', 'pa') }));
    assert.match(svc.envBlock, /^SVC_MGMT_USER=ops$/m);
  } finally {
    await svc.close();
  }
});

test('repeated failures from one address: 429 for every protected request until the window ends', async () => {
  const svc = await startTestSvc(['mgmt']);
  try {
    const { user, password } = account(svc);
    // Missing credentials are not guesses and are not counted.
    for (let i = 0; i < MAX_AUTH_FAILURES + 5; i++) {
      assert.equal((await mgmt(svc, '/v2/mq/ipv4', { auth: null })).status, 401);
    }
    // Successful requests are not counted either.
    for (let i = 0; i < 3 * MAX_AUTH_FAILURES; i++) assert.equal((await mgmt(svc, '/v2/mq/ipv4')).status, 200);
    for (let i = 0; i < MAX_AUTH_FAILURES; i++) {
      assertUnauthorized(await mgmt(svc, '/v2/mq/ipv4', { auth: basic(user, `guess-${i}`) }));
    }
    // Locked: wrong and right credentials alike get 429, so guessing stops telling anything.
    for (const auth of [basic(user, 'guess-x'), basic(user, password)]) {
      const r = await mgmt(svc, '/v2/mq/ipv4', { auth });
      assert.equal(r.status, 429);
      assert.match(r.headers.get('content-type') ?? '', /^application\/json/);
      assert.match(r.body.error, /Too many failed authentication attempts/);
      const retryAfter = Number(r.headers.get('retry-after'));
      assert.ok(retryAfter >= 1 && retryAfter <= 60, `Retry-After ${retryAfter}`);
    }
    // Health checks stay public and unaffected.
    assert.equal((await mgmt(svc, '/v2/health', { auth: null })).status, 200);
    assert.equal((await mgmt(svc, '/healthz', { auth: basic(user, 'guess-y') })).status, 200);
  } finally {
    await svc.close();
  }
});

test('failures below the limit do not lock out the right credentials', async () => {
  const svc = await startTestSvc(['mgmt']);
  try {
    const { user } = account(svc);
    for (let i = 0; i < MAX_AUTH_FAILURES - 1; i++) {
      assertUnauthorized(await mgmt(svc, '/v2/mq/ipv4', { auth: basic(user, `guess-${i}`) }));
    }
    for (let i = 0; i < 20; i++) assert.equal((await mgmt(svc, '/v2/mq/ipv4')).status, 200);
  } finally {
    await svc.close();
  }
});

test('the lock-out ends with the window (60 s after the first failure; clock mocked)', async (t) => {
  t.mock.timers.enable({ apis: ['Date'], now: Date.now() });
  const svc = await startTestSvc(['mgmt']);
  try {
    const { user } = account(svc);
    for (let i = 0; i < MAX_AUTH_FAILURES; i++) {
      assertUnauthorized(await mgmt(svc, '/v2/mq/ipv4', { auth: basic(user, `guess-${i}`) }));
    }
    assert.equal((await mgmt(svc, '/v2/mq/ipv4')).status, 429);
    t.mock.timers.tick(AUTH_FAILURE_WINDOW_MS - 1_000);
    assert.equal((await mgmt(svc, '/v2/mq/ipv4')).status, 429);
    t.mock.timers.tick(1_000);
    assert.equal((await mgmt(svc, '/v2/mq/ipv4')).status, 200);
    // A fresh window: one more failure does not lock again.
    assertUnauthorized(await mgmt(svc, '/v2/mq/ipv4', { auth: basic(user, 'again') }));
    assert.equal((await mgmt(svc, '/v2/mq/ipv4')).status, 200);
  } finally {
    await svc.close();
  }
});
