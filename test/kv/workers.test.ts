/**
 * kv worker processes (`SVC_KV_WORKERS`; `src/kv/cluster/`), end to end against real processes,
 * sockets and redis-server: connections are spread over the workers (observed in redis-server's
 * `CLIENT LIST`: each worker names its connections `svc-kv-w<index>-<pid>`), a credential rotation
 * through the management API reaches every worker, the daily limit holds across workers, the
 * read-your-writes token is one sequence across workers, a SIGKILLed worker is replaced while
 * requests keep succeeding, and no worker outlives `close()` or a SIGKILLed primary.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { defaultKvWorkers, loadConfig } from '../../src/config.js';
import type { KvServer } from '../../src/kv/index.js';
import { RedisConnection } from '../../src/kv/redis/connection.js';
import { alive } from '../../src/kv/redis/supervisor.js';
import { startTestSvc, tempDir } from '../helpers/env.js';
import { ACL_ALLOWED_COMMANDS, until } from './helpers.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const WORKERS = { SVC_KV_WORKERS: '2' };

interface RawRes {
  status: number;
  headers: Record<string, string>;
  body: string;
}

/** One keep-alive HTTP/1.1 connection (so the test knows which requests share a connection). */
class RawConn {
  private readonly socket: net.Socket;
  private buf = Buffer.alloc(0);
  private waiter: (() => void) | undefined;
  private closed = false;

  private constructor(socket: net.Socket) {
    this.socket = socket;
    socket.on('data', (c: Buffer) => {
      this.buf = Buffer.concat([this.buf, c]);
      this.waiter?.();
    });
    socket.on('close', () => {
      this.closed = true;
      this.waiter?.();
    });
    socket.on('error', () => {});
  }

  static open(base: string): Promise<RawConn> {
    const u = new URL(base);
    return new Promise((resolve, reject) => {
      const s = net.connect({ host: u.hostname, port: Number(u.port) }, () => resolve(new RawConn(s)));
      s.once('error', reject);
    });
  }

  /** Sends one request and reads its response (Content-Length framed). @throws when the connection closes first */
  async request(method: string, target: string, headers: Record<string, string> = {}, body = ''): Promise<RawRes> {
    const lines = [`${method} ${target} HTTP/1.1`, 'host: test'];
    for (const [k, v] of Object.entries(headers)) lines.push(`${k}: ${v}`);
    if (body || method === 'POST') lines.push(`content-length: ${Buffer.byteLength(body)}`);
    this.socket.write(lines.join('\r\n') + '\r\n\r\n' + body);
    for (;;) {
      const end = this.buf.indexOf('\r\n\r\n');
      if (end >= 0) {
        const head = this.buf.subarray(0, end).toString('latin1').split('\r\n');
        const hs: Record<string, string> = {};
        for (const l of head.slice(1)) hs[l.slice(0, l.indexOf(':')).toLowerCase()] = l.slice(l.indexOf(':') + 1).trim();
        const len = Number(hs['content-length'] ?? 0);
        if (this.buf.length >= end + 4 + len) {
          const res = { status: Number(head[0].split(' ')[1]), headers: hs, body: this.buf.subarray(end + 4, end + 4 + len).toString('utf8') };
          this.buf = this.buf.subarray(end + 4 + len);
          return res;
        }
      }
      if (this.closed) throw new Error('connection closed before the response');
      await new Promise<void>((r) => (this.waiter = r));
      this.waiter = undefined;
    }
  }

  close(): void {
    this.socket.destroy();
  }
}

const auth = (token: string) => ({ authorization: `Bearer ${token}` });

/** Names of the clients connected to redis-server as the standard user (admin connection). */
async function clientNames(svc: { servers: { kv?: unknown }; ctx: { credentials: { get(n: string): string } } }): Promise<string[]> {
  const kv = svc.servers.kv as KvServer;
  const c = await RedisConnection.connect(kv.backend.endpoint, kv.backend.admin);
  try {
    const list = String(await c.send(['CLIENT', 'LIST']));
    return list
      .split('\n')
      .filter((l) => / user=svc-standard /.test(l))
      .map((l) => / name=(\S*)/.exec(l)?.[1] ?? '');
  } finally {
    c.close();
  }
}

/** Pids of worker processes named in CLIENT LIST (`svc-kv-w<index>-<pid>`). */
const namedWorkerPids = (names: string[]) => new Set(names.map((n) => /^svc-kv-w\d+-(\d+)$/.exec(n)?.[1]).filter(Boolean).map(Number));

test('connections are spread over the worker processes; one sync-token sequence; close() leaves no worker', async () => {
  const svc = await startTestSvc(['kv'], { env: WORKERS });
  const kv = svc.servers.kv as KvServer;
  const pids = kv.workerPids();
  const conns: RawConn[] = [];
  try {
    assert.equal(pids.length, 2);
    const token = svc.ctx.credentials.get('kv.token');
    for (let i = 0; i < 8; i++) conns.push(await RawConn.open(svc.urls.kv!));
    // a write on each connection; every response carries a newer token than the one before
    let last = '';
    for (const [i, c] of conns.entries()) {
      const r = await c.request('GET', `/set/w:${i}/v${i}`, auth(token));
      assert.equal(r.status, 200, r.body);
      const t = r.headers['upstash-sync-token'];
      assert.ok(t && t !== last, 'the token changes after every write');
      assert.ok(parseInt(t, 36) > (last ? parseInt(last, 36) : 0), 'tokens grow across workers');
      last = t;
    }
    // reads on every connection (both workers) carry the latest token unchanged
    for (const [i, c] of conns.entries()) {
      const r = await c.request('GET', `/get/w:${i}`, auth(token));
      assert.equal(r.body, `{"result":"v${i}"}`);
      assert.equal(r.headers['upstash-sync-token'], last, 'reads do not change it, whichever worker answers');
    }
    const seen = namedWorkerPids(await clientNames(svc));
    assert.deepEqual([...seen].sort(), [...pids].sort(), 'both workers served requests');
  } finally {
    for (const c of conns) c.close();
    await svc.close();
  }
  for (const pid of pids) assert.equal(alive(pid), false, `worker ${pid} exited at close()`);
});

test('a credential rotation through the management API reaches every worker at once', async () => {
  const svc = await startTestSvc(['kv', 'mgmt'], { env: WORKERS });
  const conns: RawConn[] = [];
  try {
    const store = svc.ctx.credentials;
    const old = { token: store.get('kv.token'), ro: store.get('kv.readonlyToken') };
    for (let i = 0; i < 6; i++) conns.push(await RawConn.open(svc.urls.kv!));
    const minted = await conns[0].request('POST', '/', { ...auth(old.token), 'content-type': 'application/json' }, JSON.stringify(['ACL', 'SETUSER', 'wk-user', 'on', '>pw-1', '~*', '&*', ...ACL_ALLOWED_COMMANDS]));
    assert.equal(minted.status, 200, minted.body);
    const acl = JSON.parse((await conns[1].request('POST', '/', { ...auth(old.token), 'content-type': 'application/json' }, '["ACL","RESTTOKEN","wk-user","pw-1"]')).body).result as string;
    for (const c of conns) {
      assert.equal((await c.request('GET', '/ping', auth(old.token))).status, 200);
      assert.equal((await c.request('GET', '/ping', auth(old.ro))).status, 200);
      assert.equal((await c.request('GET', '/ping', auth(acl))).status, 200, 'an ACL token minted by one worker works on all');
    }
    const user = store.get('mgmt.user');
    const password = store.get('mgmt.password');
    const r = await fetch(`${svc.urls.mgmt}/v2/credentials/kv/reset-password`, {
      method: 'POST',
      headers: { authorization: `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}` },
    });
    assert.equal(r.status, 200);
    const fresh = (await r.json()) as { token: string; readonlyToken: string };
    // the very next request on every connection (both workers): old tokens 401, new ones 200
    for (const c of conns) {
      assert.equal((await c.request('GET', '/ping', auth(old.token))).status, 401);
      assert.equal((await c.request('GET', '/ping', auth(old.ro))).status, 401);
      assert.equal((await c.request('GET', '/ping', auth(acl))).status, 401, 'ACL tokens are revoked with the secret');
      assert.equal((await c.request('GET', '/ping', auth(fresh.token))).status, 200);
      assert.equal((await c.request('GET', '/ping', auth(fresh.readonlyToken))).status, 200);
    }
  } finally {
    for (const c of conns) c.close();
    await svc.close();
  }
});

test('the daily request limit holds across workers (leases never exceed it)', async () => {
  const limit = 40;
  const svc = await startTestSvc(['kv'], { env: { ...WORKERS, SVC_KV_DAILY_REQUEST_LIMIT: String(limit) } });
  const conns: RawConn[] = [];
  try {
    const token = svc.ctx.credentials.get('kv.token');
    for (let i = 0; i < 8; i++) conns.push(await RawConn.open(svc.urls.kv!));
    let ok = 0;
    const refused: string[] = [];
    // concurrent on all connections, 12 requests each: 96 commands against a limit of 40
    await Promise.all(
      conns.map(async (c, i) => {
        for (let k = 0; k < 12; k++) {
          const r = await c.request('GET', `/incr/limit:${i}`, auth(token));
          if (r.status === 200) ok++;
          else {
            assert.equal(r.status, 400, r.body);
            refused.push(JSON.parse(r.body).error);
          }
        }
      }),
    );
    assert.ok(ok <= limit, `served ${ok} > limit ${limit}`);
    // unspent leases of the other worker may refuse a few early (documented); never many
    assert.ok(ok >= limit - 8, `served only ${ok} of ${limit}`);
    assert.equal(ok + refused.length, 96);
    assert.match(refused[0], /^ERR max daily request limit exceeded\. Limit: 40, Usage: \d+$/);
    // a pipeline is counted per command too
    const p = await conns[0].request('POST', '/pipeline', { ...auth(token), 'content-type': 'application/json' }, '[["ping"],["ping"]]');
    assert.equal(p.status, 400);
  } finally {
    for (const c of conns) c.close();
    await svc.close();
  }
});

test('a SIGKILLed worker is replaced; requests keep succeeding meanwhile', async () => {
  const svc = await startTestSvc(['kv'], { env: WORKERS });
  const kv = svc.servers.kv as KvServer;
  const conns: RawConn[] = [];
  try {
    const token = svc.ctx.credentials.get('kv.token');
    const [victim, survivor] = kv.workerPids();
    process.kill(victim, 'SIGKILL');
    await until(() => !kv.workerPids().includes(victim));
    // new connections go to the surviving worker (or the primary) while the victim restarts
    for (let i = 0; i < 4; i++) {
      const c = await RawConn.open(svc.urls.kv!);
      conns.push(c);
      const r = await c.request('GET', `/set/k:${i}/x`, auth(token));
      assert.equal(r.status, 200, r.body);
    }
    await until(() => kv.workerPids().length === 2, 20_000);
    const replacement = kv.workerPids().find((p) => p !== survivor && p !== victim);
    assert.ok(replacement, 'a new worker process was started');
    // the replacement takes connections again
    for (let i = 0; i < 6; i++) {
      const c = await RawConn.open(svc.urls.kv!);
      conns.push(c);
      assert.equal((await c.request('GET', '/get/k:0', auth(token))).body, '{"result":"x"}');
    }
    assert.ok(namedWorkerPids(await clientNames(svc)).has(replacement!), 'the replacement served requests');
  } finally {
    for (const c of conns) c.close();
    await svc.close();
  }
});

test('workers exit when the primary process dies (SIGKILL)', async () => {
  const { dir, cleanup } = tempDir();
  const child = spawn(process.execPath, [path.join(ROOT, 'bin/svc.js'), 'serve'], {
    env: { ...process.env, SVC_AREAS: 'kv', SVC_HOST: '127.0.0.1', SVC_KV_PORT: '0', SVC_DATA_DIR: dir, SVC_LOG_LEVEL: 'silent', SVC_KV_WORKERS: '2' },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let out = '';
  child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  const childrenOf = (ppid: number): number[] =>
    fs
      .readdirSync('/proc')
      .filter((d) => /^\d+$/.test(d))
      .filter((d) => {
        try {
          const stat = fs.readFileSync(`/proc/${d}/stat`, 'utf8');
          return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]) === ppid && fs.readFileSync(`/proc/${d}/cmdline`, 'utf8').includes('cluster/worker');
        } catch {
          return false;
        }
      })
      .map(Number);
  let workers: number[] = [];
  try {
    await until(() => out.includes('svc is running'), 30_000);
    workers = childrenOf(child.pid!);
    assert.equal(workers.length, 2, 'two worker processes');
    const url = /kv\s+(http:\/\/\S+)/.exec(out)![1];
    const token = /SVC_KV_TOKEN=(\S+)/.exec(out)![1];
    assert.equal((await fetch(`${url}/ping`, { headers: auth(token) })).status, 200);
    child.kill('SIGKILL');
    await until(() => workers.every((p) => !alive(p)), 10_000);
  } finally {
    if (child.exitCode === null) child.kill('SIGKILL');
    for (const p of workers) if (alive(p)) process.kill(p, 'SIGKILL');
    // the supervised redis-server of the killed primary
    try {
      const pid = Number(fs.readFileSync(path.join(dir, 'kv', 'redis.pid'), 'utf8'));
      if (pid > 0 && alive(pid)) process.kill(pid, 'SIGKILL');
    } catch {
      /* not started */
    }
    cleanup();
  }
});

test('default worker count: 0 below 4 CPUs, else one per CPU capped at 8; SVC_KV_WORKERS overrides it', () => {
  assert.deepEqual([1, 2, 3, 4, 6, 8, 16, 64].map((n) => defaultKvWorkers(n)), [0, 0, 0, 4, 6, 8, 8, 8]);
  assert.equal(loadConfig({}).kv.workers, defaultKvWorkers());
  assert.equal(loadConfig({ SVC_KV_WORKERS: '3' }).kv.workers, 3);
  assert.equal(loadConfig({ SVC_KV_WORKERS: '0' }).kv.workers, 0);
});
