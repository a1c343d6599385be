#!/usr/bin/env node
// `npm run build`: compiles src/ to dist/ (tsconfig.build.json) and copies every non-TypeScript file
// of src/ the server reads at run time (queue migrations *.sql, the kv JSON module *.lua, the web
// console's public/ files) to the same place under dist/. dist/ is removed first so no stale
// module survives a rename.
// Needs the dev dependency `typescript`; the result runs with `node dist/cli.js` (no tsx, no TypeScript).
// `--out <dir>` builds into another directory (the build test uses a temp dir).
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const src = path.join(root, 'src');
const outAt = process.argv.indexOf('--out');
const dist = outAt > 0 ? path.resolve(process.argv[outAt + 1]) : path.join(root, 'dist');

fs.rmSync(dist, { recursive: true, force: true });
const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
execFileSync(process.execPath, [tsc, '-p', path.join(root, 'tsconfig.build.json'), '--outDir', dist], { stdio: 'inherit' });
let copied = 0;
for (const rel of fs.readdirSync(src, { recursive: true, encoding: 'utf8' })) {
  if (rel.endsWith('.ts') || !fs.statSync(path.join(src, rel)).isFile()) continue;
  fs.mkdirSync(path.dirname(path.join(dist, rel)), { recursive: true });
  fs.copyFileSync(path.join(src, rel), path.join(dist, rel));
  copied++;
}
process.stdout.write(`built ${path.relative(root, dist) || dist}/ (${copied} asset files copied)\n`);
