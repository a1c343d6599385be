/**
 * One vector index: SQLite records + in-memory namespaces
 * (HNSW graph, sparse inverted index, metadata for filters).
 *
 * Writes go through a group-commit queue: requests arriving in the same event-loop turn run in
 * one SQLite transaction (each in its own savepoint), memory is updated in the same synchronous
 * step, and every request is answered only after the commit and an fdatasync of the WAL that
 * started after it (`store.wal`, on libuv's thread pool: COMMIT itself runs with
 * `synchronous=NORMAL`, so the event loop never waits for the disk) — so an acknowledged write is
 * durable and visible to the next query (visible from its commit on, even before its answer). A
 * failed fdatasync refuses the writes it should have covered (500/507) though they stay
 * committed; {@link close} waits for the last one. WAL checkpoints run on a worker thread
 * (`store.checkpointer`). A graph snapshot ahead of the store's sequence number (commits lost to a
 * power loss before their sync) is not loaded. A write that fails (its savepoint, or the whole
 * commit, e.g. on a full disk) leaves no trace in memory: each write keeps a journal of what it
 * touched, and after the rollback those records (and, for namespace-level writes, the namespaces)
 * are restored from SQLite, the source of truth (`undo`). HNSW insertion is not part of the
 * write: new dense vectors are queued in the graph (dense.ts `enqueue`; searched exactly until
 * inserted) and inserted in batches on {@link INSERT_THREADS} threads of the HNSW addon, off the
 * event loop (dense.ts `indexBatch`; each namespace's next batch starts when its last one ends).
 * When more than {@link PENDING_LIMIT} vector elements wait, further writes wait for the indexer
 * (back-pressure), which bounds the exact part of every query.
 *
 * Start-up: per namespace, load the graph snapshot (`snapshot.ts`) when its header matches and
 * queue the records written after its sequence number; otherwise rebuild from SQLite. Deletes
 * mark-delete in the graph; the graph is rebuilt when tombstones exceed {@link REBUILD_RATIO} of
 * the live points (and at least {@link REBUILD_MIN}) — off the request path: a fresh graph is
 * filled by indexer slices of at most {@link INDEX_SLICE_MS} on the event loop (vectors read from
 * SQLite one at a time; a slice that would share its event-loop turn with a group commit waits
 * for the next turn) while the old one serves
 * queries, writes go to both meanwhile, and the fresh one replaces the old when complete.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Logger } from '../../logger.js';
import type { IndexDefinition } from '../definitions.js';
import { graphSearchedWithin, HnswDense, QuantizedDense, type NamespaceDense } from './dense.js';
import { Bm25Embedder, HttpDenseEmbedder } from './embedders.js';
import { hnswlibBuild } from './hnswlib.js';
import { isDiskFull } from '../../disk-full.js';
import { VectorError, vectorError, VectorsMissing } from '../errors.js';
import { f32ToBlob, blobToF32 } from './float32.js';
import { NamespaceState } from './namespace.js';
import { dropSnapshot, fsyncPathAsync, readSnapshot, readSnapshotAsync, writeSnapshot, writeSnapshotAsync, type SnapshotExpectation, type SnapshotResult } from './snapshot.js';
import { SparseIndex } from './sparse.js';
import { blobToSparse, FILL_MARK, sparseToBlob, storedState, VectorStore, type ChangeRow } from './store.js';
import { copyWithoutVectors, VECTORLESS_FILE } from './vectorless.js';
import { CHANGES_PAGE, type PgIndexLog, type WriteTx } from './store-pg.js';
import type { PublishedExpectations } from './publication.js';
import type { Metadata, UpsertItem } from '../validate.js';
import type { HistogramCell } from '../../metrics.js';

export const REBUILD_RATIO = 0.5;
export const REBUILD_MIN = 1000;
/** Snapshot a namespace's graph after this many record writes (and on close). */
export const SNAPSHOT_EVERY = 50_000;
/** Longest graph-rebuild (and metadata-parse) slice between two turns of the event loop (ms). */
export const INDEX_SLICE_MS = 2;
/**
 * Threads a batch insertion runs on: one per core, at most 8 — one less (at least one) while
 * queries arrive (a graph was searched within {@link QUERIES_RECENT_MS}), so the event loop keeps
 * a core to itself. hnswlib's insertions scale with the threads (10k × 768 in-process on this
 * 2-core machine: 1.9× one thread's rate on two); searches pause them (dense.ts `graph`). On this
 * 2-core machine, 20k × 768 with batches of 100 upserted while one client queries, the query p99
 * was 16.4–20.0 ms with two threads during queries and 8.3–10.0 ms with one (idle: 1.8–4.4 ms;
 * insertion slices on the event loop, before: 10.4–10.6 ms; `docs/readme/vector-bench.md`).
 */
export const INSERT_THREADS = Math.min(8, Math.max(1, os.availableParallelism()));
/** Queries this recent (ms) leave a core to the event loop ({@link INSERT_THREADS}). */
export const QUERIES_RECENT_MS = 100;
/**
 * Most queued vector elements (pending points × dimension) before writes wait for the indexer:
 * 256k elements = 2,048 vectors at 128-d, 341 at 768-d; an exact scan of that many costs about
 * 0.5 ms on this 2-core machine (when quiet), the worst a query pays for pending points, and the
 * indexer drains it in about 0.3 s.
 */
export const PENDING_LIMIT = 256_000;
/**
 * Most vector elements one batch insertion takes (a quarter of {@link PENDING_LIMIT}: 512 vectors
 * at 128-d, 85 at 768-d, ~20 ms on two threads), so writes keep queueing behind a running batch
 * instead of waiting for it, and a finished point leaves the exact scan of queries soon.
 */
export const BATCH_ELEMENTS = PENDING_LIMIT / 4;
/**
 * Positions per batch of the background fill of dense vectors ({@link VectorIndex.fill}): one
 * PostgreSQL statement each (~0.5 MB of 128-d vectors).
 */
export const FILL_BATCH = 1000;
/**
 * Vectors written per local transaction of the fill, one event-loop turn each: an update that
 * grows a row costs ~17 µs here (200k × 512 B measured), so ~4 ms.
 */
export const FILL_APPLY = 250;
/** Wait (ms) before the fill tries again after a failure, or a pass that left records behind the database. */
export const FILL_RETRY_MS = 1000;

export class VectorIndex {
  readonly store: VectorStore;
  readonly namespaces = new Map<string, NamespaceState>();
  readonly snapshotDir: string;
  dimension?: number;
  seq = 0;
  /**
   * How the last start-up built the graphs: namespaces from a snapshot, records replayed,
   * namespaces rebuilt, and of those the ones whose snapshot was damaged (checksum mismatch).
   */
  readonly loadStats = { fromSnapshot: 0, replayed: 0, rebuilt: 0, damaged: 0 };
  /** Of {@link loadStats}' `fromSnapshot`, the graphs loaded while a publication downloaded ({@link fetchPublished}). */
  private loadedWhileDownloading = 0;
  /**
   * Graphs loaded while a publication downloaded ({@link fetchPublished}), by namespace id, with
   * what they were checked against: used by start-up's load when that is what the SQLite file
   * expects then ({@link loadAsync}), dropped after it.
   */
  private preloaded: Map<number, { expect: SnapshotExpectation; result: Promise<SnapshotResult> }> | undefined;
  readonly denseEmbedder?: HttpDenseEmbedder;
  readonly sparseEmbedder?: Bm25Embedder;
  /** Group commits (SQLite transactions of the write queue) since start. */
  commits = 0;
  /**
   * Conversion buffer of one dense vector (number[] -> float32 bytes for SQLite, which copies them
   * at bind time): one allocation per index instead of one native ArrayBuffer per record, which
   * fragmented the malloc heap during bulk upserts.
   */
  private scratch = new Float32Array(0);
  /** Observes the duration of each graph snapshot in seconds (metrics). */
  snapshotTimer: HistogramCell | undefined;
  private queue: { fn: () => unknown; resolve: (v: unknown) => void; reject: (e: unknown) => void }[] = [];
  private scheduled = false;
  private closed = false;
  private indexing = false;
  /** The last indexer slice gave its turn to a group commit ({@link indexTick}). */
  private yielded = false;
  /** Start-up's metadata parse is scheduled ({@link scheduleMetadataParse}). */
  private parsing = false;
  /** Writes waiting for the indexer (back-pressure, {@link PENDING_LIMIT}). */
  private blocked: (() => void)[] = [];
  /** What the running write changed in memory (undone from SQLite when it rolls back). */
  private journal: WriteJournal | undefined;
  /** Snapshot writes in progress ({@link maintain}), at most one per namespace. */
  private readonly snapshots = new Map<NamespaceState, Promise<void>>();
  /** The running {@link close}. */
  private closing: Promise<void> | undefined;
  /** Committed batches waiting for their WAL fsync ({@link flush}); close waits for them. */
  private readonly syncing = new Set<Promise<void>>();
  /**
   * The shared store (PostgreSQL, `store-pg.ts`) this index is a cache of; undefined = the SQLite
   * file is the store. With it, a group commit is a PostgreSQL transaction ({@link flushShared})
   * and changes of other nodes are applied by {@link catchUp}.
   */
  shared: PgIndexLog | undefined;
  /** The fsync of a downloaded cache after the index became ready ({@link syncDownloaded}); close waits for it. */
  private downloadSynced: Promise<void> | undefined;
  /**
   * True while the local copy lacks dense vectors (joined from a publication without them,
   * `vectorless.ts`; meta {@link FILL_MARK}): readers of a record's vector that find none throw
   * `VectorsMissing` ({@link vectorPending}) and the vectors are filled in the background ({@link fill}).
   */
  filling = false;
  /** The running background fill ({@link startFill}). */
  private fillRun: Promise<void> | undefined;
  /**
   * Positions (by namespace id) whose graph point may not hold the record's current vector: a
   * record restored from the local copy while its vector was not filled yet ({@link restoreRecord});
   * queued for the graph again once filled ({@link regraph}).
   */
  private unsettled = new Map<number, Set<number>>();
  /** Tail of the shared-store operations, which run one at a time ({@link exclusive}). */
  private tail: Promise<unknown> = Promise.resolve();

  /**
   * Opens the index and loads it synchronously (tests, tools); the server uses {@link open}.
   * `deferLoad`: leave the loading to the caller ({@link open}). @throws Error when the stored
   * dimension differs from the definition's.
   */
  constructor(readonly def: IndexDefinition, dataDir: string, private readonly logger: Logger, deferLoad = false) {
    const dir = path.join(dataDir, 'vector');
    this.store = new VectorStore(path.join(dir, `${def.name}.sqlite`));
    this.store.onCheckpointError = (err) =>
      this.logger.error({ err, index: def.name }, 'vector WAL checkpoint worker failed: SQLite checkpoints on the event loop again');
    this.snapshotDir = path.join(dir, `${def.name}.snapshots`);
    if (def.embedder.dense) this.denseEmbedder = new HttpDenseEmbedder(def.embedder.dense);
    if (def.embedder.sparse === 'BM25') this.sparseEmbedder = new Bm25Embedder();
    if (!deferLoad) this.load();
  }

  /**
   * Opens and loads an index without blocking the event loop for the large reads: per namespace,
   * the snapshot files are read and verified off the main thread (`snapshot.ts`
   * `readSnapshotAsync`) while the record heads are read from SQLite. Same result as the
   * constructor. @throws (rejects) as the constructor.
   */
  static async open(def: IndexDefinition, dataDir: string, logger: Logger, shared?: PgIndexLog): Promise<VectorIndex> {
    const cache = VectorIndex.cachePaths(dataDir, def.name);
    if (shared && fs.existsSync(cache.unsynced)) {
      // downloaded, but the process stopped before the files were on disk: not trusted
      logger.warn({ index: def.name }, 'vector: the downloaded cache was not synced to disk before the process stopped: discarded');
      VectorIndex.clearCache(cache);
    }
    let idx = new VectorIndex(def, dataDir, logger, true);
    let fetched: string[] | undefined;
    let settled: Promise<void> | undefined;
    try {
      if (shared) {
        // the SQLite file is a cache of the shared store: brought to its state before loading
        idx.shared = shared;
        if ((await shared.cacheState(idx.store, idx.snapshotDir)) === 'stale') {
          // no usable cache: start from the copy another node published, when there is one
          idx.store.close();
          const got = await VectorIndex.fetchPublished(def, dataDir, logger, shared);
          fetched = got?.files;
          settled = got?.settled;
          idx = new VectorIndex(def, dataDir, logger, true);
          idx.shared = shared;
          idx.preloaded = got?.preloaded;
        }
        const t0 = Date.now();
        const r = await shared.syncLocal(idx.store, idx.snapshotDir);
        logger.info({ index: def.name, ...r, ms: Date.now() - t0 }, r.reloaded ? 'vector index reloaded from PostgreSQL' : 'vector index cache caught up from PostgreSQL');
      }
      await idx.loadAsync();
      await settled;
    } catch (err) {
      await settled;
      idx.store.close();
      throw err;
    }
    if (fetched) idx.downloadSynced = idx.syncDownloaded(cache, fetched);
    idx.startFill();
    return idx;
  }

  /** The local cache files of index `name` in `dataDir` (see {@link fetchPublished}). */
  private static cachePaths(dataDir: string, name: string) {
    const dir = path.join(dataDir, 'vector');
    const file = path.join(dir, `${name}.sqlite`);
    const snapshots = path.join(dir, `${name}.snapshots`);
    const joining = path.join(dir, `${name}.joining`);
    return {
      dir,
      file,
      snapshots,
      joining,
      /** Present from before a downloaded cache is put in place until it is on disk. */
      unsynced: path.join(dir, `${name}.unsynced`),
      all: [file, `${file}-wal`, `${file}-shm`, snapshots, joining],
    };
  }

  /** Deletes the local cache files (the unsynced marker last). */
  private static clearCache(cache: ReturnType<typeof VectorIndex.cachePaths>): void {
    for (const f of cache.all) fs.rmSync(f, { recursive: true, force: true });
    fs.rmSync(cache.unsynced, { force: true });
  }

  /**
   * Replaces the local cache files of index `def` (SQLite file, graph snapshots) with the copy
   * published in the shared store (`publication.ts` `download`), when there is a usable one. The
   * files are downloaded to `<name>.joining/` and moved into place, the SQLite file last (a crash
   * in between leaves no SQLite file: the next start downloads again). They are not fsynced
   * before the index is ready: the marker `<name>.unsynced` is made durable before the download
   * (so before they are moved into place) and removed only once they are on disk ({@link syncDownloaded}); a start that finds
   * it discards the cache ({@link open}).
   * A publication that records its expectations (`PublishedExpectations`: dimension, namespace
   * ids and generations of its SQLite copy) has each graph snapshot loaded as soon as its graph
   * file and header are downloaded and verified, while the SQLite copy still downloads
   * (`snapshot.ts` `readSnapshotAsync` against those expectations, the download's SHA-256 trusted
   * instead of hashing the file again); it is refused (reloaded from PostgreSQL) when the SQLite
   * copy holds other values than them. The reads are not waited for: they go on while the
   * catch-up and the record heads run ({@link loadAsync} awaits each; a graph that turns out not
   * usable is rebuilt from the local copy, as at a restart), the graph files linked into the
   * snapshot directory meanwhile and `.joining/` removed once every read ended (`settled`, which
   * {@link open} awaits). Resolves to the paths of the files put in place, the graph reads by
   * namespace id and `settled`, or undefined (the local files deleted) when there is none or it
   * was refused. Never rejects: a failure is logged and the caller reloads the records (`syncLocal`).
   */
  private static async fetchPublished(
    def: IndexDefinition,
    dataDir: string,
    logger: Logger,
    shared: PgIndexLog,
  ): Promise<{ files: string[]; preloaded: Map<number, { expect: SnapshotExpectation; result: Promise<SnapshotResult> }>; settled: Promise<void> } | undefined> {
    const cache = VectorIndex.cachePaths(dataDir, def.name);
    VectorIndex.clearCache(cache);
    const t0 = Date.now();
    const joiningSnapshots = path.join(cache.joining, 'snapshots');
    /** Downloaded files (name → verified SHA-256) and the graph reads started, by namespace id. */
    const downloaded = new Map<string, string>();
    const reads = new Map<number, { expect: SnapshotExpectation; result: Promise<SnapshotResult> }>();
    const allRead = () => Promise.all([...reads.values()].map((r) => r.result)); // never rejects (readSnapshotAsync)
    let graphMs = 0;
    const onFile = (name: string, sha256: string, expects: PublishedExpectations | null) => {
      downloaded.set(name, sha256);
      if (!expects || expects.dimension === null || def.type === 'SPARSE') return;
      for (const [header] of downloaded) {
        const m = /^snapshots\/ns-(\d+)\.json$/.exec(header);
        const nsId = m ? Number(m[1]) : undefined;
        if (nsId === undefined || reads.has(nsId)) continue;
        let file: string;
        try {
          file = (JSON.parse(fs.readFileSync(path.join(cache.joining, header), 'utf8')) as { file: string }).file;
        } catch {
          continue; // not a header: the loader rejects it later as it always did
        }
        const sum = downloaded.get(`snapshots/${file}`);
        const ns = expects.namespaces.find((n) => n.id === nsId);
        if (sum === undefined || !ns) continue;
        const expect: SnapshotExpectation = { dimension: expects.dimension, metric: def.metric, params: def.hnsw, generation: ns.generation, quantization: def.quantization ?? 'none' };
        const started = Date.now();
        reads.set(nsId, { expect, result: readSnapshotAsync(joiningSnapshots, nsId, expect, sum).then((result) => ((graphMs = Math.max(graphMs, Date.now() - started)), result)) });
      }
    };
    const refuse = async (reason: string) => {
      logger.warn({ index: def.name, reason }, 'vector: the published snapshot is not usable: reloading the records from PostgreSQL');
      await allRead();
      VectorIndex.clearCache(cache);
      return undefined;
    };
    try {
      // durable before any downloaded file is put in place; made before the download, while little
      // is waiting to be written back (an fsync after it would wait behind the downloaded gigabyte)
      fs.mkdirSync(cache.dir, { recursive: true });
      const marker = await fs.promises.open(cache.unsynced, 'w');
      await marker.sync();
      await marker.close();
      await fsyncPathAsync(cache.dir, true);
      let got: Awaited<ReturnType<PgIndexLog['download']>>;
      try {
        got = await shared.download(cache.joining, onFile);
      } catch (err) {
        await allRead();
        throw err;
      }
      if (!got) {
        await allRead();
        VectorIndex.clearCache(cache);
        return undefined;
      }
      if ('rejected' in got) return refuse(got.rejected);
      // `cache.sqlite`, or the copy without the vectors the graphs carry (filled after ready)
      const copyName = got.files.includes(VECTORLESS_FILE) ? VECTORLESS_FILE : 'cache.sqlite';
      if (got.expectations) {
        // the graphs, the SQLite copy and the row must agree: one of them altered is refused
        const state = storedState(path.join(cache.joining, copyName));
        const e = got.expectations;
        const generations = new Map(state.namespaces.map((n) => [n.id, n.generation]));
        if (state.dimension !== e.dimension || e.namespaces.some((n) => generations.get(n.id) !== n.generation)) {
          return refuse('the SQLite copy differs from the publication\'s expectations (dimension, namespaces)');
        }
      }
      // the graph reads still running use the files under `.joining/`: the snapshots are linked
      // into place (both names valid) and `.joining/` removed once every read ended (`settled`)
      if (fs.existsSync(joiningSnapshots)) {
        fs.mkdirSync(cache.snapshots, { recursive: true });
        for (const f of fs.readdirSync(joiningSnapshots)) fs.linkSync(path.join(joiningSnapshots, f), path.join(cache.snapshots, f));
      }
      fs.renameSync(path.join(cache.joining, copyName), cache.file);
      logger.info(
        { index: def.name, seq: got.seq, bytes: got.bytes, ms: Date.now() - t0, graphsLoading: reads.size, vectorless: copyName === VECTORLESS_FILE },
        'vector index fetched from the published snapshot',
      );
      const settled = allRead().then((results) => {
        fs.rmSync(cache.joining, { recursive: true, force: true });
        const loaded = results.filter((r) => !('rejected' in r)).length;
        logger.info({ index: def.name, graphsLoaded: loaded, graphLoadMs: graphMs, ms: Date.now() - t0 }, 'vector index published graphs loaded');
      });
      const files = got.files.map((f) => (f === copyName ? cache.file : path.join(cache.snapshots, f.slice('snapshots/'.length))));
      return { files, preloaded: reads, settled };
    } catch (err) {
      logger.warn({ index: def.name, err: (err as Error)?.message ?? String(err) }, 'vector: downloading the published snapshot failed: reloading the records from PostgreSQL');
      await allRead();
      VectorIndex.clearCache(cache);
      return undefined;
    }
  }

  /**
   * fsyncs the downloaded files `files` (those replaced meanwhile by newer snapshots, written
   * durably by `snapshot.ts`, are skipped) and their directories, then removes the marker
   * `<name>.unsynced` ({@link fetchPublished}); runs after the index is ready, {@link close} waits
   * for it. Never rejects: on a failure the marker stays (the next start downloads again).
   */
  private async syncDownloaded(cache: ReturnType<typeof VectorIndex.cachePaths>, files: string[]): Promise<void> {
    const t0 = Date.now();
    try {
      for (const f of files) {
        await fsyncPathAsync(f).catch((err: NodeJS.ErrnoException) => {
          if (err.code !== 'ENOENT') throw err;
        });
      }
      if (fs.existsSync(cache.snapshots)) await fsyncPathAsync(cache.snapshots, true);
      await fsyncPathAsync(cache.dir, true);
      fs.rmSync(cache.unsynced, { force: true });
      await fsyncPathAsync(cache.dir, true);
      this.logger.info({ index: this.def.name, ms: Date.now() - t0 }, 'vector index download synced to disk');
    } catch (err) {
      this.logger.warn({ index: this.def.name, err: (err as Error)?.message ?? String(err) }, 'vector: syncing the downloaded cache to disk failed: it is downloaded again at the next start');
    }
  }

  /**
   * Publishes this node's cache of the index for joining nodes (`store-pg.ts` `publish`) when the
   * current publication is older than this node's sequence number and no other node is
   * publishing (nor published one younger than `minAgeMs`): graphs with writes since their last snapshot are snapshotted first ({@link
   * maintain}), the snapshot files hard-linked into `<name>.publishing/` (they are never changed
   * once named), then the SQLite file copied there (`store.backup`, a consistent copy taken after
   * the snapshots, so its sequence number is at least theirs), uploaded, and the directory
   * removed. Resolves to what was published (undefined: nothing). @throws the database or file error.
   */
  async publish(minAgeMs = 0): Promise<{ seq: number; bytes: number } | undefined> {
    // a node still filling its vectors publishes nothing (its copy lacks vectors its graphs may not carry)
    if (!this.shared || this.closed || this.seq === 0 || this.filling) return undefined;
    const staging = path.join(path.dirname(this.snapshotDir), `${this.def.name}.publishing`);
    try {
      return await this.shared.publish(this.seq, minAgeMs, async () => {
        fs.rmSync(staging, { recursive: true, force: true });
        fs.mkdirSync(path.join(staging, 'snapshots'), { recursive: true });
        await this.maintain(1);
        if (this.closed) return undefined;
        const names = fs.existsSync(this.snapshotDir) ? fs.readdirSync(this.snapshotDir) : [];
        const graphs: { nsId: number; generation: number; seq: number; files: { name: string; path: string }[] }[] = [];
        for (const h of names.filter((n) => /^ns-\d+\.json$/.test(n))) {
          try {
            const header = JSON.parse(fs.readFileSync(path.join(this.snapshotDir, h), 'utf8')) as { file: string; generation: number; seq: number };
            const linked = path.join(staging, 'snapshots', header.file);
            fs.linkSync(path.join(this.snapshotDir, header.file), linked);
            fs.copyFileSync(path.join(this.snapshotDir, h), path.join(staging, 'snapshots', h));
            const files = [{ name: `snapshots/${header.file}`, path: linked }, { name: `snapshots/${h}`, path: path.join(staging, 'snapshots', h) }];
            graphs.push({ nsId: Number(/\d+/.exec(h)![0]), generation: header.generation, seq: header.seq, files });
          } catch {
            // replaced by a newer snapshot meanwhile: this namespace is published without a graph
          }
        }
        // without the vectors the published graphs carry (`vectorless.ts`), unless the index has no
        // float graph (int8 codes re-rank every query on the original vectors; sparse has none)
        const vectorless = this.hasDense && this.def.quantization !== 'int8';
        const copy = path.join(staging, vectorless ? VECTORLESS_FILE : 'cache.sqlite');
        const t0 = Date.now();
        if (vectorless) {
          const { nulled } = await copyWithoutVectors(this.store.file, copy, graphs.map((g) => ({ ns: g.nsId, seq: g.seq })));
          this.logger.info({ index: this.def.name, nulled, bytes: fs.statSync(copy).size, ms: Date.now() - t0 }, 'vector copy without the vectors the graphs carry made for publishing');
        } else await this.store.backup(copy);
        const { seq, dimension, namespaces } = storedState(copy);
        // a graph of a namespace reset after its snapshot (another generation than the copy's) is
        // left out; the copy then has that namespace's vectors (they were nulled by generation-less
        // sequence numbers only for records the graph covers, and a reset deletes those records)
        const generations = new Map(namespaces.map((n) => [n.id, n.generation]));
        const files = graphs.filter((g) => generations.get(g.nsId) === g.generation).flatMap((g) => g.files);
        files.push({ name: path.basename(copy), path: copy });
        return { seq, files, expectations: { dimension, namespaces } };
      });
    } finally {
      fs.rmSync(staging, { recursive: true, force: true });
    }
  }

  get hasDense(): boolean {
    return this.def.type !== 'SPARSE';
  }
  get hasSparse(): boolean {
    return this.def.type !== 'DENSE';
  }

  /** {@link load} with each namespace's snapshot read in parallel with its heads (see {@link open}). */
  private async loadAsync(): Promise<void> {
    this.loadMeta();
    const t0 = Date.now();
    const phases = { headsMs: 0, snapshotWaitMs: 0, indexesMs: 0 };
    let replayed = 0;
    for (const row of this.store.namespaces()) {
      const ns = new NamespaceState(row);
      this.namespaces.set(row.name, ns);
      const expect = this.snapshotExpectation(ns);
      // a graph loaded while the publication downloaded, when the file still expects what it was checked against
      const pre = this.preloaded?.get(row.id);
      const usable = pre && expect && sameExpectation(pre.expect, expect);
      if (usable && row.next_pos > 0) this.loadedWhileDownloading++;
      // (read while the heads are: the graph on the thread pool, the heads on this thread)
      const snap = expect && row.next_pos > 0 ? (usable ? pre.result : readSnapshotAsync(this.snapshotDir, row.id, expect)) : undefined;
      let t = Date.now();
      this.loadHeads(ns);
      phases.headsMs += Date.now() - t;
      t = Date.now();
      const got = snap && (await snap);
      phases.snapshotWaitMs += Date.now() - t;
      if (this.filling && expect && ns.count > 0 && (!got || 'rejected' in got || got.header.seq > this.seq)) {
        // the graph is rebuilt from the local copy: its vectors are filled first (before ready)
        t = Date.now();
        const r = await this.fillNamespace(ns, false);
        this.logger.info({ index: this.def.name, namespace: ns.name, ...r, ms: Date.now() - t }, 'vector vectors of a namespace without a usable graph filled from PostgreSQL before rebuilding it');
        if (r.left > 0) throw new Error(`vector index ${this.def.name}: ${r.left} vectors of namespace '${ns.name}' could not be filled from PostgreSQL`);
      }
      t = Date.now();
      replayed += this.loadIndexes(ns, ns.count > 0 ? got : undefined);
      phases.indexesMs += Date.now() - t;
    }
    this.preloaded = undefined;
    const { fromSnapshot, rebuilt } = this.loadStats;
    const loadedWhileDownloading = this.loadedWhileDownloading;
    this.logger.info({ index: this.def.name, namespaces: this.namespaces.size, fromSnapshot, loadedWhileDownloading, rebuilt, replayed, ms: Date.now() - t0, ...phases, hnswlib: hnswlibBuild }, 'vector index loaded');
    // after loading, not while the snapshot is read: the graph read and the hashing need the cores
    this.scheduleMetadataParse();
    this.scheduleIndexing();
  }

  /**
   * Starts the background fill of the dense vectors the local copy lacks ({@link filling}), unless
   * it runs or nothing is missing. Called once the index is loaded ({@link open}).
   */
  startFill(): void {
    if (!this.filling || !this.shared || this.fillRun || this.closed) return;
    this.fillRun = this.fill().finally(() => (this.fillRun = undefined));
  }

  /**
   * The background fill: passes over every namespace in position order ({@link fillNamespace},
   * batches of {@link FILL_BATCH} positions, each batch's statement pausable by the
   * `FILL_LOCK_CLASS` lock, `store-pg.ts`), until a pass finds no record without its vector; then
   * the marker {@link FILL_MARK} is removed (in the same order in the WAL as the fills, so a
   * crash never leaves the marker removed before them). A record whose vector the database has
   * for another write (this node is behind) is left to the catch-up, run between passes; a
   * failure (the database unreachable) is retried after {@link FILL_RETRY_MS}. A restart before
   * the end finds the marker and starts again, skipping the batches already filled. Ends (logged)
   * once the index is closed (the node stopping or the index deleted). Never rejects.
   */
  private async fill(): Promise<void> {
    const t0 = Date.now();
    let filled = 0;
    let passes = 0;
    const pause = () => new Promise((r) => setTimeout(r, FILL_RETRY_MS).unref());
    this.logger.info({ index: this.def.name }, 'vector vectors filling from PostgreSQL');
    while (!this.closed && this.filling) {
      let left = 0;
      passes++;
      try {
        for (const ns of [...this.namespaces.values()]) {
          const r = await this.fillNamespace(ns, true);
          filled += r.filled;
          left += r.left;
          if (this.closed) break;
        }
      } catch (err) {
        if (this.closed) break;
        this.shared!.warn(err, 'filling the vectors failed (retried)');
        await pause();
        continue;
      }
      if (this.closed) break;
      if (left === 0) {
        await this.exclusive(async () => {
          if (this.closed) return;
          this.store.deleteMeta(FILL_MARK);
          this.store.checkpointer.committed();
          this.filling = false;
        });
        this.logger.info({ index: this.def.name, filled, passes, ms: Date.now() - t0 }, 'vector vectors filled from PostgreSQL');
        return;
      }
      await this.catchUp().catch(() => undefined); // the records left are behind the database's
      await pause();
    }
    // closed (stopping, or the index deleted): its statement done, nothing written after the close
    if (this.closed) this.logger.info({ index: this.def.name, filled, passes, ms: Date.now() - t0 }, 'vector vectors fill stopped: the index closed');
  }

  /**
   * Fills the dense vectors of namespace `ns` missing in the local copy from the shared store, in
   * windows of {@link FILL_BATCH} positions (a window with none missing costs one local index
   * range and no statement; the next window's statement runs while one is written), each written only into a record that still holds the same write
   * (`store.ts` `fillVectors`: a write, delete or reset applied meanwhile is never overwritten),
   * under {@link exclusive} (never inside a group commit's open transaction). Resolves to the
   * vectors filled and the records still without one (behind the database, or not there any
   * more). `pausable`: the batches take the shared fill lock. @throws the database error.
   */
  private async fillNamespace(ns: NamespaceState, pausable: boolean): Promise<{ filled: number; left: number }> {
    let filled = 0;
    let left = 0;
    if (this.closed) return { filled, left };
    const top = this.store.maxPos(ns.row.id);
    /** The next window from `from` with vectors missing, its statement started (undefined: none). */
    const window = (from: number) => {
      for (; top !== undefined && from <= top; from += FILL_BATCH) {
        const to = from + FILL_BATCH;
        const missing = this.store.unfilled(ns.row.id, from, to).length;
        if (missing === 0) continue;
        const rows = this.shared!.vectorsAt(ns.row.id, { from, to }, pausable);
        rows.catch(() => undefined); // (awaited below, unless the fill stops first)
        return { from, to, missing, rows };
      }
      return undefined;
    };
    for (let w = window(0); w; ) {
      const rows = await w.rows;
      if (this.closed || this.namespaces.get(ns.name) !== ns) break; // closing, or the namespace deleted
      // the next window is read while this one is written (the database's work beside this thread's)
      const { from, to, missing } = w;
      w = window(to);
      let n = 0;
      for (let i = 0; i < rows.length && !this.closed; i += FILL_APPLY) {
        await this.exclusive(async () => {
          if (!this.closed) n += this.store.fillVectors(ns.row.id, rows.slice(i, i + FILL_APPLY));
        });
        await new Promise((r) => setImmediate(r));
      }
      filled += n;
      // (read again only when some were not filled here: on demand meanwhile, or behind the database)
      if (n < missing && !this.closed) {
        left += await this.exclusive(async () => (this.closed ? 0 : this.store.unfilled(ns.row.id, from, to).length));
      }
      if (this.unsettled.has(ns.row.id) && !this.closed) await this.exclusive(async () => this.regraph(ns.row.id));
    }
    return { filled, left };
  }

  /**
   * True when `vector` (a record's dense vector as the local copy has it) is missing because it is
   * not filled yet ({@link filling}): the reader throws `VectorsMissing` instead of answering.
   */
  vectorPending(vector: Buffer | null | undefined): boolean {
    return vector == null && this.filling && this.hasDense;
  }

  /**
   * Reads the dense vectors of the records of namespace id `nsId` at `positions` from the shared
   * store into the local copy (records that hold the same write only, as {@link fillNamespace});
   * when some are still missing (this node is behind the database), catches up. A request that
   * found them missing (`VectorsMissing`) then runs again (`http/routes.ts`).
   * @throws VectorError 503 `vectorsUnavailable` when the database cannot be reached.
   */
  async fetchMissing(nsId: number, positions: number[]): Promise<void> {
    if (!this.shared) return;
    const want = [...new Set(positions)];
    try {
      const rows = await this.shared.vectorsAt(nsId, { positions: want });
      const filled = await this.exclusive(async () => {
        const n = this.store.fillVectors(nsId, rows);
        this.regraph(nsId);
        return n;
      });
      if (filled < want.length) await this.catchUp();
    } catch (err) {
      this.shared.warn(err, 'reading vectors not filled yet failed');
      throw vectorError('vectorsUnavailable');
    }
  }

  /**
   * Queues again for the graph the filled vectors of the positions of `nsId` that
   * {@link restoreRecord} left unsettled (their graph point may hold another write's vector).
   */
  private regraph(nsId: number): void {
    const set = this.unsettled.get(nsId);
    if (!set || this.closed) return;
    const ns = [...this.namespaces.values()].find((n) => n.row.id === nsId);
    for (const pos of set) {
      const row = ns && this.store.getByPos(nsId, pos);
      if (ns && row?.vector == null && row && ns.ids[pos] !== undefined) continue; // still missing
      set.delete(pos);
      if (!ns || !row?.vector || !ns.dense) continue;
      const v = blobToF32(row.vector);
      ns.dense.enqueue(pos, v, row.seq);
      ns.rebuilding?.graph.enqueue(pos, v, row.seq);
    }
    if (set.size === 0) this.unsettled.delete(nsId);
    if (this.pendingCount() > 0) this.scheduleIndexing();
  }

  /** What a snapshot of `ns` must match (undefined: the index has no dense part or no dimension yet). */
  private snapshotExpectation(ns: NamespaceState): SnapshotExpectation | undefined {
    if (!this.hasDense || this.dimension === undefined) return undefined;
    return { dimension: this.dimension, metric: this.def.metric, params: this.def.hnsw, generation: ns.row.generation, quantization: this.def.quantization ?? 'none' };
  }

  /** Dimension and sequence number from the store. @throws Error when the stored dimension differs from the definition's. */
  private loadMeta(): void {
    const dim = this.store.getMeta('dimension');
    this.dimension = dim !== undefined ? Number(dim) : this.def.dimension;
    if (dim !== undefined && this.def.dimension !== undefined && Number(dim) !== this.def.dimension) {
      throw new Error(`vector index ${this.def.name}: stored dimension ${dim} differs from the configured ${this.def.dimension}`);
    }
    if (dim === undefined && this.dimension !== undefined && this.hasDense) this.store.setMeta('dimension', String(this.dimension));
    this.seq = Number(this.store.getMeta('seq') ?? 0);
    this.filling = this.shared !== undefined && this.hasDense && this.store.getMeta(FILL_MARK) !== undefined;
  }

  /** Loads dimension, sequence number and every namespace (snapshot + replay, or rebuild). */
  private load(): void {
    this.loadMeta();
    const t0 = Date.now();
    let replayed = 0;
    for (const row of this.store.namespaces()) {
      const ns = new NamespaceState(row);
      this.namespaces.set(row.name, ns);
      this.loadHeads(ns);
      replayed += this.loadIndexes(ns);
    }
    this.logger.info({ index: this.def.name, namespaces: this.namespaces.size, replayed, ms: Date.now() - t0, hnswlib: hnswlibBuild }, 'vector index loaded');
    this.scheduleMetadataParse();
    this.scheduleIndexing();
  }

  /**
   * Ids, labels and metadata of every record of `ns` from SQLite (one pass in primary-key order,
   * rows as arrays); metadata stays JSON text, parsed once loaded in slices
   * ({@link scheduleMetadataParse}) or on first use (namespace.ts `meta`).
   */
  private loadHeads(ns: NamespaceState): void {
    ns.presize(ns.row.next_pos);
    for (const [id, pos, metadata] of this.store.headsRaw(ns.row.id)) ns.load(pos, id, metadata);
  }

  /**
   * Parses the metadata text start-up left in memory, in slices of at most {@link INDEX_SLICE_MS}
   * between turns of the event loop (queries run in between; a filter reaching text not parsed
   * yet parses it itself).
   */
  private scheduleMetadataParse(): void {
    if (this.parsing || this.closed) return;
    this.parsing = true;
    const tick = () => {
      if (this.closed) return void (this.parsing = false);
      const deadline = performance.now() + INDEX_SLICE_MS;
      let done = true;
      for (const ns of this.namespaces.values()) {
        if (!ns.parseMetadata(deadline)) {
          done = false;
          break;
        }
      }
      if (done) this.parsing = false;
      else setImmediate(tick);
    };
    setImmediate(tick);
  }

  /**
   * Builds the dense graph (snapshot + replay when possible) and the sparse index of `ns`; `read`:
   * the snapshot already read (otherwise read here, synchronously).
   */
  private loadIndexes(ns: NamespaceState, read?: SnapshotResult): number {
    let replayed = 0;
    if (this.hasSparse) {
      ns.sparse = new SparseIndex();
    }
    const expect = this.snapshotExpectation(ns);
    if (expect) {
      let snap = ns.count > 0 ? (read ?? readSnapshot(this.snapshotDir, ns.row.id, expect)) : undefined;
      // A snapshot covering writes the store does not have: written after commits whose WAL sync
      // never completed (power loss). Its sequence numbers would be handed out again.
      if (snap && !('rejected' in snap) && snap.header.seq > this.seq) snap = { rejected: 'stale', detail: `covers seq ${snap.header.seq}, the store ends at ${this.seq}` };
      if (snap && 'rejected' in snap) {
        const where = { index: this.def.name, namespace: ns.name, records: ns.count, reason: snap.rejected, detail: snap.detail };
        if (snap.rejected === 'checksum' || snap.rejected === 'unreadable') {
          this.loadStats.damaged++;
          this.logger.warn(where, 'vector snapshot damaged (checksum mismatch or unreadable): not used, rebuilding the graph from the store');
        } else this.logger.info(where, 'vector snapshot not usable: rebuilding the graph from the store');
      }
      if (snap && !('rejected' in snap)) {
        this.loadStats.fromSnapshot++;
        ns.dense = snap.graph;
        for (const label of [...snap.graph.labels()]) if (ns.ids[label] === undefined) snap.graph.remove(label);
        for (const r of this.store.newerThan(ns.row.id, snap.header.seq)) {
          if (r.vector) ns.dense.enqueue(r.pos, blobToF32(r.vector), r.seq);
          replayed++;
        }
      } else {
        ns.dense = this.newGraph(ns.count);
      }
    }
    if (ns.sparse || (ns.dense && ns.dense.size === 0 && ns.count > 0)) {
      const rebuildDense = ns.dense !== undefined && ns.dense.size === 0;
      // a graph is rebuilt in batches inserted on all cores; the event loop waits for each (at
      // start-up nothing is served yet; a namespace reloaded after a rollback waited as long before)
      const graph = rebuildDense && ns.dense instanceof HnswDense ? ns.dense : undefined;
      let labels: number[] = [];
      let vectors: Float32Array[] = [];
      const flush = () => {
        graph!.addAll(labels, vectors, INSERT_THREADS);
        labels = [];
        vectors = [];
      };
      for (const r of this.store.vectors(ns.row.id)) {
        if (ns.sparse && r.sparse) ns.sparse.add(r.pos, blobToSparse(r.sparse));
        if (rebuildDense && this.vectorPending(r.vector)) {
          // a namespace reloaded after a rolled-back write while vectors are missing: added once read
          let set = this.unsettled.get(ns.row.id);
          if (!set) this.unsettled.set(ns.row.id, (set = new Set()));
          set.add(r.pos);
          this.settleSoon(ns.row.id);
        }
        if (!rebuildDense || !r.vector) continue;
        if (!graph) {
          ns.dense!.add(r.pos, blobToF32(r.vector));
          continue;
        }
        labels.push(r.pos);
        vectors.push(blobToF32(r.vector));
        if (labels.length * this.dimension! >= BATCH_ELEMENTS) flush();
      }
      if (labels.length > 0) flush();
      if (rebuildDense) {
        ns.unsnapshotted = ns.count;
        this.loadStats.rebuilt++;
      }
    }
    ns.unsnapshotted += replayed;
    this.loadStats.replayed += replayed;
    return replayed;
  }

  /** An empty dense part for a namespace: an HNSW graph, or the codes alone (`"quantization": "int8"`). */
  private newGraph(capacity = 0): NamespaceDense {
    const D = this.def.quantization === 'int8' ? QuantizedDense : HnswDense;
    return new D(this.dimension!, this.def.metric, this.def.hnsw, Math.max(1024, capacity));
  }

  /** The namespace or undefined. */
  ns(name: string): NamespaceState | undefined {
    return this.namespaces.get(name);
  }

  private ensureNs(name: string): NamespaceState {
    let ns = this.namespaces.get(name);
    if (!ns) {
      this.touchNamespaces();
      ns = new NamespaceState(this.store.createNamespace(name));
      if (this.hasSparse) ns.sparse = new SparseIndex();
      if (this.hasDense && this.dimension !== undefined) ns.dense = this.newGraph();
      this.namespaces.set(name, ns);
    }
    return ns;
  }

  /** Vector elements (points × dimension) queued for graph insertion, over all namespaces. */
  pendingElements(): number {
    let n = 0;
    for (const ns of this.namespaces.values()) if (ns.dense) n += ns.dense.pending * ns.dense.dimension;
    return n;
  }

  /** Points queued for graph insertion in `ns` (all namespaces when undefined). */
  pendingCount(ns?: NamespaceState): number {
    if (ns) return ns.dense?.pending ?? 0;
    let n = 0;
    for (const s of this.namespaces.values()) n += s.dense?.pending ?? 0;
    return n;
  }

  /**
   * Runs `fn` inside the next group commit; resolves after the commit. Waits first while more
   * than {@link PENDING_LIMIT} vector elements are queued for the graph.
   */
  write<T>(fn: () => T): Promise<T> {
    if (this.closed) return Promise.reject(vectorError('indexClosing'));
    return new Promise<T>((resolve, reject) => {
      const enter = () => {
        this.queue.push({ fn, resolve: resolve as (v: unknown) => void, reject });
        if (!this.scheduled) {
          this.scheduled = true;
          setImmediate(() => {
            if (!this.shared) return this.flush();
            this.exclusive(() => this.flushShared()).catch((err: unknown) => this.logger.error({ err, index: this.def.name }, 'vector group commit failed'));
          });
        }
      };
      if (this.blocked.length || this.pendingElements() > PENDING_LIMIT) {
        this.blocked.push(enter);
        this.scheduleIndexing();
      } else enter();
    });
  }

  /** Resolves once no point waits for graph insertion and no rebuild runs (polls every 10 ms; tests and benches). */
  async whenIndexed(): Promise<void> {
    while (this.graphWorkLeft() && !this.closed) await new Promise((r) => setTimeout(r, 10));
  }

  /** True while some point waits for graph insertion or some graph rebuild runs. */
  graphWorkLeft(): boolean {
    return this.pendingCount() > 0 || this.rebuildCount() > 0;
  }

  private scheduleIndexing(): void {
    if (this.indexing || this.closed) return;
    this.indexing = true;
    setImmediate(() => this.indexTick());
  }

  /**
   * One indexing slice: inserts queued points (all namespaces) for at most {@link INDEX_SLICE_MS},
   * lets blocked writes in once the queue is under {@link PENDING_LIMIT}, and re-schedules itself
   * with `setImmediate` (so pending I/O — queries — runs between slices) while points remain.
   */
  private indexTick(): void {
    this.indexing = false;
    if (this.closed) return;
    if (this.scheduled && !this.yielded) {
      // A group commit runs later in this same turn of the event loop (its setImmediate was queued
      // after this one): let it run alone, so a query waits for one of the two, not both.
      // Rescheduled from within the turn, the slice runs in the next one, after pending I/O (never
      // twice in a row: writes arriving every turn must not starve the indexer).
      this.yielded = true;
      this.scheduleIndexing();
      return;
    }
    this.yielded = false;
    // while queries arrive, one core is left to the event loop
    const threads = graphSearchedWithin(QUERIES_RECENT_MS) ? Math.max(1, INSERT_THREADS - 1) : INSERT_THREADS;
    for (const ns of this.namespaces.values()) {
      const dense = ns.dense;
      dense?.indexBatch(BATCH_ELEMENTS, threads)?.then(
        () => this.scheduleIndexing(),
        (err: unknown) => {
          this.logger.error({ err, index: this.def.name, namespace: ns.name }, 'vector graph insertion failed');
          // its points are queued again: retry later rather than in a loop
          setTimeout(() => this.scheduleIndexing(), 1000).unref();
        },
      );
    }
    const deadline = performance.now() + INDEX_SLICE_MS;
    for (const ns of this.namespaces.values()) {
      if (performance.now() >= deadline) break;
      if (ns.rebuilding) this.rebuildSlice(ns, deadline);
    }
    if (this.blocked.length && this.pendingElements() <= PENDING_LIMIT) {
      const go = this.blocked;
      this.blocked = [];
      for (const enter of go) enter();
    }
    // points of a graph a snapshot is reading wait for it: its end schedules the indexer again
    if (this.insertablePending() || this.rebuildCount() > 0) this.scheduleIndexing();
  }

  /** True when some namespace has points queued for a graph that no snapshot is reading. */
  private insertablePending(): boolean {
    for (const ns of this.namespaces.values()) if (ns.dense?.insertable) return true;
    return false;
  }

  /** Namespaces whose graph is being rebuilt. */
  rebuildCount(): number {
    let n = 0;
    for (const ns of this.namespaces.values()) if (ns.rebuilding) n++;
    return n;
  }

  /**
   * Moves the rebuild of `ns` on until `deadline`: adds the next live points (vectors from SQLite)
   * to the fresh graph, inserts what writes queued there meanwhile, and swaps it in when done.
   */
  private rebuildSlice(ns: NamespaceState, deadline: number): void {
    const r = ns.rebuilding!;
    try {
      while (r.at < r.todo.length && performance.now() < deadline) {
        const label = r.todo[r.at++];
        if (ns.ids[label] === undefined || r.graph.has(label)) continue; // deleted, or rewritten meanwhile
        const v = this.store.vectorAt(ns.row.id, label);
        if (v) r.graph.add(label, blobToF32(v));
      }
      if (r.at < r.todo.length) return;
      r.graph.indexPending(deadline);
      if (r.graph.pending > 0) return;
      ns.dense = r.graph;
      ns.rebuilding = undefined;
      ns.unsnapshotted = Math.max(ns.unsnapshotted, SNAPSHOT_EVERY);
      this.maintain();
    } catch (err) {
      this.logger.error({ err, index: this.def.name, namespace: ns.name }, 'vector graph rebuild failed');
      ns.rebuilding = undefined;
    }
  }

  private flush(): void {
    this.scheduled = false;
    const batch = this.queue;
    this.queue = [];
    if (batch.length === 0) return;
    const results: { ok: boolean; v: unknown }[] = [];
    const all = newJournal();
    try {
      this.store.transaction(() => {
        for (const op of batch) {
          // SQLite rolls the whole transaction back by itself on some errors (SQLITE_FULL): the
          // ops left would otherwise run in transactions of their own and commit unseen
          if (!this.store.db.inTransaction) {
            results.push({ ok: false, v: results.find((r) => !r.ok)?.v ?? vectorError('commitFailed') });
            continue;
          }
          const j = (this.journal = newJournal());
          try {
            results.push({ ok: true, v: this.store.transaction(op.fn) });
          } catch (err) {
            results.push({ ok: false, v: err });
            // its savepoint was rolled back: so is its change in memory
            this.undo(j);
          } finally {
            this.journal = undefined;
            mergeJournal(all, j);
          }
        }
        if (this.store.db.inTransaction) this.store.setMeta('seq', String(this.seq));
      });
      this.commits++;
    } catch (err) {
      this.logger.error({ err, index: this.def.name }, 'vector commit failed');
      // the whole transaction was rolled back: no write of the batch stays visible
      this.undo(all);
      // SQLite rolls the whole transaction back by itself on SQLITE_FULL inside one operation;
      // the COMMIT then fails with "no transaction is active": the operation's error is the cause
      const full = isDiskFull(err) || results.some((r) => !r.ok && isDiskFull(r.v));
      const answer = vectorError(full ? 'diskFull' : 'commitFailed');
      for (const op of batch) op.reject(answer);
      return;
    }
    // failed writes were rolled back (nothing to make durable): answered at once; the others
    // after the WAL fsync that covers this commit (off the event loop)
    const committed: number[] = [];
    batch.forEach((op, i) => (results[i].ok ? committed.push(i) : op.reject(isDiskFull(results[i].v) ? vectorError('diskFull') : results[i].v)));
    this.store.checkpointer.committed();
    if (committed.length) {
      const synced = this.store.wal.sync().then(
        () => committed.forEach((i) => batch[i].resolve(results[i].v)),
        (err: unknown) => {
          // committed, but not known to be on disk: refused, so the client repeats it (kept in memory and SQLite)
          this.logger.error({ err, index: this.def.name }, 'vector commit failed: the WAL could not be synced');
          const answer = vectorError(isDiskFull(err) ? 'diskFull' : 'commitFailed');
          committed.forEach((i) => batch[i].reject(answer));
        },
      );
      this.syncing.add(synced);
      void synced.finally(() => this.syncing.delete(synced));
    }
    this.maintain();
    if (this.pendingCount() > 0) this.scheduleIndexing();
  }

  /** Runs `fn` after the shared-store operations before it ({@link flushShared}, {@link catchUp}). */
  private exclusive<T>(fn: () => Promise<T>): Promise<T> {
    const p = this.tail.then(fn, fn);
    this.tail = p.catch(() => undefined);
    return p;
  }

  /**
   * The group commit on a shared store: one PostgreSQL transaction holding the index's write lock
   * (`store-pg.ts`). First the changes other nodes committed are applied here ({@link applyRemote}),
   * so positions, namespace ids and sequence numbers continue the database's; then the queued
   * writes run as {@link flush} runs them (one local SQLite transaction, a savepoint each, memory
   * updated in the same step) while `store.capture` collects what they changed; that is committed
   * to PostgreSQL, and only then locally. Writes are answered after both commits (so a write is
   * visible to the next query on this node). When PostgreSQL cannot be reached or the commit
   * fails, the local transaction is rolled back, memory restored from it (`undo`), the sequence
   * number put back (a commit whose outcome is unknown is applied by the next catch-up if it
   * happened) and the writes answered 503 (`databaseUnavailable`). Never rejects.
   */
  private async flushShared(): Promise<void> {
    this.scheduled = false;
    const batch = this.queue;
    this.queue = [];
    if (batch.length === 0) return;
    let tx: WriteTx;
    try {
      tx = await this.shared!.begin(this.seq);
    } catch (err) {
      this.shared!.warn(err, 'writes refused, the database is unavailable');
      for (const op of batch) op.reject(vectorError('databaseUnavailable'));
      return;
    }
    try {
      if (tx.changes.length) this.applyRemote(tx.changes);
    } catch (err) {
      await tx.rollback();
      this.logger.error({ err, index: this.def.name }, 'vector: changes of other nodes could not be applied');
      for (const op of batch) op.reject(vectorError('commitFailed'));
      return;
    }
    const seqBefore = this.seq;
    const changes: ChangeRow[] = [];
    const results: { ok: boolean; v: unknown }[] = [];
    const all = newJournal();
    this.store.db.exec('BEGIN');
    this.store.capture = { changes, nextSeq: () => ++this.seq };
    try {
      for (const op of batch) {
        // SQLite rolls the whole transaction back by itself on some errors (SQLITE_FULL): the ops
        // left would run outside it, so they fail with the first failure (as in flush)
        if (!this.store.db.inTransaction) {
          results.push({ ok: false, v: results.find((r) => !r.ok)?.v ?? vectorError('commitFailed') });
          continue;
        }
        const mark = changes.length;
        const seqMark = this.seq;
        const j = (this.journal = newJournal());
        try {
          results.push({ ok: true, v: this.store.transaction(op.fn) });
        } catch (err) {
          results.push({ ok: false, v: isDiskFull(err) ? vectorError('diskFull') : err });
          // its savepoint was rolled back: so are its changes, memory and the sequence numbers it
          // took (the index's sequence number and the changes stay gap-free, so followers and this
          // node's next `begin` agree with the database)
          changes.length = mark;
          this.seq = seqMark;
          this.undo(j);
        } finally {
          this.journal = undefined;
          mergeJournal(all, j);
        }
      }
    } finally {
      this.store.capture = undefined;
    }
    if (!this.store.db.inTransaction) {
      // the local cache lost the whole transaction (a full disk): nothing goes to PostgreSQL
      await tx.rollback();
      this.seq = seqBefore;
      this.undo(all);
      const cause = results.find((r) => !r.ok)?.v;
      const answer = isDiskFull(cause) || (cause instanceof VectorError && cause.code === 'diskFull') ? vectorError('diskFull') : vectorError('commitFailed');
      this.logger.error({ err: cause, index: this.def.name }, 'vector commit failed in the local cache: nothing was sent to PostgreSQL');
      for (const op of batch) op.reject(answer);
      return;
    }
    let failure: unknown;
    if (changes.length) {
      try {
        await tx.commit(changes, this.store.namespaces(), this.seq);
      } catch (err) {
        failure = err;
      }
    } else await tx.rollback();
    if (failure !== undefined) {
      this.store.db.exec('ROLLBACK');
      this.seq = seqBefore;
      this.undo(all);
      this.shared!.warn(failure, 'writes refused, the commit failed');
      batch.forEach((op, i) => op.reject(results[i].ok ? vectorError('databaseUnavailable') : results[i].v));
      return;
    }
    try {
      this.store.setMeta('seq', String(this.seq));
      this.store.db.exec('COMMIT');
    } catch (err) {
      // committed to PostgreSQL (so acknowledged) but not to the cache: the cache and memory go
      // back to before the batch, and the next catch-up (the poll) applies it from the database
      this.logger.error({ err, index: this.def.name }, 'vector: the local cache could not commit a write stored in PostgreSQL; it is applied again from the database');
      if (this.store.db.inTransaction) this.store.db.exec('ROLLBACK');
      this.seq = seqBefore;
      this.undo(all);
    }
    this.commits++;
    this.store.checkpointer.committed();
    batch.forEach((op, i) => (results[i].ok ? op.resolve(results[i].v) : op.reject(results[i].v)));
    this.maintain();
    if (this.pendingCount() > 0) this.scheduleIndexing();
  }

  /**
   * Applies the changes other nodes committed to the shared store since this node's sequence
   * number (a notification, the poll, or start-up). Resolves to the number applied.
   * @throws the database error (nothing applied from the failing read).
   */
  catchUp(): Promise<number> {
    return this.exclusive(async () => {
      let n = 0;
      while (!this.closed && this.shared) {
        const t0 = performance.now();
        const page = await this.shared.changesSince(this.seq);
        const t1 = performance.now();
        if (page.length) this.applyRemote(page);
        n += page.length;
        this.logger.trace({ index: this.def.name, changes: page.length, readMs: Math.round(t1 - t0), applyMs: Math.round(performance.now() - t1) }, 'vector catch-up page');
        if (page.length < CHANGES_PAGE) break;
      }
      return n;
    });
  }

  /**
   * Applies committed changes of the shared store (in sequence order) to the local SQLite cache
   * (one transaction, with the positions and ids they carry) and then to memory, the way a
   * rolled-back write is undone: namespaces are matched to their rows (created ones loaded,
   * reset ones reloaded, deleted ones dropped with their snapshots), then every written or deleted
   * record is re-read from the cache (`restoreRecord`: graph, sparse index, metadata).
   */
  private applyRemote(changes: ChangeRow[]): void {
    const before = new Set(this.namespaces.values());
    this.store.transaction(() => this.store.applyChanges(changes));
    this.seq = Math.max(this.seq, changes[changes.length - 1].seq);
    let namespaces = false;
    for (const c of changes) {
      if (c.kind === 'upsert' || c.kind === 'delete') continue;
      namespaces = true;
      if (c.kind === 'drop' || c.kind === 'reset') dropSnapshot(this.snapshotDir, c.ns!);
    }
    if (namespaces) {
      const dim = this.store.getMeta('dimension');
      if (dim !== undefined && this.dimension === undefined && this.hasDense) {
        this.dimension = Number(dim);
        for (const ns of this.namespaces.values()) ns.dense ??= this.newGraph();
      }
      this.reconcileNamespaces();
    }
    const byId = new Map([...this.namespaces.values()].map((ns) => [ns.row.id, ns]));
    const j = newJournal();
    for (const c of changes) {
      if (c.kind !== 'upsert' && c.kind !== 'delete') continue;
      const ns = byId.get(c.ns!);
      if (!ns || !before.has(ns)) continue; // loaded whole from the cache by reconcileNamespaces
      let ids = j.records.get(ns);
      if (!ids) j.records.set(ns, (ids = new Set()));
      ids.add(c.id!);
    }
    this.undo(j);
    for (const [ns, ids] of j.records) ns.unsnapshotted += ids.size;
    if (this.pendingCount() > 0) this.scheduleIndexing();
  }

  /** Notes that the running write changes record `id` of `ns` in memory. */
  private touch(ns: NamespaceState, id: string): void {
    if (!this.journal) return;
    let ids = this.journal.records.get(ns);
    if (!ids) this.journal.records.set(ns, (ids = new Set()));
    ids.add(id);
  }

  /** Notes that the running write changes namespaces (create, reset, delete, rename) or the dimension. */
  private touchNamespaces(): void {
    if (this.journal) this.journal.namespaces = true;
  }

  /**
   * Makes memory agree with SQLite again after the writes of `j` were rolled back: namespaces
   * (when touched) are matched to their rows — created ones dropped, renamed ones renamed back,
   * reset or deleted ones reloaded from the store — then every touched record is re-read: gone from
   * memory when SQLite has no row, otherwise its position, metadata, vector (queued for the graph
   * again) and sparse vector as stored. Costs one SQLite read per touched record (a whole
   * namespace for a failed reset or delete). Never throws: a store that cannot be read is logged.
   */
  private undo(j: WriteJournal): void {
    try {
      if (j.namespaces) this.reconcileNamespaces();
      const rows = new Map(this.store.namespaces().map((r) => [r.id, r]));
      for (const [ns, ids] of j.records) {
        if (this.namespaces.get(ns.name) !== ns) continue; // dropped or reloaded whole
        ns.row.next_pos = rows.get(ns.row.id)?.next_pos ?? ns.row.next_pos;
        for (const id of ids) this.restoreRecord(ns, id);
      }
    } catch (err) {
      this.logger.error({ err, index: this.def.name }, 'vector write rolled back, but memory could not be restored from the store');
    }
  }

  /** Memory state of record `id` of `ns` from its SQLite row (or its absence). */
  private restoreRecord(ns: NamespaceState, id: string): void {
    const row = this.store.get(ns.row.id, id);
    const at = ns.byId.get(id);
    if (at !== undefined && at !== row?.pos) ns.drop(id);
    if (!row) return;
    ns.put(row.pos, id, row.metadata ? (JSON.parse(row.metadata) as Metadata) : undefined);
    if (this.vectorPending(row.vector)) {
      // not filled yet: the graph point stays; queued again once the vector is read (it may be
      // another write's: a rolled-back one, or the catch-up's before the write that carries it)
      let set = this.unsettled.get(ns.row.id);
      if (!set) this.unsettled.set(ns.row.id, (set = new Set()));
      set.add(row.pos);
      this.settleSoon(ns.row.id);
    } else if (row.vector && ns.dense) {
      const v = blobToF32(row.vector);
      ns.dense.enqueue(row.pos, v, row.seq);
      ns.rebuilding?.graph.enqueue(row.pos, v, row.seq);
    } else {
      ns.dense?.remove(row.pos);
      ns.rebuilding?.graph.remove(row.pos);
    }
    if (row.sparse && ns.sparse) ns.sparse.add(row.pos, blobToSparse(row.sparse));
    else ns.sparse?.remove(row.pos);
  }

  /** Reads the vectors {@link restoreRecord} left unsettled in `nsId` (retried every {@link FILL_RETRY_MS} until done). */
  private settleSoon(nsId: number): void {
    setImmediate(() => {
      const set = this.unsettled.get(nsId);
      if (!set || this.closed || !this.shared) return;
      this.fetchMissing(nsId, [...set]).catch(() => setTimeout(() => this.settleSoon(nsId), FILL_RETRY_MS).unref());
    });
  }

  /** Namespaces and dimension in memory from SQLite after a rolled-back namespace-level write. */
  private reconcileNamespaces(): void {
    if (this.store.getMeta('dimension') === undefined && this.def.dimension === undefined && this.dimension !== undefined) {
      this.dimension = undefined;
      for (const ns of this.namespaces.values()) {
        ns.dense = undefined;
        ns.rebuilding = undefined;
      }
    }
    const known = new Map([...this.namespaces.values()].map((ns) => [ns.row.id, ns]));
    this.namespaces.clear();
    for (const row of this.store.namespaces()) {
      let ns = known.get(row.id);
      if (ns && ns.row.generation === row.generation) {
        ns.row.name = row.name;
        ns.row.next_pos = row.next_pos;
      } else {
        ns = new NamespaceState(row);
        this.loadHeads(ns);
        this.loadIndexes(ns);
        this.scheduleMetadataParse();
      }
      this.namespaces.set(row.name, ns);
    }
  }

  /** Checks dimensions/parts of records for this index type. @throws VectorError 400/422. */
  checkRecord(item: { vector?: ArrayLike<number>; sparse?: unknown }, where = ''): void {
    const t = this.def.type;
    if (t === 'DENSE' && !item.vector) throw vectorError('denseNeedsVector', where);
    if (t === 'DENSE' && item.sparse) throw vectorError('denseNoSparse', where);
    if (t === 'SPARSE' && !item.sparse) throw vectorError('sparseNeedsSparse', where);
    if (t === 'SPARSE' && item.vector) throw vectorError('sparseNoDense', where);
    if (t === 'HYBRID' && (!item.vector || !item.sparse)) throw vectorError('hybridNeedsBoth', where);
    this.checkDimension(item.vector);
  }

  /** 422 when `v` does not have the index dimension (once fixed). */
  checkDimension(v: ArrayLike<number> | undefined): void {
    if (v && this.dimension !== undefined && v.length !== this.dimension) throw vectorError('dimensionMismatch', v.length, this.dimension);
  }

  /** Fixes the dimension at the first dense write (persisted) and creates the graphs. */
  private fixDimension(d: number): void {
    if (this.dimension !== undefined) return;
    this.touchNamespaces();
    this.dimension = d;
    this.store.setDimension(d);
    for (const ns of this.namespaces.values()) ns.dense = this.newGraph();
  }

  /** Upserts records into namespace `name` (validated by the caller). */
  upsert(name: string, items: UpsertItem[]): Promise<string> {
    items.forEach((it, i) => this.checkRecord(it, items.length > 1 ? `[${i}]: ` : ''));
    const dims = new Set(items.filter((i) => i.vector).map((i) => i.vector!.length));
    if (dims.size > 1) throw vectorError('dimensionMismatch', [...dims][1], [...dims][0]);
    return this.write(() => {
      for (const it of items) this.checkDimension(it.vector);
      if (items[0].vector) this.fixDimension(items[0].vector.length);
      const ns = this.ensureNs(name);
      for (const it of items) this.putRecord(ns, it);
      this.store.setNextPos(ns.row.id, ns.row.next_pos);
      return 'Success';
    });
  }

  /** Writes one record (SQL + memory). Keeps the position of an existing id. */
  private putRecord(ns: NamespaceState, it: UpsertItem): void {
    this.touch(ns, it.id);
    const existing = ns.byId.get(it.id);
    const pos = existing ?? ns.row.next_pos++;
    let vec: Float32Array | undefined;
    if (it.vector) {
      if (this.scratch.length !== it.vector.length) this.scratch = new Float32Array(it.vector.length);
      vec = this.scratch;
      vec.set(it.vector);
    }
    this.store.upsert(ns.row.id, {
      id: it.id,
      pos,
      seq: ++this.seq,
      vector: vec ? f32ToBlob(vec) : null,
      sparse: it.sparse ? sparseToBlob(it.sparse) : null,
      metadata: it.metadata !== undefined ? JSON.stringify(it.metadata) : null,
      data: it.data ?? null,
    });
    ns.put(pos, it.id, it.metadata);
    if (vec) {
      ns.dense!.enqueue(pos, vec, this.seq);
      ns.rebuilding?.graph.enqueue(pos, vec, this.seq);
    } else {
      ns.dense?.remove(pos);
      ns.rebuilding?.graph.remove(pos);
    }
    if (it.sparse) ns.sparse!.add(pos, it.sparse);
    else ns.sparse?.remove(pos);
    ns.unsnapshotted++;
  }

  /** Deletes by ids, prefix or filter; resolves to the number deleted. */
  delete(name: string, by: { ids?: string[]; prefix?: string; filter?: string }): Promise<number> {
    const pre = this.ns(name);
    // Compile (and 400 on syntax errors) before queueing.
    if (by.filter !== undefined && pre) pre.match(by.filter);
    return this.write(() => {
      const ns = this.ns(name);
      if (!ns) return 0;
      let ids: string[];
      if (by.ids) ids = by.ids;
      else if (by.prefix !== undefined) ids = [...ns.byId.keys()].filter((id) => id.startsWith(by.prefix!));
      else ids = (ns.match(by.filter) ?? { labels: [] as number[] }).labels.map((l) => ns.ids[l]!);
      let n = 0;
      for (const id of ids) {
        this.touch(ns, id);
        if (ns.byId.has(id) && this.store.delete(ns.row.id, id)) {
          ns.drop(id);
          n++;
        }
      }
      return n;
    });
  }

  /**
   * Updates one record: new vector/sparse/data, metadata OVERWRITE (default) or PATCH (RFC 7396).
   * Resolves to 1, or 0 when the id does not exist.
   */
  update(name: string, u: { id: string; vector?: number[]; sparse?: UpsertItem['sparse']; data?: string; metadata?: Metadata; patch: boolean }): Promise<number> {
    if (this.def.type === 'DENSE' && u.sparse) throw vectorError('denseNoSparse', '');
    if (this.def.type === 'SPARSE' && u.vector) throw vectorError('sparseNoDense', '');
    this.checkDimension(u.vector);
    return this.write(() => {
      const ns = this.ns(name);
      const row = ns && ns.byId.has(u.id) ? this.store.get(ns.row.id, u.id) : undefined;
      if (!ns || !row) return 0;
      // its vector is kept: one not filled yet is read first (the request runs again, http/routes.ts)
      if (!u.vector && this.vectorPending(row.vector)) throw new VectorsMissing(ns.row.id, [row.pos]);
      let metadata = row.metadata ? (JSON.parse(row.metadata) as Metadata) : undefined;
      if (u.metadata !== undefined) metadata = u.patch ? (mergePatch(metadata ?? {}, u.metadata) as Metadata) : u.metadata;
      if (u.vector) this.fixDimension(u.vector.length);
      this.putRecord(ns, {
        id: u.id,
        vector: u.vector ?? (row.vector ? Array.from(blobToF32(row.vector)) : undefined),
        sparse: u.sparse ?? (row.sparse ? blobToSparse(row.sparse) : undefined),
        metadata,
        data: u.data ?? row.data ?? undefined,
      });
      return 1;
    });
  }

  /** Empties one namespace (or all with `all`); namespaces stay listed. */
  reset(name: string, all: boolean): Promise<string> {
    return this.write(() => {
      this.touchNamespaces();
      const targets = all ? [...this.namespaces.values()] : [this.ns(name)].filter((n): n is NamespaceState => !!n);
      for (const ns of targets) {
        this.store.resetNamespace(ns.row.id);
        ns.row.next_pos = 0;
        ns.row.generation++;
        ns.clear();
        if (this.hasSparse) ns.sparse = new SparseIndex();
        if (this.hasDense && this.dimension !== undefined) ns.dense = this.newGraph();
        ns.unsnapshotted = 0;
        dropSnapshot(this.snapshotDir, ns.row.id);
      }
      return 'Success';
    });
  }

  /** Deletes a namespace. @throws VectorError 404 when absent, 400 for the default namespace. */
  deleteNamespace(name: string): Promise<string> {
    return this.write(() => {
      this.touchNamespaces();
      if (name === '') throw vectorError('defaultNamespaceDelete');
      const ns = this.ns(name);
      if (!ns) throw vectorError('namespaceNotFound', name, this.def.name);
      this.store.dropNamespace(ns.row.id);
      this.namespaces.delete(name);
      dropSnapshot(this.snapshotDir, ns.row.id);
      return 'Success';
    });
  }

  /** Renames a namespace; `deleteExisting` replaces an existing target. */
  renameNamespace(from: string, to: string, deleteExisting: boolean): Promise<boolean> {
    return this.write(() => {
      this.touchNamespaces();
      if (from === '' || to === '') throw vectorError('defaultNamespaceRename');
      const ns = this.ns(from);
      if (!ns) throw vectorError('namespaceNotFound', from, this.def.name);
      if (from === to) return true;
      const target = this.ns(to);
      if (target) {
        if (!deleteExisting) throw vectorError('namespaceExists', to);
        this.store.dropNamespace(target.row.id);
        this.namespaces.delete(to);
        dropSnapshot(this.snapshotDir, target.row.id);
      }
      this.store.renameNamespace(ns.row.id, to);
      ns.row.name = to;
      this.namespaces.delete(from);
      this.namespaces.set(to, ns);
      return true;
    });
  }

  /**
   * Rebuilds graphs with many tombstones; snapshots graphs with at least `minWrites` record writes
   * since their last snapshot. Runs after each commit (default threshold), on a timer and on close.
   * Snapshots are written off the event loop (snapshot.ts `writeSnapshotAsync`; one per namespace
   * at a time, a namespace whose snapshot is still being written is skipped) unless `sync` (close);
   * the returned promise resolves when the snapshots started here, or still being written, are
   * done. Never rejects: failures are logged and the writes stay counted, so the next call retries.
   */
  maintain(minWrites = SNAPSHOT_EVERY, sync = false): Promise<void> {
    const running: Promise<void>[] = [];
    for (const ns of this.namespaces.values()) {
      const g = ns.dense;
      if (!g) continue;
      try {
        // (not while vectors are missing locally: a rebuild reads every vector from the local copy)
        if (!ns.rebuilding && !this.filling && g.tombstones >= REBUILD_MIN && g.tombstones > g.size * REBUILD_RATIO) {
          ns.rebuilding = { graph: this.newGraph(ns.count), todo: [...g.labels()], at: 0 };
          this.scheduleIndexing();
        }
        const inFlight = this.snapshots.get(ns);
        if (inFlight) running.push(inFlight);
        else if (ns.unsnapshotted >= Math.max(1, minWrites) && ns.count > 0) {
          if (sync) {
            const start = performance.now();
            writeSnapshot(this.snapshotDir, ns.row.id, ns.row.generation, g.coveredSeq(this.seq), g);
            this.snapshotTimer?.since(start);
            // points still queued for the graph are not covered: the closing snapshot must take them
            ns.unsnapshotted = g.pending;
          } else running.push(this.snapshotAsync(ns, g));
        }
      } catch (err) {
        this.logger.error({ err, index: this.def.name, namespace: ns.name }, 'vector maintenance failed');
      }
    }
    return Promise.all(running).then(() => undefined);
  }

  /** Writes a snapshot of `g`, the graph of `ns`, off the event loop (see {@link maintain}). */
  private snapshotAsync(ns: NamespaceState, g: NamespaceDense): Promise<void> {
    const start = performance.now();
    const generation = ns.row.generation;
    // points still queued for the graph are not covered: the next snapshot must take them
    const counted = ns.unsnapshotted - g.pending;
    ns.unsnapshotted -= counted;
    const current = () => this.namespaces.get(ns.name) === ns && ns.row.generation === generation;
    const done = writeSnapshotAsync(this.snapshotDir, ns.row.id, generation, g.coveredSeq(this.seq), g, current)
      .then(
        () => this.snapshotTimer?.since(start),
        (err: unknown) => {
          ns.unsnapshotted += counted;
          this.logger.error({ err, index: this.def.name, namespace: ns.name }, 'vector maintenance failed');
        },
      )
      .finally(() => {
        this.snapshots.delete(ns);
        this.scheduleIndexing();
      });
    this.snapshots.set(ns, done);
    return done;
  }

  /** Readiness: loaded (the constructor loaded every namespace), not closed, and SQLite answers. */
  ready(): boolean {
    return !this.closed && this.store.ping();
  }

  /**
   * Flushes pending writes, waits for snapshots being written, inserts queued points, snapshots
   * dirty graphs and closes SQLite. Idempotent (a second call returns the first one's promise).
   */
  close(): Promise<void> {
    return (this.closing ??= this.closeNow());
  }

  private async closeNow(): Promise<void> {
    for (const enter of this.blocked.splice(0)) enter();
    if (this.queue.length) await new Promise<void>((r) => setImmediate(r));
    if (this.shared) await this.exclusive(() => this.flushShared());
    else this.flush();
    this.closed = true;
    await this.tail;
    await Promise.all(this.snapshots.values());
    await Promise.all([...this.namespaces.values()].map((ns) => ns.dense?.idle()));
    // Insert what is queued (at most PENDING_LIMIT elements plus the last batch), so the closing
    // snapshot covers every write and the next start replays nothing.
    for (const ns of this.namespaces.values()) ns.dense?.indexPending();
    await this.maintain(1, true);
    await Promise.all(this.syncing);
    await this.downloadSynced;
    // a running fill is not waited for (its statement may wait for the fill lock): it touches the
    // local copy only under `exclusive` after checking `closed`, and stops at its next step
    await this.store.wal.close();
    await this.store.checkpointer.close();
    this.store.close();
  }
}

/** RFC 7396 JSON Merge Patch: `null` removes a key, objects merge recursively, others replace. */
export function mergePatch(target: unknown, patch: unknown): unknown {
  if (!patch || typeof patch !== 'object' || Array.isArray(patch)) return patch;
  const out: Record<string, unknown> =
    target && typeof target === 'object' && !Array.isArray(target) ? { ...(target as Record<string, unknown>) } : {};
  for (const [k, v] of Object.entries(patch)) {
    if (v === null) delete out[k];
    else out[k] = mergePatch(out[k], v);
  }
  return out;
}

/** What one write (or a batch of them) changed in memory: records by namespace, and whether namespaces. */
interface WriteJournal {
  records: Map<NamespaceState, Set<string>>;
  namespaces: boolean;
}

const newJournal = (): WriteJournal => ({ records: new Map(), namespaces: false });

/** Adds `from` to `into`. */
function mergeJournal(into: WriteJournal, from: WriteJournal): void {
  into.namespaces ||= from.namespaces;
  for (const [ns, ids] of from.records) {
    const set = into.records.get(ns);
    if (set) for (const id of ids) set.add(id);
    else into.records.set(ns, new Set(ids));
  }
}

/** Whether two snapshot expectations are the same (every field; `params` by M and efConstruction). */
function sameExpectation(a: SnapshotExpectation, b: SnapshotExpectation): boolean {
  return (
    a.dimension === b.dimension && a.metric === b.metric && a.generation === b.generation && (a.quantization ?? 'none') === (b.quantization ?? 'none') &&
    a.params.m === b.params.m && a.params.efConstruction === b.params.efConstruction
  );
}
