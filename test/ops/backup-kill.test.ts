/**
 * svc killed with SIGKILL in the middle of a backup (at the test-only crash points of
 * `src/backup.ts`: after the queue's copy, and after every file is written but before the
 * manifest): nothing in the backup directory claims to be complete (no directory with the
 * backup's name, no manifest), `svc restore` refuses the partial directory, svc restarts on its
 * data directory and serves what it held, and the next backup into the same directory removes the
 * partial one and completes.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { Client } from '@upstash/qstash';
import { Redis } from '@upstash/redis';
import { Index } from '@upstash/vector';
import { tempDir } from '../helpers/env.js';
import { cli, credentials, postBackup, serve, started, stop } from './backup-helpers.js';

/** Every path under `dir`, relative, sorted. */
const tree = (dir: string) => fs.readdirSync(dir, { recursive: true, encoding: 'utf8' }).sort();

for (const point of ['after-queue', 'before-manifest']) {
  test(`SIGKILL during a backup (${point}): no complete-looking backup, svc restarts and serves its data`, { timeout: 400_000 }, async () => {
    const tmp = tempDir('svc-backup-kill-');
    const data = path.join(tmp.dir, 'data');
    const parent = path.join(tmp.dir, 'backups');
    const env = { SVC_VECTOR_DIMENSION: '4' };
    const svc = serve(data, { ...env, BACKUP_TEST_CRASH_POINT: point });
    let again: ReturnType<typeof serve> | undefined;
    try {
      await started(svc);
      const creds = credentials(data);
      await new Redis({ url: svc.url('kv'), token: creds['kv.token'] }).set('kept', 'value');
      await new Index({ url: svc.url('vector'), token: creds['vector.default.token'] }).upsert({ id: 'v1', vector: [1, 2, 3, 4] });
      const { messageId } = await new Client({ baseUrl: svc.url('queue'), token: creds['queue.token'], retry: false }).publishJSON({
        url: 'https://example.com/kill-test',
        body: { a: 1 },
        delay: 3600,
      });

      await postBackup(svc.url('mgmt'), creds, { dir: path.join(parent, 'b1') }).then(
        (r) => assert.fail(`the backup answered ${r.status} instead of the process dying`),
        () => undefined, // the connection dies with the process
      );
      await svc.exited;
      assert.equal(svc.child.signalCode, 'SIGKILL');

      const left = tree(parent);
      assert.ok(!left.includes('b1'), `no directory with the backup's name: ${left.join(', ')}`);
      assert.ok(!left.some((p) => path.basename(p) === 'manifest.json'), `no manifest anywhere: ${left.join(', ')}`);
      const partial = fs.readdirSync(parent).filter((n) => n.includes('.partial-'));
      assert.equal(partial.length, 1, 'the partial directory is recognisable by its name');
      assert.ok(tree(path.join(parent, partial[0])).includes('queue.sqlite'), 'the crash came mid-backup (the queue copy was written)');
      const refused = await cli(['restore', path.join(parent, partial[0]), '--data-dir', path.join(tmp.dir, 'r')]);
      assert.equal(refused.code, 1);
      assert.match(refused.stderr, /not a complete svc backup/);
      assert.ok(!fs.existsSync(path.join(tmp.dir, 'r')));

      // svc restarts normally on its data directory and serves what it held
      again = serve(data, env);
      await started(again);
      assert.equal(await new Redis({ url: again.url('kv'), token: creds['kv.token'] }).get('kept'), 'value');
      const [v] = await new Index({ url: again.url('vector'), token: creds['vector.default.token'] }).fetch(['v1']);
      assert.equal(v?.id, 'v1');
      const m = await new Client({ baseUrl: again.url('queue'), token: creds['queue.token'], retry: false }).messages.get(messageId);
      assert.equal(m.messageId, messageId);

      // the next backup into the same directory completes and clears the partial one
      const ok = await postBackup(again.url('mgmt'), creds, { dir: path.join(parent, 'b2') });
      assert.equal(ok.status, 200, JSON.stringify(ok.body));
      assert.deepEqual(fs.readdirSync(parent), ['b2']);
      assert.ok(fs.existsSync(path.join(parent, 'b2', 'manifest.json')));
    } finally {
      if (again) await stop(again);
      await stop(svc);
      // the redis-server a killed svc leaves behind (a restarted svc stops it itself)
      try {
        process.kill(Number(fs.readFileSync(path.join(data, 'kv', 'redis.pid'), 'utf8')), 'SIGKILL');
      } catch {
        /* gone already */
      }
      tmp.cleanup();
    }
  });
}
