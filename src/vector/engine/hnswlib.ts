/**
 * hnswlib-node's addon, in the build this CPU runs fastest.
 *
 * `npm install` compiles hnswlib-node portably (128-bit SSE distance kernels) and, on x86-64
 * Linux, `scripts/build-hnswlib.mjs` compiles it again for the micro-architecture levels
 * x86-64-v4 (AVX-512) and x86-64-v3 (AVX2, FMA) — hnswlib chooses its SIMD kernels at compile
 * time. Here, once per process, the CPU's flags (`/proc/cpuinfo`) decide: the highest level whose
 * every flag the CPU (and kernel) has, when its build exists and loads; else the portable build.
 * The builds share hnswlib's source and file format: a snapshot written by one loads in any other.
 * The level sets are the x86-64 psABI's (`lzcnt` is `abm` in /proc/cpuinfo).
 */
import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import portable from 'hnswlib-node';

type Hnswlib = typeof portable;

/** CPU flags of x86-64-v3 (x86-64 psABI micro-architecture level; includes v2's). */
const V3_FLAGS = ['avx', 'avx2', 'bmi1', 'bmi2', 'f16c', 'fma', 'abm', 'movbe', 'xsave', 'sse4_2', 'ssse3', 'popcnt', 'cx16'];
/** CPU flags each level needs, best level first. */
const LEVEL_FLAGS: Record<string, string[]> = {
  'x86-64-v4': [...V3_FLAGS, 'avx512f', 'avx512bw', 'avx512cd', 'avx512dq', 'avx512vl'],
  'x86-64-v3': V3_FLAGS,
};

const require = createRequire(import.meta.url);

/** Flags of the first CPU in /proc/cpuinfo (empty when unreadable: not Linux). */
function cpuFlags(): Set<string> {
  try {
    const line = /^flags\s*:(.*)$/m.exec(fs.readFileSync('/proc/cpuinfo', 'utf8'));
    return new Set(line ? line[1].trim().split(/\s+/) : []);
  } catch {
    return new Set();
  }
}

/** Directory of the extra builds (`node_modules/.cache/svc-hnswlib`, next to hnswlib-node). */
export function hnswlibBuildDir(): string {
  return path.join(path.dirname(path.dirname(require.resolve('hnswlib-node/package.json'))), '.cache/svc-hnswlib');
}

/** Path of the addon built for `level` (it may not exist). */
export function hnswlibAddonPath(level: string): string {
  return path.join(hnswlibBuildDir(), level, 'build/Release/addon.node');
}

/** Levels this CPU can run, best first. */
export function supportedLevels(flags = cpuFlags()): string[] {
  if (process.arch !== 'x64') return [];
  return Object.keys(LEVEL_FLAGS).filter((level) => LEVEL_FLAGS[level].every((f) => flags.has(f)));
}

function load(): { hnswlib: Hnswlib; build: string } {
  for (const level of supportedLevels()) {
    const file = hnswlibAddonPath(level);
    if (!fs.existsSync(file)) continue;
    try {
      return { hnswlib: require(file) as Hnswlib, build: level };
    } catch {
      // built for another Node.js ABI (Node.js changed after the install): try the next
    }
  }
  return { hnswlib: portable, build: 'portable' };
}

const loaded = load();
/** The addon (same exports as `import hnswlib from 'hnswlib-node'`). */
export const hnswlib: Hnswlib = loaded.hnswlib;
/** Which build {@link hnswlib} is: `x86-64-v4`, `x86-64-v3` or `portable`. */
export const hnswlibBuild: string = loaded.build;
