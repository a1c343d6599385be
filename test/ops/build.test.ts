/**
 * The production build: `npm run build` (scripts/build.mjs) compiles src/ to a dist directory with
 * the run-time assets (queue migrations `*.sql`, the kv JSON module `*.lua`, the web console's
 * `public/` files); the result is started
 * the way an operator does after `npm ci --omit=dev` — `node bin/svc.js serve` with neither tsx nor
 * TypeScript installed — and answers on every area, with a kv worker process forked from the
 * built `worker.js`. Start-up time and RSS are printed as test diagnostics (docs/readme/operations.md).
 */
import assert from 'node:assert/strict';
import { spawn, execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { tempDir } from '../helpers/env.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
/**
 * A production install beside a fresh build: package.json, package-lock.json, bin/, dist/ (built
 * here) and node_modules as `npm prune --omit=dev` leaves it — a hard-linked copy of the installed
 * tree that npm itself prunes to the lock file's production dependencies (offline, about 1 s),
 * which is what `npm ci --omit=dev` installs without rebuilding the native addons.
 */
function productionApp(dir: string): string {
  const app = path.join(dir, 'app');
  execFileSync(process.execPath, [path.join(ROOT, 'scripts/build.mjs'), '--out', path.join(app, 'dist')], { stdio: 'pipe' });
  fs.mkdirSync(path.join(app, 'bin'));
  fs.copyFileSync(path.join(ROOT, 'bin/svc.js'), path.join(app, 'bin/svc.js'));
  for (const file of ['package.json', 'package-lock.json']) fs.copyFileSync(path.join(ROOT, file), path.join(app, file));
  try {
    execFileSync('cp', ['-al', path.join(ROOT, 'node_modules'), path.join(app, 'node_modules')], { stdio: 'pipe' });
  } catch {
    // another file system: hard links are impossible, copy
    fs.rmSync(path.join(app, 'node_modules'), { recursive: true, force: true });
    execFileSync('cp', ['-a', path.join(ROOT, 'node_modules'), path.join(app, 'node_modules')], { stdio: 'pipe' });
  }
  execFileSync('npm', ['prune', '--omit=dev', '--offline', '--no-audit', '--no-fund'], { cwd: app, stdio: 'pipe', env: { ...process.env, npm_config_loglevel: 'error' } });
  return app;
}

function envVar(block: string, name: string): string {
  const m = new RegExp(`^${name}=(.*)$`, 'm').exec(block);
  assert.ok(m, `${name} missing in\n${block}`);
  return m[1];
}

async function call(url: string, init: RequestInit & { token?: string } = {}): Promise<{ status: number; body: any }> {
  const headers = new Headers(init.headers);
  if (init.token) headers.set('authorization', `Bearer ${init.token}`);
  const res = await fetch(url, { ...init, headers });
  const text = await res.text();
  let body: unknown = text;
  try {
    body = JSON.parse(text);
  } catch {
    // not JSON
  }
  return { status: res.status, body };
}

function rssKb(pid: number): number {
  const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
  return Number(/^VmRSS:\s+(\d+)/m.exec(status)?.[1] ?? NaN);
}

test('the built server (dist/) starts without tsx or TypeScript and serves every area', async (t) => {
  const { dir, cleanup } = tempDir('svc-build-');
  try {
    const app = productionApp(dir);
    assert.ok(fs.existsSync(path.join(app, 'dist/queue/store/migrations/0001_init.sql')));
    assert.ok(fs.existsSync(path.join(app, 'dist/kv/json/lua/register.lua')));
    assert.ok(fs.existsSync(path.join(app, 'dist/mgmt/console/public/index.html')));
    for (const devOnly of ['tsx', 'typescript', 'esbuild']) assert.equal(fs.existsSync(path.join(app, 'node_modules', devOnly)), false, devOnly);
    assert.ok(fs.existsSync(path.join(app, 'node_modules/fastify')));

    // `dist/cli.js env`: the compiled CLI alone, no server
    const data = path.join(dir, 'data');
    const env = { PATH: process.env.PATH, SVC_DATA_DIR: data, SVC_HOST: '127.0.0.1', SVC_LOG_LEVEL: 'warn', SVC_QUEUE_PORT: '0', SVC_KV_PORT: '0', SVC_VECTOR_PORT: '0', SVC_MGMT_PORT: '0', SVC_KV_WORKERS: '1' };
    const envOut = execFileSync(process.execPath, [path.join(app, 'dist/cli.js'), 'env'], { cwd: app, env, encoding: 'utf8' });
    assert.match(envOut, /^UPSTASH_REDIS_REST_TOKEN=/m);

    const t0 = performance.now();
    const child = spawn(process.execPath, [path.join(app, 'bin/svc.js'), 'serve'], { cwd: app, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    const exited = new Promise<number | null>((resolve) => child.on('exit', (c) => resolve(c)));
    try {
      const deadline = Date.now() + 120_000;
      // the banner (URLs and the .env block) is one write ending in an empty line
      while (!/Paste into[\s\S]*\n\n$/.test(stdout)) {
        assert.equal(child.exitCode, null, `svc exited: ${stderr}`);
        assert.ok(Date.now() < deadline, `no banner after 120 s: ${stdout}\n${stderr}`);
        await new Promise((r) => setTimeout(r, 50));
      }
      const startMs = performance.now() - t0;
      const url = (area: string) => new RegExp(`^${area}\\s+(http://\\S+)`, 'm').exec(stdout)![1];

      // mgmt: every area ready
      const deadlineReady = Date.now() + 60_000;
      let health = await call(`${url('mgmt')}/v2/health`);
      while (health.status !== 200 && Date.now() < deadlineReady) {
        await new Promise((r) => setTimeout(r, 200));
        health = await call(`${url('mgmt')}/v2/health`);
      }
      assert.equal(health.status, 200, JSON.stringify(health.body));
      assert.deepEqual(Object.keys(health.body.areas).sort(), ['kv', 'mgmt', 'queue', 'vector']);
      // the web console's page (a file copied from src/ into dist/)
      const page = await fetch(`${url('mgmt')}/console/`);
      assert.equal(page.status, 200);
      assert.match(await page.text(), /<html/i);

      // kv: a plain command and a JSON command (the .lua module copied into dist/)
      const kvToken = envVar(stdout, 'UPSTASH_REDIS_REST_TOKEN');
      assert.deepEqual((await call(url('kv'), { method: 'POST', token: kvToken, body: JSON.stringify(['SET', 'k', 'v']) })).body, { result: 'OK' });
      assert.deepEqual((await call(`${url('kv')}/get/k`, { token: kvToken })).body, { result: 'v' });
      assert.deepEqual((await call(url('kv'), { method: 'POST', token: kvToken, body: JSON.stringify(['JSON.SET', 'j', '$', '{"a":[1,2]}']) })).body, { result: 'OK' });
      assert.deepEqual((await call(url('kv'), { method: 'POST', token: kvToken, body: JSON.stringify(['JSON.ARRLEN', 'j', '$.a']) })).body, { result: [2] });

      // queue: the store (migrations from dist/) answers
      const qToken = envVar(stdout, 'QSTASH_TOKEN');
      const queues = await call(`${url('queue')}/v2/queues`, { token: qToken });
      assert.equal(queues.status, 200, JSON.stringify(queues.body));
      assert.ok(Array.isArray(queues.body));

      // vector: upsert and query
      const vToken = envVar(stdout, 'UPSTASH_VECTOR_REST_TOKEN');
      const info = await call(`${url('vector')}/info`, { token: vToken });
      assert.equal(info.status, 200, JSON.stringify(info.body));

      const rss = rssKb(child.pid!);
      t.diagnostic(`built server: banner after ${Math.round(startMs)} ms, RSS ${Math.round(rss / 1024)} MiB (Node ${process.version}, load ${(await import('node:os')).loadavg()[0].toFixed(1)})`);
    } finally {
      child.kill('SIGTERM');
      const code = await exited;
      assert.equal(code, 0, `exit code ${code}; stderr: ${stderr}`);
    }
  } finally {
    cleanup();
  }
});
