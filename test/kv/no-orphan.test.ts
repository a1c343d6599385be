/**
 * The supervised redis-server does not outlive svc, however svc ends: killed by SIGKILL, or
 * aborted by V8 when its heap is exhausted (forced here with a small `--max-old-space-size` and
 * a reply larger than the heap). The watchdog of `src/kv/redis/supervisor.ts` stops it.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { spawnSvc, type SvcProcess } from '../helpers/svc-process.js';
import { alive } from '../helpers/wait.js';

/** The pid of svc's redis-server (its pidfile in the data dir). */
const redisPid = (svc: SvcProcess) => Number(fs.readFileSync(path.join(svc.dataDir, 'kv', 'redis.pid'), 'utf8').trim());

/** Waits up to 20 s for `pid` to end; true when it did. A redis-server still running after that is killed (no leak from a failing test). */
async function ends(pid: number): Promise<boolean> {
  for (let i = 0; i < 200 && alive(pid); i++) await new Promise((r) => setTimeout(r, 100));
  if (!alive(pid)) return true;
  process.kill(pid, 'SIGKILL');
  return false;
}

test('svc killed by SIGKILL leaves no redis-server behind', { timeout: 120_000 }, async () => {
  const svc = await spawnSvc(['kv']);
  try {
    const pid = redisPid(svc);
    assert.ok(alive(pid));
    svc.child.kill('SIGKILL');
    await svc.exited;
    assert.equal(await ends(pid), true, 'redis-server still running 20 s after svc was killed');
  } finally {
    await svc.close();
  }
});

test('svc aborted by an out-of-memory error leaves no redis-server behind', { timeout: 120_000 }, async () => {
  const svc = await spawnSvc(['kv'], {}, ['--max-old-space-size=96']);
  try {
    const pid = redisPid(svc);
    const port = svc.ports.kv;
    const auth = { authorization: `Bearer ${svc.credentials()['kv.token']}` };
    const set = await fetch(`http://127.0.0.1:${port}/set/big`, { method: 'POST', headers: auth, body: 'x'.repeat(4 << 20) });
    assert.equal(set.status, 200);
    // a 400 MB reply in a 96 MB heap
    await fetch(`http://127.0.0.1:${port}/`, { method: 'POST', headers: auth, body: JSON.stringify(['mget', ...Array(100).fill('big')]) }).catch(() => undefined);
    const exit = await svc.exited;
    assert.equal(exit.signal, 'SIGABRT', svc.output().slice(-2000));
    assert.match(svc.output(), /heap out of memory|Reached heap limit/i);
    assert.equal(await ends(pid), true, 'redis-server still running 20 s after svc aborted');
  } finally {
    await svc.close();
  }
});
