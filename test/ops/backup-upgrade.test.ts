/**
 * Upgrades. `test/fixtures/data-v1/` is a data directory written by svc (every area, every kind of
 * record; `scripts/make-data-fixture.ts` writes it and `data-v1.json`, the list of what it holds).
 * - the current svc starts on a copy of it and serves all of it through the official SDKs;
 * - a copy whose stores record older schema versions (the queue at 3, before its notify table; a
 *   vector index from before versions were recorded) is migrated forward at start-up, after a
 *   pre-upgrade backup of those files;
 * - a copy whose queue or vector store records a newer version is refused (`svc serve` exits 2
 *   with a clear error) and no file of it is created or changed.
 */
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import Database from 'better-sqlite3';
import { Client } from '@upstash/qstash';
import { Redis } from '@upstash/redis';
import { Index } from '@upstash/vector';
import { Client as WorkflowClient } from '@upstash/workflow';
import { SchemaTooNewError } from '../../src/backup.js';
import { latestVersion } from '../../src/queue/store/migrate.js';
import { VECTOR_SCHEMA_VERSION } from '../../src/vector/engine/store.js';
import { startTestSvc, tempDir } from '../helpers/env.js';
import { ROOT, serve, userVersion } from './backup-helpers.js';

const FIXTURE = path.join(ROOT, 'test/fixtures/data-v1');
const INDEXES_FILE = path.join(ROOT, 'test/fixtures/data-v1-indexes.json');
type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any
const expected = JSON.parse(fs.readFileSync(path.join(ROOT, 'test/fixtures/data-v1.json'), 'utf8')) as Json;
// the longest retentions: the fixture's logs, DLQ entry and finished run must not age out
const TEN_YEARS_MS = String(3650 * 86_400_000);
const env = {
  ...(expected.env as Record<string, string>),
  SVC_VECTOR_INDEXES: INDEXES_FILE,
  SVC_QUEUE_LOG_RETENTION_MS: TEN_YEARS_MS,
  SVC_QUEUE_DLQ_RETENTION_MS: TEN_YEARS_MS,
  SVC_QUEUE_WORKFLOW_RETENTION_MS: TEN_YEARS_MS,
};

/** A copy of the fixture in a new temporary directory. */
function copyFixture(): { dir: string; cleanup(): void } {
  const tmp = tempDir('svc-fixture-');
  const dir = path.join(tmp.dir, 'data');
  fs.cpSync(FIXTURE, dir, { recursive: true });
  return { dir, cleanup: tmp.cleanup };
}

/** Turns the queue store of data directory `dir` into what schema 3 wrote (before workflow_notifies). */
function queueAsSchema3(dir: string): void {
  const q = new Database(path.join(dir, 'queue.sqlite'));
  q.exec('DROP TABLE workflow_notifies; DROP INDEX workflow_runs_completed; DROP INDEX workflow_waiters_run;');
  q.pragma('user_version = 3');
  q.close();
}

/** Every file under `dir` (relative path -> size, mtime and SHA-256). */
function fingerprint(dir: string): Map<string, string> {
  const out = new Map<string, string>();
  for (const rel of fs.readdirSync(dir, { recursive: true, encoding: 'utf8' }).sort()) {
    const st = fs.statSync(path.join(dir, rel));
    out.set(rel, st.isFile() ? `${st.size} ${st.mtimeMs} ${crypto.createHash('sha256').update(fs.readFileSync(path.join(dir, rel))).digest('hex')}` : 'dir');
  }
  return out;
}

test('the current svc starts on the fixture data directory and serves every record of it', { timeout: 300_000 }, async () => {
  const copy = copyFixture();
  const svc = await startTestSvc(['queue', 'kv', 'vector', 'mgmt'], { dataDir: copy.dir, env });
  try {
    const creds = svc.ctx.credentials;
    const q = new Client({ baseUrl: svc.urls.queue!, token: creds.get('queue.token'), retry: false });
    const e = expected.queue as Json;
    assert.equal((await q.messages.get(e.pending)).messageId, e.pending);
    assert.equal((await q.messages.get(e.queued.messageId)).queueName, e.queued.queueName);
    assert.equal((await q.messages.get(e.flowControl.messageId)).flowControlKey, e.flowControl.key);
    const states = async (messageId: string) => ((await q.logs({ filter: { messageId } } as never)) as unknown as { logs: { state: string }[] }).logs.map((l) => l.state);
    assert.ok((await states(e.delivered)).includes('DELIVERED'));
    assert.ok((await states(e.cancelled)).includes('CANCELLED'));
    const { messages: dlq } = await q.dlq.listMessages();
    assert.ok(dlq.some((m) => m.dlqId === e.dlq.dlqId && m.messageId === e.dlq.messageId), 'the DLQ entry');
    assert.equal((await q.queue({ queueName: e.queued.queueName }).get()).name, e.queued.queueName);
    const group = await q.urlGroups.get(e.urlGroup.name);
    assert.deepEqual(group.endpoints.map((x) => x.url).sort(), e.urlGroup.endpoints);
    const schedule = await q.schedules.get(e.schedule.scheduleId);
    assert.equal(schedule.cron, e.schedule.cron);
    const wf = new WorkflowClient({ baseUrl: svc.urls.queue!, token: creds.get('queue.token') });
    const run = async (id: string) => ((await wf.logs({ filter: { workflowRunId: id } } as never)) as unknown as { runs: Json[] }).runs.find((r) => r.workflowRunId === id);
    assert.equal((await run(e.runs.finished))?.workflowState, 'RUN_SUCCESS');
    assert.equal((await run(e.runs.waiting))?.workflowState, 'RUN_STARTED');
    assert.equal(((await wf.getWaiters({ eventId: e.runs.eventId })) as unknown[]).length, 1);

    const redis = new Redis({ url: svc.urls.kv!, token: creds.get('kv.token'), automaticDeserialization: false });
    const k = expected.kv as Json;
    assert.equal(await redis.get('fixture:string'), k['fixture:string']);
    assert.equal(await redis.get('fixture:ttl'), k['fixture:ttl']);
    assert.ok((await redis.ttl('fixture:ttl')) > 86_400);
    // without automatic deserialization the SDK hands HGETALL's flat field/value list through
    const flat = (await redis.hgetall('fixture:hash')) as unknown as string[];
    assert.deepEqual(Object.fromEntries(flat.flatMap((x, i) => (i % 2 ? [] : [[x, flat[i + 1]]]))), k['fixture:hash']);
    assert.deepEqual(await redis.lrange('fixture:list', 0, -1), k['fixture:list']);
    assert.deepEqual((await redis.smembers('fixture:set')).sort(), k['fixture:set']);
    assert.deepEqual(await redis.zrange('fixture:zset', 0, -1), k['fixture:zset']);
    assert.equal(await redis.xlen('fixture:stream'), 1);
    const xrange = await fetch(`${svc.urls.kv}/xrange/fixture:stream/-/+`, { headers: { authorization: `Bearer ${creds.get('kv.token')}` } });
    assert.deepEqual(((await xrange.json()) as { result: unknown }).result, [[k['fixture:stream'], ['field', 'value']]]);
    assert.deepEqual(JSON.parse(String(await redis.json.get('fixture:json'))), k['fixture:json']);

    const url = (name: string) => (name === 'default' ? svc.urls.vector! : `${svc.urls.vector!}/${name}`);
    for (const [name, namespaces] of Object.entries(expected.vector as Record<string, Record<string, Json[]>>)) {
      const index = new Index({ url: url(name), token: creds.get(`vector.${name}.token`) });
      for (const [ns, records] of Object.entries(namespaces)) {
        const got = await index.namespace(ns).fetch(records.map((r) => r.id), { includeVectors: true, includeMetadata: true, includeData: true });
        got.forEach((r, i) => {
          const want = records[i];
          assert.ok(r, `${name}/${ns}/${want.id}`);
          if (want.vector) assert.deepEqual(r.vector, want.vector);
          if (want.sparseVector) {
            assert.deepEqual(r.sparseVector!.indices, want.sparseVector.indices);
            r.sparseVector!.values.forEach((v, j) => assert.ok(Math.abs(v - want.sparseVector.values[j]) < 1e-6));
          }
          assert.deepEqual(r.metadata, want.metadata);
          assert.equal(r.data, want.data);
        });
      }
    }
    const [top] = await new Index({ url: url('default'), token: creds.get('vector.default.token') }).query({ vector: [1, 0, 0, 0], topK: 1 });
    assert.equal(top.id, 'd1');
  } finally {
    await svc.close();
    copy.cleanup();
  }
});

test('older stored schema versions are migrated at start-up after a pre-upgrade backup', { timeout: 300_000 }, async () => {
  const copy = copyFixture();
  try {
    // the queue as schema 3 wrote it, a vector index from before versions
    queueAsSchema3(copy.dir);
    const v = new Database(path.join(copy.dir, 'vector', 'default.sqlite'));
    v.pragma('user_version = 0');
    v.close();

    const svc = await startTestSvc(['queue', 'kv', 'vector', 'mgmt'], { dataDir: copy.dir, env });
    try {
      const q2 = new Client({ baseUrl: svc.urls.queue!, token: svc.ctx.credentials.get('queue.token'), retry: false });
      assert.equal((await q2.messages.get(expected.queue.pending)).messageId, expected.queue.pending);
      const [d1] = await new Index({ url: svc.urls.vector!, token: svc.ctx.credentials.get('vector.default.token') }).fetch(['d1']);
      assert.equal(d1?.id, 'd1');
    } finally {
      await svc.close();
    }
    assert.equal(userVersion(path.join(copy.dir, 'queue.sqlite')), latestVersion());
    assert.equal(userVersion(path.join(copy.dir, 'vector', 'default.sqlite')), VECTOR_SCHEMA_VERSION);
    const [pre] = fs.readdirSync(path.join(copy.dir, 'backups')).filter((n) => n.startsWith('pre-upgrade-'));
    assert.ok(pre, 'a pre-upgrade backup');
    const manifest = JSON.parse(fs.readFileSync(path.join(copy.dir, 'backups', pre, 'manifest.json'), 'utf8')) as Json;
    assert.equal(manifest.reason, 'pre-upgrade');
    assert.deepEqual(
      (manifest.files as Json[]).map((f) => [f.path, f.schemaVersion]).sort(),
      [['queue.sqlite', 3], ['vector/default.sqlite', 0]],
    );
    assert.equal(userVersion(path.join(copy.dir, 'backups', pre, 'queue.sqlite')), 3, 'the backup holds the file as it was');
  } finally {
    copy.cleanup();
  }
});

test('a data directory from a newer svc is refused and left unchanged', { timeout: 300_000 }, async () => {
  const copy = copyFixture();
  try {
    const fixtureVersion = userVersion(path.join(copy.dir, 'queue.sqlite'));
    const q = new Database(path.join(copy.dir, 'queue.sqlite'));
    q.pragma('user_version = 99');
    q.close();
    const before = fingerprint(copy.dir);
    const svc = serve(copy.dir, env);
    const code = await svc.exited;
    assert.equal(code, 2, svc.output());
    assert.match(svc.output(), new RegExp(`queue\\.sqlite has queue schema version 99, this svc \\(\\S+\\) supports up to ${latestVersion()}; upgrade svc`));
    assert.match(svc.output(), /nothing was changed/);
    assert.deepEqual(fingerprint(copy.dir), before);

    // a vector index from a newer svc, through the in-process start (the same check)
    const q2 = new Database(path.join(copy.dir, 'queue.sqlite'));
    q2.pragma(`user_version = ${fixtureVersion}`);
    q2.close();
    const v = new Database(path.join(copy.dir, 'vector', 'hybrid.sqlite'));
    v.pragma(`user_version = ${VECTOR_SCHEMA_VERSION + 1}`);
    v.close();
    const again = fingerprint(copy.dir);
    await assert.rejects(startTestSvc(['queue', 'kv', 'vector', 'mgmt'], { dataDir: copy.dir, env }), (err: Error) => {
      assert.ok(err instanceof SchemaTooNewError);
      assert.match(err.message, new RegExp(`hybrid\\.sqlite has vector schema version ${VECTOR_SCHEMA_VERSION + 1}`));
      return true;
    });
    assert.deepEqual(fingerprint(copy.dir), again);
  } finally {
    copy.cleanup();
  }
});

test('repeated starts that find the same older schema keep two pre-upgrade backups of it (the first and the newest), others untouched', { timeout: 300_000 }, async () => {
  const copy = copyFixture();
  try {
    queueAsSchema3(copy.dir);
    const backups = path.join(copy.dir, 'backups');
    // an earlier upgrade's backup (other versions) and a scheduled backup: not this rule's
    const earlier = path.join(backups, 'pre-upgrade-20200101T000000000Z');
    fs.mkdirSync(earlier, { recursive: true });
    fs.writeFileSync(path.join(earlier, 'manifest.json'), JSON.stringify({ reason: 'pre-upgrade', files: [{ path: 'queue.sqlite', schemaVersion: 2 }] }));
    const scheduled = path.join(backups, 'svc-backup-20200101T000000000Z');
    fs.mkdirSync(scheduled);
    fs.writeFileSync(path.join(scheduled, 'manifest.json'), JSON.stringify({ reason: 'schedule', files: [] }));
    // the queue area is not enabled, so its store is never migrated: every start finds version 3
    // again (as a migration failing on every start would leave it)
    const taken: string[] = [];
    for (let i = 0; i < 4; i++) {
      const before = new Set(fs.readdirSync(backups));
      const svc = await startTestSvc(['mgmt'], { dataDir: copy.dir, env });
      await svc.close();
      const made = fs.readdirSync(backups).filter((n) => !before.has(n));
      assert.equal(made.length, 1, `start ${i} took one pre-upgrade backup: ${made.join(', ')}`);
      taken.push(made[0]);
    }
    const left = fs.readdirSync(backups).filter((n) => !n.startsWith('.')).sort();
    assert.deepEqual(left, [path.basename(earlier), taken[0], taken[3], path.basename(scheduled)].sort());
    for (const n of [taken[0], taken[3]]) assert.equal(userVersion(path.join(backups, n, 'queue.sqlite')), 3, `${n} holds the file as it was`);
  } finally {
    copy.cleanup();
  }
});
