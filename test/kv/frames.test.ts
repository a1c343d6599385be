/**
 * The topology router's framing of client commands (`src/kv/redis/frames.ts` `CommandFrames`):
 * the same commands, with the same exact bytes, whatever the chunks the stream arrives in (every
 * split point of a small stream, random splits of a large one with 20 kB values and a command of
 * 2,000 arguments), and the reply scanner `replyEnd` on every split point.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { CommandFrames, INCOMPLETE, replyEnd } from '../../src/kv/redis/frames.js';
import { encodeCommands } from '../../src/kv/resp.js';

type Cmd = string[];

function frame(chunks: Buffer[]): { args: string[][]; raws: Buffer[] } {
  const args: string[][] = [];
  const raws: Buffer[] = [];
  const f = new CommandFrames((c) => {
    args.push(c.args().map((a) => Buffer.from(a).toString('latin1')));
    raws.push(Buffer.from(c.raw()));
    // the argument offsets agree with the views
    for (let i = 0; i < c.length; i++) assert.equal(c.buf.toString('latin1', c.argStart(i), c.argEnd(i)), args[args.length - 1][i]);
  });
  for (const c of chunks) f.feed(c);
  return { args, raws };
}

const bytes = (cmds: Cmd[]) => Buffer.from(encodeCommands(cmds));

function check(cmds: Cmd[], chunks: Buffer[]): void {
  const { args, raws } = frame(chunks);
  assert.deepEqual(args, cmds);
  raws.forEach((r, i) => assert.ok(r.equals(bytes([cmds[i]])), `command ${i}`));
}

/** Deterministic pseudo-random numbers (a test that fails can be run again as it was). */
function rng(seed: number): () => number {
  let x = seed;
  return () => {
    x = (x * 1103515245 + 12345) & 0x7fffffff;
    return x / 0x7fffffff;
  };
}

describe('CommandFrames', () => {
  test('every split point of a small stream (one and two cuts)', () => {
    const cmds: Cmd[] = [['SET', 'k', 'v\r\n$3\r\n*1'], ['GET', ''], ['MSET', 'a', '1', 'b', '22', 'c', '333'], ['PING']];
    const all = bytes(cmds);
    for (let i = 0; i <= all.length; i++) {
      check(cmds, [all.subarray(0, i), all.subarray(i)]);
      for (let j = i; j <= all.length; j += 7) check(cmds, [all.subarray(0, i), all.subarray(i, j), all.subarray(j)]);
    }
  });

  test('random splits of a large stream: 20 kB values, a command of 2,000 arguments, many small commands', () => {
    const r = rng(7);
    const cmds: Cmd[] = [];
    for (let i = 0; i < 400; i++) {
      const kind = r();
      if (kind < 0.05) cmds.push(['SET', `big:${i}`, String(i % 10).repeat(20_000)]);
      else if (kind < 0.06) cmds.push(['MSET', ...Array.from({ length: 2000 }, (_, j) => `m:${i}:${j}`)]);
      else cmds.push(['SET', `k:${i}`, 'v'.repeat(Math.floor(r() * 200))]);
    }
    const all = bytes(cmds);
    for (let round = 0; round < 20; round++) {
      const chunks: Buffer[] = [];
      for (let at = 0; at < all.length; ) {
        const n = 1 + Math.floor(r() * (round % 2 ? 300 : 70_000));
        chunks.push(all.subarray(at, at + n));
        at += n;
      }
      check(cmds, chunks);
    }
  });

  test('bytes that are not commands: a protocol error', () => {
    assert.throws(() => frame([Buffer.from('GET k\r\n')]), /RESP array/);
    assert.throws(() => frame([Buffer.from('*1\r\n:1\r\n')]), /bulk string/);
  });
});

describe('replyEnd', () => {
  test('each reply type ends where it ends, at every split point', () => {
    const replies = ['+OK\r\n', '-ERR x\r\n', ':42\r\n', '$3\r\nabc\r\n', '$-1\r\n', '*-1\r\n', '*0\r\n', '*2\r\n$1\r\na\r\n*1\r\n:1\r\n', `-${'E'.repeat(100)} long\r\n`];
    for (const text of replies) {
      const b = Buffer.from(text);
      assert.equal(replyEnd(b, 0, b.length), b.length, text);
      for (let i = 0; i < b.length; i++) assert.ok(replyEnd(b, 0, i) < 0 || replyEnd(b, 0, i) === INCOMPLETE, `${JSON.stringify(text)} cut at ${i}`);
    }
  });
});
