/**
 * A backup of an svc whose queue is on PostgreSQL and whose kv database is an external Redis:
 * neither is copied; the manifest says so for each and names the tools that back them up, and the
 * embedded stores (credentials, the vector index) are in the backup as usual.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { test } from 'node:test';
import { Redis } from '@upstash/redis';
import { startTestSvc, tempDir } from '../helpers/env.js';
import { startTestPostgres } from '../helpers/postgres.js';
import { waitFor } from '../helpers/wait.js';
import { postBackup } from './backup-helpers.js';

async function freePort(): Promise<number> {
  const s = net.createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const port = (s.address() as net.AddressInfo).port;
  await new Promise((r) => s.close(r));
  return port;
}

test('PostgreSQL queue store and external Redis: not copied, the manifest names their own tools', { timeout: 300_000 }, async () => {
  const tmp = tempDir('svc-backup-external-');
  const pg = await startTestPostgres();
  const port = await freePort();
  const redis = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', tmp.dir], { stdio: 'ignore' });
  const redisExited = new Promise((r) => redis.once('exit', r));
  let svc: Awaited<ReturnType<typeof startTestSvc>> | undefined;
  try {
    svc = await waitFor('svc on the external stores', () =>
      pg.newDatabase().then((url) =>
        startTestSvc(['queue', 'kv', 'vector', 'mgmt'], {
          dataDir: path.join(tmp.dir, 'data'),
          env: { SVC_QUEUE_DATABASE_URL: url, SVC_KV_REDIS_URL: `redis://127.0.0.1:${port}`, SVC_VECTOR_DIMENSION: '4' },
        }),
      ), 60_000);
    await new Redis({ url: svc.urls.kv!, token: svc.ctx.credentials.get('kv.token') }).set('k', 'v');
    const creds = { 'mgmt.user': svc.ctx.credentials.get('mgmt.user'), 'mgmt.password': svc.ctx.credentials.get('mgmt.password') };
    const dir = path.join(tmp.dir, 'backup');
    const r = await postBackup(svc.urls.mgmt!, creds, { dir });
    assert.equal(r.status, 200, JSON.stringify(r.body));
    const manifest = JSON.parse(fs.readFileSync(path.join(dir, 'manifest.json'), 'utf8')) as { files: { path: string }[]; skipped: { store: string; note: string }[] };
    assert.deepEqual(manifest.files.map((f) => f.path).sort(), ['credentials.json', 'vector/default.sqlite']);
    const note = (store: string) => manifest.skipped.find((s) => s.store === store)?.note ?? '';
    assert.match(note('queue'), /PostgreSQL.*pg_dump.*pg_basebackup/);
    assert.match(note('kv'), /external Redis.*BGSAVE.*redis-cli --rdb/);
    assert.ok(!fs.existsSync(path.join(dir, 'queue.sqlite')) && !fs.existsSync(path.join(dir, 'kv')));
  } finally {
    await svc?.close();
    redis.kill('SIGTERM');
    await redisExited;
    await pg.stop();
    tmp.cleanup();
  }
});
