/**
 * Online backup and restore end to end: a real `svc serve` (queue on SQLite, a supervised
 * redis-server, a vector index, mgmt) under a steady write load from the official SDKs; `svc backup`
 * while the writes go on; `svc restore` into a new directory; `svc serve` there. Every write
 * acknowledged before the backup started is served by the restored svc, the SQLite copies pass
 * `PRAGMA integrity_check`, Redis loads the RDB, and the vector index answers exact queries as a
 * brute-force scan of its records does. Two backups at once: the second is answered 409.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import Database from 'better-sqlite3';
import { Client } from '@upstash/qstash';
import { Redis } from '@upstash/redis';
import { Index } from '@upstash/vector';
import { tempDir } from '../helpers/env.js';
import { waitFor } from '../helpers/wait.js';
import { cli, credentials, postBackup, serve, started, stop } from './backup-helpers.js';

const DIM = 8;
const randomVector = () => Array.from({ length: DIM }, () => Math.random() * 2 - 1);

function cosine(a: number[], b: number[]): number {
  let d = 0;
  let na = 0;
  let nb = 0;
  for (let i = 0; i < a.length; i++) {
    d += a[i] * b[i];
    na += a[i] * a[i];
    nb += b[i] * b[i];
  }
  return d / Math.sqrt(na * nb);
}

interface Ack<T> {
  at: number;
  value: T;
}

test('backup under a write load in every area, restore into a new directory, serve every acknowledged write', { timeout: 600_000 }, async () => {
  const tmp = tempDir('svc-backup-');
  const data = path.join(tmp.dir, 'data');
  const restored = path.join(tmp.dir, 'restored');
  const backupDir = path.join(tmp.dir, 'backups', 'b1');
  const env = { SVC_VECTOR_DIMENSION: String(DIM) };
  const svc = serve(data, env);
  let again: ReturnType<typeof serve> | undefined;
  try {
    await started(svc);
    const creds = credentials(data);
    const redis = new Redis({ url: svc.url('kv'), token: creds['kv.token'] });
    const qstash = new Client({ baseUrl: svc.url('queue'), token: creds['queue.token'], retry: false });
    const index = new Index({ url: svc.url('vector'), token: creds['vector.default.token'] });

    // records written before the load: exact-query probes in two namespaces
    const fixed = Array.from({ length: 40 }, (_, i) => ({ id: `fixed-${i}`, vector: randomVector() }));
    await index.upsert(fixed.slice(0, 20));
    await index.namespace('ns1').upsert(fixed.slice(20));

    // steady writes in every area; each acknowledgement is recorded with its time
    let stopped = false;
    const kvAcks: Ack<string>[] = [];
    const vectorAcks: Ack<{ id: string; ns: string; vector: number[] }>[] = [];
    const queueAcks: Ack<string>[] = [];
    const errors: unknown[] = [];
    const writers = [
      (async () => {
        for (let i = 0; !stopped; i++) {
          await redis.set(`k:${i}`, `v${i}`);
          kvAcks.push({ at: Date.now(), value: `k:${i}` });
        }
      })(),
      (async () => {
        for (let i = 0; !stopped; i++) {
          const rec = { id: `w-${i}`, ns: i % 2 ? 'ns1' : '', vector: randomVector() };
          await index.namespace(rec.ns).upsert({ id: rec.id, vector: rec.vector, metadata: { i } });
          vectorAcks.push({ at: Date.now(), value: rec });
        }
      })(),
      (async () => {
        for (let i = 0; !stopped; i++) {
          const { messageId } = await qstash.publishJSON({ url: 'https://example.com/backup-test', body: { i }, delay: 3600 });
          queueAcks.push({ at: Date.now(), value: messageId });
        }
      })(),
    ].map((p) => p.catch((err) => errors.push(err)));
    await waitFor('writes acknowledged in every area', () => kvAcks.length >= 30 && vectorAcks.length >= 30 && queueAcks.length >= 30, 120_000);

    const backupStarted = Date.now();
    const run = await cli(['backup', backupDir], { SVC_DATA_DIR: data, SVC_MGMT_URL: svc.url('mgmt') });
    assert.equal(run.code, 0, `svc backup: ${run.stderr}`);
    assert.match(run.stdout, /backup written to/);

    // two backups at once: one is written, the other refused with 409
    const [a, b] = await Promise.all([
      postBackup(svc.url('mgmt'), creds, { dir: path.join(tmp.dir, 'backups', 'b2') }),
      postBackup(svc.url('mgmt'), creds, { dir: path.join(tmp.dir, 'backups', 'b3') }),
    ]);
    assert.deepEqual([a.status, b.status].sort(), [200, 409]);
    assert.match(String((a.status === 409 ? a : b).body.error), /already running/);

    stopped = true;
    await Promise.all(writers);
    assert.deepEqual(errors, [], 'every write was acknowledged');
    const before = <T>(acks: Ack<T>[]) => acks.filter((x) => x.at < backupStarted).map((x) => x.value);
    const kvBefore = before(kvAcks);
    const vectorBefore = before(vectorAcks);
    const queueBefore = before(queueAcks);
    assert.ok(kvAcks.length > kvBefore.length || vectorAcks.length > vectorBefore.length, 'writes went on during the backup');

    const manifest = JSON.parse(fs.readFileSync(path.join(backupDir, 'manifest.json'), 'utf8')) as { files: { path: string }[]; schemas: Record<string, number> };
    assert.deepEqual(manifest.files.map((f) => f.path).sort(), [
      'credentials.json',
      'kv/appendonlydir/appendonly.aof.1.base.rdb',
      'kv/appendonlydir/appendonly.aof.manifest',
      'queue.sqlite',
      'vector/default.sqlite',
    ]);
    assert.ok(manifest.schemas.queue >= 1 && manifest.schemas.vector >= 1 && manifest.schemas.credentials >= 1);

    const restore = await cli(['restore', backupDir, '--data-dir', restored]);
    assert.equal(restore.code, 0, restore.stderr);
    for (const f of ['queue.sqlite', 'vector/default.sqlite']) {
      const db = new Database(path.join(restored, f), { readonly: true });
      try {
        assert.equal(db.pragma('integrity_check', { simple: true }), 'ok', f);
      } finally {
        db.close();
      }
    }

    // the restored data directory serves every write acknowledged before the backup began
    again = serve(restored, env);
    await started(again);
    assert.match(fs.readFileSync(path.join(restored, 'kv', 'redis.log'), 'utf8'), /DB loaded from base file appendonly\.aof\.1\.base\.rdb/);
    const rcreds = credentials(restored);
    assert.equal(rcreds['kv.token'], creds['kv.token'], 'the credentials are restored');
    const redis2 = new Redis({ url: again.url('kv'), token: rcreds['kv.token'] });
    const qstash2 = new Client({ baseUrl: again.url('queue'), token: rcreds['queue.token'], retry: false });
    const index2 = new Index({ url: again.url('vector'), token: rcreds['vector.default.token'] });

    const values = await redis2.mget<string[]>(...kvBefore);
    assert.deepEqual(values, kvBefore.map((k) => `v${k.slice(2)}`));
    for (const id of queueBefore) {
      const m = await qstash2.messages.get(id);
      assert.equal(m.messageId, id);
    }
    for (const ns of ['', 'ns1']) {
      const expected = [...fixed.slice(ns ? 20 : 0, ns ? 40 : 20).map((f) => ({ ...f, ns })), ...vectorBefore.filter((v) => v.ns === ns)];
      const got = await index2.namespace(ns).fetch(expected.map((e) => e.id), { includeVectors: true });
      got.forEach((r, i) => {
        assert.ok(r, `vector ${expected[i].id} in namespace ${JSON.stringify(ns)} is restored`);
        r.vector!.forEach((x, j) => assert.ok(Math.abs(x - expected[i].vector[j]) < 1e-6));
      });
    }

    // exact queries: each probe finds itself first, and random queries rank as a brute-force scan
    for (const f of fixed.slice(0, 20)) {
      const [top] = await index2.query({ vector: f.vector, topK: 1 });
      assert.equal(top.id, f.id);
    }
    const all: { id: string; vector: number[] }[] = [];
    for (let cursor: string | number = 0; ; ) {
      const page: { vectors: { id: string | number; vector?: number[] }[]; nextCursor: string | number } = await index2.range({ cursor, limit: 1000, includeVectors: true });
      all.push(...page.vectors.map((v) => ({ id: String(v.id), vector: v.vector! })));
      if (!page.nextCursor) break;
      cursor = page.nextCursor;
    }
    for (let q = 0; q < 10; q++) {
      const vector = randomVector();
      const exact = all.map((r) => ({ id: r.id, s: cosine(vector, r.vector) })).sort((x, y) => y.s - x.s).slice(0, 5).map((r) => r.id);
      const answer = (await index2.query({ vector, topK: 5 })).map((r) => String(r.id));
      assert.deepEqual(answer, exact);
    }
  } finally {
    if (again) await stop(again);
    await stop(svc);
    tmp.cleanup();
  }
});
