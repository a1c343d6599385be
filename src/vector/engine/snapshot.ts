/**
 * Persisted HNSW graph snapshots. hnswlib's own file has no header, so each snapshot is a file
 * and a header in `<dataDir>/vector/<index>.snapshots/`:
 * - `ns-<nsId>-<generation>-<seq>.hnsw`: `writeIndexSync` output, written to a temp name then
 *   renamed (the graph holds the vectors too: float32, stored form);
 * - `ns-<nsId>.json`: the header `{magic, version, dimension, metric, m, efConstruction, count,
 *   seq, generation, file, bytes, hnswSha256, sha256}`, written to a temp name then renamed (the
 *   commit point).
 * Every file is fsynced before its rename and the directory after the renames, in the order
 * file → header, so a header on disk never names a file that is not (a crash leaves the previous
 * snapshot or none). The header carries the SHA-256 of the file and of its own other fields
 * (`sha256`); a snapshot whose sums do not match (a bit flip, a torn or truncated file) is not
 * loaded — hnswlib reads its file without checks, so a damaged graph could otherwise crash the
 * process or answer wrong neighbours.
 * A snapshot covers every record write with sequence number <= `seq` (the graph's covered
 * sequence: writes still pending insertion are newer); on start the graph is loaded and only
 * newer records are replayed. A header that does not match (magic, version, dimension, metric, M,
 * efConstruction, generation, size, checksums) is ignored and the graph is rebuilt from SQLite.
 * An index without a graph (`"quantization": "int8"`, dense.ts `QuantizedDense`) writes its 8-bit
 * codes instead (`ns-<nsId>-<generation>-<seq>.int8.codes`: dense.ts `QuantizedVectors`, `labels`
 * × stride bytes — the dimension rounded up to 16, zero-padded — then `labels` float32 scales and
 * squared norms); its header adds `labels`, `codesBytes` and `codesSha256` (the same as `bytes`
 * and `hnswSha256`), and `quantization: "int8"` keeps it from being read as (or replaced by) a
 * graph snapshot after a configuration change (headers without the field are graph snapshots).
 * Version-3 graph snapshots also saved 8-bit codes next to the graph (`.codes`); they load as
 * version 4 ones, their codes file unread (the next snapshot removes it).
 */
import { createHash, webcrypto } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { Worker } from 'node:worker_threads';
import type { Metric, Quantization } from '../definitions.js';
import { HnswDense, QuantizedDense, QuantizedVectors, type HnswParams, type NamespaceDense } from './dense.js';

export const SNAPSHOT_MAGIC = 'SVC-HNSW';
/**
 * 4: graph snapshots without a codes file; 3: checksums in the header (version-3 snapshots load,
 * version-2 ones, without checksums, are rebuilt once).
 */
export const SNAPSHOT_VERSION = 4;
/** Older versions that load as {@link SNAPSHOT_VERSION} (module doc). */
const READABLE_VERSIONS = [3, SNAPSHOT_VERSION];

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
  /** SHA-256 (hex) of the file (the graph, or an int8 index's codes). */
  hnswSha256: string;
  /** Entries in the codes file (int8 snapshots, and version-3 graph snapshots' `.codes`). */
  labels?: number;
  codesBytes?: number;
  /** SHA-256 (hex) of the codes file. */
  codesSha256?: string;
  /** `int8`: no graph file (a `QuantizedDense` index); absent for a graph snapshot. */
  quantization?: 'int8';
  /** SHA-256 (hex) of this header's JSON without this field (written last). */
  sha256?: string;
}

/** The codes file a version-3 graph snapshot wrote next to `graphFile` (removed with it). */
const codesName = (graphFile: string) => graphFile.replace(/\.hnsw$/, '.codes');
/**
 * The file a header names: the graph file, or for an int8 index its codes file — `.int8.codes`, so
 * that it never has the name of a version-3 graph snapshot's codes file at the same sequence
 * number (which replacing that snapshot removes).
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
  let sum: string;
  let labels: number | undefined;
  if (int8) {
    labels = Math.min(graph.labelSpan, graph.codes.capacity);
    sum = writeDurably(path.join(dir, file), graph.codes.serialize(labels));
  } else {
    const tmp = path.join(dir, `${file}.tmp`);
    graph.index.writeIndexSync(tmp);
    fsyncPath(tmp);
    sum = fileSha256(tmp);
    fs.renameSync(tmp, path.join(dir, file));
  }
  fsyncPath(dir, true);
  const header = snapshotHeader(graph, { count: graph.size, seq, generation, file, hnswSha256: sum }, labels, dir);
  const previous = previousFile(dir, nsId);
  writeDurably(headerPath(dir, nsId), [Buffer.from(JSON.stringify(header))]);
  fsyncPath(dir, true);
  dropPrevious(dir, previous, file);
}

/**
 * The header of a snapshot whose file is written (size read from `dir`), with its own checksum;
 * `labels` = entries of an int8 index's codes file.
 */
function snapshotHeader(graph: NamespaceDense, h: Pick<SnapshotHeader, 'count' | 'seq' | 'generation' | 'file' | 'hnswSha256'>, labels: number | undefined, dir: string): SnapshotHeader {
  const bytes = fs.statSync(path.join(dir, h.file)).size;
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
    bytes,
    hnswSha256: h.hnswSha256,
    ...(graph instanceof QuantizedDense ? { labels, codesBytes: bytes, codesSha256: h.hnswSha256, quantization: 'int8' as const } : {}),
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
export async function fsyncPathAsync(p: string, directory = false): Promise<void> {
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
 * {@link writeSnapshot} without holding the event loop: hnswlib writes the graph on libuv's thread
 * pool while `graph.saving` keeps insertions out of it (searches, queued writes and mark-deletes go
 * on: the graph points written are those inserted when the call starts, the header's `seq` says
 * which writes they cover), a worker thread hashes the file, fsyncs and renames run on the thread
 * pool, in the same order as {@link writeSnapshot} (file → directory → header → directory). An
 * int8 index's codes are copied on the main thread (a memcpy: queued writes change them meanwhile)
 * and hashed by WebCrypto. `current()` is asked before the header is written: false (the namespace
 * was reset or dropped meanwhile) removes the new file and resolves false. The caller runs at most
 * one snapshot per namespace at a time. @throws (rejects) on I/O errors; before the header's rename
 * the previous snapshot then stays in force and the new file is removed.
 */
export async function writeSnapshotAsync(dir: string, nsId: number, generation: number, seq: number, graph: NamespaceDense, current: () => boolean): Promise<boolean> {
  fs.mkdirSync(dir, { recursive: true });
  const int8 = graph instanceof QuantizedDense;
  const file = snapshotName(nsId, generation, seq, int8);
  const filePath = path.join(dir, file);
  const tmp = `${filePath}.tmp`;
  const count = graph.size;
  const remove = () => Promise.all([tmp, filePath].map((f) => fs.promises.rm(f, { force: true })));
  let committed = false;
  try {
    let codesSum: string | undefined;
    let labels: number | undefined;
    if (int8) {
      labels = Math.min(graph.labelSpan, graph.codes.capacity);
      const codes = Buffer.concat(graph.codes.serialize(labels));
      codesSum = Buffer.from(await webcrypto.subtle.digest('SHA-256', codes)).toString('hex');
      await fs.promises.writeFile(tmp, codes);
    } else {
      if (graph.inserting) await graph.idle(); // a running batch insertion ends first (the file is one consistent graph)
      graph.saving++;
      try {
        await graph.index.writeIndex(tmp);
      } finally {
        graph.saving--;
      }
    }
    await fsyncPathAsync(tmp);
    const sum = codesSum ?? (await fileSha256InWorker(tmp));
    await fs.promises.rename(tmp, filePath);
    await fsyncPathAsync(dir, true);
    if (!current()) {
      await remove();
      return false;
    }
    const header = snapshotHeader(graph, { count, seq, generation, file, hnswSha256: sum }, labels, dir);
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
    if (h.quantization === 'int8') return { graph: readCodes(h, fs.readFileSync(file), sha256Hex, expect), header: h };
    if (fs.statSync(file).size !== h.bytes || fileSha256(file) !== h.hnswSha256) return { rejected: 'checksum', detail: h.file };
    return { graph: HnswDense.load(file, expect.dimension, expect.metric, expect.params), header: h };
  } catch (err) {
    return { rejected: err instanceof CodesMismatch ? 'checksum' : 'unreadable', detail: (err as Error).message };
  }
}

/**
 * {@link readSnapshot} without blocking the event loop for the large parts, which run at once:
 * hnswlib reads the graph on libuv's thread pool while a worker thread hashes the file (an int8
 * index's codes file is read and hashed on the thread pool: WebCrypto). The graph is handed out
 * only when the checksum matches; a graph hnswlib read from a file that turns out damaged is
 * dropped unused (hnswlib checks the file's layout while reading it; what a damaged file could
 * break is a search, and none runs on it). `verifiedSha256`: the SHA-256 the graph file was just
 * verified to have while it was downloaded (`publication.ts` `download`, computed over the bytes
 * written): compared with the header's instead of reading and hashing the file again. Never rejects.
 */
export async function readSnapshotAsync(dir: string, nsId: number, expect: SnapshotExpectation, verifiedSha256?: string): Promise<SnapshotResult> {
  const checked = checkHeader(dir, nsId, expect);
  if ('rejected' in checked) return checked;
  const h = checked.header;
  const file = path.join(dir, h.file);
  const settle = <T>(p: Promise<T>) => p.then((value) => ({ value }), (err: unknown) => ({ err: err as Error }));
  try {
    if (h.quantization === 'int8') {
      const buf = await fs.promises.readFile(file);
      const sum = Buffer.from(await webcrypto.subtle.digest('SHA-256', buf)).toString('hex');
      return { graph: readCodes(h, buf, () => sum, expect), header: h };
    }
    if ((await fs.promises.stat(file)).size !== h.bytes) return { rejected: 'checksum', detail: h.file };
    const sum = verifiedSha256 !== undefined ? Promise.resolve(verifiedSha256) : fileSha256InWorker(file);
    const [graphSum, graph] = await Promise.all([settle(sum), settle(HnswDense.read(file, expect.dimension, expect.metric, expect.params))]);
    if ('err' in graphSum) return { rejected: 'unreadable', detail: graphSum.err.message };
    if (graphSum.value !== h.hnswSha256) return { rejected: 'checksum', detail: h.file };
    if ('err' in graph) return { rejected: 'unreadable', detail: graph.err.message };
    return { graph: graph.value(), header: h };
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
  if (buf.byteLength !== h.codesBytes || sum(buf) !== h.codesSha256 || h.labels === undefined) throw new CodesMismatch(h.file);
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
  if (h.magic !== SNAPSHOT_MAGIC || !READABLE_VERSIONS.includes(h.version)) return { rejected: 'stale', detail: `version ${h.version}` };
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
