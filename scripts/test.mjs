/**
 * `npm test [-- <file>... | <node --test option>...]`: the test suite, after npm's `pretest`
 * (`bash scripts/install-deps.sh test`: installs the missing test-only system packages, chromium
 * and PostgreSQL, or names them in one line; builds the current Redis of the kv newer-command tests
 * once).
 * With no file given: the type check (`tsc -p tsconfig.json --noEmit`), then every
 * `test/**\/*.test.ts`; with files: only those, without the type check. node:test through tsx,
 * two files at a time, 240 s per test; arguments starting with `-` go to `node --test` (e.g.
 * `--test-name-pattern=...`). Runs with the Node.js the native addons were built for (package.json
 * runs it through scripts/with-node.mjs).
 */
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { runAsChild } from './addon-node.mjs';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
process.chdir(root);

/** Runs a command with inherited stdio; exits with its status on failure. */
function run(cmd, args) {
  const r = spawnSync(cmd, args, { stdio: 'inherit' });
  if (r.error) {
    process.stderr.write(`svc: cannot run ${cmd}: ${r.error.message}\n`);
    process.exit(127);
  }
  if (r.status !== 0) process.exit(r.status ?? 1);
}

/** Every `*.test.ts` under `dir` (relative to the root), sorted. */
function testFiles(dir) {
  return fs
    .readdirSync(path.join(root, dir), { withFileTypes: true })
    .flatMap((e) => (e.isDirectory() ? testFiles(path.join(dir, e.name)) : e.name.endsWith('.test.ts') ? [path.join(dir, e.name)] : []))
    .sort();
}

const args = process.argv.slice(2);
const options = args.filter((a) => a.startsWith('-'));
let files = args.filter((a) => !a.startsWith('-'));
if (files.length === 0) {
  run(process.execPath, [path.join(root, 'node_modules/typescript/bin/tsc'), '-p', 'tsconfig.json', '--noEmit']);
  files = testFiles('test');
}
// as a child this process waits for and forwards signals to (SIGTERM too: `node --test` stops its
// test files on it), ending with its exit code
runAsChild(process.execPath, ['--import', 'tsx', '--test', '--test-concurrency=2', '--test-timeout=240000', ...options, ...files], process.env);
