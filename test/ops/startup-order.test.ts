/**
 * Start-up order: every area's port is bound before kv or vector opens its stored state
 * (`AreaServer.start`, `src/main.ts`). A port already in use stops `svc serve` (non-zero exit)
 * before the kv database or a vector index file has been created or changed; and while kv and
 * vector load, their ports answer 503 with `Retry-After` and `/v2/health` reports them down.
 * Real child processes (`node bin/svc.js serve`), a real redis-server (held back by a wrapper
 * script until the test lets it start), the official SDKs once loaded.
 */
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { test } from 'node:test';
import { Redis } from '@upstash/redis';
import { Index } from '@upstash/vector';
import { tempDir } from '../helpers/env.js';
import { launchSvc, stopSvc } from '../helpers/svc-process.js';
import { waitFor } from '../helpers/wait.js';

const serve = launchSvc;
const stop = stopSvc;

/** Every file under `dir` (relative path -> size, mtime and SHA-256 of the content). */
function fingerprint(dir: string): Map<string, string> {
  const out = new Map<string, string>();
  for (const rel of fs.readdirSync(dir, { recursive: true, encoding: 'utf8' }).sort()) {
    const st = fs.lstatSync(path.join(dir, rel));
    if (!st.isFile()) {
      out.set(rel, st.isDirectory() ? 'dir' : 'other');
      continue;
    }
    const hash = crypto.createHash('sha256').update(fs.readFileSync(path.join(dir, rel))).digest('hex');
    out.set(rel, `${st.size} ${st.mtimeMs} ${hash}`);
  }
  return out;
}

/** A port some other program listens on. */
async function busyPort(): Promise<{ port: number; close(): Promise<void> }> {
  const s = net.createServer((c) => c.destroy());
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  return { port: (s.address() as net.AddressInfo).port, close: () => new Promise((r) => s.close(() => r())) };
}

async function freePort(): Promise<number> {
  const b = await busyPort();
  await b.close();
  return b.port;
}

const credentials = (dir: string) => JSON.parse(fs.readFileSync(path.join(dir, 'credentials.json'), 'utf8')) as Record<string, string>;

test('a port in use stops start-up before kv or vector has created or changed a stored file', { timeout: 240_000 }, async () => {
  const tmp = tempDir('svc-startup-order-');
  try {
    // stored state of both areas: a kv key in the supervised redis-server, a vector in the index
    const first = serve(tmp.dir, { SVC_AREAS: 'kv,vector', SVC_KV_PORT: '0', SVC_VECTOR_PORT: '0' });
    try {
      await waitFor('the first svc banner', () => /Paste into/.test(first.output()), 120_000);
      const url = (area: string) => new RegExp(`^${area}\\s+(http://\\S+)`, 'm').exec(first.output())![1];
      const creds = credentials(tmp.dir);
      const redis = new Redis({ url: url('kv'), token: creds['kv.token'] });
      assert.equal(await redis.set('kept', 'value'), 'OK');
      const index = new Index({ url: url('vector'), token: creds['vector.default.token'] });
      assert.equal(await index.upsert({ id: 'v1', vector: Array.from({ length: 8 }, (_, i) => i + 1) }), 'Success');
    } finally {
      await stop(first);
    }
    const before = fingerprint(tmp.dir);
    assert.ok([...before.keys()].some((f) => f.startsWith('kv')), 'the kv database has files');
    assert.ok([...before.keys()].some((f) => f.startsWith('vector')), 'the vector index has files');

    // kv binds first, then vector's port is taken; then kv's own port is taken
    for (const taken of ['vector', 'kv'] as const) {
      const busy = await busyPort();
      try {
        const ports = { SVC_KV_PORT: '0', SVC_VECTOR_PORT: '0', [`SVC_${taken.toUpperCase()}_PORT`]: String(busy.port) };
        const svc = serve(tmp.dir, { SVC_AREAS: 'kv,vector', ...ports });
        let timer: NodeJS.Timeout | undefined;
        const code = await Promise.race([svc.exited, new Promise<'timeout'>((r) => (timer = setTimeout(() => r('timeout'), 120_000)))]);
        clearTimeout(timer);
        if (code === 'timeout') await stop(svc);
        assert.notEqual(code, 0, `svc with the ${taken} port taken must fail: ${svc.output()}`);
        assert.notEqual(code, 'timeout', `svc with the ${taken} port taken did not exit: ${svc.output()}`);
        assert.match(svc.output(), /EADDRINUSE/);
      } finally {
        await busy.close();
      }
      const after = fingerprint(tmp.dir);
      after.delete('svc.lock'); // the data directory's lock: taken (rewritten) before anything else
      before.delete('svc.lock');
      assert.deepEqual(after, before, `the ${taken} port taken: no stored file created or changed`);
    }

    // the state is intact: a normal start serves it
    const again = serve(tmp.dir, { SVC_AREAS: 'kv,vector', SVC_KV_PORT: '0', SVC_VECTOR_PORT: '0' });
    try {
      await waitFor('the svc banner', () => /Paste into/.test(again.output()), 120_000);
      const url = (area: string) => new RegExp(`^${area}\\s+(http://\\S+)`, 'm').exec(again.output())![1];
      const creds = credentials(tmp.dir);
      assert.equal(await new Redis({ url: url('kv'), token: creds['kv.token'] }).get('kept'), 'value');
      const info = await new Index({ url: url('vector'), token: creds['vector.default.token'] }).info();
      assert.equal(info.vectorCount, 1);
    } finally {
      await stop(again);
    }
  } finally {
    tmp.cleanup();
  }
});

test('while kv and vector load, their ports answer 503 with Retry-After and /v2/health says not ready', { timeout: 240_000 }, async () => {
  const tmp = tempDir('svc-startup-loading-');
  // redis-server is held back until the test creates the `go` file
  const go = path.join(tmp.dir, '..', `${path.basename(tmp.dir)}-go`);
  const wrapper = path.join(tmp.dir, '..', `${path.basename(tmp.dir)}-redis.sh`);
  fs.writeFileSync(wrapper, `#!/bin/sh\nwhile [ ! -f '${go}' ]; do sleep 0.05; done\nexec redis-server "$@"\n`, { mode: 0o755 });
  const [kvPort, vectorPort, mgmtPort] = [await freePort(), await freePort(), await freePort()];
  const svc = serve(tmp.dir, {
    SVC_AREAS: 'kv,vector,mgmt',
    SVC_KV_PORT: String(kvPort),
    SVC_VECTOR_PORT: String(vectorPort),
    SVC_MGMT_PORT: String(mgmtPort),
    SVC_KV_REDIS_SERVER_BIN: wrapper,
  });
  try {
    const kvUrl = `http://127.0.0.1:${kvPort}`;
    const vectorUrl = `http://127.0.0.1:${vectorPort}`;
    // the kv port answers while its database is still held back
    const kv = await waitFor('the kv port to answer', () => fetch(`${kvUrl}/get/kept`, { headers: { authorization: `Bearer ${credentials(tmp.dir)['kv.token']}` } }).catch(() => undefined), 60_000);
    assert.equal(kv.status, 503);
    assert.equal(kv.headers.get('retry-after'), '1');
    assert.match(((await kv.json()) as { error: string }).error, /starting/);
    // vector loads after kv: its port is bound and answers 503 in the vector error shape
    const vector = await fetch(`${vectorUrl}/info`, { headers: { authorization: `Bearer ${credentials(tmp.dir)['vector.default.token']}` } });
    assert.equal(vector.status, 503);
    assert.equal(vector.headers.get('retry-after'), '1');
    assert.equal(((await vector.json()) as { status: number }).status, 503);
    const health = await fetch(`http://127.0.0.1:${mgmtPort}/v2/health`);
    assert.equal(health.status, 503);
    assert.deepEqual(((await health.json()) as { areas: unknown }).areas, { kv: 'down', vector: 'down', mgmt: 'ok' });
    assert.doesNotMatch(svc.output(), /Paste into/, 'no banner before the areas are loaded');
    assert.ok(!fs.existsSync(path.join(tmp.dir, 'vector')), 'the vector index is not opened while kv loads');

    fs.writeFileSync(go, '');
    await waitFor('the svc banner', () => /Paste into/.test(svc.output()), 120_000);
    const creds = credentials(tmp.dir);
    const redis = new Redis({ url: kvUrl, token: creds['kv.token'] });
    assert.equal(await redis.set('k', 'v'), 'OK');
    assert.equal(await redis.get('k'), 'v');
    const index = new Index({ url: vectorUrl, token: creds['vector.default.token'] });
    assert.equal(await index.upsert({ id: 'a', vector: [1, 2, 3, 4] }), 'Success');
    const ok = await fetch(`http://127.0.0.1:${mgmtPort}/v2/health`);
    assert.equal(ok.status, 200);
    assert.deepEqual(((await ok.json()) as { areas: unknown }).areas, { kv: 'ok', vector: 'ok', mgmt: 'ok' });
  } finally {
    fs.writeFileSync(go, '');
    await stop(svc);
    fs.rmSync(go, { force: true });
    fs.rmSync(wrapper, { force: true });
    tmp.cleanup();
  }
});

test('a database that cannot start after the kv port is bound fails start-up cleanly (non-zero exit, nothing left running)', { timeout: 180_000 }, async () => {
  const tmp = tempDir('svc-startup-fail-');
  const broken = path.join(tmp.dir, '..', `${path.basename(tmp.dir)}-broken-redis.sh`);
  fs.writeFileSync(broken, '#!/bin/sh\necho "redis-server: refusing to start" >&2\nexit 1\n', { mode: 0o755 });
  const svc = serve(tmp.dir, { SVC_AREAS: 'kv,vector', SVC_KV_PORT: '0', SVC_VECTOR_PORT: '0', SVC_KV_REDIS_SERVER_BIN: broken });
  try {
    let timer: NodeJS.Timeout | undefined;
    const code = await Promise.race([svc.exited, new Promise<'timeout'>((r) => (timer = setTimeout(() => r('timeout'), 120_000)))]);
    clearTimeout(timer);
    assert.notEqual(code, 'timeout', `svc did not exit: ${svc.output()}`);
    assert.notEqual(code, 0, svc.output());
    assert.doesNotMatch(svc.output(), /Paste into/);
    // vector loads after kv: its index was never opened
    assert.ok(!fs.existsSync(path.join(tmp.dir, 'vector')), 'the vector index is not opened when kv fails to load');
  } finally {
    await stop(svc);
    fs.rmSync(broken, { force: true });
    tmp.cleanup();
  }
});
