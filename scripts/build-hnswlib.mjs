#!/usr/bin/env node
/**
 * Builds hnswlib-node's native addon a second and third time, for the x86-64 micro-architecture
 * levels x86-64-v3 (AVX2, FMA) and x86-64-v4 (AVX-512), next to the portable build npm made.
 * Run by `npm install` / `npm ci` (package.json `postinstall`); idempotent; never fails the install.
 *
 * Why: hnswlib picks its SIMD distance kernels at compile time (`hnswlib.h`: USE_AVX when the
 * compiler targets AVX, USE_AVX512 when it targets AVX-512F). hnswlib-node's binding.gyp passes no
 * `-m` flags, so its build computes every distance with 128-bit SSE. hnswlib's own Python package
 * compiles with `-march=native` for this reason. Measured on a 2-core AMD EPYC (AVX-512), 10k×768
 * random vectors, M 16, efConstruction 100: 0.92 ms per insertion (portable), 0.55 (x86-64-v3),
 * 0.47 (x86-64-v4); a query at ef 100 0.77 / 0.55 / 0.51 ms.
 *
 * A build for a level the CPU lacks would die on an illegal instruction, so nothing here decides
 * which build runs: `src/vector/engine/hnswlib.ts` reads the CPU's flags at start-up and loads the
 * best build this CPU can run, else the portable one. Both builds are made whatever the build
 * machine's CPU, so an installation copied to another x86-64 machine still finds the right one.
 *
 * Output: `node_modules/.cache/svc-hnswlib/<level>/build/Release/addon.node`, compiled from a
 * copy of hnswlib-node's sources with `CXXFLAGS=-march=<level>` by the node-gyp npm runs
 * (`npm_config_node_gyp`; headers from `npm_config_nodedir` like every other addon), and
 * `stamp.json` (hnswlib-node version, Node ABI) so a reinstall rebuilds only when either changed.
 * Compiler output goes to `node_modules/.cache/svc-hnswlib/build.log`. Other platforms: nothing.
 */
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const LEVELS = ['x86-64-v4', 'x86-64-v3'];

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const pkgDir = path.join(root, 'node_modules/hnswlib-node');
const outDir = path.join(root, 'node_modules/.cache/svc-hnswlib');

function main() {
  if (process.platform !== 'linux' || process.arch !== 'x64' || !fs.existsSync(pkgDir)) return;
  const gyp = process.env.npm_config_node_gyp ?? path.join(path.dirname(process.env.npm_execpath ?? ''), '../node_modules/node-gyp/bin/node-gyp.js');
  if (!fs.existsSync(gyp)) {
    console.log('svc: node-gyp not found; vector search uses the portable hnswlib build');
    return;
  }
  const stamp = JSON.stringify({ hnswlib: JSON.parse(fs.readFileSync(path.join(pkgDir, 'package.json'), 'utf8')).version, abi: process.versions.modules });
  fs.mkdirSync(outDir, { recursive: true });
  const log = path.join(outDir, 'build.log');
  fs.writeFileSync(log, '');
  const built = [];
  for (const level of LEVELS) {
    const dir = path.join(outDir, level);
    const addon = path.join(dir, 'build/Release/addon.node');
    const stampFile = path.join(dir, 'stamp.json');
    if (fs.existsSync(addon) && fs.existsSync(stampFile) && fs.readFileSync(stampFile, 'utf8') === stamp) {
      built.push(level);
      continue;
    }
    fs.rmSync(dir, { recursive: true, force: true });
    fs.mkdirSync(dir, { recursive: true });
    for (const f of ['binding.gyp', 'package.json']) fs.copyFileSync(path.join(pkgDir, f), path.join(dir, f));
    fs.cpSync(path.join(pkgDir, 'src'), path.join(dir, 'src'), { recursive: true });
    const r = spawnSync(process.execPath, [gyp, 'rebuild'], {
      cwd: dir,
      env: { ...process.env, CXXFLAGS: `${process.env.CXXFLAGS ?? ''} -march=${level}`.trim() },
      encoding: 'utf8',
    });
    fs.appendFileSync(log, `## ${level}: exit ${r.status}\n${r.stdout ?? ''}${r.stderr ?? ''}${r.error ? String(r.error) : ''}\n`);
    if (r.status === 0 && fs.existsSync(addon)) {
      fs.writeFileSync(stampFile, stamp);
      built.push(level);
    } else fs.rmSync(dir, { recursive: true, force: true });
  }
  console.log(
    built.length
      ? `svc: hnswlib built for ${built.join(', ')} (used when the CPU has it)`
      : `svc: hnswlib was not built for x86-64-v3/v4 (compiler output in ${path.relative(root, log)}); vector search uses the portable build`,
  );
}

main();
