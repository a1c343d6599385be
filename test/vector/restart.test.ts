/**
 * Durability: a real `node bin/svc.js serve` child with
 * SVC_AREAS=vector. Phase 1 writes and stops gracefully (graph snapshot written); phase 2 writes
 * more (upserts, deletes, updates, concurrent batches = group commit) and is killed with SIGKILL
 * while writes are in flight; phase 3 restarts on the same data dir: every acknowledged write is
 * there, the snapshot was loaded and newer records replayed, queries find replayed vectors.
 * A damaged snapshot (graph file or header changed on disk) is not loaded: start-up says so in the
 * log and rebuilds the graph from the store. A snapshot of the previous format (version 3: the
 * graph plus a file of 8-bit codes) loads as it is.
 */
import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { after, test } from 'node:test';
import { Index } from '@upstash/vector';
import { tempDir } from '../helpers/env.js';
import { randomVectors, serveVectorChild } from './helpers.js';

const D = 16;
const children: ChildProcess[] = [];
const data = tempDir('svc-vector-restart-');
after(() => {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  data.cleanup();
});

/** svc on `dir` (a child process, {@link serveVectorChild}); `log()` is its stderr (level warn and up). */
async function serve(dir = data.dir): Promise<{ child: ChildProcess; url: string; log(): string }> {
  const s = await serveVectorChild(dir);
  children.push(s.child);
  return s;
}

const exited = (c: ChildProcess) => new Promise<void>((r) => (c.exitCode !== null || c.signalCode !== null ? r() : c.once('exit', () => r())));

function client(url: string, dir = data.dir): Index {
  const creds = JSON.parse(fs.readFileSync(path.join(dir, 'credentials.json'), 'utf8'));
  return new Index({ url, token: creds['vector.default.token'], retry: false, enableTelemetry: false });
}

test('kill -9 loses no acknowledged write; restart loads the snapshot and replays newer records', { timeout: 90_000 }, async () => {
  const vecs = randomVectors(6000, D, 5);
  const expected = new Map<string, number>(); // id -> index into vecs
  // Phase 1: 3,000 records, graceful stop -> snapshot.
  let s = await serve();
  let index = client(s.url);
  for (let i = 0; i < 3000; i += 500) {
    await index.upsert(vecs.slice(i, i + 500).map((v, j) => ({ id: `r${i + j}`, vector: v })));
    for (let j = 0; j < 500; j++) expected.set(`r${i + j}`, i + j);
  }
  s.child.kill('SIGTERM');
  await exited(s.child);
  const snaps = fs.readdirSync(path.join(data.dir, 'vector', 'default.snapshots'));
  assert.ok(snaps.some((f) => f.endsWith('.hnsw')), `snapshot files: ${snaps}`);
  const header = JSON.parse(fs.readFileSync(path.join(data.dir, 'vector', 'default.snapshots', 'ns-1.json'), 'utf8'));
  assert.equal(header.magic, 'SVC-HNSW');
  assert.equal(header.count, 3000);
  assert.equal(header.dimension, D);

  // Phase 2: concurrent upserts (group commit), deletes, updates; SIGKILL with writes in flight.
  s = await serve();
  index = client(s.url);
  const acked: Promise<void>[] = [];
  for (let i = 3000; i < 5000; i += 100) {
    const batch = vecs.slice(i, i + 100).map((v, j) => ({ id: `r${i + j}`, vector: v }));
    acked.push(index.upsert(batch).then(() => batch.forEach((b, j) => expected.set(b.id, i + j))));
  }
  await Promise.all(acked);
  const del = await index.delete(Array.from({ length: 100 }, (_, i) => `r${i}`));
  assert.equal(del.deleted, 100);
  for (let i = 0; i < 100; i++) expected.delete(`r${i}`);
  await index.update({ id: 'r200', vector: vecs[5999] });
  expected.set('r200', 5999);
  // In flight at the kill: these may or may not survive, but must not corrupt anything.
  const inflight = Array.from({ length: 10 }, (_, k) =>
    index.upsert(vecs.slice(5000 + k * 50, 5050 + k * 50).map((v, j) => ({ id: `late${k * 50 + j}`, vector: v }))).then(
      () => 'acked',
      () => 'failed',
    ),
  );
  s.child.kill('SIGKILL');
  await exited(s.child);
  const lateAcked = (await Promise.all(inflight)).map((r, k) => (r === 'acked' ? k : -1)).filter((k) => k >= 0);
  for (const k of lateAcked) for (let j = 0; j < 50; j++) expected.set(`late${k * 50 + j}`, 5000 + k * 50 + j);

  // Phase 3: everything acknowledged is there.
  s = await serve();
  index = client(s.url);
  const info = await index.info();
  assert.ok(info.vectorCount >= expected.size, `${info.vectorCount} < ${expected.size}`);
  const ids = [...expected.keys()];
  for (let i = 0; i < ids.length; i += 1000) {
    const got = await index.fetch(ids.slice(i, i + 1000), { includeVectors: true });
    got.forEach((g, j) => {
      assert.ok(g, `missing ${ids[i + j]}`);
      const want = vecs[expected.get(ids[i + j])!].map(Math.fround);
      assert.deepEqual(g.vector!.map(Math.fround), want);
    });
  }
  assert.deepEqual(await index.fetch(['r0', 'r99']), [null, null]);
  // Replayed and updated records are searchable in the graph.
  for (const [id, vi] of [['r4999', 4999], ['r200', 5999], ['r3000', 3000], ['r150', 150]] as const) {
    const [top] = await index.query({ vector: vecs[vi], topK: 1 });
    assert.equal(top.id, id);
    assert.equal(top.score, 1);
  }
  assert.equal((await index.query({ vector: vecs[5], topK: 3 })).some((r) => r.id === 'r5'), false);
  s.child.kill('SIGTERM');
  await exited(s.child);
});

test('a damaged snapshot is not loaded: logged, graph rebuilt from the store, answers unchanged', { timeout: 150_000 }, async () => {
  const own = tempDir('svc-vector-snapcrc-');
  const snapDir = path.join(own.dir, 'vector', 'default.snapshots');
  const vecs = randomVectors(2000, D, 11);
  const header = () => JSON.parse(fs.readFileSync(path.join(snapDir, 'ns-1.json'), 'utf8'));
  /** Flips 64 bytes in the middle of `file` (same size, so only the checksum can tell). */
  const flip = (file: string) => {
    const b = fs.readFileSync(file);
    for (let i = 0; i < 64; i++) b[(b.length >> 1) + i] ^= 0x5a;
    fs.writeFileSync(file, b);
  };
  /**
   * Restarts on the snapshot: the log names a damaged one, or says nothing of it (loaded, not
   * rebuilt); every record is found by its own vector.
   */
  const restartAndCheck = async (what: string, damaged: boolean) => {
    const s = await serveVectorChild(own.dir, { SVC_LOG_LEVEL: 'info' });
    children.push(s.child);
    const index = client(s.url, own.dir);
    assert.equal((await index.info()).vectorCount, vecs.length);
    for (const i of [0, 1, 777, 1500, 1999]) {
      const [top] = await index.query({ vector: vecs[i], topK: 1 });
      assert.equal(top.id, `s${i}`, what);
      assert.equal(top.score, 1, what);
    }
    const said = /vector snapshot damaged/.test(s.log());
    assert.equal(said, damaged, `${what}: log ${s.log()}`);
    if (!damaged) assert.doesNotMatch(s.log(), /snapshot not usable/, what);
    s.child.kill('SIGTERM');
    await exited(s.child);
  };
  try {
    const s = await serve(own.dir);
    const index = client(s.url, own.dir);
    for (let i = 0; i < vecs.length; i += 500) await index.upsert(vecs.slice(i, i + 500).map((v, j) => ({ id: `s${i + j}`, vector: v })));
    s.child.kill('SIGTERM');
    await exited(s.child);
    let h = header();
    assert.match(h.hnswSha256, /^[0-9a-f]{64}$/);
    assert.equal(h.version, 4);
    assert.deepEqual(fs.readdirSync(snapDir).sort(), [h.file, 'ns-1.json'], 'a graph file and its header, no codes file');

    flip(path.join(snapDir, h.file));
    await restartAndCheck('graph file damaged', true);
    // the closing svc wrote a fresh, good snapshot: loaded without complaint
    await restartAndCheck('fresh snapshot', false);

    // the previous format: version 3, with a codes file next to the graph (not read any more)
    h = header();
    const { sha256: _, ...fields } = h;
    const v3 = { ...fields, version: 3, labels: vecs.length, codesBytes: 4096, codesSha256: 'ab'.repeat(32) };
    fs.writeFileSync(path.join(snapDir, h.file.replace(/\.hnsw$/, '.codes')), Buffer.alloc(4096, 7));
    fs.writeFileSync(path.join(snapDir, 'ns-1.json'), JSON.stringify({ ...v3, sha256: createHash('sha256').update(JSON.stringify(v3)).digest('hex') }));
    await restartAndCheck('version-3 snapshot', false);

    // a header still valid JSON with one value changed (a later seq would skip replaying records)
    h = header();
    fs.writeFileSync(path.join(snapDir, 'ns-1.json'), JSON.stringify({ ...h, seq: h.seq + 1000 }));
    await restartAndCheck('header changed', true);
    assert.equal(fs.readdirSync(snapDir).filter((f) => f.endsWith('.tmp')).length, 0, 'no temp files left');
  } finally {
    own.cleanup();
  }
});
