#!/usr/bin/env node
/**
 * `node scripts/with-node.mjs <command> [args...]`: runs the command with the Node.js this
 * checkout's native addons were built for (scripts/addon-node.mjs) first on PATH. Every npm script
 * of package.json starts with it, so `npm test`, `npm start`, `npm run bench:kv` ... typed in a new
 * shell work whatever `node` that shell finds: `npm` itself may run on the system's Node.js, the
 * command (`node ...`, `tsx ...`, `tsc ...`) runs on the one in `.tools/node` that
 * scripts/quickstart.sh installed. When there is no such Node.js it prints one line saying what to
 * do and exits 1. Runs on any Node.js >= 18.
 */
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { addonNode, runAsChild, switchedEnv } from './addon-node.mjs';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const [cmd, ...args] = process.argv.slice(2);
if (!cmd) {
  process.stderr.write('usage: node scripts/with-node.mjs <command> [args...]\n');
  process.exit(2);
}
const decision = addonNode(root);
if (decision.action === 'fail') {
  process.stderr.write(decision.message + '\n');
  process.exit(1);
}
runAsChild(cmd, args, decision.action === 'switch' ? switchedEnv(decision) : process.env);
