/**
 * `svc restore` refuses, writing nothing: a backup with a changed file (SHA-256 mismatch), a
 * target directory that is not empty, a backup whose store has a schema newer than this svc's, and
 * a directory without a manifest. A good backup restores into an empty existing directory.
 * Backups are taken by a running svc (`POST /v2/backup` on the management port).
 */
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import Database from 'better-sqlite3';
import { Redis } from '@upstash/redis';
import { startTestSvc, tempDir } from '../helpers/env.js';
import { cli, postBackup } from './backup-helpers.js';

interface Manifest {
  files: { path: string; bytes: number; sha256: string; schemaVersion?: number }[];
  schemas: Record<string, number>;
}

const readManifest = (dir: string) => JSON.parse(fs.readFileSync(path.join(dir, 'manifest.json'), 'utf8')) as Manifest;
const writeManifest = (dir: string, m: Manifest) => fs.writeFileSync(path.join(dir, 'manifest.json'), JSON.stringify(m, null, 2));

test('svc restore refuses a tampered file, a non-empty target, a newer schema; restores a good backup', { timeout: 300_000 }, async () => {
  const tmp = tempDir('svc-restore-');
  const svc = await startTestSvc(['queue', 'kv', 'vector', 'mgmt'], { env: { SVC_VECTOR_DIMENSION: '4' } });
  try {
    await new Redis({ url: svc.urls.kv!, token: svc.ctx.credentials.get('kv.token') }).set('k', 'v');
    const creds = { 'mgmt.user': svc.ctx.credentials.get('mgmt.user'), 'mgmt.password': svc.ctx.credentials.get('mgmt.password') };
    const good = path.join(tmp.dir, 'good');
    const r = await postBackup(svc.urls.mgmt!, creds, { dir: good });
    assert.equal(r.status, 200, JSON.stringify(r.body));
    // a relative or existing target is refused before anything is written
    assert.equal((await postBackup(svc.urls.mgmt!, creds, { dir: 'relative/dir' })).status, 400);
    const exists = await postBackup(svc.urls.mgmt!, creds, { dir: good });
    assert.equal(exists.status, 400);
    assert.match(String(exists.body.error), /exists already/);

    const restore = (backup: string, target: string) => cli(['restore', backup, '--data-dir', target]);

    // a changed byte in the middle of the queue's database
    const tampered = path.join(tmp.dir, 'tampered');
    fs.cpSync(good, tampered, { recursive: true });
    const q = path.join(tampered, 'queue.sqlite');
    const bytes = fs.readFileSync(q);
    bytes[Math.floor(bytes.length / 2)] ^= 0xff;
    fs.writeFileSync(q, bytes);
    let out = await restore(tampered, path.join(tmp.dir, 't1'));
    assert.equal(out.code, 1);
    assert.match(out.stderr, /queue\.sqlite: SHA-256 mismatch/);
    assert.ok(!fs.existsSync(path.join(tmp.dir, 't1')), 'nothing written');

    // a target that holds something
    const busy = path.join(tmp.dir, 'busy');
    fs.mkdirSync(busy);
    fs.writeFileSync(path.join(busy, 'keep.txt'), 'mine');
    out = await restore(good, busy);
    assert.equal(out.code, 1);
    assert.match(out.stderr, /is not empty/);
    assert.deepEqual(fs.readdirSync(busy), ['keep.txt']);

    // a queue database (and manifest) from a newer svc: schema version 99, sums consistent
    const newer = path.join(tmp.dir, 'newer');
    fs.cpSync(good, newer, { recursive: true });
    const db = new Database(path.join(newer, 'queue.sqlite'));
    db.pragma('user_version = 99');
    db.close();
    const m = readManifest(newer);
    const entry = m.files.find((f) => f.path === 'queue.sqlite')!;
    const content = fs.readFileSync(path.join(newer, 'queue.sqlite'));
    Object.assign(entry, { bytes: content.length, sha256: createHash('sha256').update(content).digest('hex'), schemaVersion: 99 });
    m.schemas.queue = 99;
    writeManifest(newer, m);
    out = await restore(newer, path.join(tmp.dir, 't2'));
    assert.equal(out.code, 1);
    assert.match(out.stderr, /queue schema version 99 is newer than this svc/);
    assert.ok(!fs.existsSync(path.join(tmp.dir, 't2')));

    // no manifest: not a backup
    const bare = path.join(tmp.dir, 'bare');
    fs.cpSync(good, bare, { recursive: true });
    fs.rmSync(path.join(bare, 'manifest.json'));
    out = await restore(bare, path.join(tmp.dir, 't3'));
    assert.equal(out.code, 1);
    assert.match(out.stderr, /not a complete svc backup/);

    // the good one restores into an empty existing directory
    const empty = path.join(tmp.dir, 'empty');
    fs.mkdirSync(empty);
    out = await restore(good, empty);
    assert.equal(out.code, 0, out.stderr);
    assert.deepEqual(fs.readdirSync(empty).sort(), ['credentials.json', 'kv', 'queue.sqlite', 'vector']);
    // the command it prints starts svc as it was itself started (`svc` is not on a checkout's PATH)
    assert.match(out.stdout, new RegExp(`^start it with: SVC_DATA_DIR=${empty.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')} node bin/svc\\.js serve$`, 'm'));
  } finally {
    await svc.close();
    tmp.cleanup();
  }
});
