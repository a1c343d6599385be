/**
 * Upgrading a data directory written by the previous release, end to end: the previous release
 * itself (its source, taken from this repository's history) runs `svc serve`, the official SDKs
 * write queue messages, DLQ entries, logs, a schedule, a queue with parallelism, kv keys and
 * vector records through it; then this checkout's svc starts on the same data directory and must
 * answer the same (every field), deliver what was pending, retry and delete the DLQ entries,
 * continue a logs cursor taken on the previous release, and serve the vector records.
 * A second test kills the previous release with SIGKILL in the middle of a burst of publishes,
 * grows its tables so the copies of migrations 0006 and 0007 take seconds, SIGKILLs the first
 * start of this svc in the middle of 0006 and the second in the middle of 0007, and checks the
 * file is each time a consistent older schema with every row, which the third start migrates.
 *
 * How the previous release is obtained: `git archive` of the pinned commit below from the
 * repository this test runs in, extracted to a temporary directory, with this checkout's
 * node_modules linked in (the release's package.json and lock file are the same). A `git clone`
 * (CI's `.ci/run` works on a fresh clone) has the whole history; a shallow clone does not, and the
 * test then fails and says to run `git fetch --unshallow`, never skips. Running the real old code
 * (rather than recreating its schema from its migration files) is the point: it proves what the
 * old code wrote, with the old code's own values, is read by the new one.
 * Previous release: the commit before the SQLite queue migrations 0006 (`logs` without
 * AUTOINCREMENT) and 0007 (`messages` the same); queue schema version 5.
 */
import assert from 'node:assert/strict';
import { execFileSync, execSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import Database from 'better-sqlite3';
import { Client } from '@upstash/qstash';
import { Redis } from '@upstash/redis';
import { Index } from '@upstash/vector';
import { Client as WorkflowClient } from '@upstash/workflow';
import { latestVersion } from '../../src/queue/store/migrate.js';
import { startTestPostgres, withPg } from '../helpers/postgres.js';
import { tempDir } from '../helpers/env.js';
import { launchSvc, stopSvc, type LaunchedSvc } from '../helpers/svc-process.js';
import { startSink, waitFor, type Sink } from '../queue/helpers.js';
import { startWorkflowApp, waitForRunState, workflowRunLog, type WorkflowApp, type WorkflowEnv } from '../queue/workflow-helpers.js';
import { credentials, ROOT, started, userVersion } from './backup-helpers.js';

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

/** The previous release (queue schema 5). */
const PREVIOUS = 'a35e9c02985601cdfb57da252f253a4cf83e7bac';
const PREVIOUS_QUEUE_SCHEMA = 5;
const LONG = String(3650 * 86_400_000);
// the stores this test is about (SQLite; the vector PostgreSQL store in its own test) whatever
// store a whole test run was pointed at (`test/helpers/env.ts`)
const ENV = {
  SVC_QUEUE_DATABASE_URL: '',
  SVC_VECTOR_DATABASE_URL: '',
  SVC_VECTOR_INDEXES: '',
  SVC_VECTOR_DIMENSION: '4',
  SVC_QUEUE_LOG_RETENTION_MS: LONG,
  SVC_QUEUE_DLQ_RETENTION_MS: LONG,
  SVC_QUEUE_PORT: '0',
  SVC_KV_PORT: '0',
  SVC_VECTOR_PORT: '0',
  SVC_MGMT_PORT: '0',
};

/** The previous release's source in a temporary directory (see the header). */
function previousRelease(): { root: string; cleanup(): void } {
  try {
    execFileSync('git', ['-C', ROOT, 'cat-file', '-e', `${PREVIOUS}^{commit}`], { stdio: 'ignore' });
  } catch {
    throw new Error(`commit ${PREVIOUS} (the previous release) is not in this clone's history; run \`git fetch --unshallow\``);
  }
  const tmp = tempDir('svc-previous-');
  execSync(`git -C '${ROOT}' archive ${PREVIOUS} | tar -x -C '${tmp.dir}'`);
  fs.symlinkSync(path.join(ROOT, 'node_modules'), path.join(tmp.dir, 'node_modules'));
  return { root: tmp.dir, cleanup: tmp.cleanup };
}

async function serveFrom(root: string | undefined, dataDir: string, areas: string): Promise<LaunchedSvc> {
  const svc = launchSvc(dataDir, { ...ENV, SVC_AREAS: areas }, [], root);
  await started(svc);
  return svc;
}

/** The workflow SDK's QStash env for `svc` (its URL changes on every start; keys and token stay). */
function workflowEnv(svc: LaunchedSvc, dataDir: string): WorkflowEnv {
  const c = credentials(dataDir);
  return { QSTASH_URL: svc.url('queue'), QSTASH_TOKEN: c['queue.token'], QSTASH_CURRENT_SIGNING_KEY: c['queue.currentSigningKey'], QSTASH_NEXT_SIGNING_KEY: c['queue.nextSigningKey'] };
}

function clientOf(svc: LaunchedSvc, dataDir: string): Client {
  return new Client({ baseUrl: svc.url('queue'), token: credentials(dataDir)['queue.token'], retry: false });
}

/** Every log entry, following `cursor` from `start` (latest first, pages of `count`). */
async function allLogs(q: Client, start?: string, count = 3): Promise<Json[]> {
  const out: Json[] = [];
  let cursor = start;
  for (;;) {
    const page = (await q.logs({ cursor, count } as never)) as unknown as { logs: Json[]; cursor?: string };
    out.push(...page.logs);
    if (!page.cursor) return out;
    cursor = page.cursor;
  }
}

/**
 * Every entry of `GET /v2/<kind>?<query>` (kind `logs` or `events`), raw HTTP, pages of 3 from
 * cursor `start`; `first` only the first page, with its cursor.
 */
async function rawPages(base: string, token: string, kind: 'logs' | 'events', query: string, start?: string, first = false): Promise<{ entries: Json[]; cursor?: string }> {
  const entries: Json[] = [];
  let cursor = start;
  for (;;) {
    const r = await fetch(`${base}/v2/${kind}?count=3&${query}${cursor ? `&cursor=${cursor}` : ''}`, { headers: { authorization: `Bearer ${token}` } });
    assert.equal(r.status, 200);
    const page = (await r.json()) as Json;
    entries.push(...(page[kind] as Json[]));
    if (!page.cursor || first) return { entries, cursor: page.cursor as string | undefined };
    cursor = page.cursor as string;
  }
}

async function allDlq(q: Client): Promise<Json[]> {
  return (await q.dlq.listMessages({ count: 100 } as never)).messages as unknown as Json[];
}

test('a data directory written by the previous release: every record, same answers, pending work done', { timeout: 240_000 }, async () => {
  const prev = previousRelease();
  const data = tempDir('svc-upgrade-');
  const sink: Sink = await startSink((r, n) => {
    const p = r.url.split('?')[0];
    if (p === '/fail') return { status: 500, body: 'always fails' };
    if (p === '/flip' && n === 1) return { status: 500, body: 'fails once' };
    return undefined;
  });
  let svc: LaunchedSvc | undefined;
  let app: WorkflowApp | undefined;
  try {
    // ---- the previous release writes
    svc = await serveFrom(prev.root, data.dir, 'queue,kv,vector');
    let q = clientOf(svc, data.dir);
    app = await startWorkflowApp(workflowEnv(svc, data.dir), {
      '/three': [async (c) => {
        const a = await c.run('s1', () => (c.requestPayload as { n: number }).n + 1);
        return { result: await c.run('s2', () => a * 10) };
      }, {}],
      '/waiter': [async (c) => {
        const r = await c.waitForEvent('wait', 'upgrade-event', { timeout: '1d' });
        await c.run('after', () => ({ got: r.eventData ?? null, timeout: r.timeout }));
      }, {}],
    });
    let wf = new WorkflowClient({ baseUrl: svc.url('queue'), token: credentials(data.dir)['queue.token'] });
    const finishedRun = await wf.trigger({ url: `${app.url}/three`, body: { n: 4 } });
    const waitingRun = await wf.trigger({ url: `${app.url}/waiter`, body: {} });
    await waitForRunState(wf, finishedRun.workflowRunId, 'RUN_SUCCESS', 60_000);
    await waitFor('the waiter', async () => ((await wf.getWaiters({ eventId: 'upgrade-event' })) as unknown[]).length > 0, 60_000);
    const delivered = await Promise.all([1, 2, 3].map((i) => q.publish({ url: `${sink.url}/ok/${i}`, body: `b${i}`, headers: { 'X-Src': `s${i}` } })));
    const failed = await q.publish({ url: `${sink.url}/fail`, body: 'f', retries: 0, callback: `${sink.url}/cb`, failureCallback: `${sink.url}/fcb` });
    const flip = await q.publish({ url: `${sink.url}/flip`, body: 'flip', retries: 0 });
    const far = await q.publish({ url: `${sink.url}/far`, body: 'far', delay: 86_400 });
    const schedule = await q.schedules.create({ destination: `${sink.url}/cron`, cron: '0 0 1 1 *', body: 'yearly' });
    await q.queue({ queueName: 'upq' }).upsert({ parallelism: 2 });
    await waitFor('deliveries, DLQ and failure callback on the previous release', async () =>
      sink.at('/fcb').length === 1 && (await allDlq(q)).length === 2 && delivered.every((_, i) => sink.at(`/ok/${i + 1}`).length === 1) ? true : undefined, 60_000);
    const redis = new Redis({ url: svc.url('kv'), token: credentials(data.dir)['kv.token'] });
    await redis.set('upgrade:k', 'v1');
    const vec = new Index({ url: svc.url('vector'), token: credentials(data.dir)['vector.default.token'] });
    const records = {
      a: [{ id: 'a1', vector: [1, 0, 0, 0], metadata: { n: 1 }, data: 'one' }, { id: 'a2', vector: [0, 1, 0, 0], metadata: { n: 2 } }],
      b: [{ id: 'b1', vector: [0, 0, 1, 0], metadata: { tag: 'x' }, data: 'three' }],
    };
    for (const [ns, rs] of Object.entries(records)) await vec.namespace(ns).upsert(rs);
    // published last: due 20 s later, after the upgrade
    const delayed = await q.publish({ url: `${sink.url}/delayed`, body: 'later', delay: 20 });
    const queued = await q.queue({ queueName: 'upq' }).enqueue({ url: `${sink.url}/queued`, body: 'in the queue', delay: 20 });

    const before = {
      dlq: await allDlq(q),
      logs: await allLogs(q),
      delayed: await q.messages.get(delayed.messageId),
      queued: await q.messages.get(queued.messageId),
      far: await q.messages.get(far.messageId),
      schedule: await q.schedules.get(schedule.scheduleId),
      queue: await q.queue({ queueName: 'upq' }).get(),
      vectors: Object.fromEntries(await Promise.all(Object.keys(records).map(async (ns) => [ns, await vec.namespace(ns).fetch(records[ns as 'a'].map((r) => r.id), { includeVectors: true, includeMetadata: true, includeData: true })]))),
      query: await vec.namespace('a').query({ vector: [1, 0.1, 0, 0], topK: 2, includeMetadata: true }),
      finishedRun: await workflowRunLog(wf, finishedRun.workflowRunId),
      waitingRun: await workflowRunLog(wf, waitingRun.workflowRunId),
      waiters: await wf.getWaiters({ eventId: 'upgrade-event' }),
    };
    assert.equal(before.waitingRun?.workflowState, 'RUN_STARTED');
    const firstPage = (await q.logs({ count: 3 } as never)) as unknown as { logs: Json[]; cursor?: string };
    assert.ok(firstPage.cursor, 'more than one page of logs');
    // earliest first (new entries come after the cursor's place) and the events list
    const token = credentials(data.dir)['queue.token'];
    const oldRaw = {
      earliest: (await rawPages(svc.url('queue'), token, 'logs', 'order=earliestFirst')).entries,
      earliestFirst: await rawPages(svc.url('queue'), token, 'logs', 'order=earliestFirst', undefined, true),
      events: (await rawPages(svc.url('queue'), token, 'events', '')).entries,
      eventsFirst: await rawPages(svc.url('queue'), token, 'events', '', undefined, true),
    };
    assert.ok(sink.at('/delayed').length + sink.at('/queued').length === 0, 'the delayed messages are not due before the upgrade');
    await stopSvc(svc);
    svc = undefined;
    assert.equal(userVersion(path.join(data.dir, 'queue.sqlite')), PREVIOUS_QUEUE_SCHEMA);

    // ---- this svc on the same data directory
    svc = await serveFrom(undefined, data.dir, 'queue,kv,vector');
    assert.equal(userVersion(path.join(data.dir, 'queue.sqlite')), latestVersion());
    q = clientOf(svc, data.dir);
    // the cursor of the previous release continues after its first page, nothing lost or repeated
    // (latest first: entries this svc adds come before the cursor's place)
    const rest = await allLogs(q, firstPage.cursor);
    assert.deepEqual([...firstPage.logs, ...rest], before.logs);
    const rawRest = await rawPages(svc.url('queue'), token, 'events', '', oldRaw.eventsFirst.cursor);
    assert.deepEqual([...oldRaw.eventsFirst.entries, ...rawRest.entries], oldRaw.events);
    const earliestRest = (await rawPages(svc.url('queue'), token, 'logs', 'order=earliestFirst', oldRaw.earliestFirst.cursor)).entries;
    assert.deepEqual([...oldRaw.earliestFirst.entries, ...earliestRest].slice(0, oldRaw.earliest.length), oldRaw.earliest);
    const oldKeys = new Set(oldRaw.earliest.map((e) => JSON.stringify(e)));
    assert.ok(earliestRest.slice(oldRaw.earliest.length - 3).every((e) => !oldKeys.has(JSON.stringify(e))), 'no entry repeated');
    assert.deepEqual(await allDlq(q), before.dlq);
    assert.deepEqual(await q.schedules.get(schedule.scheduleId), before.schedule);
    assert.deepEqual(await q.queue({ queueName: 'upq' }).get(), before.queue);
    assert.deepEqual(await q.messages.get(far.messageId), before.far);
    assert.deepEqual(await q.messages.get(delayed.messageId), before.delayed);
    assert.deepEqual(await q.messages.get(queued.messageId), before.queued);
    assert.equal(before.queued.queueName, 'upq');
    app.env = workflowEnv(svc, data.dir);
    wf = new WorkflowClient({ baseUrl: svc.url('queue'), token: credentials(data.dir)['queue.token'] });
    assert.deepEqual(await workflowRunLog(wf, finishedRun.workflowRunId), before.finishedRun);
    assert.deepEqual(await workflowRunLog(wf, waitingRun.workflowRunId), before.waitingRun);
    // the same waiters; this release also names each one's run and event (the fields the Python
    // workflow client reads), which the previous release did not send
    const waitersNow = await wf.getWaiters({ eventId: 'upgrade-event' });
    assert.deepEqual(
      waitersNow,
      before.waiters.map((w) => ({ ...w, workflowRunId: waitingRun.workflowRunId, eventId: 'upgrade-event' })),
    );
    // the run that waited on the previous release completes when notified on this one
    const notified = await wf.notify({ eventId: 'upgrade-event', eventData: { v: 2 } });
    assert.equal((notified as unknown[]).length, 1);
    const resumed = await waitForRunState(wf, waitingRun.workflowRunId, 'RUN_SUCCESS', 90_000);
    const outs = (resumed.steps as Json[]).flatMap((g) => (g.steps as Json[]) ?? []).filter((x) => x.stepName === 'after').map((x) => x.out);
    assert.deepEqual(outs.map((o) => JSON.parse(String(o))), [{ got: { v: 2 }, timeout: false }]);

    // the delayed message is delivered once, when due
    await waitFor('the delayed message', () => (sink.at('/delayed').length ? true : undefined), 90_000);
    const got = sink.at('/delayed')[0];
    assert.equal(got.body.toString(), 'later');
    assert.equal(got.headers['upstash-message-id'], delayed.messageId);
    assert.ok(got.time >= before.delayed.notBefore! - 50, 'not before its time');
    // the DLQ entries: retry the one whose destination now answers 200, delete the other
    const flipEntry = before.dlq.find((e) => e.messageId === flip.messageId)!;
    const failEntry = before.dlq.find((e) => e.messageId === failed.messageId)!;
    assert.equal(failEntry.responseStatus, 500);
    assert.equal(failEntry.responseBody, 'always fails');
    assert.equal(failEntry.failureCallback ?? `${sink.url}/fcb`, `${sink.url}/fcb`);
    const retry = await fetch(`${svc.url('queue')}/v2/dlq/retry/${flipEntry.dlqId}`, { method: 'POST', headers: { authorization: `Bearer ${credentials(data.dir)['queue.token']}` } });
    assert.equal(retry.status, 201, await retry.clone().text());
    await waitFor('the retried DLQ message', () => (sink.at('/flip').length === 2 ? true : undefined), 60_000);
    await q.dlq.delete(failEntry.dlqId);
    assert.deepEqual((await allDlq(q)).map((e) => e.dlqId), []);
    // new messages get new, larger sequence numbers: nothing collides with the old rows
    const after = await q.publish({ url: `${sink.url}/ok/new`, body: 'new' });
    await waitFor('a message published after the upgrade', () => (sink.at('/ok/new').length ? true : undefined), 60_000);
    assert.ok(!before.logs.some((l) => l.messageId === after.messageId));
    // (the destination has it before svc records the outcome: the DELIVERED row follows its answer)
    await waitFor('the DELIVERED log of the new message', async () => ((await allLogs(q)).some((l) => l.messageId === after.messageId && l.state === 'DELIVERED') ? true : undefined), 60_000);
    // each message of the previous release was delivered once (its retries aside)
    for (let i = 1; i <= 3; i++) assert.equal(sink.at(`/ok/${i}`).length, 1);
    assert.equal(sink.at('/delayed').length, 1);
    await waitFor('the message of the queue', () => (sink.at('/queued').length ? true : undefined), 60_000);
    assert.equal(sink.at('/queued')[0].headers['upstash-message-id'], queued.messageId);

    assert.equal(await new Redis({ url: svc.url('kv'), token: credentials(data.dir)['kv.token'] }).get('upgrade:k'), 'v1');
    const vec2 = new Index({ url: svc.url('vector'), token: credentials(data.dir)['vector.default.token'] });
    for (const [ns, rs] of Object.entries(records)) {
      assert.deepEqual(await vec2.namespace(ns).fetch(rs.map((r) => r.id), { includeVectors: true, includeMetadata: true, includeData: true }), before.vectors[ns]);
    }
    assert.deepEqual(await vec2.namespace('a').query({ vector: [1, 0.1, 0, 0], topK: 2, includeMetadata: true }), before.query);
    await stopSvc(svc);
    svc = undefined;

    // ---- refusals: going back to the previous release on the upgraded directory, and this svc
    // on a directory of a newer schema (exit 2, a clear message, the file unchanged)
    const file = path.join(data.dir, 'queue.sqlite');
    const back = launchSvc(data.dir, { ...ENV, SVC_AREAS: 'queue,kv,vector' }, [], prev.root);
    assert.equal(await back.exited, 2, back.output());
    assert.match(back.output(), new RegExp(`queue\\.sqlite has queue schema version ${latestVersion()}, this svc \\(\\S+\\) supports up to ${PREVIOUS_QUEUE_SCHEMA}; upgrade svc`));
    assert.equal(userVersion(file), latestVersion());
    const db = new Database(file);
    db.pragma(`user_version = ${latestVersion() + 1}`);
    db.close();
    const newer = launchSvc(data.dir, { ...ENV, SVC_AREAS: 'queue,kv,vector' });
    assert.equal(await newer.exited, 2, newer.output());
    assert.match(newer.output(), new RegExp(`queue\\.sqlite has queue schema version ${latestVersion() + 1}, this svc \\(\\S+\\) supports up to ${latestVersion()}; upgrade svc`));
    assert.equal(userVersion(file), latestVersion() + 1);
  } finally {
    if (svc) await stopSvc(svc);
    await app?.close();
    await sink.close();
    data.cleanup();
    prev.cleanup();
  }
});

/** Row counts of the tables the schema-6/7 migrations copy, and the file's consistency checks. */
function queueFileState(file: string): { version: number; messages: number; logs: number; dlq: number; integrity: string; brokenKeys: number } {
  const db = new Database(file, { readonly: true });
  try {
    const count = (t: string) => Number(db.prepare(`SELECT count(*) FROM ${t}`).pluck().get());
    return {
      version: Number(db.pragma('user_version', { simple: true })),
      messages: count('messages'),
      logs: count(`logs WHERE message_seq != 0`), // schema 6's marker row holds no entry
      dlq: count('dlq'),
      integrity: String(db.pragma('integrity_check', { simple: true })),
      brokenKeys: (db.pragma('foreign_key_check') as unknown[]).length,
    };
  } finally {
    db.close();
  }
}

/**
 * Grows the tables of a schema-5 queue file with copies of its rows (so migrations 0006/0007 copy
 * for seconds): `n` finished messages each with two log rows and, for every second one, a DLQ entry.
 */
function grow(file: string, n: number): void {
  const db = new Database(file);
  try {
    const cols = (t: string) => (db.pragma(`table_info(${t})`) as { name: string }[]).map((c) => c.name).filter((c) => c !== 'seq');
    const m = cols('messages').filter((c) => c !== 'id');
    const failed = Number(db.prepare('SELECT message_seq FROM dlq ORDER BY seq LIMIT 1').pluck().get());
    const d = cols('dlq').filter((c) => c !== 'dlq_id' && c !== 'message_seq');
    const l = cols('logs').filter((c) => c !== 'message_seq');
    const first = Number(db.prepare('SELECT max(seq) FROM messages').pluck().get()) + 1;
    db.transaction(() => {
      db.exec(`WITH RECURSIVE k(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM k WHERE i + 1 < ${n})
        INSERT INTO messages (seq, id, ${m.join(', ')}) SELECT ${first} + k.i, 'msg_bulk' || k.i, ${m.map((c) => `x.${c}`).join(', ')} FROM k, messages x WHERE x.seq = ${failed}`);
      db.exec(`INSERT INTO dlq (dlq_id, message_seq, ${d.join(', ')}) SELECT 'bulk-' || y.seq, y.seq, ${d.map((c) => `x.${c}`).join(', ')}
        FROM messages y, dlq x WHERE y.seq >= ${first} AND y.seq % 2 = 0 AND x.message_seq = ${failed}`);
      db.exec(`INSERT INTO logs (message_seq, ${l.join(', ')}) SELECT y.seq, ${l.map((c) => `x.${c}`).join(', ')}
        FROM messages y, (SELECT * FROM logs WHERE message_seq = ${failed} ORDER BY seq LIMIT 2) x WHERE y.seq >= ${first}`);
    })();
  } finally {
    db.close();
  }
}

test('the previous release killed mid-load, then this svc killed mid-migration: the file stays a consistent older schema and the next start completes it', { timeout: 300_000 }, async () => {
  const prev = previousRelease();
  const data = tempDir('svc-upgrade-kill-');
  const sink: Sink = await startSink((r) => (r.url.startsWith('/fail') ? { status: 500, body: 'no' } : { delayMs: 50 }));
  const file = path.join(data.dir, 'queue.sqlite');
  let svc: LaunchedSvc | undefined;
  try {
    svc = await serveFrom(prev.root, data.dir, 'queue');
    const q = clientOf(svc, data.dir);
    const failed = await q.publish({ url: `${sink.url}/fail`, body: 'f', retries: 0 });
    await waitFor('the DLQ entry', async () => ((await allDlq(q)).length ? true : undefined), 60_000);
    // a burst of publishes, SIGKILLed once 40 were accepted
    const acked: string[] = [];
    // (raw HTTP: the SDK would print every publish the kill cuts off)
    const publish = async (i: number) => {
      const r = await fetch(`${svc!.url('queue')}/v2/publish/${sink.url}/burst`, { method: 'POST', headers: { authorization: `Bearer ${credentials(data.dir)['queue.token']}` }, body: `m${i}` });
      if (r.ok) acked.push(((await r.json()) as { messageId: string }).messageId);
    };
    const burst = Array.from({ length: 150 }, (_, i) => publish(i).catch(() => undefined)); // cut off by the kill
    await waitFor('40 accepted publishes', () => (acked.length >= 40 ? true : undefined), 60_000);
    svc.child.kill('SIGKILL');
    await svc.exited;
    svc = undefined;
    await Promise.allSettled(burst);
    const accepted = [...acked];

    grow(file, 150_000);
    const old = queueFileState(file);
    assert.equal(old.version, PREVIOUS_QUEUE_SCHEMA);
    assert.ok(old.logs > 300_000 && old.dlq > 75_000, JSON.stringify(old));

    // first start of this svc, SIGKILLed while migration 0006 copies `logs` (after its pre-upgrade
    // backup); the second one once 0006 has committed, while 0007 copies `messages`
    const backups = path.join(data.dir, 'backups');
    const wal = `${file}-wal`;
    const first = launchSvc(data.dir, { ...ENV, SVC_AREAS: 'queue' });
    const seenState = await waitFor('migration 0006 copying', () => {
      if (first.child.exitCode !== null) return 'exited';
      const backedUp = fs.existsSync(backups) && fs.readdirSync(backups).some((b) => fs.existsSync(path.join(backups, b, 'manifest.json')));
      return backedUp && fs.existsSync(wal) && fs.statSync(wal).size > 8 * 1024 * 1024 ? 'copying' : undefined;
    }, 120_000);
    assert.equal(seenState, 'copying', first.output());
    first.child.kill('SIGKILL');
    await first.exited;
    const mid = queueFileState(file);
    assert.equal(mid.version, PREVIOUS_QUEUE_SCHEMA, 'killed before migration 0006 committed');
    assert.deepEqual(mid, old, 'every row is there, the file is consistent');

    const second = launchSvc(data.dir, { ...ENV, SVC_AREAS: 'queue' });
    const seenSecond = await waitFor('migration 0007 copying', () => {
      if (second.child.exitCode !== null) return 'exited';
      return userVersion(file) === 6 ? 'copying' : undefined;
    }, 120_000);
    assert.equal(seenSecond, 'copying', second.output());
    second.child.kill('SIGKILL');
    await second.exited;
    const mid2 = queueFileState(file);
    assert.equal(mid2.version, 6, 'killed before migration 0007 committed');
    assert.deepEqual({ ...mid2, version: 0 }, { ...old, version: 0 }, 'every row is there, the file is consistent');

    // the next start completes the migration and serves the records
    svc = await serveFrom(undefined, data.dir, 'queue');
    const done = queueFileState(file);
    assert.equal(done.version, latestVersion());
    assert.equal(done.dlq, old.dlq);
    assert.equal(done.integrity, 'ok');
    assert.equal(done.brokenKeys, 0);
    // each start that found an older schema took its own pre-upgrade backup (docs/operations.md)
    const pre = fs.readdirSync(backups).filter((b) => b.startsWith('pre-upgrade-')).sort();
    assert.equal(pre.length, 3, pre.join(', '));
    assert.deepEqual(pre.map((b) => userVersion(path.join(backups, b, 'queue.sqlite'))), [5, 5, 6]);
    const q2 = clientOf(svc, data.dir);
    const entry = (await q2.dlq.listMessages({ filter: { messageId: failed.messageId } } as never)).messages[0] as unknown as Json;
    assert.equal(entry?.responseBody, 'no');
    // every publish the previous release accepted before its SIGKILL is delivered
    const seen = () => new Set(sink.at('/burst').map((r) => String(r.headers['upstash-message-id'])));
    await waitFor('every accepted message delivered', () => (accepted.every((id) => seen().has(id)) ? true : undefined), 120_000);
    await stopSvc(svc);
    svc = undefined;
    assert.ok(queueFileState(file).messages >= old.messages);
  } finally {
    if (svc) await stopSvc(svc);
    await sink.close();
    data.cleanup();
    prev.cleanup();
  }
});

/** The pino JSON lines of `svc`'s output with message `msg`. */
function logLines(svc: LaunchedSvc, msg: string): Json[] {
  return svc
    .output()
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as Json)
    .filter((l) => l.msg === msg);
}

/** The publications of index `default` (seq and whether `expectations` is recorded, once the column exists). */
async function publications(url: string): Promise<{ seq: number; expectations: boolean | null }[]> {
  return withPg(url, async (c) => {
    const cols = await c.query("SELECT 1 FROM information_schema.columns WHERE table_name = 'vector_publications' AND column_name = 'expectations'");
    const r = await c.query<{ seq: string; e: boolean | null }>(
      `SELECT p.seq, ${cols.rowCount ? 'p.expectations IS NOT NULL' : 'NULL'} AS e FROM vector_publications p JOIN vector_indexes i ON i.name = p.index_name AND i.incarnation = p.incarnation WHERE p.index_name = 'default' ORDER BY p.seq`,
    );
    return r.rows.map((x) => ({ seq: Number(x.seq), expectations: x.e }));
  });
}

test('vector on PostgreSQL: a node of this svc joins from the previous release\'s publication and then publishes with expectations', { timeout: 300_000 }, async () => {
  const prev = previousRelease();
  const pg = await startTestPostgres();
  const dirs = tempDir('svc-upgrade-pg-');
  const nodes: LaunchedSvc[] = [];
  const vectorEnv = (url: string) => ({ ...ENV, SVC_AREAS: 'vector', SVC_VECTOR_DATABASE_URL: url, SVC_VECTOR_DATABASE_SCHEMA: 'public', SVC_VECTOR_TOKEN: 'upgrade-token', SVC_VECTOR_PUBLISH_MS: '300', SVC_LOG_LEVEL: 'info' });
  const start = async (root: string | undefined, dir: string, url: string) => {
    const n = launchSvc(path.join(dirs.dir, dir), vectorEnv(url), [], root);
    nodes.push(n);
    await started(n);
    return n;
  };
  const index = (n: LaunchedSvc) => new Index({ url: n.url('vector'), token: 'upgrade-token', retry: false, enableTelemetry: false });
  try {
    const url = await pg.newDatabase();
    const old = await start(prev.root, 'old', url);
    const records = {
      '': Array.from({ length: 60 }, (_, i) => ({ id: `r${i}`, vector: [1, i / 60, (i % 7) / 7, 0.5], metadata: { i } })),
      other: Array.from({ length: 30 }, (_, i) => ({ id: `o${i}`, vector: [0.2, 1, i / 30, (i % 3) / 3], data: `d${i}` })),
    };
    for (const [ns, rs] of Object.entries(records)) await index(old).namespace(ns).upsert(rs);
    await waitFor('the previous release\'s publication', async () => ((await publications(url)).length ? true : undefined), 120_000);
    assert.deepEqual((await publications(url)).map((p) => p.expectations), [null], 'the previous release has no expectations column');
    const fetchAll = async (n: LaunchedSvc) =>
      Object.fromEntries(await Promise.all(Object.entries(records).map(async ([ns, rs]) => [ns, await index(n).namespace(ns).fetch(rs.map((r) => r.id), { includeVectors: true, includeMetadata: true, includeData: true })])));
    const query = (n: LaunchedSvc) => index(n).namespace('').query({ vector: [1, 0.3, 0.2, 0.5], topK: 5, includeMetadata: true });
    const want = { records: await fetchAll(old), query: await query(old) };
    await stopSvc(old);

    // this svc, empty data dir: migrates the database, joins from the old publication
    const joiner = await start(undefined, 'new', url);
    await waitFor('the index loaded (log)', () => (logLines(joiner, 'vector index loaded').length ? true : undefined), 60_000);
    const fetched = logLines(joiner, 'vector index fetched from the published snapshot');
    assert.equal(fetched.length, 1, `joined from the previous release's publication: ${joiner.output()}`);
    const loaded = logLines(joiner, 'vector index loaded')[0];
    assert.equal(loaded.rebuilt, 0, JSON.stringify(loaded));
    assert.equal(loaded.fromSnapshot, 2, JSON.stringify(loaded));
    assert.equal(loaded.loadedWhileDownloading, 0, 'no expectations recorded: graphs loaded after the SQLite copy');
    assert.deepEqual(await fetchAll(joiner), want.records);
    assert.deepEqual(await query(joiner), want.query);
    // a change, then this svc's own publication, with expectations
    await index(joiner).upsert({ id: 'new1', vector: [0, 0, 1, 1] });
    await waitFor('a publication with expectations', async () => ((await publications(url)).some((p) => p.expectations === true) ? true : undefined), 120_000);
    // the previous release's own data dir, restarted on this svc
    const again = await start(undefined, 'old', url);
    assert.deepEqual(await fetchAll(again), want.records);
    assert.equal((await index(again).fetch(['new1']))[0]?.id, 'new1');
  } finally {
    for (const n of nodes) await stopSvc(n);
    await pg.stop();
    dirs.cleanup();
    prev.cleanup();
  }
});
