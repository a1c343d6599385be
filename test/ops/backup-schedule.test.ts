/**
 * Scheduled backups (`SVC_BACKUP_DIR`, `SVC_BACKUP_INTERVAL`, `SVC_BACKUP_KEEP`): backups appear in
 * the directory on the interval, only the newest `keep` complete ones stay, and `/metrics` reports
 * the last backup's time and outcome; a schedule whose directory cannot be created reports
 * failures there. `POST /v2/backup` without a body writes into `SVC_BACKUP_DIR`.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { loadConfig } from '../../src/config.js';
import { startTestSvc, tempDir } from '../helpers/env.js';
import { waitFor } from '../helpers/wait.js';
import { postBackup } from './backup-helpers.js';

/** The value of the sample `name` (with `labels` as written, e.g. `{outcome="ok"}`) in the `/metrics` text; undefined when absent. */
async function sample(mgmtUrl: string, name: string, labels = ''): Promise<number | undefined> {
  const text = await (await fetch(`${mgmtUrl}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(`${name}${labels} `));
  return line === undefined ? undefined : Number(line.split(' ')[1]);
}

test('scheduled backups: written on the interval, the newest SVC_BACKUP_KEEP kept, outcome on /metrics', { timeout: 300_000 }, async () => {
  const tmp = tempDir('svc-backup-schedule-');
  const dir = path.join(tmp.dir, 'backups');
  const t0 = Date.now() / 1000;
  const svc = await startTestSvc(['queue', 'kv', 'vector', 'mgmt'], {
    env: { SVC_BACKUP_DIR: dir, SVC_BACKUP_INTERVAL: '1s', SVC_BACKUP_KEEP: '2', SVC_VECTOR_DIMENSION: '4' },
  });
  try {
    const mgmt = svc.urls.mgmt!;
    await waitFor('three scheduled backups', async () => ((await sample(mgmt, 'svc_backups_total', '{outcome="ok"}')) ?? 0) >= 3, 180_000);
    assert.equal(await sample(mgmt, 'svc_backup_last_ok'), 1);
    assert.ok((await sample(mgmt, 'svc_backup_last_success_timestamp_seconds'))! >= t0);
    assert.ok((await sample(mgmt, 'svc_backup_last_bytes'))! > 0);
    assert.ok((await sample(mgmt, 'svc_backup_last_duration_seconds'))! >= 0);
    const complete = () => fs.readdirSync(dir).filter((n) => /^svc-backup-/.test(n) && fs.existsSync(path.join(dir, n, 'manifest.json')));
    // pruning follows each backup: at most KEEP complete ones (plus one being pruned right now)
    await waitFor('pruning to SVC_BACKUP_KEEP', () => complete().length === 2, 60_000);
    const m = JSON.parse(fs.readFileSync(path.join(dir, complete()[0], 'manifest.json'), 'utf8')) as { reason: string };
    assert.equal(m.reason, 'schedule');

    // POST without a body: a backup into SVC_BACKUP_DIR
    const creds = { 'mgmt.user': svc.ctx.credentials.get('mgmt.user'), 'mgmt.password': svc.ctx.credentials.get('mgmt.password') };
    const r = await waitFor('an API backup between scheduled ones', async () => {
      const res = await postBackup(mgmt, creds);
      return res.status === 200 ? res : undefined;
    }, 60_000);
    assert.equal(path.dirname(String(r.body.dir)), dir);
    const last = await fetch(`${mgmt}/v2/backup`, { headers: { authorization: `Basic ${Buffer.from(`${creds['mgmt.user']}:${creds['mgmt.password']}`).toString('base64')}` } });
    assert.equal(((await last.json()) as { last: { ok: boolean } }).last.ok, true);
  } finally {
    await svc.close();
    tmp.cleanup();
  }
});

test('a scheduled backup that fails is reported on /metrics', { timeout: 300_000 }, async () => {
  const tmp = tempDir('svc-backup-schedule-fail-');
  const blocker = path.join(tmp.dir, 'not-a-directory');
  fs.writeFileSync(blocker, '');
  const svc = await startTestSvc(['kv', 'mgmt'], { env: { SVC_BACKUP_DIR: path.join(blocker, 'backups'), SVC_BACKUP_INTERVAL: '1s' } });
  try {
    const mgmt = svc.urls.mgmt!;
    await waitFor('a failed scheduled backup', async () => ((await sample(mgmt, 'svc_backups_total', '{outcome="failed"}')) ?? 0) >= 1, 120_000);
    assert.equal(await sample(mgmt, 'svc_backup_last_ok'), 0);
    assert.equal(await sample(mgmt, 'svc_backup_last_success_timestamp_seconds'), undefined);
  } finally {
    await svc.close();
    tmp.cleanup();
  }
});

test('SVC_BACKUP_INTERVAL: a duration with a unit, and only with SVC_BACKUP_DIR', () => {
  assert.equal(loadConfig({ SVC_BACKUP_DIR: '/b', SVC_BACKUP_INTERVAL: '6h' }).backup.intervalMs, 6 * 3_600_000);
  assert.equal(loadConfig({ SVC_BACKUP_DIR: '/b', SVC_BACKUP_INTERVAL: '1d', SVC_BACKUP_KEEP: '3' }).backup.keep, 3);
  assert.throws(() => loadConfig({ SVC_BACKUP_DIR: '/b', SVC_BACKUP_INTERVAL: '6' }), /SVC_BACKUP_INTERVAL="6": expected a duration/);
  assert.throws(() => loadConfig({ SVC_BACKUP_INTERVAL: '1h' }), /SVC_BACKUP_INTERVAL needs SVC_BACKUP_DIR/);
  assert.throws(() => loadConfig({ SVC_BACKUP_KEEP: '0' }), /SVC_BACKUP_KEEP/);
});
