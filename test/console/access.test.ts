/**
 * The web console's serving and access control, in a real browser (chromium through
 * playwright-core) and over raw HTTP: the sign-in form (a wrong password refused, the right one
 * admitted), the session cookie's attributes, logout, CSRF protection of state-changing calls, the
 * management brute-force brake on the form, `SVC_CONSOLE=false`, `SVC_CONSOLE_READONLY=true`,
 * offline assets, and the overview page loading without JavaScript errors.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { Client } from '@upstash/qstash';
import { MAX_AUTH_FAILURES } from '../../src/mgmt/index.js';
import { startTestSvc } from '../helpers/env.js';
import { waitFor } from '../queue/helpers.js';
import { basic } from '../mgmt/helpers.js';
import { launchBrowser, screenshot, signIn, type ConsoleBrowser } from './browser.js';
import { consoleLogin, consoleCall } from './helpers.js';

type Svc = Awaited<ReturnType<typeof startTestSvc>>;

describe('console: sign-in and pages in a browser', () => {
  let svc: Svc;
  let b: ConsoleBrowser;
  before(async () => {
    svc = await startTestSvc(['queue', 'kv', 'vector', 'mgmt'], { env: { SVC_VECTOR_DIMENSION: '3' } });
    b = await launchBrowser();
  });
  after(async () => {
    await b?.close();
    await svc?.close();
  });

  test('a wrong password is refused; the right one signs in; the overview loads; sign out', async () => {
    const { page } = b;
    const external: string[] = [];
    page.on('request', (r) => {
      if (!r.url().startsWith(svc.urls.mgmt!)) external.push(r.url());
    });
    await page.goto(`${svc.urls.mgmt}/console/`);
    await page.waitForSelector('form.login');
    await screenshot(page, '00-sign-in');
    await page.fill('input[name=user]', 'admin');
    await page.fill('input[name=password]', 'not-the-password');
    await page.click('button[type=submit]');
    await page.waitForSelector('.notice.error');
    assert.match(await page.textContent('.notice.error') ?? '', /wrong user name or password/);
    assert.equal(await page.locator('aside.side').count(), 0);
    // the refused sign-in is the only error the browser logs (its 401 answer)
    assert.deepEqual(b.errors, ['console.error: Failed to load resource: the server responded with a status of 401 (Unauthorized)']);
    b.errors.length = 0;

    await signIn(page, svc);
    await page.waitForSelector('[data-area=queue]');
    assert.match(await page.textContent('[data-area=kv]') ?? '', /Healthy/);
    await page.waitForSelector('[data-state=ready]');
    await screenshot(page, '01-overview');

    const cookies = await b.context.cookies();
    const c = cookies.find((x) => x.name === 'svc_console');
    assert.ok(c, 'session cookie set');
    assert.equal(c.httpOnly, true);
    assert.equal(c.sameSite, 'Strict');
    assert.equal(c.path, '/console');
    assert.ok(c.expires > Date.now() / 1000 + 3600, 'cookie has an expiry');
    assert.equal(await page.evaluate(() => document.cookie), '', 'scripts cannot read the session cookie');

    await page.click('[data-logout]');
    await page.waitForSelector('form.login');
    const r = await fetch(`${svc.urls.mgmt}/console/api/overview`, { headers: { cookie: `svc_console=${c.value}` } });
    assert.equal(r.status, 401, 'the session ends at logout');
    assert.deepEqual(external, [], 'no request leaves svc (offline assets)');
    assert.deepEqual(b.errors, []);
  });
});

describe('console: access control over HTTP', () => {
  let svc: Svc;
  before(async () => {
    svc = await startTestSvc(['queue', 'kv', 'mgmt']);
  });
  after(() => svc?.close());

  test('every API route needs a session; state-changing calls need the CSRF token and the same origin', async () => {
    assert.deepEqual(await (await fetch(`${svc.urls.mgmt}/console/api/session`)).json(), { signedIn: false });
    for (const path of ['overview', 'queue/v2/stats', 'kv/']) {
      const r = await fetch(`${svc.urls.mgmt}/console/api/${path}`);
      assert.equal(r.status, 401, path);
    }
    const s = await consoleLogin(svc);
    let r = await consoleCall(svc, s, 'POST', 'kv/', ['SET', 'k', 'v'], { csrf: null });
    assert.equal(r.status, 403);
    r = await consoleCall(svc, s, 'POST', 'kv/', ['SET', 'k', 'v'], { csrf: 'wrong' });
    assert.equal(r.status, 403);
    r = await consoleCall(svc, s, 'POST', 'kv/', ['SET', 'k', 'v'], { origin: 'http://evil.example' });
    assert.equal(r.status, 403);
    r = await consoleCall(svc, s, 'POST', 'kv/', ['SET', 'k', 'v']);
    assert.equal(r.status, 200);
    assert.deepEqual(r.body, { result: 'OK' });
    // unknown console paths: 404 without a Basic challenge (the browser would show its own dialog)
    const nope = await fetch(`${svc.urls.mgmt}/console/nope`);
    assert.equal(nope.status, 404);
    assert.equal(nope.headers.get('www-authenticate'), null);
    // the console's Basic-auth-free routes do not open the management API
    assert.equal((await fetch(`${svc.urls.mgmt}/v2/mq/ipv4`, { headers: { cookie: `svc_console=${s.cookie}` } })).status, 401);
  });

  test('the brute-force brake applies to the form, and a Basic-auth failure counts for it too', async () => {
    const other = await startTestSvc(['mgmt']);
    try {
      for (let i = 0; i < MAX_AUTH_FAILURES - 1; i++) {
        const r = await fetch(`${other.urls.mgmt}/console/api/login`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ user: 'admin', password: `guess${i}` }) });
        assert.equal(r.status, 401);
      }
      assert.equal((await fetch(`${other.urls.mgmt}/v2/mq/ipv4`, { headers: { authorization: basic('admin', 'guess') } })).status, 401);
      const r = await fetch(`${other.urls.mgmt}/console/api/login`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ user: 'admin', password: other.ctx.credentials.get('mgmt.password') }),
      });
      assert.equal(r.status, 429, 'even the right password is refused past the limit');
      assert.ok(Number(r.headers.get('retry-after')) >= 1);
    } finally {
      await other.close();
    }
  });
});

describe('console: configuration', () => {
  test('SVC_CONSOLE=false: no console routes (the management API answers as before)', async () => {
    const svc = await startTestSvc(['mgmt'], { env: { SVC_CONSOLE: 'false' } });
    try {
      assert.equal((await fetch(`${svc.urls.mgmt}/console/`)).status, 401);
      const r = await fetch(`${svc.urls.mgmt}/console/`, { headers: { authorization: basic('admin', svc.ctx.credentials.get('mgmt.password')) } });
      assert.equal(r.status, 404);
    } finally {
      await svc.close();
    }
  });

  test('SVC_CONSOLE_READONLY=true: writes refused by the console (queue) and by the areas (kv read-only token); reads work', async () => {
    const svc = await startTestSvc(['queue', 'kv', 'mgmt'], { env: { SVC_CONSOLE_READONLY: 'true' } });
    try {
      const s = await consoleLogin(svc);
      assert.equal(s.info.readonly, true);
      let r = await consoleCall(svc, s, 'POST', 'queue/v2/keys/rotate');
      assert.equal(r.status, 403);
      r = await consoleCall(svc, s, 'GET', 'queue/v2/keys');
      assert.equal(r.status, 200);
      r = await consoleCall(svc, s, 'POST', 'kv/', ['SET', 'k', 'v']);
      assert.notEqual(r.status, 200);
      assert.match(JSON.stringify(r.body), /NOPERM|read-?only/i);
      r = await consoleCall(svc, s, 'POST', 'kv/', ['GET', 'k']);
      assert.equal(r.status, 200);

      // the pages show no action at all
      const client = new Client({ baseUrl: svc.urls.queue!, token: svc.ctx.credentials.get('queue.token') });
      await client.schedules.create({ destination: 'http://127.0.0.1:9/x', cron: '0 0 1 1 *', scheduleId: 'yearly' });
      await client.publish({ url: 'http://127.0.0.1:9/dead', body: 'x', retries: 0 });
      await waitFor('DLQ entry', async () => (await client.dlq.listMessages()).messages.length === 1, 30_000);
      const b = await launchBrowser();
      try {
        await signIn(b.page, svc);
        assert.equal(await b.page.locator('.readonly-tag').count(), 1);
        for (const [hash, row] of [['#/queue/schedules', 'tr[data-schedule=yearly]'], ['#/queue/dlq', 'table[data-table=dlq] tbody tr'], ['#/queue/keys', 'dd[data-key=current]']]) {
          await b.page.goto(`${svc.urls.mgmt}/console/${hash}`);
          await b.page.locator(row).first().waitFor();
          const actions = '[data-retry], [data-delete], [data-pause], [data-resume], [data-rotate], [data-new-schedule], [data-retry-filter], [data-delete-filter], [data-bulk-retry], main input[type=checkbox]';
          assert.equal(await b.page.locator(actions).count(), 0, `no action on ${hash}`);
        }
        await screenshot(b.page, '03-readonly-dlq');
        assert.deepEqual(b.errors, []);
      } finally {
        await b.close();
      }
    } finally {
      await svc.close();
    }
  });
});
