#!/usr/bin/env node
/**
 * Builds svc's HNSW addon (`native/hnsw/graph.cc`: hnswlib's graph with batch insertion on threads
 * of its own, see that file) once portably and, on x86-64 Linux, again for the micro-architecture
 * levels x86-64-v3 (AVX2, FMA) and x86-64-v4 (AVX-512). Run by `npm install` / `npm ci`
 * (package.json `postinstall`); idempotent.
 *
 * Why several builds: hnswlib picks its SIMD distance kernels at compile time (`hnswlib.h`: USE_AVX
 * when the compiler targets AVX, USE_AVX512 when it targets AVX-512F); a portable build computes
 * every distance with 128-bit SSE. hnswlib's own Python package compiles with `-march=native` for
 * this reason. Measured on a 2-core AMD EPYC (AVX-512), 10k×768 random vectors, M 16,
 * efConstruction 100: 0.92 ms per insertion (portable), 0.55 (x86-64-v3), 0.47 (x86-64-v4); a query
 * at ef 100 0.77 / 0.55 / 0.51 ms.
 *
 * A build for a level the CPU lacks would die on an illegal instruction, so nothing here decides
 * which build runs: `src/vector/engine/hnswlib.ts` reads the CPU's flags at start-up and loads the
 * best build this CPU can run, else the portable one. Every build is made whatever the build
 * machine's CPU, so an installation copied to another x86-64 machine still finds the right one.
 *
 * Sources: `native/hnsw/` and hnswlib's headers from the hnswlib-node package
 * (`node_modules/hnswlib-node/src/hnswlib`), compiled with `CXXFLAGS=-march=<level>` by the
 * node-gyp npm runs (`npm_config_node_gyp`; headers from `npm_config_nodedir` like every other
 * addon). Output: `node_modules/.cache/svc-hnswlib/<level>/build/Release/svc_hnsw.node` and
 * `stamp.json` (hnswlib-node version, Node ABI, hash of the sources) so a reinstall rebuilds only
 * when one of them changed. Compiler output goes to `node_modules/.cache/svc-hnswlib/build.log`.
 * Exits 1 (failing the install) when not even the portable build could be made: the vector area
 * cannot run without it.
 */
import { spawnSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const srcDir = path.join(root, 'native/hnsw');
const hnswlibDir = path.join(root, 'node_modules/hnswlib-node/src/hnswlib');
const outDir = path.join(root, 'node_modules/.cache/svc-hnswlib');
const LEVELS = process.platform === 'linux' && process.arch === 'x64' ? ['x86-64-v4', 'x86-64-v3', 'portable'] : ['portable'];

function main() {
  if (!fs.existsSync(hnswlibDir)) return; // not installed yet (npm runs this after every dependency)
  const gyp = [
    process.env.npm_config_node_gyp,
    process.env.npm_execpath && path.join(path.dirname(process.env.npm_execpath), '../node_modules/node-gyp/bin/node-gyp.js'),
    path.join(path.dirname(process.execPath), '../lib/node_modules/npm/node_modules/node-gyp/bin/node-gyp.js'), // run by hand
  ].find((f) => f && fs.existsSync(f));
  if (!gyp) {
    console.error('svc: node-gyp not found: cannot build the HNSW addon (run the install with npm)');
    process.exit(1);
  }
  const hash = crypto.createHash('sha256');
  for (const dir of [srcDir, hnswlibDir]) for (const f of fs.readdirSync(dir).sort()) hash.update(f).update(fs.readFileSync(path.join(dir, f)));
  const stamp = JSON.stringify({
    hnswlib: JSON.parse(fs.readFileSync(path.join(hnswlibDir, '../../package.json'), 'utf8')).version,
    abi: process.versions.modules,
    sources: hash.digest('hex').slice(0, 16),
  });
  fs.mkdirSync(outDir, { recursive: true });
  const log = path.join(outDir, 'build.log');
  fs.writeFileSync(log, '');
  const built = [];
  for (const level of LEVELS) {
    const dir = path.join(outDir, level);
    const addon = path.join(dir, 'build/Release/svc_hnsw.node');
    const stampFile = path.join(dir, 'stamp.json');
    if (fs.existsSync(addon) && fs.existsSync(stampFile) && fs.readFileSync(stampFile, 'utf8') === stamp) {
      built.push(level);
      continue;
    }
    fs.rmSync(dir, { recursive: true, force: true });
    fs.mkdirSync(dir, { recursive: true });
    fs.cpSync(srcDir, dir, { recursive: true });
    fs.cpSync(hnswlibDir, path.join(dir, 'hnswlib'), { recursive: true });
    const march = level === 'portable' ? '' : `-march=${level}`;
    const r = spawnSync(process.execPath, [gyp, 'rebuild'], {
      cwd: dir,
      env: { ...process.env, CXXFLAGS: `${process.env.CXXFLAGS ?? ''} ${march}`.trim() },
      encoding: 'utf8',
    });
    fs.appendFileSync(log, `## ${level}: exit ${r.status}\n${r.stdout ?? ''}${r.stderr ?? ''}${r.error ? String(r.error) : ''}\n`);
    if (r.status === 0 && fs.existsSync(addon)) {
      fs.writeFileSync(stampFile, stamp);
      built.push(level);
    } else fs.rmSync(dir, { recursive: true, force: true });
  }
  if (!built.includes('portable')) {
    console.error(`svc: the HNSW addon could not be built (compiler output in ${path.relative(root, log)}); the vector area needs it`);
    process.exit(1);
  }
  console.log(`svc: HNSW addon built for ${built.join(', ')} (the best one the CPU runs is used)`);
}

main();
