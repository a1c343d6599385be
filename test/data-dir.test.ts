/**
 * The data directory is private to svc's user: after real writes by the queue (SQLite + WAL/SHM
 * with a forwarded Authorization header), vector (SQLite + WAL, HNSW snapshots written on close)
 * and kv (the supervised redis-server's files) every file under `SVC_DATA_DIR` is 0600 and every
 * directory 0700 — also when the process umask is the usual 0o022 and when an older version left
 * 0644/0755 entries behind.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { Client } from '@upstash/qstash';
import { Redis } from '@upstash/redis';
import { Index } from '@upstash/vector';
import { startTestSvc, tempDir } from './helpers/env.js';
import { startSink, waitFor } from './queue/helpers.js';

/** Every file and directory under `dir` (itself included) whose permission bits differ from 0600/0700. */
function looseEntries(dir: string): string[] {
  const out: string[] = [];
  const walk = (p: string) => {
    const st = fs.lstatSync(p);
    const mode = st.mode & 0o777;
    if (st.isDirectory()) {
      if (mode !== 0o700) out.push(`${p} ${mode.toString(8)}`);
      for (const e of fs.readdirSync(p)) walk(path.join(p, e));
    } else if (st.isFile() && mode !== 0o600) out.push(`${p} ${mode.toString(8)}`);
  };
  walk(dir);
  return out;
}

/** Relative paths of every regular file under `dir`. */
function files(dir: string): string[] {
  return (fs.readdirSync(dir, { recursive: true }) as string[]).filter((f) => fs.statSync(path.join(dir, f)).isFile());
}

test('everything under SVC_DATA_DIR is 0600 files / 0700 directories after real writes', { timeout: 120_000 }, async () => {
  const tmp = tempDir('svc-modes-');
  const dataDir = path.join(tmp.dir, 'data');
  const previousUmask = process.umask(0o022);
  const sink = await startSink();
  try {
    // what an older version left behind: a readable directory tree
    fs.mkdirSync(path.join(dataDir, 'old'), { recursive: true, mode: 0o755 });
    fs.chmodSync(dataDir, 0o755);
    fs.writeFileSync(path.join(dataDir, 'old', 'queue.sqlite-wal'), 'x', { mode: 0o644 });
    fs.writeFileSync(path.join(dataDir, 'leftover.json'), '{}', { mode: 0o644 });
    assert.ok(looseEntries(dataDir).length >= 4);

    const svc = await startTestSvc(['queue', 'kv', 'vector'], { dataDir, env: { SVC_VECTOR_DIMENSION: '4' } });
    try {
      const creds = (k: string) => svc.ctx.credentials.get(k);
      const qstash = new Client({ baseUrl: svc.urls.queue!, token: creds('queue.token'), retry: false });
      await qstash.publish({ url: `${sink.url}/m`, body: 'secret', headers: { Authorization: 'Bearer downstream-secret' } });
      await waitFor('delivery', () => sink.at('/m')[0], 30_000);
      const redis = new Redis({ url: svc.urls.kv!, token: creds('kv.token'), enableTelemetry: false });
      await redis.set('k', 'v');
      const index = new Index({ url: svc.urls.vector!, token: creds('vector.default.token'), retry: false, enableTelemetry: false });
      await index.upsert(Array.from({ length: 20 }, (_, i) => ({ id: `v${i}`, vector: [i, 1, 2, 3] })));

      const running = files(dataDir);
      assert.ok(running.includes('queue.sqlite-wal'), running.join(', '));
      assert.ok(running.some((f) => f.startsWith('vector') && f.endsWith('.sqlite-wal')), running.join(', '));
      await waitFor('redis append-only file', () => files(dataDir).some((f) => f.startsWith('kv') && f.includes('.aof')), 30_000);
      assert.deepEqual(looseEntries(dataDir), [], 'while running');
    } finally {
      await svc.close();
    }
    const after = files(dataDir);
    assert.ok(after.some((f) => f.endsWith('.hnsw')), `a vector snapshot was written on close: ${after.join(', ')}`);
    assert.deepEqual(looseEntries(dataDir), [], 'after close');
  } finally {
    process.umask(previousUmask);
    await sink.close();
    tmp.cleanup();
  }
});
