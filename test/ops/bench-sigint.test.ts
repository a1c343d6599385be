/**
 * Ctrl-C on a bench (bench/lib/proc.ts `installCleanupHandlers`): the bench stops every process it
 * started and removes its temp dirs, prints no stack trace of the requests that fail while its
 * servers stop (its own `catch` and `process.exit(1)` included), and exits 130; a real process
 * and a real SIGINT (test/fixtures/bench-interrupted.ts). Also two real benches that spawn svc
 * themselves (`adoptChild`, `adoptTempDir`, `onCleanup`): `bench/tracing.ts` (three svc
 * processes, a checkout of a revision) and `bench/kv-front-ab.ts` (two svc with their
 * redis-servers), SIGINT (exit 130) and SIGTERM (exit 143) while their servers run.
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import os from 'node:os';
import { test } from 'node:test';
import { alive, waitFor } from '../helpers/wait.js';

const ROOT = path.resolve(import.meta.dirname, '../..');

test('SIGINT stops a bench cleanly: children killed, temp dirs removed, no stack trace, exit 130', { timeout: 120_000 }, async () => {
  const bench = spawn(process.execPath, ['--import', 'tsx', path.join(ROOT, 'test/fixtures/bench-interrupted.ts')], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  bench.stdout.on('data', (b: Buffer) => (stdout += b.toString('utf8')));
  bench.stderr.on('data', (b: Buffer) => (stderr += b.toString('utf8')));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => bench.once('exit', (code, signal) => resolve({ code, signal })));
  let childPid = 0;
  try {
    const m = await waitFor('the bench to start its child', () => /READY (\d+) (\S+)/.exec(stdout) ?? undefined, 60_000);
    childPid = Number(m[1]);
    const dir = m[2];
    assert.ok(alive(childPid) && fs.existsSync(dir));
    bench.kill('SIGINT');
    const { code, signal } = await exited;
    assert.deepEqual({ code, signal }, { code: 130, signal: null }, stderr);
    assert.match(stderr, /SIGINT: stopping every started process/);
    assert.doesNotMatch(stderr, /\n\s+at /, 'no stack trace');
    assert.doesNotMatch(stderr, /went away/, 'the bench\'s own error after the stop is not printed');
    assert.equal(alive(childPid), false, 'the child process group is gone');
    assert.equal(fs.existsSync(dir), false, 'the temp dir is removed');
  } finally {
    if (bench.exitCode === null && bench.signalCode === null) bench.kill('SIGKILL');
    if (childPid && alive(childPid)) process.kill(childPid, 'SIGKILL');
  }
});

/** The pids of every descendant of `pid` (from /proc). */
function descendants(pid: number): number[] {
  const children = new Map<number, number[]>();
  for (const e of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(e)) continue;
    try {
      const stat = fs.readFileSync(`/proc/${e}/stat`, 'utf8');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      children.set(ppid, [...(children.get(ppid) ?? []), Number(e)]);
    } catch {
      /* gone meanwhile */
    }
  }
  const out: number[] = [];
  const walk = (p: number) => {
    for (const c of children.get(p) ?? []) {
      out.push(c);
      walk(c);
    }
  };
  walk(pid);
  return out;
}

/** A descendant's command line, environment variable `name` and working directory ('' when gone). */
function procInfo(pid: number): { cmd: string; dataDir: string; cwd: string } {
  try {
    const cmd = fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').replace(/\0/g, ' ');
    const env = fs.readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0');
    const dataDir = env.find((v) => v.startsWith('SVC_DATA_DIR='))?.slice('SVC_DATA_DIR='.length) ?? '';
    return { cmd, dataDir, cwd: fs.readlinkSync(`/proc/${pid}/cwd`) };
  } catch {
    return { cmd: '', dataDir: '', cwd: '' };
  }
}

/**
 * Starts `args` (a bench), waits until `svcCount` svc processes run under it (and, when given,
 * until its stdout matches `after`), sends `signal`, and checks: exit 128 + the signal number,
 * every process it had started gone, the svc data dirs and the temp dirs under the OS temp dir the
 * svc processes ran in removed (not this checkout, which may itself sit under the temp dir), no stack trace.
 */
async function interruptBench(args: string[], svcCount: number, signal: 'SIGINT' | 'SIGTERM', after?: RegExp): Promise<void> {
  const bench = spawn(process.execPath, ['--import', 'tsx', ...args], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
  let stderr = '';
  let stdout = '';
  bench.stdout.on('data', (b: Buffer) => (stdout += b.toString('utf8')));
  bench.stderr.on('data', (b: Buffer) => (stderr += b.toString('utf8')));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => bench.once('exit', (code, sig) => resolve({ code, signal: sig })));
  let started: number[] = [];
  try {
    const svcs = await waitFor(`${svcCount} svc processes under the bench`, () => {
      const svc = descendants(bench.pid!).map((pid) => ({ pid, ...procInfo(pid) })).filter((p) => p.cmd.includes('bin/svc.js') && p.dataDir);
      return svc.length >= svcCount && svc.every((p) => fs.existsSync(p.dataDir)) ? svc : undefined;
    }, 180_000);
    if (after) await waitFor(`${after} in the bench's output`, () => after.test(stdout), 180_000);
    started = descendants(bench.pid!);
    const dirs = [...new Set(svcs.flatMap((p) => [p.dataDir, p.cwd]))].filter((d) => d.startsWith(os.tmpdir() + path.sep) && d !== ROOT && !ROOT.startsWith(d + path.sep));
    assert.ok(dirs.length >= svcCount, JSON.stringify(svcs));
    bench.kill(signal);
    const end = await exited;
    assert.deepEqual(end, { code: signal === 'SIGINT' ? 130 : 143, signal: null }, stderr);
    assert.match(stderr, new RegExp(`${signal}: stopping every started process`));
    assert.doesNotMatch(stderr, /\n\s+at /, 'no stack trace');
    await waitFor('every process the bench started to be gone', () => started.every((pid) => !alive(pid)), 30_000);
    for (const d of dirs) assert.equal(fs.existsSync(d), false, `${d} removed`);
  } finally {
    if (!started.length) started = descendants(bench.pid!);
    if (bench.exitCode === null && bench.signalCode === null) bench.kill('SIGKILL');
    for (const pid of started) if (alive(pid)) process.kill(pid, 'SIGKILL');
  }
}

test('bench/tracing.ts: SIGINT while its three svc processes run stops them, removes their data dirs and the checkout, exit 130', { timeout: 300_000 }, async () => {
  await interruptBench(['bench/tracing.ts', '--base', 'HEAD', '--rounds', '1', '--n', '200000', '--kv-n', '200000'], 3, 'SIGINT');
});

test('bench/kv-front-ab.ts: SIGTERM while both svc (and their redis-servers) run stops them and removes their data dirs, exit 143', { timeout: 300_000 }, async () => {
  await interruptBench(['bench/kv-front-ab.ts', '.', '.', '50'], 2, 'SIGTERM', /^round 0 A:/m);
});
