/**
 * Failure and deployment modes: the supervised redis-server killed mid-traffic
 * (fast 5xx JSON, then recovery after the restart, acknowledged data kept), request-size and
 * daily limits, and external mode (`SVC_KV_REDIS_URL`) against a redis-server started here.
 */
import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { after, describe, test } from 'node:test';
import type { KvServer } from '../../src/kv/index.js';
import { restartDelayMs, type SupervisedBackend } from '../../src/kv/redis/supervisor.js';
import { startTestSvc, tempDir } from '../helpers/env.js';
import { call, until } from './helpers.js';

const cleanups: (() => Promise<void> | void)[] = [];
after(async () => {
  for (const c of cleanups.reverse()) await c();
});

describe('supervised redis-server', () => {
  test('restart backoff is capped and jittered', () => {
    assert.equal(restartDelayMs(0, () => 1), 100);
    assert.equal(restartDelayMs(0, () => 0), 50);
    assert.equal(restartDelayMs(3, () => 1), 800);
    assert.equal(restartDelayMs(30, () => 1), 5000);
    assert.equal(restartDelayMs(30, () => 0), 2500);
  });

  test('killed mid-traffic: fast 5xx JSON, then recovery with the data kept', async () => {
    const svc = await startTestSvc(['kv']);
    cleanups.push(() => svc.close());
    const base = svc.urls.kv!;
    const token = svc.ctx.credentials.get('kv.token');
    const kv = svc.servers.kv as KvServer;
    const backend = kv.backend as SupervisedBackend;
    const sockDir = path.join(svc.dataDir, 'kv');
    assert.ok(fs.existsSync(path.join(sockDir, 'redis.sock')), 'unix socket in the data dir');
    assert.equal(fs.statSync(path.join(sockDir, 'redis.sock')).mode & 0o777, 0o700);
    assert.equal(fs.statSync(path.join(sockDir, 'redis.conf')).mode & 0o777, 0o600);
    assert.deepEqual((await call(base, '/set/durable/yes', { token })).json, { result: 'OK' });
    assert.equal(await kv.ready!(), true);

    // traffic in flight while the child is SIGKILLed
    let stop = false;
    const statuses: number[] = [];
    const slowest: number[] = [];
    const traffic = (async () => {
      while (!stop) {
        const t0 = Date.now();
        const r = await call(base, '/pipeline', { token, method: 'POST', body: JSON.stringify([['incr', 'ctr'], ['get', 'durable']]) });
        slowest.push(Date.now() - t0);
        statuses.push(r.status);
        if (r.status !== 200) {
          assert.ok(r.status >= 500, `status ${r.status}`);
          assert.equal(typeof r.json.error, 'string');
        }
      }
    })();
    await until(() => statuses.length > 20);
    const oldPid = backend.pid!;
    process.kill(oldPid, 'SIGKILL');
    await until(() => statuses.some((s) => s >= 500), 5000);
    const down = await call(base, '/get/durable', { token });
    if (down.status !== 200) {
      assert.equal(down.status, 503);
      assert.match(down.json.error, /unavailable|lost|restarting/);
    }
    // recovery: the supervisor restarts it and requests succeed again
    await until(async () => (await call(base, '/get/durable', { token })).status === 200, 15_000);
    stop = true;
    await traffic;
    assert.notEqual(backend.pid, oldPid);
    assert.deepEqual((await call(base, '/get/durable', { token })).json, { result: 'yes' });
    assert.ok(Math.max(...slowest) < 3000, `a request hung for ${Math.max(...slowest)} ms`);
    assert.equal(await kv.ready!(), true);
    // the read-only ACL user and policy table are back too
    const ro = svc.ctx.credentials.get('kv.readonlyToken');
    assert.match((await call(base, '/set/x/y', { token: ro })).json.error, /^NOPERM/);
    assert.equal((await call(base, '/blpop/x/0', { token })).status, 400);
    // close() stops the child
    await svc.close();
    assert.equal(await until(() => { try { process.kill(backend.pid ?? oldPid, 0); return false; } catch { return true; } }, 10_000), true);
  });

  test('a data dir too long for a unix socket path falls back to a loopback port', async () => {
    const tmp = tempDir();
    cleanups.push(() => tmp.cleanup());
    const dataDir = path.join(tmp.dir, 'd'.repeat(60), 'e'.repeat(60));
    const svc = await startTestSvc(['kv'], { dataDir });
    cleanups.push(() => svc.close());
    const backend = (svc.servers.kv as KvServer).backend as SupervisedBackend;
    assert.equal(backend.endpoint.path, undefined);
    assert.equal(backend.endpoint.host, '127.0.0.1');
    assert.ok(backend.endpoint.port! > 0);
    const token = svc.ctx.credentials.get('kv.token');
    assert.deepEqual((await call(svc.urls.kv!, '/set/k/v', { token })).json, { result: 'OK' });
    // the port is protected: the default user is off
    const probe = await new Promise<string>((resolve) => {
      const s = net.connect(backend.endpoint.port!, '127.0.0.1', () => s.write('*2\r\n$3\r\nGET\r\n$1\r\nk\r\n'));
      s.once('data', (d) => { resolve(d.toString()); s.destroy(); });
    });
    assert.match(probe, /^-NOAUTH/);
    await svc.close();
  });

  test('data survives a restart of svc', async () => {
    const tmp = tempDir();
    cleanups.push(() => tmp.cleanup());
    const a = await startTestSvc(['kv'], { dataDir: tmp.dir });
    const token = a.ctx.credentials.get('kv.token');
    await call(a.urls.kv!, '/set/persisted/1', { token });
    await a.close();
    const b = await startTestSvc(['kv'], { dataDir: tmp.dir });
    cleanups.push(() => b.close());
    assert.equal(b.ctx.credentials.get('kv.token'), token);
    assert.deepEqual((await call(b.urls.kv!, '/get/persisted', { token })).json, { result: '1' });
    await b.close();
  });
});

describe('limits', () => {
  test('max request size and daily request limit', async () => {
    const svc = await startTestSvc(['kv'], { env: { SVC_KV_MAX_REQUEST_BYTES: '2048', SVC_KV_DAILY_REQUEST_LIMIT: '20' } });
    cleanups.push(() => svc.close());
    const base = svc.urls.kv!;
    const token = svc.ctx.credentials.get('kv.token');
    const big = 'x'.repeat(3000);
    for (const [p, body] of [
      ['/set/k', big],
      ['/', JSON.stringify(['set', 'k', big])],
      ['/pipeline', JSON.stringify([['set', 'k', big]])],
      ['/multi-exec', JSON.stringify([['set', 'a', 1], ['set', 'k', big]])],
    ]) {
      const r = await call(base, p, { token, method: 'POST', body });
      assert.equal(r.status, 400, p);
      assert.deepEqual(r.json, { error: 'ERR max request size exceeded' });
    }
    assert.deepEqual((await call(base, '/get/a', { token })).json, { result: null }); // transaction discarded
    let used = 1;
    const r = await call(base, '/pipeline', { token, method: 'POST', body: JSON.stringify(Array.from({ length: 15 }, () => ['incr', 'c'])) });
    assert.equal(r.status, 200);
    used += 15;
    // a transaction that would exceed the limit is discarded as a whole
    const tx = await call(base, '/multi-exec', { token, method: 'POST', body: JSON.stringify(Array.from({ length: 10 }, () => ['incr', 'c'])) });
    assert.equal(tx.status, 400);
    assert.match(tx.json.error, /daily request limit/);
    while (used < 20) {
      assert.equal((await call(base, '/ping', { token })).status, 200);
      used++;
    }
    const over = await call(base, '/get/c', { token });
    assert.equal(over.status, 400);
    assert.match(over.json.error, /^ERR max daily request limit exceeded/);
    await svc.close();
  });
});

function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const s = net.createServer().listen(0, '127.0.0.1', () => {
      const p = (s.address() as net.AddressInfo).port;
      s.close(() => resolve(p));
    });
  });
}

describe('external mode', () => {
  test('SVC_KV_REDIS_URL with username and password', async () => {
    const dir = tempDir();
    cleanups.push(() => dir.cleanup());
    const port = await freePort();
    const child = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--requirepass', 'ext-pass', '--dir', dir.dir, '--save', '', '--appendonly', 'no'], { stdio: 'ignore' });
    const exited = new Promise((r) => child.once('exit', r));
    cleanups.push(async () => {
      if (child.exitCode === null) {
        child.kill('SIGKILL');
        await exited;
      }
    });
    await until(() => new Promise<boolean>((res) => {
      const s = net.connect(port, '127.0.0.1', () => { s.destroy(); res(true); }).on('error', () => res(false));
    }));
    const svc = await startTestSvc(['kv'], { env: { SVC_KV_REDIS_URL: `redis://default:ext-pass@127.0.0.1:${port}` } });
    cleanups.push(() => svc.close());
    const base = svc.urls.kv!;
    const token = svc.ctx.credentials.get('kv.token');
    assert.deepEqual((await call(base, '/set/ext/1', { token })).json, { result: 'OK' });
    assert.deepEqual((await call(base, '/incr/ext', { token })).json, { result: 2 });
    assert.equal((await call(base, '/pipeline', { token, method: 'POST', body: '[["get","ext"],["dbsize"]]' })).json[0].result, '2');
    assert.equal(fs.existsSync(path.join(svc.dataDir, 'kv', 'redis.sock')), false, 'no child redis-server in external mode');
    // the read-only user was created on the external server
    const ro = svc.ctx.credentials.get('kv.readonlyToken');
    assert.deepEqual((await call(base, '/get/ext', { token: ro })).json, { result: '2' });
    assert.match((await call(base, '/set/ext/3', { token: ro })).json.error, /^NOPERM/);
    // the URL's user is protected from ACL changes
    assert.equal((await call(base, '/acl/setuser/default/off', { token })).status, 400);
    assert.equal(await svc.servers.kv!.ready!(), true);
    await svc.close();
  });
});

test('external server: FLUSHALL empties the database number svc serves, not the server\'s other ones', async () => {
  const dir = tempDir();
  cleanups.push(() => dir.cleanup());
  const port = await freePort();
  await startPlainRedis(port, dir.dir, ['--port', String(port)]);
  const cli = (...args: string[]) => execFileSync('redis-cli', ['-p', String(port), ...args], { encoding: 'utf8' }).trim();
  cli('-n', '0', 'set', 'someone-else', 'kept');
  const svc = await startTestSvc(['kv'], { env: { SVC_KV_REDIS_URL: `redis://127.0.0.1:${port}/3` } });
  cleanups.push(() => svc.close());
  const token = svc.ctx.credentials.get('kv.token');
  for (const form of ['/flushall', '/flushall/async']) {
    assert.deepEqual((await call(svc.urls.kv!, '/set/mine/1', { token })).json, { result: 'OK' });
    assert.equal(cli('-n', '3', 'dbsize'), '1');
    assert.deepEqual((await call(svc.urls.kv!, form, { token })).json, { result: 'OK' }, form);
    await until(async () => cli('-n', '3', 'dbsize') === '0');
    assert.equal(cli('-n', '0', 'get', 'someone-else'), 'kept', `${form} left database 0 alone`);
  }
  await svc.close();
});

/** Starts a throw-away redis-server with `args`; resolves once `port` accepts connections. */
async function startPlainRedis(port: number, dir: string, args: string[]): Promise<void> {
  const child = spawn('redis-server', ['--bind', '127.0.0.1', '--dir', dir, '--save', '', '--appendonly', 'no', ...args], { stdio: 'ignore' });
  const exited = new Promise((r) => child.once('exit', r));
  cleanups.push(async () => {
    if (child.exitCode === null) {
      child.kill('SIGKILL');
      await exited;
    }
  });
  await until(() => new Promise<boolean>((res) => {
    const s = net.connect(port, '127.0.0.1', () => { s.destroy(); res(true); }).on('error', () => res(false));
  }));
}

describe('external mode over TLS', () => {
  test('rediss:// with a self-signed certificate trusted through SVC_KV_REDIS_TLS_CA_FILE', async () => {
    const dir = tempDir();
    cleanups.push(() => dir.cleanup());
    const cert = path.join(dir.dir, 'cert.pem');
    const key = path.join(dir.dir, 'key.pem');
    execFileSync('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', key, '-out', cert, '-days', '1',
      '-subj', '/CN=127.0.0.1', '-addext', 'subjectAltName=IP:127.0.0.1'], { stdio: 'ignore' });
    const port = await freePort();
    await startPlainRedis(port, dir.dir, ['--port', '0', '--tls-port', String(port), '--tls-cert-file', cert, '--tls-key-file', key,
      '--tls-ca-cert-file', cert, '--tls-auth-clients', 'no', '--requirepass', 'tls-pass']);
    const svc = await startTestSvc(['kv'], { env: { SVC_KV_REDIS_URL: `rediss://default:tls-pass@127.0.0.1:${port}`, SVC_KV_REDIS_TLS_CA_FILE: cert } });
    cleanups.push(() => svc.close());
    const token = svc.ctx.credentials.get('kv.token');
    assert.deepEqual((await call(svc.urls.kv!, '/set/tls/1', { token })).json, { result: 'OK' });
    assert.deepEqual((await call(svc.urls.kv!, '/pipeline', { token, method: 'POST', body: '[["incr","tls"],["get","tls"]]' })).json, [{ result: 2 }, { result: '2' }]);
    await svc.close();
    // without the CA the certificate is refused: svc does not start
    const noCa = tempDir();
    cleanups.push(() => noCa.cleanup());
    await assert.rejects(startTestSvc(['kv'], { dataDir: noCa.dir, env: { SVC_KV_REDIS_URL: `rediss://default:tls-pass@127.0.0.1:${port}` } }), /certificate|unavailable/i);
  });
});

describe('stale child', () => {
  test('a redis-server left running by a crashed svc in the same data dir is stopped first', async () => {
    const tmp = tempDir();
    cleanups.push(() => tmp.cleanup());
    const a = await startTestSvc(['kv'], { dataDir: tmp.dir });
    const token = a.ctx.credentials.get('kv.token');
    await call(a.urls.kv!, '/set/stale/1', { token });
    const oldPid = ((a.servers.kv as KvServer).backend as SupervisedBackend).pid!;
    // simulate a crash of svc: the HTTP side goes away but the child keeps running
    const backend = (a.servers.kv as KvServer).backend as SupervisedBackend;
    (backend as unknown as { stopping: boolean }).stopping = true; // no restart, child left alive
    const b = await startTestSvc(['kv'], { dataDir: tmp.dir });
    cleanups.push(() => b.close());
    let gone = false;
    try { process.kill(oldPid, 0); } catch { gone = true; }
    assert.equal(gone, true, 'stale redis-server was stopped');
    assert.deepEqual((await call(b.urls.kv!, '/get/stale', { token })).json, { result: '1' });
    await b.close();
    await a.close();
  });
});
