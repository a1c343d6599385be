/**
 * The Redis connection's reads (`src/kv/redis/connection.ts`): plain sockets are read into one
 * buffer shared by every connection of the process (`onread`), and each read is copied out before
 * the next. Replies kept after their read (pipelines resolved in a later turn, raw bytes, values
 * larger than the shared buffer arriving over many reads) must stay intact while other connections
 * read into the same buffer.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, test } from 'node:test';
import type { KvServer } from '../../src/kv/index.js';
import { RedisConnection } from '../../src/kv/redis/connection.js';
import type { Reply } from '../../src/kv/resp.js';
import { startTestSvc } from '../helpers/env.js';

let svc: Awaited<ReturnType<typeof startTestSvc>>;

before(async () => {
  svc = await startTestSvc(['kv']);
});
after(async () => {
  await svc?.close();
});

test('replies kept after their read stay intact while other connections read into the shared buffer', async () => {
  const backend = (svc.servers.kv as KvServer).backend;
  const conns = await Promise.all([0, 1, 2].map(() => RedisConnection.connect(backend.endpoint, backend.admin)));
  try {
    // a value above the 64 KiB read buffer, one of several reads' size, and a small one
    const values = [randomBytes(70_000), randomBytes(300_000), randomBytes(5)];
    await Promise.all(values.map((v, i) => conns[i].send(['SET', `reads:${i}`, v])));
    const kept: Promise<{ i: number; replies: Reply[]; raws: Buffer[] | undefined }>[] = [];
    const single: Promise<void>[] = [];
    for (let round = 0; round < 20; round++) {
      for (let i = 0; i < conns.length; i++) {
        // a pipeline whose replies are read in one turn and used in a later one (a Promise)
        kept.push(conns[i].batch([['GET', `reads:${i}`], ['GET', `reads:${(i + 1) % 3}`]], true).then((r) => ({ i, ...r })));
        // a single command answered from inside the read, with its raw bytes
        single.push(
          new Promise((resolve, reject) =>
            conns[i].sendCb(['GET', `reads:${i}`], true, (err, reply, raw) => {
              if (err) return reject(err);
              try {
                assert.deepEqual(reply, values[i]);
                assert.deepEqual(raw, Buffer.concat([Buffer.from(`$${values[i].length}\r\n`), values[i], Buffer.from('\r\n')]));
                resolve();
              } catch (e) {
                reject(e as Error);
              }
            }),
          ),
        );
      }
    }
    await Promise.all(single);
    // only now, many reads later, are the pipelines' replies compared
    for (const { i, replies, raws } of await Promise.all(kept)) {
      assert.deepEqual(replies, [values[i], values[(i + 1) % 3]]);
      assert.deepEqual(raws?.map((r) => r.length), [values[i], values[(i + 1) % 3]].map((v) => v.length + `$${v.length}\r\n`.length + 2));
    }
  } finally {
    for (const c of conns) c.close();
  }
});
