/**
 * Schedules: cron parsing; the scheduler
 * driven by a fake clock against a real SQLite store (fires once per due time, a missed
 * occurrence once, never twice); the API through the SDK; one real end-to-end firing over HTTP
 * with a clock shifted to just before a minute boundary; and restart without double fire.
 */
import assert from 'node:assert/strict';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { Client } from '@upstash/qstash';
import { createContext } from '../../src/main.js';
import { createLogger } from '../../src/logger.js';
import { parseCron } from '../../src/queue/schedules/cron.js';
import { Scheduler } from '../../src/queue/schedules/scheduler.js';
import { createQueueServer } from '../../src/queue/server.js';
import { buildMessage } from '../../src/queue/build.js';
import { openSqliteQueueStore } from '../../src/queue/store/sqlite.js';
import { tempDir, testConfig } from '../helpers/env.js';
import { startQueue, startSink, waitFor, type Sink } from './helpers.js';

const MIN = 60_000;
const logger = createLogger('silent');

test('cron: 5 fields, CRON_TZ prefix, trimming, errors', () => {
  const t0 = Date.UTC(2026, 0, 1, 10, 7, 30);
  assert.equal(parseCron(' */10 * * * * ').text, '*/10 * * * *');
  assert.equal(parseCron('*/10 * * * *').next(t0), Date.UTC(2026, 0, 1, 10, 10));
  assert.equal(parseCron('* * * * *').next(Date.UTC(2026, 0, 1, 10, 10)), Date.UTC(2026, 0, 1, 10, 11));
  // 09:00 in New York (UTC-5 in January) = 14:00 UTC
  assert.equal(parseCron('CRON_TZ=America/New_York 0 9 * * *').next(t0), Date.UTC(2026, 0, 1, 14, 0));
  assert.throws(() => parseCron('* * * *'), /expected 5 fields/);
  assert.throws(() => parseCron('0 * * * * *'), /expected 5 fields/);
  assert.throws(() => parseCron('61 * * * *'), /invalid Upstash-Cron/);
  assert.throws(() => parseCron('CRON_TZ=Nowhere/City * * * * *'), /invalid Upstash-Cron/);
});

test('scheduler with a fake clock: once per due time, missed occurrence once, paused never', async () => {
  const tmp = tempDir();
  const store = openSqliteQueueStore(path.join(tmp.dir, 'q.sqlite'));
  const schedules = store.schedules();
  let now = Date.UTC(2026, 0, 1, 10, 0, 30);
  const clock = { now: () => now };
  const fired: number[] = [];
  const mk = () =>
    new Scheduler({
      schedules,
      clock,
      logger,
      build: async (s, t) => [buildMessage(s.options, { url: 'http://127.0.0.1:9/x', scheduleId: s.id }, s.body, t)],
      fired: (_m, t) => fired.push(t),
    });
  const sch = mk();
  const opts = { method: 'POST', headers: {}, maxRetries: 0 };
  await schedules.upsertSchedule({ id: 's1', cron: '* * * * *', destination: 'http://127.0.0.1:9/x', options: opts, body: Buffer.from('b'), paused: false, createdAt: now, nextTime: parseCron('* * * * *').next(now), lastMessageIds: [] });
  assert.equal(await sch.tick(), 0, 'not due yet');
  now = Date.UTC(2026, 0, 1, 10, 1, 0);
  assert.equal(await sch.tick(), 1);
  assert.equal(await sch.tick(), 0, 'no double fire for the same due time');
  const s = (await schedules.getSchedule('s1'))!;
  assert.equal(s.lastTime, now);
  assert.equal(s.nextTime, Date.UTC(2026, 0, 1, 10, 2));
  assert.equal(s.lastMessageIds.length, 1);
  // down for 5 minutes: the missed occurrences fire once, then the schedule is back on the grid
  now = Date.UTC(2026, 0, 1, 10, 7, 12);
  const fresh = mk(); // another scheduler instance (a restart) sees the same state
  const [a, b] = await Promise.all([fresh.tick(), sch.tick()]);
  assert.equal(a + b, 1, 'two concurrent schedulers fire a due time once');
  assert.equal((await schedules.getSchedule('s1'))!.nextTime, Date.UTC(2026, 0, 1, 10, 8));
  await schedules.setSchedulePaused('s1', true, undefined);
  now += 10 * MIN;
  assert.equal(await sch.tick(), 0, 'paused');
  assert.equal(fired.length, 2);
  await store.close();
  tmp.cleanup();
});

let q: Awaited<ReturnType<typeof startQueue>>;
let sink: Sink;
before(async () => {
  q = await startQueue();
  sink = await startSink();
});
after(async () => {
  await q.close();
  await sink.close();
});

test('schedule API with the SDK: create, upsert by id, get shape, list, pause/resume (PATCH and POST), delete', async () => {
  const { scheduleId } = await q.client.schedules.create({
    destination: `${sink.url}/sched`,
    cron: '*/5 * * * * ',
    headers: { 'test-header': 'test-value', 'Bypass-Tunnel-Reminder': 'client-test' },
    retries: 5,
    delay: 10,
    callback: `${sink.url}/cb`,
    label: 'lbl',
  });
  assert.match(scheduleId, /^scd_/);
  const s = await q.client.schedules.get(scheduleId);
  assert.equal(s.cron, '*/5 * * * *');
  assert.equal(s.destination, `${sink.url}/sched`);
  assert.deepEqual(s.header, { 'Bypass-Tunnel-Reminder': ['client-test'], 'Content-Type': ['application/json'], 'Test-Header': ['test-value'] });
  assert.equal(s.retries, 5);
  assert.equal(s.delay, 10);
  assert.equal(s.callback, `${sink.url}/cb`);
  assert.equal(s.isPaused, false);
  assert.equal((s as unknown as { body?: string }).body, undefined);
  assert.ok(typeof s.nextScheduleTime === 'number' && s.nextScheduleTime > Date.now() && s.nextScheduleTime % (5 * MIN) === 0);
  const again = await q.client.schedules.create({ destination: `${sink.url}/sched2`, cron: '0 * * * *', scheduleId, queueName: 'sq', body: 'hello' });
  assert.equal(again.scheduleId, scheduleId);
  const s2 = await q.client.schedules.get(scheduleId);
  assert.equal(s2.destination, `${sink.url}/sched2`);
  assert.equal(s2.queueName, 'sq');
  assert.equal(s2.body, 'hello');
  assert.equal(s2.createdAt, s.createdAt);
  await q.client.schedules.pause({ schedule: scheduleId }); // PATCH
  assert.equal((await q.client.schedules.get(scheduleId)).isPaused, true);
  const res = await q.api(`/v2/schedules/${scheduleId}/resume`, { method: 'POST' });
  assert.equal(res.status, 200);
  assert.equal((await q.client.schedules.get(scheduleId)).isPaused, false);
  assert.ok((await q.client.schedules.list()).some((x) => x.scheduleId === scheduleId));
  await q.client.schedules.delete(scheduleId);
  await assert.rejects(q.client.schedules.get(scheduleId), /not found/);
  const bad = await q.api(`/v2/schedules/${sink.url}/x`, { method: 'POST', headers: { 'Upstash-Cron': '* * *' } });
  assert.equal(bad.status, 400);
  const missing = await q.api(`/v2/schedules/${sink.url}/x`, { method: 'POST' });
  assert.equal(missing.status, 400);
});

/** A queue server whose clock runs `offset()` ms ahead of real time. */
async function shiftedServer(dataDir: string, offset: () => number) {
  const config = testConfig(dataDir, { SVC_AREAS: 'queue' });
  const actx = createContext(config, { logger, env: {} });
  const server = await createQueueServer(actx, { clock: { now: () => Date.now() + offset() } });
  const url = await server.listen();
  const client = new Client({ baseUrl: url, token: actx.credentials.get('queue.token'), retry: false });
  return { server, url, client };
}

test('real firing end to end (clock shifted to 1.5 s before a minute), once per due time across a restart, missed occurrence once', async () => {
  const tmp = tempDir();
  const hit = await startSink();
  let offset = 0;
  try {
    // shift so that the next minute boundary is 1.5 s away
    const toBoundary = () => MIN - (Date.now() % MIN);
    offset = toBoundary() - 1500;
    let svc = await shiftedServer(tmp.dir, () => offset);
    await svc.client.queue({ queueName: 'sq2' }).upsert({ parallelism: 1 });
    const { scheduleId } = await svc.client.schedules.create({ destination: `${hit.url}/tick`, cron: '* * * * *', queueName: 'sq2', headers: { 'x-a': 'b' }, body: 'payload' });
    const first = await waitFor('first firing', () => hit.at('/tick')[0], 8000);
    assert.equal(first.headers['upstash-schedule-id'], scheduleId);
    assert.equal(first.headers['upstash-queue-name'], 'sq2');
    assert.equal(first.headers['x-a'], 'b');
    assert.equal(first.body.toString(), 'payload');
    const s = await waitFor('state SUCCESS', async () => {
      const x = await svc.client.schedules.get(scheduleId);
      return Object.values(x.lastScheduleStates ?? {})[0] === 'SUCCESS' ? x : undefined;
    });
    assert.ok(s.lastScheduleTime! > 0 && s.nextScheduleTime! > s.lastScheduleTime!);
    await svc.server.close();
    // restart 3 minutes later (shifted clock): the missed occurrences fire exactly once
    offset += 3 * MIN;
    svc = await shiftedServer(tmp.dir, () => offset);
    await waitFor('missed occurrence fired', () => hit.at('/tick').length === 2, 8000);
    await svc.server.close();
    // restart again without time passing: no double fire
    svc = await shiftedServer(tmp.dir, () => offset);
    await new Promise((r) => setTimeout(r, 500)); // negative check
    assert.equal(hit.at('/tick').length, 2);
    const after = await svc.client.schedules.get(scheduleId);
    assert.ok(after.nextScheduleTime! > Date.now() + offset);
    await svc.server.close();
  } finally {
    await hit.close();
    tmp.cleanup();
  }
});
