/**
 * svc as a real child process (`node bin/svc.js serve`, every port 0) for tests that measure its
 * memory, outlive it or kill it: the areas' URLs from the banner, the tokens from
 * `credentials.json`, its resident set size from `/proc`.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { tempDir } from './env.js';
import { waitFor } from './wait.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

export interface SvcProcess {
  child: ChildProcess;
  pid: number;
  dataDir: string;
  /** Area name -> base URL, from the banner. */
  urls: Record<string, string>;
  /** Area name -> port. */
  ports: Record<string, number>;
  /** Credential name -> value, as the process wrote them (`credentials.json`, read on each call). */
  credentials(): Record<string, string>;
  /** Everything svc wrote to stdout and stderr so far. */
  output(): string;
  /** Resident set size of the svc process in bytes (`VmRSS`). */
  rss(): number;
  /** The same in MiB. */
  rssMb(): number;
  /** Peak resident set size since start or the last {@link SvcProcess.resetPeak}, in bytes (`VmHWM`). */
  peakRss(): number;
  /** Resets the peak to the current RSS (`/proc/<pid>/clear_refs` = 5). */
  resetPeak(): void;
  /** True while the process runs. */
  alive(): boolean;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** SIGTERM (SIGKILL after 20 s), then removes the data dir. */
  close(): Promise<void>;
}

/** A `/proc/<pid>/status` field given in kB, in bytes. */
function procStatusBytes(pid: number, field: string): number {
  const m = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
  if (!m) throw new Error(`no ${field} in /proc/${pid}/status`);
  return Number(m[1]) * 1024;
}

/** `node bin/svc.js serve` as launched by {@link launchSvc}: start-up not awaited. */
export interface LaunchedSvc {
  child: ChildProcess;
  /** Everything svc wrote to stdout and stderr so far. */
  output(): string;
  /** The exit code (null after a signal). */
  exited: Promise<number | null>;
  /** Base URL of `area` from the banner; throws while the banner does not name it. */
  url(area: string): string;
}

/**
 * Launches `node bin/svc.js serve` on `dataDir` (127.0.0.1, log level warn, kv workers off; `env`
 * adds or overrides; `nodeArgs` go before the script) without waiting for it: for tests of
 * start-up errors, crash points and restarts on the same data. The data dir is the caller's.
 * `root`: the checkout whose `bin/svc.js` runs (default this one; another release's for upgrades).
 */
export function launchSvc(dataDir: string, env: Record<string, string> = {}, nodeArgs: string[] = [], root = ROOT): LaunchedSvc {
  const child = spawn(process.execPath, [...nodeArgs, path.join(root, 'bin/svc.js'), 'serve'], {
    cwd: root,
    env: { ...process.env, SVC_HOST: '127.0.0.1', SVC_DATA_DIR: dataDir, SVC_LOG_LEVEL: 'warn', SVC_KV_WORKERS: '0', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (out += d.toString()));
  return {
    child,
    output: () => out,
    exited: new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code))),
    url: (area) => {
      const m = new RegExp(`^${area}\\s+(http://\\S+)`, 'm').exec(out);
      if (!m) throw new Error(`no ${area} URL in the banner:\n${out}`);
      return m[1];
    },
  };
}

/** Stops a {@link launchSvc} process (SIGTERM unless it already exited) and waits for its exit. */
export async function stopSvc(svc: LaunchedSvc): Promise<void> {
  if (svc.child.exitCode === null && svc.child.signalCode === null) svc.child.kill('SIGTERM');
  await svc.exited;
}

/**
 * Starts svc with `areas` (kv workers off, every port 0) and `env` (an `SVC_DATA_DIR` there is
 * used and kept: e.g. a restart on the same data; else a temporary one, removed by `close`);
 * `nodeArgs` go before the script (e.g. `--max-old-space-size=64`). Resolves once the banner names
 * every area's URL (60 s deadline).
 */
export async function spawnSvc(areas: string[], env: Record<string, string> = {}, nodeArgs: string[] = []): Promise<SvcProcess> {
  const tmp = env.SVC_DATA_DIR ? { dir: env.SVC_DATA_DIR, cleanup() {} } : tempDir('svc-proc-');
  const launched = launchSvc(
    tmp.dir,
    { SVC_AREAS: areas.join(','), SVC_KV_PORT: '0', SVC_VECTOR_PORT: '0', SVC_QUEUE_PORT: '0', SVC_MGMT_PORT: '0', SVC_VECTOR_DIMENSION: '2', ...env },
    nodeArgs,
  );
  const { child, output } = launched;
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
  const urls: Record<string, string> = {};
  const ports: Record<string, number> = {};
  try {
    await waitFor(
      'svc banner',
      () => {
        for (const a of areas) {
          const m = new RegExp(`^${a}\\s+(http://\\S+)`, 'm').exec(output());
          if (!m) return undefined;
          urls[a] = m[1];
          ports[a] = Number(new URL(m[1]).port);
        }
        return /svc is running/.test(output()) || undefined;
      },
      60_000,
    );
  } catch (err) {
    child.kill('SIGKILL');
    tmp.cleanup();
    throw new Error(`${(err as Error).message}\n${output()}`);
  }
  const pid = child.pid!;
  const alive = () => child.exitCode === null && child.signalCode === null;
  return {
    child,
    pid,
    dataDir: tmp.dir,
    urls,
    ports,
    credentials: () => JSON.parse(fs.readFileSync(path.join(tmp.dir, 'credentials.json'), 'utf8')) as Record<string, string>,
    output,
    rss: () => procStatusBytes(pid, 'VmRSS'),
    rssMb: () => procStatusBytes(pid, 'VmRSS') / (1024 * 1024),
    peakRss: () => procStatusBytes(pid, 'VmHWM'),
    resetPeak: () => fs.writeFileSync(`/proc/${pid}/clear_refs`, '5'),
    alive,
    exited,
    async close() {
      if (alive()) {
        child.kill('SIGTERM');
        const t = setTimeout(() => child.kill('SIGKILL'), 20_000);
        await exited;
        clearTimeout(t);
      }
      tmp.cleanup();
    },
  };
}
