/**
 * svc's HNSW addon (`native/hnsw/graph.cc`: hnswlib's graph with batch insertion on threads of
 * its own), in the build this CPU runs fastest.
 *
 * `npm install` runs `scripts/build-hnswlib.mjs`, which compiles the addon portably (128-bit SSE
 * distance kernels) and, on x86-64 Linux, again for the micro-architecture levels x86-64-v4
 * (AVX-512) and x86-64-v3 (AVX2, FMA) — hnswlib chooses its SIMD kernels at compile time. Here,
 * once per process, the CPU's flags (`/proc/cpuinfo`) decide: the highest level whose every flag
 * the CPU (and kernel) has, when its build exists and loads; else the portable build. The builds
 * share hnswlib's source and file format: a snapshot written by one loads in any other. The level
 * sets are the x86-64 psABI's (`lzcnt` is `abm` in /proc/cpuinfo).
 */
import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';

/**
 * One HNSW graph (hnswlib `HierarchicalNSW<float>`). Labels are unsigned 32-bit integers, vectors
 * Float32Arrays of the dimension (stored form: the caller normalizes for cosine). Distances are
 * hnswlib's: squared L2 (`'l2'`) or 1 − dot product (`'ip'`). Every method throws an `Error` with
 * hnswlib's message on failure (out of memory, capacity exceeded, file unreadable, ...).
 *
 * Concurrency (hnswlib allows parallel insertions, but no read during an insertion): while an
 * {@link addPoints} batch runs, every other method needs the insertion threads paused
 * ({@link pause} ... {@link resume}) and throws otherwise; {@link resizeIndex}, {@link addPoints}
 * and the file methods need no batch at all, and no file job (read or write) at once.
 */
export interface HnswGraph {
  /** An empty graph for `maxElements` points (grows with {@link resizeIndex}). */
  initIndex(maxElements: number, m: number, efConstruction: number, randomSeed: number): void;
  readIndexSync(file: string): void;
  /** Reads a graph file on libuv's thread pool. */
  readIndex(file: string): Promise<void>;
  writeIndexSync(file: string): void;
  /** Writes the graph on libuv's thread pool; searches and mark-deletes may go on meanwhile. */
  writeIndex(file: string): Promise<void>;
  resizeIndex(maxElements: number): void;
  /** Inserts (or replaces) one point on the calling thread. */
  addPoint(vector: Float32Array, label: number): void;
  /**
   * Inserts (or replaces) `labels.length` points (`vectors`: labels.length × dimension, copied) on
   * `threads` threads of the addon's own; resolves when all are in. Capacity must be there for
   * every label new to the graph. Rejects with the first insertion's error (the others go in).
   * The copies are kept for the next batch until {@link releaseBatchBuffers}.
   */
  addPoints(vectors: Float32Array, labels: Uint32Array, threads: number): Promise<void>;
  /**
   * {@link addPoints} blocking the calling thread until every point is in (no copy; nothing else
   * may use the graph meanwhile: start-up). @throws the first insertion's error (the others go in).
   */
  addPointsSync(vectors: Float32Array, labels: Uint32Array, threads: number): void;
  /** Frees the copies of a batch's arguments kept for the next batch. No batch may run. */
  releaseBatchBuffers(): void;
  /** Blocks until no insertion thread is inside an insertion (~one insertion); none starts until {@link resume}. */
  pause(): void;
  resume(): void;
  /** @throws `Label not found` when the label is not in the graph. */
  markDelete(label: number): void;
  /** The `k` nearest points (not mark-deleted, accepted by `filter`) at breadth max(ef, k), nearest first. */
  searchKnn(query: Float32Array, k: number, ef: number, filter?: (label: number) => boolean): { neighbors: Uint32Array; distances: Float32Array };
  /**
   * The `k` nearest of `labels[0..count)` by exact distance to the vectors the graph holds (the
   * distance of {@link searchKnn}; no graph traversal), nearest first. Skips a label whose
   * `current[label]` is not 1, that the graph does not hold, or that is mark-deleted.
   */
  exactKnn(query: Float32Array, labels: Int32Array, count: number, k: number, current: Uint8Array): { neighbors: Uint32Array; distances: Float32Array };
  /** Every label in the graph, mark-deleted ones included. */
  getIdsList(): Uint32Array;
  getMaxElements(): number;
  /** Points in the graph, mark-deleted ones included. */
  getCurrentCount(): number;
}

interface Addon {
  Graph: new (space: 'l2' | 'ip', dimension: number) => HnswGraph;
  /** glibc `malloc_trim(0)` on libuv's thread pool: resolves true when memory went back to the kernel (false elsewhere). */
  mallocTrim(): Promise<boolean>;
}

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

/** Directory of the builds (`node_modules/.cache/svc-hnswlib`, next to hnswlib-node, whose hnswlib headers they compile). */
function hnswlibBuildDir(): string {
  return path.join(path.dirname(path.dirname(require.resolve('hnswlib-node/package.json'))), '.cache/svc-hnswlib');
}

/** Path of the addon built for `level` (`x86-64-v4`, `x86-64-v3`, `portable`; it may not exist). */
export function hnswlibAddonPath(level: string): string {
  return path.join(hnswlibBuildDir(), level, 'build/Release/svc_hnsw.node');
}

/** Levels this CPU can run, best first (`portable` not included). */
export function supportedLevels(flags = cpuFlags()): string[] {
  if (process.arch !== 'x64') return [];
  return Object.keys(LEVEL_FLAGS).filter((level) => LEVEL_FLAGS[level].every((f) => flags.has(f)));
}

/** @throws when no build loads (the install's postinstall step did not run or failed). */
function load(): { addon: Addon; build: string } {
  const errors: string[] = [];
  for (const level of [...supportedLevels(), 'portable']) {
    const file = hnswlibAddonPath(level);
    if (!fs.existsSync(file)) continue;
    try {
      return { addon: require(file) as Addon, build: level };
    } catch (err) {
      // built for another Node.js ABI (Node.js changed after the install): try the next
      errors.push(`${level}: ${(err as Error).message}`);
    }
  }
  throw new Error(`svc's HNSW addon is not built for this Node.js (run \`npm rebuild\` or \`node scripts/build-hnswlib.mjs\`)${errors.length ? `: ${errors.join('; ')}` : ''}`);
}

const loaded = load();
/** The HNSW graph class of the loaded build. */
export const Graph = loaded.addon.Graph;
/** glibc `malloc_trim(0)` off the event loop; see {@link Addon.mallocTrim}. */
export const mallocTrim = (): Promise<boolean> => loaded.addon.mallocTrim();
/** Which build {@link Graph} is: `x86-64-v4`, `x86-64-v3` or `portable`. */
export const hnswlibBuild: string = loaded.build;
