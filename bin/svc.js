#!/usr/bin/env node
// Entry point of the `svc` command (and `npm start`).
// - Source checkout with the dev dependencies installed (tsx resolvable, src/cli.ts present): runs
//   src/cli.ts through tsx, so what runs is always the current source, never a stale build.
// - Otherwise (a production install: `npm run build`, then `npm ci --omit=dev`): runs the compiled
//   dist/cli.js with plain Node (no tsx, no TypeScript).
import fs from 'node:fs';

const source = new URL('../src/cli.ts', import.meta.url);
const built = new URL('../dist/cli.js', import.meta.url);

async function loadTsx() {
  if (!fs.existsSync(source)) return undefined;
  try {
    return await import('tsx/esm/api');
  } catch (err) {
    if (err?.code === 'ERR_MODULE_NOT_FOUND') return undefined;
    throw err;
  }
}

const tsx = await loadTsx();
if (tsx) {
  tsx.register();
  await import(source.href);
} else if (fs.existsSync(built)) {
  await import(built.href);
} else {
  process.stderr.write('svc: dist/cli.js is missing and tsx is not installed: run `npm run build` (needs the dev dependencies) or `npm install`\n');
  process.exit(1);
}
