/**
 * The PostgreSQL queue store's start-up: clear errors (exit code 2, the variable named, the
 * password never printed) for a bad URL, an unreachable server and a wrong password; migrations
 * applied once when nodes start together; a schema newer than this svc refused. And a fault:
 * PostgreSQL restarted under load (publishes answer 503 + Retry-After while it is down, never a
 * 2xx for an uncommitted message; deliveries resume; nothing acknowledged is lost). And the test
 * helper's own hygiene, and a value PostgreSQL refuses (a NUL character) answered 400: a cluster left by a killed test process is removed by the next. A real
 * PostgreSQL (throw-away cluster, or SVC_TEST_DATABASE_URL) and real `svc` processes.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, test } from 'node:test';
import pg from 'pg';
import { openPgQueueStore } from '../../src/queue/store/pg.js';
import { loadMigrations } from '../../src/queue/store/migrate.js';
import { startTestSvc, tempDir } from '../helpers/env.js';
import { startSink, waitFor } from './helpers.js';
import { postgresBinDir, reapStaleClusters, startTestPostgres, withPg, type TestPostgres } from '../helpers/postgres.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
let server: TestPostgres;
const tmp = tempDir('svc-pg-start-');

before(async () => {
  server = await startTestPostgres();
});
after(async () => {
  await server?.stop();
  tmp.cleanup();
});

/** Runs `svc serve` (queue only) with `databaseUrl` until it exits (30 s at most); returns its code and output. */
function serveOnce(databaseUrl: string): Promise<{ code: number | null; out: string }> {
  const env: Record<string, string | undefined> = { ...process.env, SVC_AREAS: 'queue', SVC_QUEUE_PORT: '0', SVC_DATA_DIR: tmp.dir, SVC_LOG_LEVEL: 'warn', SVC_QUEUE_DATABASE_URL: databaseUrl };
  delete env.SVC_QUEUE_DATABASE_SCHEMA;
  delete env.PGPASSWORD;
  const child = spawn(process.execPath, [path.join(ROOT, 'bin/svc.js'), 'serve'], { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr.on('data', (d: Buffer) => (out += d.toString()));
  return new Promise((resolve) => {
    const t = setTimeout(() => child.kill('SIGKILL'), 30_000);
    child.on('exit', (code) => {
      clearTimeout(t);
      resolve({ code, out });
    });
  });
}

async function closedPort(): Promise<number> {
  return new Promise((resolve) => {
    const s = net.createServer().listen(0, '127.0.0.1', () => {
      const port = (s.address() as net.AddressInfo).port;
      s.close(() => resolve(port));
    });
  });
}

test('start-up errors name SVC_QUEUE_DATABASE_URL, never print the password, exit with code 2', async () => {
  const db = new URL(await server.newDatabase('svc_start'));
  const cases: { what: string; url: string; secret: string; expect: RegExp }[] = [
    { what: 'not a postgres URL', url: 'mysql://svc:S3cretNotShown@127.0.0.1/db', secret: 'S3cretNotShown', expect: /SVC_QUEUE_DATABASE_URL: expected a postgres:\/\/ or postgresql:\/\/ URL/ },
    { what: 'bad sslmode', url: 'postgres://svc:S3cretNotShown@127.0.0.1/db?sslmode=sometimes', secret: 'S3cretNotShown', expect: /SVC_QUEUE_DATABASE_URL: sslmode=sometimes/ },
    { what: 'unreachable', url: `postgres://svc:S3cretNotShown@127.0.0.1:${await closedPort()}/db`, secret: 'S3cretNotShown', expect: /SVC_QUEUE_DATABASE_URL \(postgres:\/\/svc:\*\*\*@127\.0\.0\.1:\d+\/db\): cannot connect: server unreachable/ },
    { what: 'wrong password', url: `postgresql://${db.username}:Wr0ngPassw0rd@${db.host}${db.pathname}`, secret: 'Wr0ngPassw0rd', expect: /SVC_QUEUE_DATABASE_URL \(postgresql:\/\/svc:\*\*\*@.*\): cannot connect: authentication failed/ },
  ];
  for (const c of cases) {
    const r = await serveOnce(c.url);
    assert.equal(r.code, 2, `${c.what}: exit code (output: ${r.out})`);
    assert.match(r.out, c.expect, c.what);
    assert.ok(!r.out.includes(c.secret), `${c.what}: the password is not printed`);
  }
});

test('nodes starting together apply each migration once; a newer schema is refused', async () => {
  const url = await server.newDatabase('svc_migrate');
  const stores = await Promise.all([1, 2, 3, 4].map(() => openPgQueueStore(url)));
  await Promise.all(stores.map((s) => s.close()));
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    const rows = (await c.query<{ version: number }>('SELECT version FROM svc_queue_schema ORDER BY version')).rows.map((r) => r.version);
    const shipped = loadMigrations(path.join(ROOT, 'src/queue/store/pg-migrations')).map((m) => m.version);
    assert.deepEqual(rows, shipped, 'one row per migration');
    await c.query('INSERT INTO svc_queue_schema (version, applied_at) VALUES (999, 0)');
  } finally {
    await c.end();
  }
  await assert.rejects(openPgQueueStore(url), /schema version 999 is newer than this svc supports/);
  const r = await serveOnce(url);
  assert.equal(r.code, 2, r.out);
  assert.match(r.out, /newer than this svc supports/);
});

test('a value PostgreSQL cannot store (a NUL character in a path parameter) answers 400, not 500', async () => {
  const url = await server.newDatabase('svc_nul');
  const svc = await startTestSvc(['queue'], { env: { SVC_QUEUE_DATABASE_URL: url, SVC_QUEUE_DATABASE_SCHEMA: 'public' } });
  try {
    const token = svc.ctx.credentials.get('queue.token');
    for (const route of ['/v2/dlq/%00', '/v2/flowControl/%00', '/v2/messages/a%00b', '/v2/schedules/%00']) {
      const res = await fetch(`${svc.urls.queue}${route}`, { headers: { authorization: `Bearer ${token}` } });
      const body = (await res.json()) as { error?: string };
      assert.equal(res.status, 400, `${route}: ${res.status} ${JSON.stringify(body)}`);
      assert.match(body.error ?? '', /NUL/);
    }
    assert.equal((await fetch(`${svc.urls.queue}/v2/dlq`, { headers: { authorization: `Bearer ${token}` } })).status, 200);
  } finally {
    await svc.close();
  }
});

test('PostgreSQL restarted under load: 503 + Retry-After while down, deliveries resume, nothing acknowledged lost', async () => {
  const own = await startTestPostgres({ own: true }); // this test stops and restarts the server
  const url = await own.newDatabase('svc_fault');
  const delivered = new Set<string>();
  const sink = await startSink((r) => {
    delivered.add(r.headers['upstash-message-id'] as string);
    return { status: 200 };
  });
  const svc = await startTestSvc(['queue'], { env: { SVC_QUEUE_DATABASE_URL: url, SVC_QUEUE_DATABASE_SCHEMA: 'public', SVC_QUEUE_LEASE_MS: '3000' } });
  try {
    const token = svc.ctx.credentials.get('queue.token');
    const acked: string[] = [];
    const statuses = new Map<number, number>();
    let down = false;
    let stop = false;
    let retryAfterWhileDown = 0;
    const publisher = async (p: number) => {
      for (let i = 0; !stop; i++) {
        const res = await fetch(`${svc.urls.queue}/v2/publish/${sink.url}/f/${p}/${i}`, { method: 'POST', headers: { authorization: `Bearer ${token}` }, body: `${p}-${i}` }).catch(() => undefined);
        if (!res) continue;
        statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
        const body = (await res.json()) as { messageId?: string };
        if (res.status >= 200 && res.status < 300) acked.push(body.messageId!);
        else if (res.status === 503 && res.headers.get('retry-after') && down) retryAfterWhileDown++;
        if (res.status !== 201 && res.status !== 200) await new Promise((r) => setTimeout(r, 50));
      }
    };
    const running = Promise.all([0, 1, 2, 3].map(publisher));
    await waitFor('publishes acknowledged before the restart', () => acked.length >= 50, 30_000);
    own.kill(); // pg_ctl stop -m immediate: like a crash
    down = true;
    await waitFor('503 with Retry-After while PostgreSQL is down', () => retryAfterWhileDown >= 3, 30_000);
    const ackedWhileDown = acked.length;
    await new Promise((r) => setTimeout(r, 500));
    assert.equal(acked.length, ackedWhileDown, 'no publish acknowledged while the database is down');
    own.start();
    down = false;
    await waitFor('publishes acknowledged again after the restart', () => acked.length >= ackedWhileDown + 50, 60_000);
    stop = true;
    await running;
    await waitFor('every acknowledged message delivered', () => acked.every((id) => delivered.has(id)), 90_000).catch((err) => {
      throw new Error(`${(err as Error).message}; missing ${acked.filter((id) => !delivered.has(id)).length} of ${acked.length}`);
    });
    const other = [...statuses].filter(([s]) => s !== 201 && s !== 200 && s !== 503);
    assert.deepEqual(other, [], 'only 2xx and 503 answers');
  } finally {
    await svc.close();
    await sink.close();
    await own.stop();
  }
});

test('a test cluster left behind by a killed test process is stopped and removed by the next start', async (t) => {
  if (!server.own) return t.skip('SVC_TEST_DATABASE_URL names the server: no own clusters');
  const helper = path.join(ROOT, 'test/helpers/postgres.ts');
  const child = spawn(
    process.execPath,
    ['--import', 'tsx', '--input-type=module', '-e', `const { startTestPostgres } = await import(${JSON.stringify(helper)}); const s = await startTestPostgres({ own: true }); console.log('URL ' + s.adminUrl); setInterval(() => {}, 1 << 30);`],
    { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let out = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr.on('data', (d: Buffer) => (out += d.toString()));
  const url = await waitFor('the child process cluster', () => /^URL (\S+)/m.exec(out)?.[1], 120_000);
  const dir = fs.readdirSync(os.tmpdir()).find((n) => n.startsWith(`svc-pg-${child.pid}-`));
  assert.ok(dir, 'the cluster directory is named after its test process');
  const pidFile = path.join(os.tmpdir(), dir, 'data', 'postmaster.pid');
  const postmaster = Number(fs.readFileSync(pidFile, 'utf8').split('\n')[0]);
  child.kill('SIGKILL'); // no exit handler runs: the cluster stays up
  await new Promise((r) => child.once('exit', r));
  await withPg(url, (c) => c.query('SELECT 1')); // still serving
  assert.ok(reapStaleClusters(postgresBinDir()).includes(path.join(os.tmpdir(), dir)));
  assert.equal(fs.existsSync(path.join(os.tmpdir(), dir)), false);
  await waitFor('the postmaster stopped', () => {
    try {
      process.kill(postmaster, 0);
      return false;
    } catch {
      return true;
    }
  }, 30_000);
});
