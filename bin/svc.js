#!/usr/bin/env node
// Entry point of the `svc` command (and `npm start`).
// - Runs on the Node.js the native addons were built for: when node_modules/.svc-node (written by
//   scripts/node-env.sh's install) names another major version than this process's, it runs
//   itself again with that Node.js (.tools/node, installed by scripts/quickstart.sh) as a child
//   (same stdio, SIGINT/SIGTERM forwarded, same exit code; scripts/addon-node.mjs), or says in one
//   line what to do when there is none. `node bin/svc.js serve` typed in a new shell thus works
//   whatever `node` the shell finds first.
// - Source checkout with the dev dependencies installed (tsx resolvable, src/cli.ts present): runs
//   src/cli.ts through tsx, so what runs is always the current source, never a stale build.
// - Otherwise (a production install: `npm run build`, then `npm ci --omit=dev`): runs the compiled
//   dist/cli.js with plain Node (no tsx, no TypeScript).
import fs from 'node:fs';
import { fileURLToPath } from 'node:url';

const source = new URL('../src/cli.ts', import.meta.url);
const built = new URL('../dist/cli.js', import.meta.url);
const chooser = new URL('../scripts/addon-node.mjs', import.meta.url);

// A deployed app without scripts/ runs on the Node.js it was installed with: nothing to choose.
if (fs.existsSync(chooser)) {
  const { addonNode, runAsChild, switchedEnv } = await import(chooser.href);
  const decision = addonNode(fileURLToPath(new URL('..', import.meta.url)));
  if (decision.action === 'fail') {
    process.stderr.write(decision.message + '\n');
    process.exit(1);
  }
  if (decision.action === 'switch') {
    runAsChild(`${decision.binDir}/node`, [...process.execArgv, fileURLToPath(import.meta.url), ...process.argv.slice(2)], switchedEnv(decision));
    // the child does the work; this process ends when it does (runAsChild exits)
    await new Promise(() => {});
  }
}

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
