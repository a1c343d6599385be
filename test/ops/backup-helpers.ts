/**
 * Helpers of the backup tests: `svc serve` / `svc backup` / `svc restore` as real child processes,
 * the management API's backup route, reading a data directory's credentials and a SQLite file's
 * schema version.
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import Database from 'better-sqlite3';
import { launchSvc, stopSvc, type LaunchedSvc } from '../helpers/svc-process.js';
import { waitFor } from '../helpers/wait.js';

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

export type ChildSvc = LaunchedSvc;

/** `node bin/svc.js serve` on `dataDir` (every port 0 unless `env` sets one). */
export function serve(dataDir: string, env: Record<string, string> = {}): ChildSvc {
  return launchSvc(dataDir, { SVC_QUEUE_PORT: '0', SVC_KV_PORT: '0', SVC_VECTOR_PORT: '0', SVC_MGMT_PORT: '0', ...env });
}

/** Resolves once the banner is printed; throws with the output when svc exits first. */
export async function started(svc: ChildSvc, timeoutMs = 180_000): Promise<void> {
  let exited = false;
  void svc.exited.then(() => (exited = true));
  await waitFor('the svc banner', () => {
    if (exited) throw new Error(`svc exited: ${svc.output()}`);
    return /Paste into/.test(svc.output());
  }, timeoutMs).catch((err: Error) => {
    throw new Error(`${err.message}\n${svc.output()}`);
  });
}

export { stopSvc as stop };

/** Runs `node bin/svc.js <args>`; resolves to its exit code and output. */
export function cli(args: string[], env: Record<string, string> = {}): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [path.join(ROOT, 'bin/svc.js'), ...args], {
      cwd: ROOT,
      env: { ...process.env, SVC_LOG_LEVEL: 'warn', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.once('exit', (code) => resolve({ code, stdout, stderr }));
  });
}

/** The credentials.json of `dataDir`. */
export function credentials(dataDir: string): Record<string, string> {
  return JSON.parse(fs.readFileSync(path.join(dataDir, 'credentials.json'), 'utf8')) as Record<string, string>;
}

/** `POST /v2/backup` with Basic auth; resolves to the status and JSON body. */
export async function postBackup(mgmtUrl: string, creds: Record<string, string>, body?: object): Promise<{ status: number; body: Record<string, unknown> }> {
  const r = await fetch(`${mgmtUrl}/v2/backup`, {
    method: 'POST',
    headers: {
      authorization: `Basic ${Buffer.from(`${creds['mgmt.user']}:${creds['mgmt.password']}`).toString('base64')}`,
      'content-type': 'application/json',
    },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: r.status, body: (await r.json()) as Record<string, unknown> };
}

/** The `PRAGMA user_version` (schema version) of the SQLite file `file`, opened read-only. */
export function userVersion(file: string): number {
  const db = new Database(file, { readonly: true });
  try {
    return Number(db.pragma('user_version', { simple: true }));
  } finally {
    db.close();
  }
}
