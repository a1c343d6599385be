/**
 * Child-process plumbing for the bench scripts (kv, queue, vector): start long-running servers and
 * one-shot load generators, wait until they are ready, and stop EVERY process this bench started —
 * on normal completion, on an error, and on Ctrl-C / SIGTERM.
 *
 * Every child is spawned `detached` (its own process group), so a server that itself spawns
 * children (svc supervising redis-server) is stopped as a whole: SIGTERM to the group, then SIGKILL
 * to the group after a grace period. Temp directories made by {@link makeTempDir} are removed at the
 * end. {@link installCleanupHandlers} (installed by the first process or temp dir started here)
 * makes Ctrl-C a clean stop: children stopped, temp dirs removed, exit 130, no stack trace.
 *
 * Rule source: `/work/briefs/common.md` ("never leave background processes running").
 */
import { spawn, type ChildProcess, type SpawnOptions } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';

/** A child process started by {@link startProcess}. */
export interface ManagedProcess {
  /** Label used in logs and errors. */
  readonly name: string;
  readonly child: ChildProcess;
  readonly pid: number;
  /** Everything the child wrote so far (stdout and stderr interleaved, capped at 1 MB). */
  output(): string;
  /** Resolves with the exit code (or the signal name) once the child has exited. */
  readonly exited: Promise<number | string>;
  /**
   * Stops the whole process group: `signal` (default SIGTERM), then SIGKILL after `graceMs`
   * (default 5000 ms). Resolves when the child has exited. Idempotent.
   */
  stop(signal?: NodeJS.Signals, graceMs?: number): Promise<void>;
}

export interface StartOptions {
  name: string;
  cmd: string;
  args?: string[];
  env?: NodeJS.ProcessEnv;
  cwd?: string;
  /** Ready when the output matches this; without it the process is ready once spawned. */
  readyPattern?: RegExp;
  /** Give up waiting for `readyPattern` after this many ms (default 30000). */
  readyTimeoutMs?: number;
}

const running = new Set<ManagedProcess>();
const tempDirs = new Set<string>();
const OUTPUT_CAP = 1 << 20;

/** Binds port 0 on `host` (default 127.0.0.1), reads the port the kernel chose and releases it. */
export function freePort(host = '127.0.0.1'): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.unref();
    srv.once('error', reject);
    srv.listen(0, host, () => {
      const addr = srv.address();
      srv.close(() => (addr && typeof addr === 'object' ? resolve(addr.port) : reject(new Error('no port'))));
    });
  });
}

/** A fresh directory under the OS temp dir, removed by {@link cleanupAll}. */
export function makeTempDir(prefix = 'svc-bench-'): string {
  installCleanupHandlers();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
  tempDirs.add(dir);
  return dir;
}

function killGroup(pid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(-pid, signal);
  } catch {
    try {
      process.kill(pid, signal);
    } catch {
      /* already gone */
    }
  }
}

/**
 * Spawns a long-running child in its own process group and waits for `readyPattern`.
 * @throws Error when the child exits or the pattern does not appear in time (the child is stopped
 *   first; the error message carries its last output).
 */
export async function startProcess(opts: StartOptions): Promise<ManagedProcess> {
  installCleanupHandlers();
  const spawnOpts: SpawnOptions = {
    cwd: opts.cwd,
    env: opts.env ?? process.env,
    detached: true,
    stdio: ['ignore', 'pipe', 'pipe'],
  };
  const child = spawn(opts.cmd, opts.args ?? [], spawnOpts);
  let out = '';
  const onData = (b: Buffer) => {
    if (out.length < OUTPUT_CAP) out += b.toString('utf8');
  };
  child.stdout!.on('data', onData);
  child.stderr!.on('data', onData);
  const exited = new Promise<number | string>((resolve) => {
    child.once('exit', (code, sig) => resolve(code ?? sig ?? 'unknown'));
    child.once('error', (err) => {
      out += `\nspawn error: ${err.message}`;
      resolve('spawn-error');
    });
  });
  let done = false;
  void exited.then(() => (done = true));
  const proc = manage(opts.name, child, exited, () => out);
  if (!child.pid) {
    await exited;
    running.delete(proc);
    throw new Error(`${opts.name}: could not start ${opts.cmd}: ${out.trim()}`);
  }
  if (opts.readyPattern) {
    const pattern = opts.readyPattern;
    const timeoutMs = opts.readyTimeoutMs ?? 30_000;
    const ok = await new Promise<boolean>((resolve) => {
      const check = () => {
        if (pattern.test(out)) finish(true);
      };
      const finish = (v: boolean) => {
        clearTimeout(timer);
        child.stdout!.off('data', check);
        child.stderr!.off('data', check);
        resolve(v);
      };
      const timer = setTimeout(() => finish(false), timeoutMs);
      child.stdout!.on('data', check);
      child.stderr!.on('data', check);
      void exited.then(() => finish(pattern.test(out)));
      check();
    });
    if (!ok || done) {
      const why = done ? 'exited' : `no ${pattern} within ${timeoutMs} ms`;
      await proc.stop('SIGKILL');
      throw new Error(`${opts.name}: not ready (${why}); output:\n${out.slice(-4000)}`);
    }
  }
  return proc;
}

/**
 * The {@link ManagedProcess} of `child` (whose end `exited` reports), registered for the cleanup:
 * `stop` signals its process group (the process itself when it has none of its own), SIGKILLs it
 * after the grace period, then sweeps the group.
 */
function manage(name: string, child: ChildProcess, exited: Promise<number | string>, output: () => string): ManagedProcess {
  let stopping: Promise<void> | undefined;
  let done = false;
  void exited.then(() => (done = true));
  const proc: ManagedProcess = {
    name,
    child,
    pid: child.pid ?? -1,
    output,
    exited,
    stop(signal = 'SIGTERM', graceMs = 5000) {
      return (stopping ??= (async () => {
        if (!done && child.pid) {
          killGroup(child.pid, signal);
          const timer = setTimeout(() => child.pid && killGroup(child.pid, 'SIGKILL'), graceMs);
          await exited;
          clearTimeout(timer);
          // Grandchildren (e.g. a supervised redis-server) may outlive the leader: sweep the group.
          killGroup(child.pid, 'SIGKILL');
        }
        running.delete(proc);
      })());
    },
  };
  running.add(proc);
  return proc;
}

/**
 * Puts a child the bench spawned itself (with `node:child_process`, not {@link startProcess}) under
 * the same cleanup: Ctrl-C, SIGTERM or an uncaught error stop it (its process group when spawned
 * `detached`, else the process; SIGTERM, SIGKILL after 5 s) before the bench exits. Returns `child`.
 */
export function adoptChild<C extends ChildProcess>(child: C, name: string): C {
  installCleanupHandlers();
  const exited = new Promise<number | string>((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) return resolve(child.exitCode ?? child.signalCode ?? 'unknown');
    child.once('exit', (code, sig) => resolve(code ?? sig ?? 'unknown'));
    child.once('error', () => resolve('spawn-error'));
  });
  const proc = manage(name, child, exited, () => '');
  void exited.then(() => running.delete(proc));
  return child;
}

/** Puts a directory the bench made itself under the cleanup (removed at the end and on Ctrl-C). Returns `dir`. */
export function adoptTempDir(dir: string): string {
  installCleanupHandlers();
  tempDirs.add(dir);
  return dir;
}

const cleanups: (() => unknown)[] = [];

/**
 * Runs `fn` (awaited, errors ignored) when the bench is stopped by a signal or an uncaught error,
 * after its processes are stopped and before the temp dirs are removed: for what the bench started
 * through another helper (a test PostgreSQL cluster's stop).
 */
export function onCleanup(fn: () => unknown): void {
  installCleanupHandlers();
  cleanups.push(fn);
}

/** Result of {@link runToCompletion}. */
export interface RunResult {
  code: number | string;
  stdout: string;
  stderr: string;
}

/**
 * Runs a one-shot command (a load generator) to completion, capturing stdout and stderr. The child
 * is registered like a server, so Ctrl-C stops it too. Never throws for a non-zero exit: callers
 * check `code`.
 */
export async function runToCompletion(name: string, cmd: string, args: string[], env?: NodeJS.ProcessEnv): Promise<RunResult> {
  installCleanupHandlers();
  const child = spawn(cmd, args, { env: env ?? process.env, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout!.on('data', (b: Buffer) => (stdout += b.toString('utf8')));
  child.stderr!.on('data', (b: Buffer) => (stderr += b.toString('utf8')));
  const exited = new Promise<number | string>((resolve) => {
    child.once('exit', (code, sig) => resolve(code ?? sig ?? 'unknown'));
    child.once('error', (err) => {
      stderr += `spawn error: ${err.message}`;
      resolve('spawn-error');
    });
  });
  const proc: ManagedProcess = {
    name,
    child,
    pid: child.pid ?? -1,
    output: () => stdout + stderr,
    exited,
    async stop() {
      if (child.pid && child.exitCode === null) killGroup(child.pid, 'SIGKILL');
      await exited;
      running.delete(proc);
    },
  };
  running.add(proc);
  const code = await exited;
  running.delete(proc);
  return { code, stdout, stderr };
}

/**
 * Polls `probe` every `intervalMs` (default 50) until it returns true.
 * @throws Error naming `what` when `timeoutMs` (default 15000) passes first.
 */
export async function waitFor(what: string, probe: () => Promise<boolean> | boolean, timeoutMs = 15_000, intervalMs = 50): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let lastErr: unknown;
  for (;;) {
    try {
      if (await probe()) return;
    } catch (err) {
      lastErr = err;
    }
    if (Date.now() > deadline) {
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${lastErr ? `: ${String(lastErr)}` : ''}`);
    }
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}

/** Stops every process still running (in reverse start order) and removes the temp dirs. */
export async function cleanupAll(): Promise<void> {
  for (const p of [...running].reverse()) await p.stop();
  for (const fn of cleanups.splice(0).reverse()) await Promise.resolve().then(fn).catch(() => undefined);
  await stopStrayChildren();
  for (const d of tempDirs) fs.rmSync(d, { recursive: true, force: true });
  tempDirs.clear();
}

/** The pids of this process's children still running (Linux `/proc`; empty elsewhere). */
function childPids(): number[] {
  const out: number[] = [];
  let entries: string[];
  try {
    entries = fs.readdirSync('/proc');
  } catch {
    return out;
  }
  for (const e of entries) {
    if (!/^\d+$/.test(e)) continue;
    try {
      const stat = fs.readFileSync(`/proc/${e}/stat`, 'utf8');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      if (Number(fields[1]) === process.pid && fields[0] !== 'Z') out.push(Number(e));
    } catch {
      /* gone meanwhile */
    }
  }
  return out;
}

/**
 * The last sweep of {@link cleanupAll}: children the bench started through another helper and
 * never handed to this module (one still starting when Ctrl-C came) get SIGTERM, then SIGKILL
 * after 5 s. Such a child's own children (a supervised redis-server) follow it: svc's watchdog.
 */
async function stopStrayChildren(): Promise<void> {
  const pids = childPids();
  if (pids.length === 0) return;
  for (const pid of pids) killGroup(pid, 'SIGTERM');
  const deadline = Date.now() + 5000;
  while (Date.now() < deadline && pids.some((pid) => childPids().includes(pid))) await new Promise((r) => setTimeout(r, 50));
  for (const pid of childPids()) if (pids.includes(pid)) killGroup(pid, 'SIGKILL');
}

/** Synchronous last resort for `process.on('exit')`: SIGKILL every group still registered. */
function killAllSync(): void {
  for (const p of running) if (p.pid > 0) killGroup(p.pid, 'SIGKILL');
  for (const d of tempDirs) {
    try {
      fs.rmSync(d, { recursive: true, force: true });
    } catch {
      /* best effort */
    }
  }
}

let installed = false;
/** The exit code of the signal that interrupted the bench (130 SIGINT, 143 SIGTERM), once one did. */
let interruptedWith: number | undefined;
/** How long the bench's own code may unwind (its `finally` blocks) once its children are stopped. */
const UNWIND_MS = 300;

/**
 * Makes SIGINT, SIGTERM, an uncaught exception or an unhandled rejection stop every child and
 * remove the temp dirs before the bench exits (exit code 130 / 143 / 1). Idempotent; called by
 * {@link startProcess}, {@link runToCompletion} and {@link makeTempDir}, so every bench that starts
 * its processes through this module has it.
 *
 * A signal is a clean stop, not a failure: one line says so, then the bench's output is muted (its
 * pending requests fail as its servers stop, and its `catch` would print those errors with their
 * stack traces), its own `process.exit(1)` / `process.exitCode = 1` cannot end it early or change
 * the code, every started process group is stopped, the temp dirs removed, the bench's `finally`
 * blocks get {@link UNWIND_MS} to run, and it exits 128 + the signal number. A second Ctrl-C
 * kills every group at once and exits.
 */
export function installCleanupHandlers(): void {
  if (installed) return;
  installed = true;
  const realExit = process.exit.bind(process) as (code?: number) => never;
  const write = process.stderr.write.bind(process.stderr);
  let exiting = false;
  const bail = (code: number, why: string, err?: unknown) => {
    if (exiting) {
      killAllSync();
      realExit(interruptedWith ?? code);
    }
    exiting = true;
    if (err) write(`\n${why}: ${err instanceof Error ? err.stack ?? err.message : String(err)}\n`);
    else write(`\n${why}: stopping every started process...\n`);
    const hard = setTimeout(() => {
      killAllSync();
      realExit(code);
    }, 10_000);
    hard.unref();
    cleanupAll().finally(() => realExit(code));
  };
  const interrupt = (code: number, signal: string) => {
    if (interruptedWith !== undefined) {
      killAllSync();
      realExit(interruptedWith);
    }
    interruptedWith = code;
    exiting = true;
    write(`\n${signal}: stopping every started process and removing temp dirs...\n`);
    const mute = ((_chunk: unknown, enc?: unknown, cb?: unknown) => {
      const done = typeof enc === 'function' ? enc : cb;
      if (typeof done === 'function') (done as () => void)();
      return true;
    }) as typeof process.stdout.write;
    process.stdout.write = mute;
    process.stderr.write = mute;
    process.exit = (() => undefined) as unknown as typeof process.exit;
    const hard = setTimeout(() => {
      killAllSync();
      realExit(code);
    }, 10_000);
    hard.unref();
    void cleanupAll()
      .catch(() => undefined)
      .then(() => new Promise((r) => setTimeout(r, UNWIND_MS)))
      .then(() => {
        killAllSync();
        write(`${signal}: stopped\n`);
        realExit(code);
      });
  };
  process.on('SIGINT', () => interrupt(130, 'SIGINT'));
  process.on('SIGTERM', () => interrupt(143, 'SIGTERM'));
  process.on('uncaughtException', (err) => (interruptedWith === undefined ? bail(1, 'uncaught exception', err) : undefined));
  process.on('unhandledRejection', (err) => (interruptedWith === undefined ? bail(1, 'unhandled rejection', err) : undefined));
  process.on('exit', () => {
    killAllSync();
    if (interruptedWith !== undefined) process.exitCode = interruptedWith;
  });
}
