/**
 * One svc process per data directory. A second `svc serve` on the same `SVC_DATA_DIR` (same port
 * or another) refuses to start — exit code 2, an error naming the directory and the holder's pid —
 * without touching the first one's in-flight messages; a lock left by a killed process is taken
 * over. And in one process: a queue area that cannot bind its port has not released leases or
 * claimed messages. Real child processes (`node bin/svc.js serve`) and a real sink.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import Database from 'better-sqlite3';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { test } from 'node:test';
import { Client } from '@upstash/qstash';
import { createLogger } from '../../src/logger.js';
import { createContext } from '../../src/main.js';
import { createQueueServer } from '../../src/queue/server.js';
import { tempDir, testConfig } from '../helpers/env.js';
import { spawnQueueSvc, startQueue, startSink, waitFor } from './helpers.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

/** Runs `svc serve` on `dataDir` to its exit (60 s deadline); resolves with the code and output. */
function serveToExit(dataDir: string, env: Record<string, string>): Promise<{ code: number | null; out: string }> {
  const child = spawn(process.execPath, [path.join(ROOT, 'bin/svc.js'), 'serve'], {
    cwd: ROOT,
    env: { ...process.env, SVC_AREAS: 'queue', SVC_QUEUE_PORT: '0', SVC_HOST: '127.0.0.1', SVC_DATA_DIR: dataDir, SVC_LOG_LEVEL: 'warn', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr.on('data', (d: Buffer) => (out += d.toString()));
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`second svc did not exit: ${out}`));
    }, 60_000);
    child.on('exit', (code) => {
      clearTimeout(timer);
      resolve({ code, out });
    });
  });
}

test('a second svc on the same data directory refuses to start and leaves the first one alone', { timeout: 180_000 }, async () => {
  const tmp = tempDir('svc-lock-');
  // each delivery is held 4 s by the destination: the messages are leased by the first process
  const sink = await startSink(() => ({ delayMs: 4000 }));
  const first = await spawnQueueSvc(tmp.dir, {});
  const stop = async (c: typeof first.child, signal: NodeJS.Signals) => {
    if (c.exitCode !== null || c.signalCode !== null) return;
    const exited = new Promise((r) => c.once('exit', r));
    c.kill(signal);
    await exited;
  };
  let again: typeof first | undefined;
  try {
    const token = JSON.parse(fs.readFileSync(path.join(tmp.dir, 'credentials.json'), 'utf8'))['queue.token'] as string;
    const client = new Client({ baseUrl: first.url, token, retry: false });
    const n = 20;
    for (let i = 0; i < n; i++) await client.publish({ url: `${sink.url}/m${i}`, body: String(i), retries: 0 });
    await waitFor('deliveries in flight', () => sink.requests.length === n, 30_000);

    for (const port of [new URL(first.url).port, '0']) {
      const second = await serveToExit(tmp.dir, { SVC_QUEUE_PORT: port });
      assert.equal(second.code, 2, second.out);
      assert.ok(second.out.includes(tmp.dir), `names the directory: ${second.out}`);
      assert.ok(second.out.includes(`pid ${first.child.pid}`), `names the holder's pid: ${second.out}`);
    }
    assert.equal(first.child.exitCode, null, 'the first svc still runs');
    // every message delivered exactly once: nothing was released to a second delivery
    await new Promise((r) => setTimeout(r, 5000));
    for (let i = 0; i < n; i++) assert.equal(sink.at(`/m${i}`).length, 1, `/m${i}`);
    assert.equal(fs.readFileSync(path.join(tmp.dir, 'svc.lock'), 'utf8').trim(), String(first.child.pid));

    // the killed process leaves its lock behind: a new svc takes it over
    await stop(first.child, 'SIGKILL');
    again = await spawnQueueSvc(tmp.dir, {});
    assert.equal(fs.readFileSync(path.join(tmp.dir, 'svc.lock'), 'utf8').trim(), String(again.child.pid));
    await stop(again.child, 'SIGTERM');
    assert.equal(fs.existsSync(path.join(tmp.dir, 'svc.lock')), false, 'a clean stop removes the lock');
  } finally {
    await stop(first.child, 'SIGKILL');
    if (again) await stop(again.child, 'SIGKILL');
    await sink.close();
    tmp.cleanup();
  }
});

test('a queue area that cannot bind its port has not released leases or claimed messages', { timeout: 120_000 }, async () => {
  const tmp = tempDir('svc-bind-');
  const sink = await startSink(() => ({ delayMs: 3000 }));
  // reads the SQLite file itself: always the SQLite store, also under SVC_QUEUE_DATABASE_URL=... npm test
  const sqlite = { SVC_QUEUE_DATABASE_URL: '' };
  const q = await startQueue(sqlite, tmp.dir);
  try {
    const n = 10;
    for (let i = 0; i < n; i++) await q.client.publish({ url: `${sink.url}/b${i}`, body: String(i), retries: 0 });
    await waitFor('deliveries in flight', () => sink.requests.length === n, 30_000);
    const db = new Database(path.join(tmp.dir, 'queue.sqlite'), { readonly: true });
    const leases = () => db.prepare(`SELECT seq, claimed_by, lease_until FROM messages WHERE status = 'pending' ORDER BY seq`).all();
    const before = leases();
    assert.equal(before.length, n);
    // same directory, same (taken) port, in this process (no lock file involved)
    const config = testConfig(tmp.dir, { SVC_AREAS: 'queue', SVC_QUEUE_PORT: new URL(q.url).port, ...sqlite });
    const server = await createQueueServer(createContext(config, { logger: createLogger('fatal'), env: {} }));
    await assert.rejects(server.listen(), /EADDRINUSE/);
    await server.close();
    assert.deepEqual(leases(), before, 'the leases of the running area are untouched');
    db.close();
    await new Promise((r) => setTimeout(r, 4000));
    for (let i = 0; i < n; i++) assert.equal(sink.at(`/b${i}`).length, 1, `/b${i} delivered once`);
  } finally {
    await q.close();
    await sink.close();
    tmp.cleanup();
  }
});
