/**
 * The console's queue pages in a real browser against a real svc: a message published through
 * `@upstash/qstash` shows in the logs page and its detail (body and headers holding HTML/script
 * payloads shown as text, never run); a message to a failing URL lands in the DLQ, is retried from
 * the console and delivered; DLQ bulk delete by filter; a schedule paused from the console stops
 * firing while an unpaused one keeps firing; signing-key rotation with confirmation; the logs
 * page asks for one page at a time; every page loads without JavaScript errors (screenshots).
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { Client } from '@upstash/qstash';
import { startTestSvc } from '../helpers/env.js';
import { startSink, waitFor, type Sink } from '../queue/helpers.js';
import { launchBrowser, screenshot, signIn, type ConsoleBrowser } from './browser.js';
import { XSS } from './helpers.js';

type Svc = Awaited<ReturnType<typeof startTestSvc>>;


describe('console: queue pages', () => {
  let svc: Svc;
  let sink: Sink;
  let b: ConsoleBrowser;
  let client: Client;
  let failing = true;
  let pausedAt = 0;
  const fired = (path: string) => sink.requests.filter((r) => r.url === path).map((r) => r.time);

  before(async () => {
    svc = await startTestSvc(['queue', 'mgmt']);
    sink = await startSink((r) => (r.url.startsWith('/fail') && failing ? { status: 500, body: `broken ${XSS[1]}` } : { status: 200, body: 'ok' }));
    client = new Client({ baseUrl: svc.urls.queue!, token: svc.ctx.credentials.get('queue.token') });
    // two schedules firing every minute: one is paused from the console, the other is the control
    await client.schedules.create({ destination: `${sink.url}/sched-control`, cron: '* * * * *', scheduleId: 'control' });
    await client.schedules.create({ destination: `${sink.url}/sched-paused`, cron: '* * * * *', scheduleId: 'to-pause' });
    b = await launchBrowser();
    await signIn(b.page, svc);
  });
  after(async () => {
    await b?.close();
    await sink?.close();
    await svc?.close();
  });

  test('a schedule is paused from the console', async () => {
    const { page } = b;
    await page.goto(`${svc.urls.mgmt}/console/#/queue/schedules`);
    const row = page.locator('tr[data-schedule="to-pause"]');
    await row.locator('[data-pause]').click();
    await page.click('[data-confirm]');
    await row.locator('.badge', { hasText: 'paused' }).waitFor();
    pausedAt = Date.now();
    assert.equal((await client.schedules.get('to-pause')).isPaused, true);
    assert.equal((await client.schedules.get('control')).isPaused, false);
    await screenshot(page, '10-queue-schedules');
  });

  test('a schedule is created from the console', async () => {
    const { page } = b;
    await page.goto(`${svc.urls.mgmt}/console/#/queue/schedules`);
    await page.click('[data-new-schedule]');
    await page.fill('input[name=destination]', `${sink.url}/made-in-console`);
    await page.fill('input[name=cron]', '0 3 * * 1');
    await page.fill('input[name=scheduleId]', 'weekly-report');
    await page.fill('textarea[name=body]', '{"report":"weekly"}');
    await page.click('[data-create]');
    await page.locator('tr[data-schedule=weekly-report]').waitFor();
    const s = await client.schedules.get('weekly-report');
    assert.equal(s.cron, '0 3 * * 1');
    assert.equal(s.destination, `${sink.url}/made-in-console`);
    assert.equal(s.body, '{"report":"weekly"}');
  });

  test('a message published through the SDK shows in the logs and its detail, payloads as text', async () => {
    const { page } = b;
    const { messageId } = await client.publish({ url: `${sink.url}/ok`, body: `{"html":"${XSS[0].replaceAll('"', '\\"')}"}`, headers: { 'x-note': XSS[1] }, label: 'console-test' });
    await waitFor('delivery', () => sink.at('/ok').length > 0, 30_000);
    await page.goto(`${svc.urls.mgmt}/console/#/queue/logs`);
    const row = page.locator('table[data-table=logs] tr', { hasText: messageId }).first();
    await row.waitFor();
    await screenshot(page, '11-queue-logs');
    // filters: by message id and by state
    await page.fill('input[name=messageId]', messageId);
    await page.selectOption('select[name=state]', 'DELIVERED');
    await page.click('[data-apply]');
    await page.locator('table[data-table=logs] tbody tr').first().waitFor();
    await waitFor('filtered rows', async () => (await page.locator('table[data-table=logs] tbody tr').count()) === 1, 15_000);
    assert.match((await page.locator('table[data-table=logs] tbody tr').textContent()) ?? '', /DELIVERED/);

    await page.locator('table[data-table=logs] tbody tr').first().click();
    await page.locator('table[data-table=attempts]').waitFor();
    const text = (await page.textContent('main')) ?? '';
    assert.ok(text.includes(XSS[0]), 'the body is shown as text');
    assert.ok(text.includes(XSS[1]), 'the header is shown as text');
    assert.equal(await page.locator('img[src=x]').count(), 0);
    assert.equal(await page.locator('main script').count(), 0);
    assert.equal(await page.evaluate(() => (window as unknown as { __xss?: string }).__xss), undefined);
    await screenshot(page, '12-queue-message');
    assert.deepEqual(b.errors, []);
  });

  test('a message to a failing URL lands in the DLQ, is retried from the console and delivered', async () => {
    const { page } = b;
    const { messageId } = await client.publish({ url: `${sink.url}/fail-1`, body: 'retry me', retries: 0 });
    await waitFor('DLQ entry', async () => (await client.dlq.listMessages({ filter: { messageId } })).messages.length === 1, 30_000);
    await page.goto(`${svc.urls.mgmt}/console/#/queue/dlq`);
    const row = page.locator('table[data-table=dlq] tr', { hasText: messageId });
    await row.waitFor();
    assert.ok(((await row.textContent()) ?? '').includes(`broken ${XSS[1]}`), 'response body shown as text');
    assert.equal(await page.locator('img[src=x]').count(), 0);
    await screenshot(page, '13-queue-dlq');
    failing = false;
    try {
      await row.locator('[data-retry]').click();
      await page.click('[data-confirm]');
      await page.locator('.notice.ok', { hasText: 'Retried' }).waitFor();
      await waitFor('redelivery', () => sink.at('/fail-1').some((r) => r.body.toString() === 'retry me') && sink.at('/fail-1').length >= 2, 30_000);
      assert.equal((await client.dlq.listMessages({ filter: { messageId } })).messages.length, 0, 'the entry left the DLQ');
      // the page drops the row when it reloads the list after the retry
      await row.waitFor({ state: 'detached', timeout: 30_000 });
    } finally {
      failing = true;
    }
  });

  test('DLQ: bulk delete of a filtered selection', async () => {
    const { page } = b;
    for (const n of [1, 2, 3]) await client.publish({ url: `${sink.url}/fail-bulk-${n}`, body: 'x', retries: 0, label: n < 3 ? 'bulk' : 'keep' });
    await waitFor('3 DLQ entries', async () => (await client.dlq.listMessages()).messages.length >= 3, 30_000);
    await page.goto(`${svc.urls.mgmt}/console/#/queue/dlq?label=bulk`);
    await page.locator('table[data-table=dlq] tbody tr').nth(1).waitFor();
    await page.click('[data-delete-filter]');
    await page.click('[data-confirm]');
    await page.locator('.notice.ok', { hasText: 'Deleted 2 entries' }).waitFor();
    const left = (await client.dlq.listMessages()).messages;
    assert.deepEqual(left.map((m) => m.label), ['keep']);
    // and one entry deleted by itself
    await client.publish({ url: `${sink.url}/fail-one`, body: 'x', retries: 0, label: 'one' });
    const one = await waitFor('DLQ entry', async () => (await client.dlq.listMessages()).messages.find((m) => m.label === 'one'), 30_000);
    await page.goto(`${svc.urls.mgmt}/console/#/queue/dlq?label=one`);
    await page.locator(`tr[data-dlq="${one.dlqId}"] [data-delete]`).click();
    await page.click('[data-confirm]');
    await page.locator('.notice.ok', { hasText: `Deleted ${one.dlqId}` }).waitFor();
    assert.deepEqual((await client.dlq.listMessages()).messages.map((m) => m.label), ['keep']);
  });

  test('signing keys: rotation asks for confirmation', async () => {
    const { page } = b;
    const old = { current: svc.ctx.credentials.get('queue.currentSigningKey'), next: svc.ctx.credentials.get('queue.nextSigningKey') };
    await page.goto(`${svc.urls.mgmt}/console/#/queue/keys`);
    await page.click('[data-rotate]');
    await page.locator('.dialog').waitFor();
    await screenshot(page, '14-queue-keys-rotate');
    await page.click('[data-confirm]');
    await waitFor('rotation', () => svc.ctx.credentials.get('queue.currentSigningKey') === old.next, 10_000);
  });

  test('the logs page asks for one page at a time', async () => {
    const { page } = b;
    for (let i = 0; i < 30; i++) await client.publish({ url: `${sink.url}/many`, body: String(i), delay: 3600 });
    const calls: string[] = [];
    const on = (r: { url(): string }) => {
      if (r.url().includes('/console/api/queue/v2/logs')) calls.push(r.url());
    };
    page.on('request', on);
    await page.goto(`${svc.urls.mgmt}/console/#/queue/logs`);
    await page.locator('table[data-table=logs] tbody tr').nth(24).waitFor();
    await page.click('[data-next]');
    await waitFor('second page', () => calls.length >= 2, 15_000);
    await page.locator('table[data-table=logs] tbody tr').first().waitFor();
    page.off('request', on);
    assert.equal(calls.length, 2);
    for (const c of calls) assert.equal(new URL(c).searchParams.get('count'), '25');
    assert.ok(new URL(calls[1]).searchParams.get('cursor'), 'the second call carries the cursor');

    // the numbers behind the overview and the histogram (GET /v2/stats, /v2/stats/events)
    const auth = { authorization: `Bearer ${svc.ctx.credentials.get('queue.token')}` };
    // counts are cached for 1 s (the overview sampler may have just read them)
    const stats = await waitFor('stats', async () => {
      const s = (await (await fetch(`${svc.urls.queue}/v2/stats`, { headers: auth })).json()) as any;
      return s.messages.delayed === 30 ? s : undefined;
    }, 5_000);
    assert.equal(stats.dlq, 1);
    assert.ok(stats.deliveries.delivered >= 2 && stats.deliveries.failed >= 4, JSON.stringify(stats.deliveries));
    const h = (await (await fetch(`${svc.urls.queue}/v2/stats/events?buckets=10`, { headers: auth })).json()) as any;
    assert.ok(h.states.CREATED.length >= 10 && h.states.CREATED.length <= 11, 'minute-aligned buckets cover the hour');
    assert.equal(h.bucketMs % 60_000, 0);
    assert.ok(h.states.CREATED.reduce((a: number, n: number) => a + n, 0) >= 35);
    assert.equal((await fetch(`${svc.urls.queue}/v2/stats/events?buckets=0`, { headers: auth })).status, 400);
  });

  test('every queue page loads without JavaScript errors', async () => {
    const { page } = b;
    await client.queue({ queueName: 'orders' }).upsert({ parallelism: 2 });
    await client.urlGroups.addEndpoints({ name: 'fanout', endpoints: [{ url: `${sink.url}/a` }, { url: `${sink.url}/b`, name: XSS[1] }] });
    await client.publish({ url: `${sink.url}/fc`, body: 'x', flowControl: { key: 'tenant-1', parallelism: 2, rate: 10 } });
    for (const [tab, name] of [['queues', '15-queue-queues'], ['url-groups', '16-queue-url-groups'], ['flow-control', '17-queue-flow-control']]) {
      await page.goto(`${svc.urls.mgmt}/console/#/queue/${tab}`);
      await page.locator('table.t tbody tr').first().waitFor();
      await screenshot(page, name);
    }
    assert.equal(await page.locator('img[src=x]').count(), 0);
    assert.deepEqual(b.errors, []);
  });

  test('the paused schedule stops firing while the control keeps firing', async () => {
    assert.ok(pausedAt > 0);
    const pausedBefore = fired('/sched-paused').length;
    // the control fires at the next minute boundary after the pause
    await waitFor('control schedule fires after the pause', () => fired('/sched-control').some((t) => t > pausedAt), 75_000);
    await new Promise((r) => setTimeout(r, 1_000));
    assert.equal(fired('/sched-paused').length, pausedBefore, 'the paused schedule did not fire');
  });
});
