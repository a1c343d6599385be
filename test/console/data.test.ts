/**
 * The console's KV and vector pages in a real browser against a real svc (real redis-server,
 * real vector index), with data written through `@upstash/redis` and `@upstash/vector`: the key
 * browser's pattern and type filters; a string and a hash field edited in the console and read
 * back through the REST API; TTL set; a large value paged; a JSON document edited; the command
 * box; a vector query by vector with a metadata filter, by a record's id and by text (a second
 * index with the BM25 embedder) returning the expected ids and scores; fetch by id; the overview's
 * request counters; keys, values and metadata holding HTML/script payloads shown as text; no JavaScript
 * errors; a screenshot of every page.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { Redis } from '@upstash/redis';
import { Index } from '@upstash/vector';
import { startTestSvc, tempDir } from '../helpers/env.js';
import { waitFor } from '../queue/helpers.js';
import { launchBrowser, screenshot, signIn, type ConsoleBrowser } from './browser.js';
import { XSS } from './helpers.js';

type Svc = Awaited<ReturnType<typeof startTestSvc>>;

describe('console: kv and vector pages', () => {
  let svc: Svc;
  let b: ConsoleBrowser;
  let redis: Redis;
  let index: Index<Record<string, unknown>>;
  const xssKey = `xss:${XSS[1]}`;
  let defs: ReturnType<typeof tempDir>;

  before(async () => {
    defs = tempDir('svc-console-indexes-');
    const file = path.join(defs.dir, 'indexes.json');
    fs.writeFileSync(file, JSON.stringify([{ name: 'docs', type: 'SPARSE', embedder: { sparse: 'BM25' } }]));
    svc = await startTestSvc(['queue', 'kv', 'vector', 'mgmt'], { env: { SVC_VECTOR_DIMENSION: '3', SVC_VECTOR_INDEXES: file } });
    redis = new Redis({ url: svc.urls.kv!, token: svc.ctx.credentials.get('kv.token') });
    index = new Index({ url: svc.urls.vector!, token: svc.ctx.credentials.get('vector.default.token') });
    await redis.set('greeting', 'hello');
    await redis.set(xssKey, XSS[0]);
    await redis.set('big', 'x'.repeat(200_000));
    await redis.hset('user:1', { name: 'Ada', bio: XSS[0] });
    await redis.rpush('jobs', 'a', 'b', XSS[1]);
    await redis.sadd('tags', 'red', 'green');
    await redis.zadd('scores', { score: 1, member: 'ann' }, { score: 2, member: 'bob' });
    await redis.xadd('events', '*', { kind: 'signup', who: 'ann' });
    await redis.json.set('doc:1', '$', { title: XSS[1], n: 1 });
    await index.upsert([
      { id: 'a', vector: [1, 0, 0], metadata: { genre: 'drama', title: XSS[1] } },
      { id: 'b', vector: [0.9, 0.1, 0], metadata: { genre: 'drama' } },
      { id: 'c', vector: [0, 1, 0], metadata: { genre: 'comedy' } },
      { id: 'd', vector: [0, 0, 1], metadata: { genre: 'drama' } },
    ]);
    b = await launchBrowser();
    await signIn(b.page, svc);
  });
  after(async () => {
    await b?.close();
    await svc?.close();
    defs?.cleanup();
  });

  test('key browser: pattern and type filters; keys shown as text', async () => {
    const { page } = b;
    await page.goto(`${svc.urls.mgmt}/console/#/kv/keys`);
    await page.locator('table[data-table=keys] tbody tr').nth(8).waitFor();
    const names = await page.locator('table[data-table=keys] tr[data-key]').evaluateAll((rows) => rows.map((r) => r.getAttribute('data-key')));
    assert.deepEqual(new Set(names), new Set(['greeting', xssKey, 'big', 'user:1', 'jobs', 'tags', 'scores', 'events', 'doc:1']));
    assert.equal(await page.locator('img[src=x]').count(), 0);
    await screenshot(page, '30-kv-keys');
    await page.fill('input[name=match]', 'user:*');
    await page.click('[data-scan]');
    await waitFor('filtered keys', async () => (await page.locator('table[data-table=keys] tr[data-key]').count()) === 1, 15_000);
    await page.goto(`${svc.urls.mgmt}/console/#/kv/keys?match=*&type=zset`);
    await waitFor('type filter', async () => (await page.locator('table[data-table=keys] tr[data-key]').evaluateAll((r) => r.map((x) => x.getAttribute('data-key')))).join() === 'scores', 15_000);
  });

  test('a string edited in the console is visible through the REST API; TTL set', async () => {
    const { page } = b;
    await page.goto(`${svc.urls.mgmt}/console/#/kv/key/greeting`);
    await page.click('[data-edit]');
    await page.fill('textarea[name=edit]', 'hello from the console');
    await page.click('[data-save]');
    await waitFor('new value', async () => (await redis.get('greeting')) === 'hello from the console', 15_000);
    await page.locator('pre.value', { hasText: 'hello from the console' }).waitFor();
    await page.click('[data-ttl]');
    await page.fill('textarea[name=edit]', '120');
    await page.click('[data-save]');
    await waitFor('ttl', async () => {
      const t = await redis.ttl('greeting');
      return t > 0 && t <= 120;
    }, 15_000);
    await page.locator('[data-ttl-text]', { hasText: 'min' }).waitFor();
    await screenshot(page, '31-kv-string');
  });

  test('a hash field edited in the console; other types and a large value are shown paged, as text', async () => {
    const { page } = b;
    await page.goto(`${svc.urls.mgmt}/console/#/kv/key/user%3A1`);
    const row = page.locator('tr[data-field=name]');
    await row.locator('[data-edit]').click();
    await page.fill('textarea[name=edit]', 'Grace');
    await page.click('[data-save]');
    await waitFor('hash field', async () => (await redis.hget('user:1', 'name')) === 'Grace', 15_000);
    assert.ok(((await page.textContent('table[data-table=members]')) ?? '').includes(XSS[0]));
    await screenshot(page, '32-kv-hash');
    for (const [key, shot] of [['jobs', '33-kv-list'], ['scores', '34-kv-zset'], ['events', '35-kv-stream'], ['doc:1', '36-kv-json'], ['tags', '37-kv-set'], [xssKey, '38-kv-xss-key']]) {
      await page.goto(`${svc.urls.mgmt}/console/#/kv/key/${encodeURIComponent(key)}`);
      await page.locator('[data-key-name]').waitFor();
      await page.locator('table[data-table=members], pre.value').first().waitFor();
      await screenshot(page, shot);
    }
    assert.ok(((await page.textContent('main')) ?? '').includes(XSS[0]));
    // a JSON document is shown and edited as JSON (JSON.GET / JSON.SET)
    await page.goto(`${svc.urls.mgmt}/console/#/kv/key/doc%3A1`);
    await page.locator('pre.value', { hasText: '"n": 1' }).waitFor();
    await page.click('[data-edit]');
    await page.fill('textarea[name=edit]', '{"title": "plain", "n": 2}');
    await page.click('[data-save]');
    await waitFor('JSON document', async () => JSON.stringify(await redis.json.get('doc:1')) === '{"title":"plain","n":2}', 15_000);
    await page.goto(`${svc.urls.mgmt}/console/#/kv/key/big`);
    await page.locator('.pager', { hasText: 'too large to edit' }).waitFor();
    const shown = (await page.textContent('pre.value')) ?? '';
    assert.equal(shown.length, 64 * 1024, 'one 64 KiB slice, not the whole value');
    assert.equal(await page.locator('img[src=x]').count(), 0);
    assert.equal(await page.evaluate(() => (window as unknown as { __xss?: string }).__xss), undefined);
    assert.deepEqual(b.errors, []);
  });

  test('the command box runs a command through the REST API', async () => {
    const { page } = b;
    await page.goto(`${svc.urls.mgmt}/console/#/kv/command`);
    await page.fill('input[name=command]', 'SET "two words" "a b c"');
    await page.click('[data-run]');
    await page.locator('[data-results] pre.value', { hasText: 'OK' }).waitFor();
    assert.equal(await redis.get('two words'), 'a b c');
    await page.fill('input[name=command]', 'HGET user:1 name');
    await page.click('[data-run]');
    await page.locator('[data-results] pre.value', { hasText: 'Grace' }).waitFor();
    await page.fill('input[name=command]', 'NOSUCHCOMMAND');
    await page.click('[data-run]');
    await page.locator('[data-results] .notice.error').waitFor();
    await screenshot(page, '39-kv-command');
    // the refused command's 400 is the one error the browser logs
    assert.deepEqual(b.errors, ['console.error: Failed to load resource: the server responded with a status of 400 (Bad Request)']);
    b.errors.length = 0;
  });

  test('vector: a query by vector with a filter and by id returns the expected ids; fetch by id', async () => {
    const { page } = b;
    await page.goto(`${svc.urls.mgmt}/console/#/vector`);
    await page.locator('table[data-table=namespaces]').waitFor();
    await page.selectOption('select[name=mode]', 'vector');
    await page.fill('input[name=query-vector]', '[1, 0, 0]');
    await page.fill('input[name=filter]', "genre = 'drama'");
    await page.fill('input[name=topK]', '2');
    await page.click('[data-query]');
    const results = page.locator('table[data-table=results] tr[data-id]');
    await results.nth(1).waitFor();
    assert.deepEqual(await results.evaluateAll((r) => r.map((x) => x.getAttribute('data-id'))), ['a', 'b']);
    const scores = (await page.locator('[data-score]').allTextContents()).map(Number);
    assert.equal(scores[0], 1);
    assert.ok(scores[1] < 1 && scores[1] > 0.9);
    assert.ok(((await page.textContent('table[data-table=results]')) ?? '').includes('<img src=x onerror='), 'metadata as text');

    await page.selectOption('select[name=mode]', 'id');
    await page.fill('input[name=query-id]', 'c');
    await page.fill('input[name=filter]', '');
    await page.fill('input[name=topK]', '1');
    await page.click('[data-query]');
    await waitFor('query by id', async () => (await results.evaluateAll((r) => r.map((x) => x.getAttribute('data-id')))).join() === 'c', 15_000);

    await page.fill('input[name=fetch-id]', 'd');
    await page.click('[data-fetch]');
    await page.locator('[data-fetched]', { hasText: 'drama' }).waitFor();
    await page.locator('table[data-table=records] tr[data-id]').nth(3).waitFor();
    assert.equal(await page.locator('img[src=x]').count(), 0);
    await screenshot(page, '40-vector');
    assert.deepEqual(b.errors, []);
  });

  test('vector: a second index with an embedder is queried by text', async () => {
    const { page } = b;
    const docs = new Index({ url: `${svc.urls.vector}/docs`, token: svc.ctx.credentials.get('vector.docs.token') });
    await docs.upsert([
      { id: 'cats', data: 'cats purr and chase mice', metadata: { kind: 'pet' } },
      { id: 'cars', data: 'cars need fuel and tyres', metadata: { kind: 'machine' } },
    ]);
    await page.goto(`${svc.urls.mgmt}/console/#/vector`);
    await page.locator('a.badge', { hasText: 'docs' }).click();
    await page.locator('.stat', { hasText: 'SPARSE' }).waitFor();
    await page.selectOption('select[name=mode]', 'data');
    await page.fill('input[name=query-data]', 'mice');
    await page.fill('input[name=topK]', '1');
    await page.click('[data-query]');
    await waitFor('text query', async () => (await page.locator('table[data-table=results] tr[data-id]').evaluateAll((r) => r.map((x) => x.getAttribute('data-id')))).join() === 'cats', 15_000);
    await screenshot(page, '41-vector-text-query');
    assert.deepEqual(b.errors, []);
  });

  test('the overview after some traffic: charts of the last hour', async () => {
    const { page } = b;
    // the sampler takes a sample every 10 s: two are needed for rates
    await page.goto(`${svc.urls.mgmt}/console/#/overview`);
    await page.locator('.chart canvas').first().waitFor({ timeout: 40_000 }).catch(async () => {
      await page.reload();
      await page.locator('.chart canvas').first().waitFor({ timeout: 30_000 });
    });
    await screenshot(page, '02-overview-charts');
    // the request counters saw this test's kv and vector traffic
    // (samples come every 10 s: the refused command's 4xx shows in the next one)
    const overview = await waitFor('a sample with the 4xx', async () => {
      // through the page's API client: every console call carries the CSRF token
      const o = await page.evaluate(async () => (await import('/console/app/lib.js' as string)).api('GET', 'overview'));
      return o.samples.some((s: any) => (s.rates.kv?.clientErrors ?? 0) > 0) ? o : undefined;
    }, 30_000);
    const total = (area: string) => overview.samples.reduce((a: number, s: any) => a + (s.rates[area]?.requests ?? 0), 0);
    assert.ok(total('kv') > 0 && total('vector') > 0, JSON.stringify(overview.samples.at(-1)));
    assert.deepEqual(overview.health, { status: 'ok', areas: { queue: 'ok', kv: 'ok', vector: 'ok', mgmt: 'ok' } });
    assert.deepEqual(b.errors, []);
  });
});
