/**
 * Durability across a real crash: svc
 * runs as a child process (`node bin/svc.js serve`), gets messages (some in flight, some delayed,
 * some published right before the crash), is killed with SIGKILL, restarted on the same data
 * dir, and every acknowledged message must then be delivered with a 2xx (at-least-once).
 */
import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import { after, test } from 'node:test';
import { Client } from '@upstash/qstash';
import { tempDir } from '../helpers/env.js';
import { spawnQueueSvc, startSink, waitFor } from './helpers.js';

const TOKEN = 'restart-test-token';

const children: ChildProcess[] = [];
after(() => children.forEach((c) => c.exitCode === null && c.kill('SIGKILL')));

for (const fsync of ['always', 'everysec']) test(`kill -9 in the middle of pending deliveries loses nothing acknowledged (SVC_QUEUE_FSYNC=${fsync})`, async () => {
  // everysec answers at COMMIT: the WAL is in the OS page cache, which a process crash keeps
  const spawnSvc = (dataDir: string) => spawnQueueSvc(dataDir, { SVC_QUEUE_TOKEN: TOKEN, SVC_QUEUE_FSYNC: fsync });
  const tmp = tempDir('svc-queue-restart-');
  let phase = 1;
  const okIds = new Set<string>();
  const sink = await startSink((r) => {
    const id = r.headers['upstash-message-id'] as string;
    if (phase === 1 && r.url.startsWith('/slow')) return { delayMs: 120_000 }; // in flight at the crash
    okIds.add(id);
    return { status: 200 };
  });
  try {
    const first = await spawnSvc(tmp.dir);
    children.push(first.child);
    const client = new Client({ baseUrl: first.url, token: TOKEN, retry: false });
    const ids: string[] = [];
    for (let i = 0; i < 10; i++) ids.push((await client.publish({ url: `${sink.url}/slow/${i}`, body: `s${i}`, retryDelay: '100' })).messageId);
    for (let i = 0; i < 10; i++) ids.push((await client.publish({ url: `${sink.url}/delayed/${i}`, body: `d${i}`, delay: 2 })).messageId);
    await waitFor('slow deliveries in flight', () => sink.requests.filter((r) => r.url.startsWith('/slow')).length >= 10);
    // A burst of concurrent publishes; the crash comes right after the last acknowledgement.
    const burst = await Promise.all(Array.from({ length: 50 }, (_, i) => client.publish({ url: `${sink.url}/burst/${i}`, body: `b${i}`, delay: 1 })));
    ids.push(...burst.map((r) => r.messageId));
    first.child.kill('SIGKILL');
    await new Promise((r) => first.child.once('exit', r));
    assert.equal(first.child.signalCode, 'SIGKILL');
    const deliveredBeforeRestart = ids.filter((id) => okIds.has(id)).length;
    assert.ok(deliveredBeforeRestart < ids.length, 'the crash happened with work pending');

    phase = 2;
    const second = await spawnSvc(tmp.dir);
    children.push(second.child);
    await waitFor('every acknowledged message delivered after restart', () => ids.every((id) => okIds.has(id)), 20_000).catch((err) => {
      throw new Error(`${(err as Error).message}; missing ${ids.filter((id) => !okIds.has(id)).length} of ${ids.length}`);
    });
    // The ones in flight at the crash were delivered again after the restart.
    const slowAfter = sink.requests.filter((r) => r.url.startsWith('/slow') && okIds.has(r.headers['upstash-message-id'] as string));
    assert.ok(slowAfter.length >= 10);
    second.child.kill('SIGTERM');
    await new Promise((r) => second.child.once('exit', r));
  } finally {
    await sink.close();
    tmp.cleanup();
  }
});
