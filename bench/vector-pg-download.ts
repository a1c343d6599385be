/**
 * `node --import tsx bench/vector-pg-download.ts`: the download of a publication (`publication.ts`
 * `download`) in isolation, against the way it was read before (bytea as base64 text, one file per
 * connection, 2 connections), interleaved A/B on one throw-away PostgreSQL cluster (fsync on):
 * wall-clock ms, CPU ms of this process and of the cluster's processes (`/proc/<pid>/stat`, which
 * the load of other jobs moves least; backends that exit meanwhile are not counted). Ways
 * (`BENCH_DL_WAYS`, `|`-separated): `base64, 2 streams, fsync` (the former download), `binary COPY,
 * <n> streams, no fsync` and `... then fsync` (`publication.ts` `download`, then an fsync of each file). `BENCH_DL_MIB` (128) MiB of random bytes in two files
 * (about the sizes of 100k × 128: half graph, half SQLite copy), `BENCH_DL_ROUNDS` (3).
 */
import { createHash } from 'node:crypto';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import pgLib from 'pg';
import { download, publish, type PublicationTarget } from '../src/vector/engine/publication.js';
import { startTestPostgres } from '../test/helpers/postgres.js';
import { tempDir } from '../test/helpers/env.js';

const MIB = Number(process.env.BENCH_DL_MIB ?? 128);
const ROUNDS = Number(process.env.BENCH_DL_ROUNDS ?? 3);
const TICK = 100; // clock ticks per second (/proc/<pid>/stat; USER_HZ on Linux)

/** CPU ms (user + system) of process `postmaster` and its children (the cluster's backends; those that exited are not counted, the pool keeps its connections). */
function cpuOf(postmaster: number): number {
  let ticks = 0;
  for (const pid of fs.readdirSync('/proc').filter((p) => /^\d+$/.test(p))) {
    try {
      const f = fs.readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
      if (Number(pid) !== postmaster && Number(f[1]) !== postmaster) continue;
      ticks += Number(f[11]) + Number(f[12]);
    } catch {
      // gone meanwhile
    }
  }
  return (ticks * 1000) / TICK;
}

/** The former download: base64 text, the next chunk asked for while one is written, a file per connection, fsync. */
async function downloadBase64(pool: pgLib.Pool, dir: string): Promise<number> {
  const c = await pool.connect();
  const c2 = await pool.connect();
  try {
    await c.query('BEGIN ISOLATION LEVEL REPEATABLE READ');
    const p = (await c.query<{ id: string; files: { name: string; chunks: number; bytes: number; sha256: string }[]; snapshot: string }>("SELECT id, files, pg_export_snapshot() AS snapshot FROM vector_publications WHERE index_name = 'default'")).rows[0];
    await c2.query(`BEGIN ISOLATION LEVEL REPEATABLE READ; SET TRANSACTION SNAPSHOT '${p.snapshot}'`);
    const queue = [...p.files];
    let total = 0;
    await Promise.all(
      [c, c2].map(async (q) => {
        for (let f = queue.shift(); f; f = queue.shift()) {
          const tmp = path.join(dir, `${f.name.replace('/', '_')}.download`);
          const fd = await fs.promises.open(tmp, 'w');
          const hash = createHash('sha256');
          let bytes = 0;
          const fetch = (no: number) => q.query<{ data: string }>(`SELECT encode(data, 'base64') AS data FROM vector_publication_chunks WHERE publication = $1 AND file = $2 AND no = $3`, [p.id, f.name, no]);
          let next = f.chunks > 0 ? fetch(0) : undefined;
          for (let no = 0; no < f.chunks; no++) {
            const r = await next!;
            next = no + 1 < f.chunks ? fetch(no + 1) : undefined;
            const data = Buffer.from(r.rows[0].data, 'base64');
            hash.update(data);
            await fd.write(data, 0, data.length, bytes);
            bytes += data.length;
          }
          await fd.sync();
          await fd.close();
          if (hash.digest('hex') !== f.sha256) throw new Error('checksum');
          total += bytes;
        }
      }),
    );
    return total;
  } finally {
    await c.query('ROLLBACK');
    await c2.query('ROLLBACK');
    c.release();
    c2.release();
  }
}

const pg = await startTestPostgres({ own: true });
const dirs = tempDir('svc-bench-dl-');
const pool = new pgLib.Pool({ connectionString: await pg.newDatabase(), max: 8 });
try {
  const migrations = path.join(import.meta.dirname, '../src/vector/engine/pg-migrations');
  for (const f of fs.readdirSync(migrations).sort()) await pool.query(fs.readFileSync(path.join(migrations, f), 'utf8'));
  await pool.query(`INSERT INTO vector_indexes (name, definition, dimension, incarnation, created_at) VALUES ('default', '{}', 128, 'inc', 0)`);
  const src = path.join(dirs.dir, 'src');
  fs.mkdirSync(src);
  const half = (MIB << 20) / 2;
  fs.writeFileSync(path.join(src, 'graph'), randomBytes(half + 12345));
  fs.writeFileSync(path.join(src, 'cache.sqlite'), randomBytes(half - 12345));
  const t: PublicationTarget = { pool, name: 'default', closing: () => false, incarnation: async () => 'inc', contact: () => undefined };
  await publish(t, 1, 0, async () => ({ seq: 1, files: [{ name: 'snapshots/graph', path: path.join(src, 'graph') }, { name: 'cache.sqlite', path: path.join(src, 'cache.sqlite') }] }));
  await pool.query('CHECKPOINT');
  // the chunks are stored out of line without compression (EXTERNAL): nothing to decompress on read
  const storage = (await pool.query<{ storage: string; compressed: number; chunks: number }>(
    "SELECT (SELECT attstorage FROM pg_attribute WHERE attrelid = 'vector_publication_chunks'::regclass AND attname = 'data') AS storage, count(pg_column_compression(data))::int AS compressed, count(*)::int AS chunks FROM vector_publication_chunks",
  )).rows[0];
  console.log(`chunk storage ${storage.storage}; ${storage.compressed} of ${storage.chunks} chunks compressed`);
  console.log(`${MIB} MiB in 2 files; ${execFileSync('uptime').toString().trim()}`);
  console.log('| round | way | wall ms | this process CPU ms (user) | PostgreSQL CPU ms | MiB/s |');
  console.log('| --- | --- | --- | --- | --- | --- |');
  const backend = (await pool.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0].pid;
  const marker = Number(fs.readFileSync(`/proc/${backend}/stat`, 'utf8').split(') ')[1].split(' ')[1]);
  for (let r = 0; r < ROUNDS; r++) {
    for (const way of (process.env.BENCH_DL_WAYS ?? 'base64, 2 streams, fsync|binary COPY, 4 streams, no fsync|binary COPY, 4 streams, then fsync').split('|')) {
      const dir = path.join(dirs.dir, `d${r}${way.length}`);
      fs.mkdirSync(dir, { recursive: true });
      const c0 = process.cpuUsage();
      const p0 = cpuOf(marker);
      const w0 = performance.now();
      if (way.startsWith('base64')) await downloadBase64(pool, dir);
      else {
        const got = await download(t, dir, undefined, Number(/(\d+) streams/.exec(way)?.[1] ?? 4));
        if (!got || 'rejected' in got) throw new Error(JSON.stringify(got));
        if (way.endsWith('then fsync')) for (const f of got.files) { const fd = await fs.promises.open(path.join(dir, f), 'r+'); await fd.sync(); await fd.close(); }
      }
      const wall = performance.now() - w0;
      const c = process.cpuUsage(c0);
      const pcpu = cpuOf(marker) - p0;
      console.log(`| ${r} | ${way} | ${wall.toFixed(0)} | ${((c.user + c.system) / 1000).toFixed(0)} (user ${(c.user / 1000).toFixed(0)}) | ${pcpu.toFixed(0)} | ${(MIB / (wall / 1000)).toFixed(0)} |`);
      fs.rmSync(dir, { recursive: true, force: true });
    }
  }
  console.log(execFileSync('uptime').toString().trim());
} finally {
  await pool.end();
  await pg.stop();
  dirs.cleanup();
}
