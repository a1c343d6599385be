/**
 * Publications of a node's local cache of an index in PostgreSQL (`vector_publications`,
 * `vector_publication_chunks`, migration `0003_publications.sql`): {@link publish} uploads a
 * consistent copy of the SQLite cache file and the graph snapshots in chunks, {@link download}
 * fetches the current one for a node joining with an empty data dir, which then loads the graphs
 * instead of rebuilding them (`vector-index.ts` `open`), each as soon as its file is downloaded. Used through `store-pg.ts` `PgIndexLog`.
 *
 * The download reads the chunks as raw bytes: `COPY (SELECT no, data ...) TO STDOUT (FORMAT
 * binary)` through {@link copyChunks} (node-postgres parses every field of a result row as UTF-8
 * text, so bytea could only come as hex or base64 text, which the server encodes and this process
 * decodes: 2-3 passes over every byte and 1.33-2× the bytes on the wire). Ranges of
 * {@link DOWNLOAD_RANGE} chunks are fetched on {@link DOWNLOAD_STREAMS} connections at once, all
 * in one exported snapshot (`pg_export_snapshot`), each chunk written at its offset; the SHA-256
 * of each file is computed on the fly, in chunk order. Nothing is fsynced here: the caller makes
 * the files durable after the index is ready (`vector-index.ts`).
 */
import type pg from 'pg';
import { createHash, randomUUID, type Hash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { VECTORLESS_FILE } from './vectorless.js';
import { copyRows } from './pg-copy.js';
import { withConnection } from '../../pg.js';

/** Class (first key) of the per-index publication locks (session locks); the second key is `hashtext(index name)`. */
export const PUBLISH_LOCK_CLASS = 73_164_522;
/** Bytes per row of `vector_publication_chunks` (the last chunk of a file may be shorter). */
export const PUBLISH_CHUNK = 4 << 20;
/** Connections a download reads chunks on at once (all in one snapshot). */
export const DOWNLOAD_STREAMS = 4;
/** Chunks per `COPY` statement of a download (a connection asks for the next range when one ends). */
export const DOWNLOAD_RANGE = 4;
/** Longest wait for one range of a download, ms (16 MiB; the pool's statement limit is for small statements). */
const RANGE_TIMEOUT_MS = 120_000;
/** The database's clock in ms since the epoch (publication ages: never two nodes' clocks compared). */
const NOW_MS = '(extract(epoch FROM clock_timestamp()) * 1000)::bigint';

/** A file of a publication as its row lists it (`vector_publications.files`). */
export interface PublishedFile {
  name: string;
  bytes: number;
  chunks: number;
  sha256: string;
  /** Bytes of every chunk but the last; absent in publications written before it was stored ({@link PUBLISH_CHUNK}). */
  chunkBytes?: number;
}

/**
 * What the graph snapshots of a publication must match (`snapshot.ts` `SnapshotExpectation`, less
 * what the index definition says), as its SQLite copy holds it (`store.ts` `storedState`):
 * `vector_publications.expectations`, migration `0004_publication_expectations.sql`.
 */
export interface PublishedExpectations {
  /** `meta.dimension` of the copy (null: none yet). */
  dimension: number | null;
  /** Id and generation of every namespace of the copy. */
  namespaces: { id: number; generation: number }[];
}

/** The index a publication belongs to, as {@link publish} and {@link download} need it. */
export interface PublicationTarget {
  pool: pg.Pool;
  /** Index name. */
  name: string;
  /** True once the node is stopping: an upload stops. */
  closing(): boolean;
  /** The index's current incarnation (`vector_indexes.incarnation`). */
  incarnation(): Promise<string>;
  /** Notes that a statement reached the database (readiness). */
  contact(): void;
}

/**
 * Order in which downloaded files are put in place: graph files, then snapshot headers (which name
 * them, `snapshot.ts`), then the SQLite copy (`cache.sqlite`, or {@link VECTORLESS_FILE} without
 * the vectors the graphs carry; its presence means the download is complete).
 */
function rank(name: string): number {
  if (name === 'cache.sqlite' || name === VECTORLESS_FILE) return 2;
  return name.endsWith('.json') ? 1 : 0;
}

/**
 * Publishes a copy of the local cache of `t` for joining nodes ({@link download}). Only one node
 * publishes an index at a time: under the session advisory lock ({@link PUBLISH_LOCK_CLASS},
 * `hashtext(name)`, tried, never waited for) `stage` is asked for the files (a consistent copy:
 * `seq` = the sequence number the SQLite copy contains, `expectations` what its graph snapshots
 * match; undefined = nothing to publish) unless the
 * current publication already has `seq` >= `since` or is younger than `minAgeMs` (by the
 * database's clock; so several nodes publish an index at most once per interval together);
 * chunks of uploads that stopped half-way are deleted; the files are uploaded in chunks of
 * {@link PUBLISH_CHUNK} under a new publication id; then one transaction makes it current and
 * deletes the previous one's chunks. A publisher killed mid-upload leaves chunks no row names
 * (never loaded). Resolves to what was published (undefined: another node holds the lock, or it
 * was up to date). @throws the database or file error (nothing of this upload becomes current).
 */
export async function publish(
  t: PublicationTarget,
  since: number,
  minAgeMs: number,
  stage: () => Promise<{ seq: number; files: { name: string; path: string }[]; expectations?: PublishedExpectations } | undefined>,
): Promise<{ seq: number; bytes: number } | undefined> {
  return withConnection(t.pool, async (c, failed) => {
    if (!(await c.query<{ ok: boolean }>('SELECT pg_try_advisory_lock($1, hashtext($2)) AS ok', [PUBLISH_LOCK_CLASS, t.name])).rows[0].ok) return undefined;
    try {
      const current = (
        await c.query<{ seq: string; age: string }>(
          `SELECT p.seq, ${NOW_MS} - p.published_at AS age FROM vector_publications p JOIN vector_indexes i ON i.name = p.index_name AND i.incarnation = p.incarnation WHERE p.index_name = $1`,
          [t.name],
        )
      ).rows[0];
      if (current && (Number(current.seq) >= since || Number(current.age) < minAgeMs)) return undefined;
      const staged = await stage();
      if (!staged) return undefined;
      const incarnation = await t.incarnation();
      await c.query('DELETE FROM vector_publication_chunks WHERE index_name = $1 AND publication NOT IN (SELECT id FROM vector_publications WHERE index_name = $1)', [t.name]);
      const id = randomUUID();
      const files: PublishedFile[] = [];
      let total = 0;
      for (const f of staged.files) {
        const hash = createHash('sha256');
        const fd = await fs.promises.open(f.path, 'r');
        let bytes = 0;
        let no = 0;
        try {
          const buf = Buffer.allocUnsafe(PUBLISH_CHUNK);
          for (;;) {
            let n = 0;
            while (n < PUBLISH_CHUNK) {
              const { bytesRead } = await fd.read(buf, n, PUBLISH_CHUNK - n, bytes + n);
              if (bytesRead === 0) break;
              n += bytesRead;
            }
            if (n === 0 && no > 0) break;
            if (t.closing()) throw new Error('svc is stopping: publication abandoned');
            const chunk = buf.subarray(0, n);
            hash.update(chunk);
            await c.query('INSERT INTO vector_publication_chunks (index_name, publication, file, no, data) VALUES ($1, $2, $3, $4, $5)', [t.name, id, f.name, no, chunk]);
            bytes += n;
            no++;
            if (n < PUBLISH_CHUNK) break;
          }
        } finally {
          await fd.close();
        }
        files.push({ name: f.name, bytes, chunks: no, sha256: hash.digest('hex'), chunkBytes: PUBLISH_CHUNK });
        total += bytes;
      }
      await c.query('BEGIN');
      try {
        await c.query(
          `INSERT INTO vector_publications (index_name, id, incarnation, seq, files, bytes, published_at, expectations) VALUES ($1, $2, $3, $4, $5, $6, ${NOW_MS}, $7)
           ON CONFLICT (index_name) DO UPDATE SET id = EXCLUDED.id, incarnation = EXCLUDED.incarnation, seq = EXCLUDED.seq, files = EXCLUDED.files,
             bytes = EXCLUDED.bytes, published_at = EXCLUDED.published_at, expectations = EXCLUDED.expectations`,
          [t.name, id, incarnation, staged.seq, JSON.stringify(files), total, staged.expectations ? JSON.stringify(staged.expectations) : null],
        );
        await c.query('DELETE FROM vector_publication_chunks WHERE index_name = $1 AND publication <> $2', [t.name, id]);
        await c.query('COMMIT');
      } catch (err) {
        await c.query('ROLLBACK').catch(() => undefined);
        throw err;
      }
      t.contact();
      return { seq: staged.seq, bytes: total };
    } finally {
      if (!failed()) await c.query('SELECT pg_advisory_unlock($1, hashtext($2))', [PUBLISH_LOCK_CLASS, t.name]);
    }
  });
}

/**
 * Runs `text`, a binary `COPY (SELECT no, data ...) TO STDOUT` of an int4 and a non-null bytea
 * column (`pg-copy.ts` {@link copyRows}), on `c`: `onRow` for every row, the bytea as a Buffer
 * that stays valid. @throws the database error, or an Error for another row layout.
 */
function copyChunks(c: pg.PoolClient, text: string, onRow: (no: number, data: Buffer) => void): Promise<void> {
  return copyRows(c, text, RANGE_TIMEOUT_MS, (f) => {
    if (f.length !== 2) throw new Error(`COPY: ${f.length} fields, 2 expected`);
    const [no, data] = f;
    if (no?.length !== 4 || !data) throw new Error('COPY: unexpected row layout');
    onRow(no.readInt32BE(0), data);
  });
}

/** A file being downloaded: its chunks hashed in order as they arrive, written at their offsets. */
class FileDownload {
  readonly hash: Hash = createHash('sha256');
  /** Next chunk to hash; chunks that arrived before it wait in `pending`. */
  next = 0;
  readonly pending = new Map<number, Buffer>();
  bytes = 0;
  readonly chunkBytes: number;
  /** Writes of this file's chunks not finished yet. */
  readonly writes = new Set<Promise<void>>();
  /** Set once every chunk arrived: the file checked and put in place ({@link download}). */
  done: Promise<void> | undefined;
  constructor(
    readonly f: PublishedFile,
    readonly tmp: string,
    readonly fd: fs.promises.FileHandle,
  ) {
    this.chunkBytes = f.chunkBytes ?? PUBLISH_CHUNK;
  }

  /** Bytes chunk `no` must have. */
  sizeOf(no: number): number {
    return no < this.f.chunks - 1 ? this.chunkBytes : this.f.bytes - (this.f.chunks - 1) * this.chunkBytes;
  }

  /** Hashes chunk `no` and the waiting ones after it. */
  arrived(no: number, data: Buffer): void {
    this.pending.set(no, data);
    for (let d = this.pending.get(this.next); d; d = this.pending.get(this.next)) {
      this.hash.update(d);
      this.bytes += d.length;
      this.pending.delete(this.next++);
    }
  }

  /** Whether every chunk was hashed. */
  get complete(): boolean {
    return this.next === this.f.chunks;
  }
}

/**
 * Downloads the current publication of `t` ({@link publish}) into `dir`: each file of it is
 * written to `dir/<name>.download`, its chunks' sizes, chunk count and SHA-256 checked against the
 * publication row, then renamed to `dir/<name>` as soon as it is complete, and `onFile(name,
 * sha256, expectations)` called (the SHA-256 it was verified to have; the row's
 * `expectations`, null in publications written before they were stored) while the other files
 * still download: a joiner loads the graph files meanwhile (`vector-index.ts` `fetchPublished`).
 * An exception thrown by `onFile` rejects the download. The row and the chunks are read in one
 * REPEATABLE READ snapshot: the first connection exports it (`pg_export_snapshot`) and
 * {@link DOWNLOAD_STREAMS} - 1 more join it, so a publication replaced meanwhile is still read
 * whole (`streams` connections in all); each reads ranges of {@link DOWNLOAD_RANGE} chunks with a binary COPY ({@link copyChunks}).
 * The files are not fsynced (the caller does it off the critical path). Resolves to undefined,
 * with nothing written, when there is no publication; to `{ rejected }` (nothing left) when it
 * belongs to another incarnation of the index (deleted and created again), or it is incomplete or
 * damaged (missing chunk, wrong size or checksum).
 * @throws the database or file error (the `.download` files removed).
 */
export async function download(
  t: PublicationTarget,
  dir: string,
  onFile: (name: string, sha256: string, expectations: PublishedExpectations | null) => void = () => undefined,
  streams = DOWNLOAD_STREAMS,
): Promise<{ seq: number; bytes: number; files: string[]; expectations: PublishedExpectations | null } | { rejected: string } | undefined> {
  const conns: { c: pg.PoolClient; broken?: Error; lost: (err: Error) => void }[] = [];
  const connect = async () => {
    const c = await t.pool.connect();
    const entry: (typeof conns)[number] = { c, lost: (err) => (entry.broken ??= err) };
    c.on('error', entry.lost);
    conns.push(entry);
    return entry;
  };
  const states: FileDownload[] = [];
  let ok = false;
  try {
    const first = await connect();
    await first.c.query('BEGIN ISOLATION LEVEL REPEATABLE READ');
    const p = (
      await first.c.query<{ id: string; incarnation: string; current: string; seq: string; files: PublishedFile[]; expectations: PublishedExpectations | null; snapshot: string }>(
        'SELECT p.id, p.incarnation, i.incarnation AS current, p.seq, p.files, p.expectations, pg_export_snapshot() AS snapshot FROM vector_publications p JOIN vector_indexes i ON i.name = p.index_name WHERE p.index_name = $1',
        [t.name],
      )
    ).rows[0];
    if (!p) return undefined;
    if (p.incarnation !== p.current) return { rejected: `published for incarnation ${p.incarnation}, the index is ${p.current}` };
    // names svc writes: never a path out of `dir` (no `..`, no leading dot)
    // (`cache.vectorless.sqlite`: the copy without the vectors the graphs carry, `vectorless.ts`)
    const bad = p.files.find((f) => !/^(cache\.sqlite|cache\.vectorless\.sqlite|snapshots\/[A-Za-z0-9_-][A-Za-z0-9._-]*)$/.test(f.name));
    if (bad) return { rejected: `unexpected file name ${bad.name}` };
    const order = [...p.files].sort((a, b) => rank(a.name) - rank(b.name));
    for (const f of order) {
      const tmp = `${path.join(dir, f.name)}.download`;
      fs.mkdirSync(path.dirname(tmp), { recursive: true });
      states.push(new FileDownload(f, tmp, await fs.promises.open(tmp, 'w')));
    }
    // the work: ranges of chunks of every file, in file and chunk order (so few wait to be hashed)
    const ranges: { s: FileDownload; from: number; to: number }[] = [];
    for (const s of states) for (let a = 0; a < s.f.chunks; a += DOWNLOAD_RANGE) ranges.push({ s, from: a, to: Math.min(a + DOWNLOAD_RANGE, s.f.chunks) });
    const snapshot = first.c.escapeLiteral(p.snapshot);
    for (let i = 1; i < Math.min(streams, ranges.length); i++) {
      const e = await connect();
      await e.c.query(`BEGIN ISOLATION LEVEL REPEATABLE READ; SET TRANSACTION SNAPSHOT ${snapshot}`);
    }
    let rejected: string | undefined;
    let writeError: Error | undefined;
    const id = first.c.escapeLiteral(p.id);
    /** Checks the complete file of `s` (its writes ended), puts it in place and tells `onFile`. */
    const finish = async (s: FileDownload) => {
      await Promise.all(s.writes);
      if (writeError || rejected !== undefined) return;
      const sum = s.hash.digest('hex');
      if (s.bytes !== s.f.bytes || sum !== s.f.sha256) return void (rejected ??= `${s.f.name}: size or checksum differs from the publication's`);
      await s.fd.close();
      await fs.promises.rename(s.tmp, path.join(dir, s.f.name));
      onFile(s.f.name, sum, p.expectations);
    };
    await Promise.all(
      conns.map(async ({ c }) => {
        for (let r = ranges.shift(); r && rejected === undefined && writeError === undefined; r = ranges.shift()) {
          const { s, from, to } = r;
          let expect = from;
          await copyChunks(
            c,
            `COPY (SELECT no, data FROM vector_publication_chunks WHERE publication = ${id} AND file = ${c.escapeLiteral(s.f.name)} AND no >= ${from} AND no < ${to} ORDER BY no) TO STDOUT (FORMAT binary)`,
            (no, data) => {
              if (rejected !== undefined) return;
              if (no !== expect) return void (rejected = `${s.f.name}: chunk ${expect} of ${s.f.chunks} is missing`);
              expect++;
              if (data.length !== s.sizeOf(no)) return void (rejected = `${s.f.name}: size or checksum differs from the publication's`);
              s.arrived(no, data);
              const w = s.fd.write(data, 0, data.length, no * s.chunkBytes).then(
                () => void s.writes.delete(w),
                (err: Error) => void (writeError ??= err),
              );
              s.writes.add(w);
              if (s.complete && !s.done) {
                s.done = finish(s);
                s.done.catch(() => undefined); // awaited once every range is read
              }
            },
          );
          if (expect < to) rejected ??= `${s.f.name}: chunk ${expect} of ${s.f.chunks} is missing`;
        }
      }),
    );
    for (const s of states) await Promise.all(s.writes);
    for (const s of states) await s.done;
    if (writeError) throw writeError;
    if (rejected !== undefined) return { rejected };
    const short = states.find((s) => !s.complete || !s.done);
    if (short) return { rejected: `${short.f.name}: size or checksum differs from the publication's` };
    ok = true;
    t.contact();
    return { seq: Number(p.seq), bytes: order.reduce((n, f) => n + f.bytes, 0), files: order.map((f) => f.name), expectations: p.expectations };
  } catch (err) {
    // a statement that failed or timed out may leave its connection mid-COPY: none is reused
    for (const e of conns) e.broken ??= err as Error;
    throw err;
  } finally {
    for (const e of conns) {
      if (!e.broken) await e.c.query('ROLLBACK').catch((err: Error) => (e.broken ??= err));
      e.c.off('error', e.lost);
      e.c.release(e.broken);
    }
    for (const s of states) {
      await s.done?.catch(() => undefined);
      await s.fd.close().catch(() => undefined);
      if (!ok) for (const f of [s.tmp, path.join(dir, s.f.name)]) fs.rmSync(f, { force: true });
    }
  }
}
