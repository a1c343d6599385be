/**
 * The SQLite queue store never binds a bare `LIMIT ?`: SQLite reads the value of such a LIMIT
 * while planning (after `ORDER BY`, in a subquery), so each new binding expires the prepared
 * statement and its next run parses and plans it again (`BOUND_LIMIT` in
 * `src/queue/store/sqlite-statements.ts`). Checked on the sources, and on SQLite itself: the same
 * rows either way.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import Database from 'better-sqlite3';
import { BOUND_LIMIT } from '../../src/queue/store/sqlite-statements.js';

const STORE_DIR = path.join(import.meta.dirname, '../../src/queue/store');

test('no SQLite store statement binds a bare LIMIT ?', () => {
  const files = fs.readdirSync(STORE_DIR).filter((f) => /^sqlite.*\.ts$/.test(f));
  assert.ok(files.length >= 4, `found ${files.join(', ')}`);
  for (const f of files) {
    const src = fs.readFileSync(path.join(STORE_DIR, f), 'utf8').replace(/^\s*(\*|\/\/).*$/gm, ''); // code, not comments
    assert.doesNotMatch(src, /LIMIT\s+\?/i, `${f} binds a bare LIMIT ?; use BOUND_LIMIT`);
  }
});

test('LIMIT +? returns the same rows as LIMIT ?', () => {
  const db = new Database(':memory:');
  db.exec('CREATE TABLE t (seq INTEGER PRIMARY KEY, due INTEGER NOT NULL); CREATE INDEX t_due ON t(due)');
  const ins = db.prepare('INSERT INTO t (due) VALUES (?)');
  for (let i = 0; i < 50; i++) ins.run((i * 7) % 13);
  const sql = (limit: string) => `SELECT seq FROM t WHERE seq IN (SELECT seq FROM t WHERE due <= ? ORDER BY due, seq ${limit}) ORDER BY seq`;
  const bare = db.prepare(sql('LIMIT ?'));
  const bound = db.prepare(sql(BOUND_LIMIT));
  for (const [due, n] of [[5, 3], [12, 50], [0, 1], [7, 0]]) assert.deepEqual(bound.all(due, n), bare.all(due, n));
  db.close();
});
