/**
 * The SQLite copy a node publishes for joining nodes (`vector-index.ts` `publish`) without the
 * dense vectors its graph snapshots already carry: every record of a namespace whose graph
 * snapshot is published, written at or before the sequence number that snapshot covers, has its
 * `vector` left NULL (a 128-d record is ~0.55 KB with its vector, tens of bytes without), and the
 * copy's meta gets {@link FILL_MARK}. The joiner loads the graphs, serves, and fills the vectors
 * from PostgreSQL in the background (`vector-index.ts` `fill`): the graph cannot give them back,
 * it holds COSINE vectors normalized. Records written after the snapshot keep their vectors (the
 * joiner replays them into the graph from the copy).
 *
 * The copy is published under the file name {@link VECTORLESS_FILE}, not `cache.sqlite`: a node
 * of an earlier release refuses a publication naming a file it does not know (its download checks
 * every name) and reloads the records from PostgreSQL, so it never serves a copy without vectors.
 *
 * Made on a worker thread with a connection of its own (`ATTACH` of the live file, one read
 * transaction, so the copy is the database as committed when it began; in WAL mode the store's
 * writers go on meanwhile): tables created from the live file's schema, rows copied by
 * `INSERT ... SELECT` in primary-key order, indexes created after the rows. Nothing runs on the
 * event loop.
 */
import { createRequire } from 'node:module';
import { Worker } from 'node:worker_threads';
import { FILL_MARK } from './store.js';

const requireCjs = createRequire(import.meta.url);

/** Name of the SQLite copy without (some) dense vectors in a publication. */
export const VECTORLESS_FILE = 'cache.vectorless.sqlite';

/** The copy worker (CommonJS, evaluated). */
const COPY_WORKER = `
const { parentPort, workerData } = require('node:worker_threads');
const Database = require(workerData.driver);
try {
  const db = new Database(workerData.dest);
  let nulled = 0;
  try {
    db.pragma('journal_mode = OFF');
    db.pragma('synchronous = OFF');
    db.prepare('ATTACH DATABASE ? AS src').run(workerData.file);
    db.exec('CREATE TEMP TABLE covered (ns INTEGER PRIMARY KEY, seq INTEGER NOT NULL)');
    const cov = db.prepare('INSERT INTO temp.covered (ns, seq) VALUES (?, ?)');
    for (const c of workerData.covered) cov.run(c.ns, c.seq);
    db.exec('BEGIN');
    const objects = db.prepare("SELECT type, name, sql FROM src.sqlite_master WHERE sql IS NOT NULL AND name NOT LIKE 'sqlite_%'").all();
    for (const o of objects) if (o.type === 'table') db.exec(o.sql);
    for (const o of objects) {
      if (o.type !== 'table') continue;
      const t = '"' + o.name.replace(/"/g, '""') + '"';
      if (o.name === 'records') {
        nulled = db.prepare('SELECT count(*) FROM src.records r JOIN temp.covered c ON c.ns = r.ns WHERE r.seq <= c.seq AND r.vector IS NOT NULL').pluck().get();
        db.exec('INSERT INTO main.records (ns, id, pos, seq, vector, sparse, metadata, data) SELECT r.ns, r.id, r.pos, r.seq, CASE WHEN r.seq <= c.seq THEN NULL ELSE r.vector END, r.sparse, r.metadata, r.data FROM src.records r LEFT JOIN temp.covered c ON c.ns = r.ns');
      } else db.exec('INSERT INTO main.' + t + ' SELECT * FROM src.' + t);
    }
    for (const o of objects) if (o.type !== 'table') db.exec(o.sql);
    if (nulled > 0) db.prepare("INSERT INTO main.meta (key, value) VALUES (?, '1') ON CONFLICT(key) DO UPDATE SET value = excluded.value").run(workerData.mark);
    const version = db.pragma('src.user_version', { simple: true });
    db.exec('COMMIT');
    db.exec('DETACH DATABASE src');
    db.pragma('user_version = ' + Number(version));
  } finally {
    db.close();
  }
  parentPort.postMessage({ ok: true, nulled });
} catch (err) {
  parentPort.postMessage({ ok: false, message: String(err && err.message) });
}
`;

/**
 * Copies the index file `file` (open in this process) to the new file `dest`, leaving NULL the
 * dense vector of every record of a namespace listed in `covered` whose sequence number is at
 * most that namespace's `seq` (what its published graph snapshot covers); sets {@link FILL_MARK}
 * in the copy when any was left out. Resolves to the number of vectors left out.
 * @throws Error with SQLite's message when the copy fails (a partial `dest` is left for the caller)
 */
export function copyWithoutVectors(file: string, dest: string, covered: { ns: number; seq: number }[]): Promise<{ nulled: number }> {
  return new Promise((resolve, reject) => {
    const w = new Worker(COPY_WORKER, { eval: true, workerData: { file, dest, covered, mark: FILL_MARK, driver: requireCjs.resolve('better-sqlite3') } });
    let settled = false;
    w.once('message', (m: { ok: boolean; nulled: number; message?: string }) => {
      settled = true;
      if (m.ok) resolve({ nulled: m.nulled });
      else reject(new Error(`SQLite copy of ${file} without vectors: ${m.message}`));
    });
    w.once('error', (err) => {
      if (!settled) reject(err);
      settled = true;
    });
    w.once('exit', (code) => {
      if (!settled) reject(new Error(`SQLite copy of ${file} without vectors: worker exited with code ${code}`));
      settled = true;
    });
  });
}
