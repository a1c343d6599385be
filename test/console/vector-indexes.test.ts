/**
 * The console's Vector page manages indexes in a real browser against a real svc: create one
 * (its tokens are shown and work with `@upstash/vector`), rename it, reset its tokens (the old one
 * is refused at once), delete it after typing its name (a wrong name deletes nothing). A read-only
 * console shows none of these actions and its API refuses each of them; the API needs the
 * session's CSRF token.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { Index } from '@upstash/vector';
import { startTestSvc } from '../helpers/env.js';
import { waitFor } from '../helpers/wait.js';
import { launchBrowser, screenshot, signIn } from './browser.js';
import { consoleCall, consoleLogin } from './helpers.js';

const sdkError = (p: Promise<unknown>) => p.then(() => 'no error', (err: Error) => err.message);

describe('console: vector index management', () => {
  test('create, rename, reset tokens and delete with a typed confirmation', { timeout: 240_000 }, async () => {
    const svc = await startTestSvc(['vector', 'mgmt'], { env: { SVC_VECTOR_DIMENSION: '3', SVC_VECTOR_DATABASE_URL: '' } });
    const b = await launchBrowser();
    const { page } = b;
    try {
      await signIn(page, svc);
      await page.goto(`${svc.urls.mgmt}/console/#/vector`);
      await page.waitForSelector('[data-table=indexes] tr[data-index=default]');
      // no rename or delete for the default index, only new tokens
      assert.equal(await page.locator('tr[data-index=default] [data-delete]').count(), 0);
      await page.fill('[data-create] input[name=name]', 'shop');
      await page.fill('[data-create] input[name=dimension_count]', '2');
      await page.click('[data-create] button[type=submit]');
      const token = await page.locator('[data-tokens] [data-token]').innerText();
      const made = (await svc.ctx.vectorIndexes!.list()) as { ok: true; value: { id: string; name: string; token: string; endpoint: string }[] };
      const shop = made.value.find((x) => x.name === 'shop')!;
      assert.equal(shop.token, token);
      const index = new Index({ url: shop.endpoint, token });
      await index.upsert({ id: 'p1', vector: [1, 0] });
      await page.waitForSelector('tr[data-index=shop]');

      await page.click('tr[data-index=shop] [data-rename]');
      await page.fill('input[name=new-name]', 'store');
      await page.click('[data-confirm]');
      await page.waitForSelector('tr[data-index=store]');

      await page.click('tr[data-index=store] [data-reset]');
      await page.click('[data-confirm]');
      await waitFor('new token shown', async () => ((await page.locator('[data-tokens] [data-token]').innerText()) !== token ? true : undefined), 30_000);
      const fresh = await page.locator('[data-tokens] [data-token]').innerText();
      assert.match(await sdkError(index.info()), /Unauthorized/);
      assert.equal((await new Index({ url: shop.endpoint, token: fresh }).info()).vectorCount, 1);
      await screenshot(page, '45-vector-indexes');

      // delete: a wrong name is refused in the dialog, the right one deletes
      await page.click('tr[data-index=store] [data-delete]');
      await page.fill('input[name=confirm-name]', 'stor');
      await page.click('[data-confirm]');
      await page.waitForSelector('.dialog .notice, .dialog [class*=error]');
      assert.equal((await new Index({ url: shop.endpoint, token: fresh }).info()).vectorCount, 1);
      await page.fill('input[name=confirm-name]', 'store');
      await page.click('[data-confirm]');
      await page.waitForSelector('tr[data-index=store]', { state: 'detached' });
      assert.match(await sdkError(new Index({ url: shop.endpoint, token: fresh }).info()), /Index not found/);
      assert.deepEqual(b.errors.filter((e) => !/status of 4\d\d/.test(e)), []);

      // the console API needs the CSRF token
      const s = await consoleLogin(svc);
      assert.equal((await consoleCall(svc, s, 'POST', 'vector-indexes', { name: 'x', similarity_function: 'COSINE', dimension_count: 2 }, { csrf: null })).status, 403);
    } finally {
      await b.close();
      await svc.close();
    }
  });

  test('a read-only console shows no index actions and refuses them', { timeout: 240_000 }, async () => {
    const svc = await startTestSvc(['vector', 'mgmt'], { env: { SVC_VECTOR_DIMENSION: '3', SVC_CONSOLE_READONLY: 'true', SVC_VECTOR_DATABASE_URL: '' } });
    const b = await launchBrowser();
    try {
      await signIn(b.page, svc);
      await b.page.goto(`${svc.urls.mgmt}/console/#/vector`);
      await b.page.waitForSelector('[data-table=indexes] tr[data-index=default]');
      assert.equal(await b.page.locator('[data-create], [data-rename], [data-reset], [data-delete]').count(), 0);
      const s = await consoleLogin(svc);
      const list = await consoleCall(svc, s, 'GET', 'vector-indexes');
      assert.equal(list.status, 200);
      const before = svc.ctx.credentials.get('vector.default.token');
      for (const [method, p, body] of [
        ['POST', 'vector-indexes', { name: 'x', similarity_function: 'COSINE', dimension_count: 2 }],
        ['POST', 'vector-indexes/default/reset-password', undefined],
        ['POST', 'vector-indexes/default/rename', { name: 'y' }],
        ['DELETE', 'vector-indexes/default', undefined],
      ] as const) {
        const r = await consoleCall(svc, s, method, p, body);
        assert.equal(r.status, 403, `${method} ${p}`);
        assert.match(r.body.error, /read-only/);
      }
      assert.equal(svc.ctx.credentials.get('vector.default.token'), before);
      assert.equal((await consoleCall(svc, s, 'GET', 'vector-indexes')).body.length, 1);
    } finally {
      await b.close();
      await svc.close();
    }
  });
});
