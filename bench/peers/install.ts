/**
 * Installs the benchmark peers of `bench/peers/package.json` (BullMQ for `npm run bench:queue`,
 * LanceDB for `npm run bench:vector`) on first use. They are not dependencies of svc: keeping them
 * out of the main package keeps `npm ci` of svc free of their native/optional platform packages.
 *
 * `npm install --prefix bench/peers --ignore-scripts --no-audit --no-fund` (versions from
 * `bench/peers/package-lock.json`; not `npm ci`, which refuses this lock file because some of
 * LanceDB's optional platform packages were never published for 0.37.1). `--ignore-scripts`: the peers' native parts
 * come as npm platform packages (`@lancedb/lancedb-linux-x64-gnu`, `@msgpackr-extract/*`), and it
 * stops optional packages (`onnxruntime-node` via `@huggingface/transformers`) from downloading
 * binaries at install time.
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));

/**
 * Makes sure package `name` is installed in `bench/peers/node_modules`, installing every peer if not.
 * Returns an error text instead of throwing when it cannot be installed (e.g. no registry access).
 */
export function ensurePeer(name: string): string | undefined {
  const marker = path.join(here, 'node_modules', name, 'package.json');
  if (fs.existsSync(marker)) return undefined;
  try {
    execFileSync('npm', ['install', '--prefix', here, '--ignore-scripts', '--no-audit', '--no-fund'], { stdio: ['ignore', 'pipe', 'pipe'], timeout: 600_000 });
    return fs.existsSync(marker) ? undefined : `npm install finished but ${name} is missing`;
  } catch (err) {
    const e = err as { stderr?: Buffer; message: string };
    return `npm install --prefix bench/peers failed: ${(e.stderr?.toString() ?? e.message).trim().split('\n').slice(-5).join(' / ')}`;
  }
}

/**
 * Installs (see {@link ensurePeer}) and imports peer `name` from `bench/peers/node_modules`.
 * Untyped on purpose: svc's type check and `npm test` must not need `bench/peers` installed.
 * Throws when it cannot be installed or loaded.
 */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export async function importPeer(name: string): Promise<any> {
  const err = ensurePeer(name);
  if (err) throw new Error(err);
  const spec: string = name; // a variable, so tsc does not resolve the module
  return import(spec);
}
