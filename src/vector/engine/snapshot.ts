/**
 * Persisted HNSW graph snapshots. hnswlib's own
 * file has no header, so each snapshot is two files in `<dataDir>/vector/<index>.snapshots/`:
 * - `ns-<nsId>-<generation>-<seq>.hnsw`: `writeIndexSync` output, written to a temp name then renamed;
 * - `ns-<nsId>-<generation>-<seq>.codes`: the 8-bit codes of the vectors (dense.ts
 *   `QuantizedVectors`: `labels` × stride bytes — the dimension rounded up to 16, zero-padded —
 *   then `labels` float32 scales and squared norms);
 * - `ns-<nsId>.json`: the header `{magic, version, dimension, metric, m, efConstruction, count,
 *   seq, generation, file, bytes, labels, codesBytes, hnswSha256, codesSha256, sha256}`, written to
 *   a temp name then renamed (the commit point).
 * Every file is fsynced before its rename and the directory after the renames, in the order
 * graph → codes → header, so a header on disk never names files that are not (a crash leaves the
 * previous snapshot or none). The header carries the SHA-256 of both files and of its own other
 * fields (`sha256`); a snapshot whose sums do not match (a bit flip, a torn or truncated file) is
 * not loaded — hnswlib reads its file without checks, so a damaged graph could otherwise crash the
 * process or answer wrong neighbours.
 * A snapshot covers every record write with sequence number <= `seq` (the graph's covered
 * sequence: writes still pending insertion are newer); on start the graph and codes are loaded and
 * only newer records are replayed. A header that does not match (magic, version, dimension,
 * metric, M, efConstruction, generation, size, checksums) is ignored and the graph is rebuilt from
 * SQLite.
 * An index without a graph (`"quantization": "int8"`, dense.ts `QuantizedDense`) writes the codes
 * file (`ns-<nsId>-<generation>-<seq>.int8.codes`) and the header only: `file` then names the
 * codes file, `bytes`/`hnswSha256` repeat the
 * codes', and `quantization: "int8"` in the header keeps it from being read as (or replaced by) a
 * graph snapshot after a configuration change (headers without the field are graph snapshots).
 */
import { createHash, webcrypto } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { Worker } from 'node:worker_threads';
import type { Metric, Quantization } from '../definitions.js';
import { HnswDense, QuantizedDense, QuantizedVectors, type HnswParams, type NamespaceDense } from './dense.js';

export const SNAPSHOT_MAGIC = 'SVC-HNSW';
/** 3: checksums in the header (version-2 snapshots, without them, are rebuilt once). */
export const SNAPSHOT_VERSION = 3;

export interface SnapshotHeader {
  magic: string;
  version: number;
  dimension: number;
  metric: Metric;
  m: number;
  efConstruction: number;
  count: number;
  seq: number;
  generation: number;
  file: string;
  bytes: number;
  /** Entries in the codes file. */
  labels: number;
  codesBytes: number;
  /** SHA-256 (hex) of the graph file. */
  hnswSha256: string;
  /** SHA-256 (hex) of the codes file. */
  codesSha256: string;
  /** `int8`: no graph file (a `QuantizedDense` index); absent for a graph snapshot. */
  quantization?: 'int8';
  /** SHA-256 (hex) of this header's JSON without this field (written last). */
  sha256?: string;
}

const codesName = (graphFile: string) => graphFile.replace(/\.hnsw$/, '.codes');
/**
 * The file a header names: the graph file, or for an int8 index its codes file — `.int8.codes`, so
 * that it never has the name of a graph snapshot's codes file at the same sequence number (which
 * replacing that snapshot removes).
 */
const snapshotName = (nsId: number, generation: number, seq: number, int8: boolean) => `ns-${nsId}-${generation}-${seq}.${int8 ? 'int8.codes' : 'hnsw'}`;
const headerPath = (dir: string, nsId: number) => path.join(dir, `ns-${nsId}.json`);
const sha256 = (text: string) => createHash('sha256').update(text).digest('hex');

/** SHA-256 (hex) of a file, read in 1 MiB chunks. */
function fileSha256(file: string): string {
  const h = createHash('sha256');
  const buf = Buffer.allocUnsafe(1 << 20);
  const fd = fs.openSync(file, 'r');
  try {
    for (let n; (n = fs.readSync(fd, buf, 0, buf.length, null)) > 0; ) h.update(buf.subarray(0, n));
  } finally {
    fs.closeSync(fd);
  }
  return h.digest('hex');
}

/** fsync of a file or directory by path. Directories that cannot be opened for fsync (not Linux) are skipped. */
function fsyncPath(p: string, directory = false): void {
  let fd: number;
  try {
    fd = fs.openSync(p, directory ? 'r' : 'r+');
  } catch (err) {
    if (directory && ['EISDIR', 'EPERM', 'EACCES'].includes((err as NodeJS.ErrnoException).code ?? '')) return;
    throw err;
  }
  try {
    fs.fsyncSync(fd);
  } finally {
    fs.closeSync(fd);
  }
}

/** Writes `parts` to `file` (temp name, fsync, rename); returns their SHA-256 (hex). */
function writeDurably(file: string, parts: Buffer[]): string {
  const h = createHash('sha256');
  const fd = fs.openSync(`${file}.tmp`, 'w');
  try {
    for (const part of parts) {
      fs.writeSync(fd, part);
      h.update(part);
    }
    fs.fsyncSync(fd);
  } finally {
    fs.closeSync(fd);
  }
  fs.renameSync(`${file}.tmp`, file);
  return h.digest('hex');
}

/**
 * Writes a snapshot of `graph` covering sequence number `seq`; replaces the previous one.
 * Durable when it returns (files and directory fsynced). @throws on I/O errors (the previous
 * snapshot then stays in force).
 */
export function writeSnapshot(dir: string, nsId: number, generation: number, seq: number, graph: NamespaceDense): void {
  fs.mkdirSync(dir, { recursive: true });
  const int8 = graph instanceof QuantizedDense;
  const file = snapshotName(nsId, generation, seq, int8);
  let hnswSha256 = '';
  if (!int8) {
    const tmp = path.join(dir, `${file}.tmp`);
    graph.index.writeIndexSync(tmp);
    fsyncPath(tmp);
    hnswSha256 = fileSha256(tmp);
    fs.renameSync(tmp, path.join(dir, file));
  }
  const labels = Math.min(graph.labelSpan, graph.codes.capacity);
  const codesFile = codesName(file);
  const codesSha256 = writeDurably(path.join(dir, codesFile), graph.codes.serialize(labels));
  if (int8) hnswSha256 = codesSha256;
  fsyncPath(dir, true);
  const header = snapshotHeader(graph, { count: graph.size, seq, generation, file, labels, hnswSha256, codesSha256 }, dir);
  const previous = previousFile(dir, nsId);
  writeDurably(headerPath(dir, nsId), [Buffer.from(JSON.stringify(header))]);
  fsyncPath(dir, true);
  dropPrevious(dir, previous, file);
}

/** The header of a snapshot whose files are written (sizes read from `dir`), with its own checksum. */
function snapshotHeader(
  graph: NamespaceDense,
  h: Pick<SnapshotHeader, 'count' | 'seq' | 'generation' | 'file' | 'labels' | 'hnswSha256' | 'codesSha256'>,
  dir: string,
): SnapshotHeader {
  const header: SnapshotHeader = {
    magic: SNAPSHOT_MAGIC,
    version: SNAPSHOT_VERSION,
    dimension: graph.dimension,
    metric: graph.metric,
    m: graph.params.m,
    efConstruction: graph.params.efConstruction,
    count: h.count,
    seq: h.seq,
    generation: h.generation,
    file: h.file,
    bytes: fs.statSync(path.join(dir, h.file)).size,
    labels: h.labels,
    codesBytes: fs.statSync(path.join(dir, codesName(h.file))).size,
    hnswSha256: h.hnswSha256,
    codesSha256: h.codesSha256,
    ...(graph instanceof QuantizedDense ? { quantization: 'int8' as const } : {}),
  };
  header.sha256 = sha256(JSON.stringify(header));
  return header;
}

/** The graph file the current header of `nsId` names (undefined: none). */
function previousFile(dir: string, nsId: number): string | undefined {
  try {
    return (JSON.parse(fs.readFileSync(headerPath(dir, nsId), 'utf8')) as SnapshotHeader).file;
  } catch {
    return undefined;
  }
}

/** Removes the files of the snapshot `previous` once the header names `file`. */
function dropPrevious(dir: string, previous: string | undefined, file: string): void {
  if (!previous || previous === file) return;
  fs.rmSync(path.join(dir, previous), { force: true });
  fs.rmSync(path.join(dir, codesName(previous)), { force: true });
}

/** fsync of a file or directory by path, on libuv's thread pool (see {@link fsyncPath}). */
async function fsyncPathAsync(p: string, directory = false): Promise<void> {
  let fh: fs.promises.FileHandle;
  try {
    fh = await fs.promises.open(p, directory ? 'r' : 'r+');
  } catch (err) {
    if (directory && ['EISDIR', 'EPERM', 'EACCES'].includes((err as NodeJS.ErrnoException).code ?? '')) return;
    throw err;
  }
  try {
    await fh.sync();
  } finally {
    await fh.close();
  }
}

/**
 * {@link writeSnapshot} without holding the event loop: only the 8-bit codes are copied on the
 * main thread (a memcpy, 0.25× the float32 size); hnswlib writes the graph on libuv's thread pool
 * while `graph.saving` keeps insertions out of it (searches, queued writes and mark-deletes go on:
 * the graph points written are those inserted when the call starts, the header's `seq` says which
 * writes they cover); the graph file is hashed by a worker thread, the codes by WebCrypto, fsyncs
 * and renames run on the thread pool, in the same order as {@link writeSnapshot} (graph → codes →
 * directory → header → directory). `current()` is asked before the header is written: false (the
 * namespace was reset or dropped meanwhile) removes the new files and resolves false. The caller
 * runs at most one snapshot per namespace at a time. @throws (rejects) on I/O errors; before the
 * header's rename the previous snapshot then stays in force and the new files are removed.
 */
export async function writeSnapshotAsync(dir: string, nsId: number, generation: number, seq: number, graph: NamespaceDense, current: () => boolean): Promise<boolean> {
  fs.mkdirSync(dir, { recursive: true });
  const int8 = graph instanceof QuantizedDense;
  const file = snapshotName(nsId, generation, seq, int8);
  const graphPath = path.join(dir, file);
  const codesPath = path.join(dir, codesName(file));
  const tmp = `${graphPath}.tmp`;
  const labels = Math.min(graph.labelSpan, graph.codes.capacity);
  const codes = Buffer.concat(graph.codes.serialize(labels)); // a copy: queued writes change the codes meanwhile
  const count = graph.size;
  const remove = () => Promise.all([tmp, graphPath, `${codesPath}.tmp`, codesPath].map((f) => fs.promises.rm(f, { force: true })));
  let committed = false;
  try {
    if (!int8) {
      if (graph.inserting) await graph.idle(); // a running batch insertion ends first (the file is one consistent graph)
      graph.saving++;
      try {
        await graph.index.writeIndex(tmp);
      } finally {
        graph.saving--;
      }
    }
    const [graphSha256, codesSha256] = await Promise.all([
      (async () => {
        if (int8) return '';
        await fsyncPathAsync(tmp);
        const sum = await fileSha256InWorker(tmp);
        await fs.promises.rename(tmp, graphPath);
        return sum;
      })(),
      (async () => {
        const sum = Buffer.from(await webcrypto.subtle.digest('SHA-256', codes)).toString('hex');
        await fs.promises.writeFile(`${codesPath}.tmp`, codes);
        await fsyncPathAsync(`${codesPath}.tmp`);
        await fs.promises.rename(`${codesPath}.tmp`, codesPath);
        return sum;
      })(),
    ]);
    await fsyncPathAsync(dir, true);
    if (!current()) {
      await remove();
      return false;
    }
    const hnswSha256 = int8 ? codesSha256 : graphSha256;
    const header = snapshotHeader(graph, { count, seq, generation, file, labels, hnswSha256, codesSha256 }, dir);
    const previous = previousFile(dir, nsId);
    const hp = headerPath(dir, nsId);
    await fs.promises.writeFile(`${hp}.tmp`, JSON.stringify(header));
    await fsyncPathAsync(`${hp}.tmp`);
    await fs.promises.rename(`${hp}.tmp`, hp);
    committed = true;
    await fsyncPathAsync(dir, true);
    // reset or dropped while the header was written: what it names is stale
    if (!current()) dropSnapshot(dir, nsId);
    else dropPrevious(dir, previous, file);
    return true;
  } catch (err) {
    if (!committed) await remove().catch(() => undefined);
    throw err;
  }
}

/** Why a snapshot was not used (start-up logs it). */
export type SnapshotRejection = 'absent' | 'stale' | 'checksum' | 'unreadable';

/** What a snapshot must match to be loaded. */
export interface SnapshotExpectation {
  dimension: number;
  metric: Metric;
  params: HnswParams;
  generation: number;
  /** Undefined = `none` (a graph snapshot). */
  quantization?: Quantization;
}

/** A loaded snapshot, or why none was. */
export type SnapshotResult = { graph: NamespaceDense; header: SnapshotHeader } | { rejected: SnapshotRejection; detail?: string };

/**
 * Loads the snapshot of namespace `nsId` when its header matches and its checksums agree;
 * otherwise says why not: `absent` (no header), `stale` (another version, dimension, metric, HNSW
 * parameters or generation — expected after a reset or a configuration change), `checksum` (a
 * file or the header was damaged), `unreadable` (anything else). Never throws.
 */
export function readSnapshot(dir: string, nsId: number, expect: SnapshotExpectation): SnapshotResult {
  const checked = checkHeader(dir, nsId, expect);
  if ('rejected' in checked) return checked;
  const h = checked.header;
  try {
    const file = path.join(dir, h.file);
    const codesFile = path.join(dir, codesName(h.file));
    if (h.quantization === 'int8') return { graph: readCodes(h, fs.readFileSync(codesFile), sha256Hex, expect), header: h };
    if (fs.statSync(file).size !== h.bytes || fileSha256(file) !== h.hnswSha256) return { rejected: 'checksum', detail: h.file };
    const codesBuf = fs.readFileSync(codesFile);
    if (codesBuf.byteLength !== h.codesBytes || createHash('sha256').update(codesBuf).digest('hex') !== h.codesSha256) {
      return { rejected: 'checksum', detail: codesName(h.file) };
    }
    const codes = QuantizedVectors.deserialize(codesBuf, expect.dimension, h.labels);
    return { graph: HnswDense.load(file, codes, expect.dimension, expect.metric, expect.params), header: h };
  } catch (err) {
    return { rejected: err instanceof CodesMismatch ? 'checksum' : 'unreadable', detail: (err as Error).message };
  }
}

/**
 * {@link readSnapshot} without blocking the event loop for the large parts, which run at once:
 * hnswlib reads the graph on libuv's thread pool, a worker thread hashes the graph file, the codes
 * file is read and hashed on the thread pool (WebCrypto). The graph is handed out only when both
 * checksums match; a graph hnswlib read from a file that turns out damaged is dropped unused
 * (hnswlib checks the file's layout while reading it; what a damaged file could break is a search,
 * and none runs on it). Never rejects.
 */
export async function readSnapshotAsync(dir: string, nsId: number, expect: SnapshotExpectation): Promise<SnapshotResult> {
  const checked = checkHeader(dir, nsId, expect);
  if ('rejected' in checked) return checked;
  const h = checked.header;
  const file = path.join(dir, h.file);
  const codesFile = path.join(dir, codesName(h.file));
  const settle = <T>(p: Promise<T>) => p.then((value) => ({ value }), (err: unknown) => ({ err: err as Error }));
  try {
    if (h.quantization === 'int8') {
      const buf = await fs.promises.readFile(codesFile);
      const sum = Buffer.from(await webcrypto.subtle.digest('SHA-256', buf)).toString('hex');
      return { graph: readCodes(h, buf, () => sum, expect), header: h };
    }
    if ((await fs.promises.stat(file)).size !== h.bytes) return { rejected: 'checksum', detail: h.file };
    const [graphSum, codes, graph] = await Promise.all([
      settle(fileSha256InWorker(file)),
      settle(fs.promises.readFile(codesFile).then(async (buf) => ({ buf, sum: Buffer.from(await webcrypto.subtle.digest('SHA-256', buf)).toString('hex') }))),
      settle(HnswDense.read(file, expect.dimension, expect.metric, expect.params)),
    ]);
    if ('err' in graphSum) return { rejected: 'unreadable', detail: graphSum.err.message };
    if (graphSum.value !== h.hnswSha256) return { rejected: 'checksum', detail: h.file };
    if ('err' in codes) return { rejected: 'unreadable', detail: codes.err.message };
    if (codes.value.buf.byteLength !== h.codesBytes || codes.value.sum !== h.codesSha256) return { rejected: 'checksum', detail: codesName(h.file) };
    if ('err' in graph) return { rejected: 'unreadable', detail: graph.err.message };
    return { graph: graph.value(QuantizedVectors.deserialize(codes.value.buf, expect.dimension, h.labels)), header: h };
  } catch (err) {
    return { rejected: err instanceof CodesMismatch ? 'checksum' : 'unreadable', detail: (err as Error).message };
  }
}

const sha256Hex = (buf: Buffer) => createHash('sha256').update(buf).digest('hex');

/** Thrown by {@link readCodes} for a codes file whose size or checksum differs from the header's. */
class CodesMismatch extends Error {}

/**
 * The `QuantizedDense` of an int8 snapshot from its codes file `buf` (`sum` hashes it).
 * @throws CodesMismatch when size or checksum differ from `h` (callers answer `checksum`).
 */
function readCodes(h: SnapshotHeader, buf: Buffer, sum: (b: Buffer) => string, expect: SnapshotExpectation): QuantizedDense {
  if (buf.byteLength !== h.codesBytes || sum(buf) !== h.codesSha256) throw new CodesMismatch(codesName(h.file));
  return QuantizedDense.fromCodes(QuantizedVectors.deserialize(buf, expect.dimension, h.labels), h.labels, expect.metric, expect.params);
}

/** SHA-256 (hex) of a file, computed by a worker thread (so on another core than the event loop's). */
function fileSha256InWorker(file: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const w = new Worker(WORKER_SHA256, { eval: true, workerData: file });
    w.once('message', (hex: string) => resolve(hex));
    w.once('error', reject);
    w.once('exit', (code) => reject(new Error(`hash worker exited with code ${code}`)));
  });
}

/** The worker of {@link fileSha256InWorker} (CommonJS, evaluated): the file in 1 MiB reads. */
const WORKER_SHA256 = `
const { parentPort, workerData } = require('node:worker_threads');
const fs = require('node:fs');
const h = require('node:crypto').createHash('sha256');
const buf = Buffer.allocUnsafe(1 << 20);
const fd = fs.openSync(workerData, 'r');
try { for (let n; (n = fs.readSync(fd, buf, 0, buf.length, null)) > 0; ) h.update(buf.subarray(0, n)); } finally { fs.closeSync(fd); }
parentPort.postMessage(h.digest('hex'));
`;

/**
 * The header of namespace `nsId`'s snapshot when present, intact (own checksum) and matching
 * `expect`; otherwise why not (see {@link readSnapshot}).
 */
function checkHeader(dir: string, nsId: number, expect: SnapshotExpectation): { header: SnapshotHeader } | { rejected: SnapshotRejection; detail?: string } {
  let text: string;
  try {
    text = fs.readFileSync(headerPath(dir, nsId), 'utf8');
  } catch {
    return { rejected: 'absent' };
  }
  let h: SnapshotHeader;
  try {
    h = JSON.parse(text) as SnapshotHeader;
  } catch {
    return { rejected: 'checksum', detail: 'header is not JSON' };
  }
  if (h.magic !== SNAPSHOT_MAGIC || h.version !== SNAPSHOT_VERSION) return { rejected: 'stale', detail: `version ${h.version}` };
  const { sha256: sum, ...rest } = h;
  if (sum !== sha256(JSON.stringify(rest))) return { rejected: 'checksum', detail: 'header' };
  if (
    h.dimension !== expect.dimension || h.metric !== expect.metric || h.m !== expect.params.m ||
    h.efConstruction !== expect.params.efConstruction || h.generation !== expect.generation ||
    (h.quantization ?? 'none') !== (expect.quantization ?? 'none')
  ) return { rejected: 'stale' };
  return { header: h };
}

/** Removes every snapshot file of a namespace (after delete-namespace or reset). */
export function dropSnapshot(dir: string, nsId: number): void {
  try {
    for (const f of fs.readdirSync(dir)) if (f.startsWith(`ns-${nsId}-`) || f === `ns-${nsId}.json`) fs.rmSync(path.join(dir, f), { force: true });
  } catch {
    /* no dir */
  }
}
