/**
 * Ctrl-C on a bench (bench/lib/proc.ts `installCleanupHandlers`): the bench stops every process it
 * started and removes its temp dirs, prints no stack trace of the requests that fail while its
 * servers stop (its own `catch` and `process.exit(1)` included), and exits 130; a real process
 * and a real SIGINT (test/fixtures/bench-interrupted.ts).
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
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
