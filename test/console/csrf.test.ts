/**
 * Cross-site request forgery through the console's forwarding, whatever the HTTP method: the kv
 * REST API runs commands from a GET path (`/set/k/v`, `/flushall`), so a GET can write. In
 * Chromium, a page served from another port of 127.0.0.1 — "same site" for the `SameSite=Strict`
 * session cookie, which the browser therefore sends — tries to write keys and flush the database
 * through `<img>` tags, a form post and `no-cors` fetches while the console is signed in: every one
 * is refused (403) and no key changes. The console itself keeps working (its GETs carry the CSRF
 * header; an `EventSource` carries the token in the query). Over raw HTTP: a GET with the cookie
 * alone, a foreign `Origin`, or `Sec-Fetch-Site: same-site` is refused.
 */
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { Redis } from '@upstash/redis';
import { startTestSvc } from '../helpers/env.js';
import { waitFor } from '../helpers/wait.js';
import { launchBrowser, screenshot, signIn, type ConsoleBrowser } from './browser.js';
import { consoleCall, consoleLogin } from './helpers.js';

type Svc = Awaited<ReturnType<typeof startTestSvc>>;

/** The attacker's page: every way a foreign page can send a request with the victim's cookies without reading the answer. */
function attackPage(mgmt: string): string {
  const api = `${mgmt}/console/api/kv`;
  return `<!doctype html><html><body>
<img src="${api}/set/pwned/img">
<img src="${api}/flushall">
<iframe name="sink"></iframe>
<form id="f" method="POST" action="${api}/set/pwned/form" target="sink" enctype="text/plain"><input name="x" value="y"></form>
<script>
fetch(${JSON.stringify(`${api}/set/pwned/fetch`)}, { mode: 'no-cors', credentials: 'include' });
fetch(${JSON.stringify(`${api}/`)}, { method: 'POST', mode: 'no-cors', credentials: 'include', headers: { 'content-type': 'text/plain' }, body: '["SET","pwned","post"]' });
document.getElementById('f').submit();
</script></body></html>`;
}

describe('console: CSRF through any method', () => {
  let svc: Svc;
  let redis: Redis;
  let b: ConsoleBrowser;
  let evil: http.Server;
  let evilUrl: string;
  before(async () => {
    svc = await startTestSvc(['kv', 'mgmt']);
    redis = new Redis({ url: svc.urls.kv!, token: svc.ctx.credentials.get('kv.token') });
    evil = http.createServer((_req, res) => res.writeHead(200, { 'content-type': 'text/html' }).end(attackPage(svc.urls.mgmt!)));
    await new Promise<void>((r) => evil.listen(0, '127.0.0.1', r));
    evilUrl = `http://127.0.0.1:${(evil.address() as AddressInfo).port}/`;
    b = await launchBrowser();
  });
  after(async () => {
    await b?.close();
    await new Promise((r) => evil?.close(r));
    await svc?.close();
  });

  test('a page on another port of the same host cannot write through the signed-in console (img, form, no-cors fetch)', async () => {
    await redis.set('sentinel', 'here');
    const { page } = b;
    await signIn(page, svc);
    const answers: { url: string; status: number | undefined; failure?: string }[] = [];
    page.on('response', (r) => {
      if (r.url().startsWith(svc.urls.mgmt!)) answers.push({ url: r.url(), status: r.status() });
    });
    page.on('requestfailed', (r) => {
      if (r.url().startsWith(svc.urls.mgmt!)) answers.push({ url: r.url(), status: undefined, failure: r.failure()?.errorText });
    });
    await page.goto(evilUrl);
    // each forged request reached svc; Chromium hides some answers from the page (ORB), the ones it shows are 403
    const forged = ['set/pwned/img', 'flushall', 'set/pwned/fetch', '', 'set/pwned/form'].map((p) => `${svc.urls.mgmt}/console/api/kv/${p}`);
    await waitFor('the forged requests answered', () => forged.every((u) => answers.some((a) => a.url === u)), 60_000);
    await screenshot(page, '05-csrf-attack-page');
    // only the forged requests: the signed-in console's own last poll (e.g. the overview) may answer after the listener is on
    const statuses = answers.filter((a) => a.status !== undefined && forged.includes(a.url)).map((a) => a.status);
    assert.ok(statuses.length >= 3 && statuses.every((s) => s === 403), JSON.stringify(answers));
    assert.equal(await redis.exists('pwned'), 0, 'no key written');
    assert.equal(await redis.get('sentinel'), 'here', 'the database was not flushed');
    b.errors.length = 0; // the attacker page's refused loads

    // the console itself still reads and writes, GETs included
    await page.goto(`${svc.urls.mgmt}/console/#/kv/keys`);
    await page.locator('tr[data-key=sentinel]').waitFor();
    await page.goto(`${svc.urls.mgmt}/console/#/kv/command`);
    await page.fill('input[name=command]', 'SET written-by-console yes');
    await page.click('[data-run]');
    await waitFor('console write', async () => (await redis.get('written-by-console')) === 'yes', 30_000);
    const got = await page.evaluate(async () => {
      const lib = await import('/console/app/lib.js' as string);
      return lib.api('GET', 'kv/get/sentinel');
    });
    assert.deepEqual(got, { result: 'here' });

    // an EventSource (no headers) passes with the token in the query
    const events = page.evaluate(
      () =>
        new Promise<string[]>((resolve, reject) => {
          void import('/console/app/lib.js' as string).then((lib) => {
            const seen: string[] = [];
            const es = new EventSource(`/console/api/kv/subscribe/news?csrf=${encodeURIComponent(lib.session.csrf)}`);
            es.onmessage = (e) => {
              seen.push(e.data);
              if (seen.length === 2) {
                es.close();
                resolve(seen);
              }
            };
            es.onerror = () => reject(new Error('EventSource failed'));
          });
        }),
    );
    await waitFor('subscriber', async () => (await redis.publish('news', 'hello')) === 1, 30_000);
    assert.deepEqual(await events, ['subscribe,news,1', 'message,news,hello']);
    assert.deepEqual(b.errors, []);
  });

  test('over HTTP: a GET that writes needs the CSRF token and the same origin', async () => {
    await redis.set('sentinel', 'here');
    const s = await consoleLogin(svc);
    const cookieOnly = { csrf: null } as const;
    let r = await consoleCall(svc, s, 'GET', 'kv/set/k/v', undefined, cookieOnly);
    assert.deepEqual([r.status, r.body], [403, { error: 'missing or wrong X-CSRF-Token' }]);
    r = await consoleCall(svc, s, 'GET', 'kv/flushall', undefined, cookieOnly);
    assert.equal(r.status, 403);
    r = await consoleCall(svc, s, 'GET', 'kv/set/k/v', undefined, { origin: 'http://127.0.0.1:1' });
    assert.deepEqual([r.status, r.body], [403, { error: 'cross-origin request refused' }]);
    const sameSite = await fetch(`${svc.urls.mgmt}/console/api/kv/set/k/v`, { headers: { cookie: `svc_console=${s.cookie}`, 'x-csrf-token': s.csrf, 'sec-fetch-site': 'same-site' } });
    assert.equal(sameSite.status, 403);
    r = await consoleCall(svc, s, 'GET', `kv/set/k/v?csrf=wrong`, undefined, cookieOnly);
    assert.equal(r.status, 403);
    assert.equal(await redis.exists('k'), 0);
    assert.equal(await redis.get('sentinel'), 'here');

    r = await consoleCall(svc, s, 'GET', 'kv/set/k/v');
    assert.deepEqual([r.status, r.body], [200, { result: 'OK' }]);
    r = await consoleCall(svc, s, 'GET', `kv/get/k?csrf=${encodeURIComponent(s.csrf)}`, undefined, cookieOnly);
    assert.deepEqual([r.status, r.body], [200, { result: 'v' }], 'the token in the query (not forwarded)');
    // every console API call but sign-in and the session probe needs it, reads included
    r = await consoleCall(svc, s, 'GET', 'overview', undefined, cookieOnly);
    assert.equal(r.status, 403);
    r = await consoleCall(svc, s, 'GET', 'session', undefined, cookieOnly);
    assert.equal(r.status, 200);
  });
});
