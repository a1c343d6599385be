/**
 * RESP2 parser/encoder units (src/kv/resp.ts): every reply type, every split point of the stream,
 * raw-byte capture, large bulk strings across chunks, and the command encoder.
 */
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { maskMonitorLine } from '../../src/kv/sse.js';
import { decodePiece, pathSegments, queryArgs } from '../../src/kv/request.js';
import { encodeCommand, encodeCommands, OK, RespError, RespParser, SimpleString, type Reply } from '../../src/kv/resp.js';
import { replyJson } from '../../src/kv/encode.js';
import { KvError } from '../../src/kv/errors.js';

function parseAll(chunks: Buffer[], wantRaw = true): { replies: Reply[]; raws: (Buffer | undefined)[] } {
  const replies: Reply[] = [];
  const raws: (Buffer | undefined)[] = [];
  const p = new RespParser((r, raw) => {
    replies.push(r);
    raws.push(raw);
  }, () => wantRaw);
  for (const c of chunks) p.feed(c);
  return { replies, raws };
}

const replies = [
  '+OK\r\n',
  '+PONG\r\n',
  '-ERR wrong number of arguments for \'get\' command\r\n',
  ':0\r\n',
  ':-42\r\n',
  ':9223372036854775807\r\n',
  '$3\r\nbar\r\n',
  '$0\r\n\r\n',
  '$-1\r\n',
  '*-1\r\n',
  '*0\r\n',
  '*3\r\n$1\r\na\r\n*2\r\n:1\r\n$-1\r\n+x\r\n',
  '$4\r\na\r\nb\r\n',
  // simple strings next to the `+OK` the parser recognises without making a string
  '+OKAY\r\n',
  '+O\r\n',
  '+ok\r\n',
  '*2\r\n+OK\r\n*1\r\n+OK\r\n',
];
const stream = Buffer.from(replies.join(''));

describe('RESP parser', () => {
  test('every type, kept distinct', () => {
    const { replies: r } = parseAll([stream]);
    assert.equal(r.length, replies.length);
    assert.equal(r[0], OK);
    assert.ok(r[1] instanceof SimpleString && r[1].value === 'PONG');
    assert.ok(r[2] instanceof RespError && r[2].message.startsWith('ERR wrong number'));
    assert.equal(r[3], 0);
    assert.equal(r[4], -42);
    assert.equal(r[5], 9223372036854775807n);
    assert.deepEqual(r[6], Buffer.from('bar'));
    assert.deepEqual(r[7], Buffer.alloc(0));
    assert.equal(r[8], null);
    assert.equal(r[9], null);
    assert.deepEqual(r[10], []);
    assert.deepEqual(r[11], [Buffer.from('a'), [1, null], new SimpleString('x')]);
    assert.deepEqual(r[12], Buffer.from('a\r\nb'));
    assert.deepEqual(r.slice(13, 16), [new SimpleString('OKAY'), new SimpleString('O'), new SimpleString('ok')]);
    assert.deepEqual(r[16], [OK, [OK]]);
    assert.equal((r[16] as Reply[])[0], OK);
  });

  test('same result and exact raw bytes for every split point (two and three chunks)', () => {
    const expected = parseAll([stream]).replies;
    for (let i = 0; i <= stream.length; i++) {
      const { replies: r, raws } = parseAll([stream.subarray(0, i), stream.subarray(i)]);
      assert.deepEqual(r, expected, `split at ${i}`);
      assert.deepEqual(raws.map((b) => b!.toString()), replies, `raw at ${i}`);
    }
    for (let i = 0; i < stream.length; i += 3) {
      for (let j = i; j <= stream.length; j += 5) {
        const { raws } = parseAll([stream.subarray(0, i), stream.subarray(i, j), stream.subarray(j)]);
        assert.deepEqual(raws.map((b) => b!.toString()), replies, `raw at ${i}/${j}`);
      }
    }
  });

  test('byte-at-a-time and a large bulk string across many chunks', () => {
    const bytes = [...stream].map((b) => Buffer.from([b]));
    assert.deepEqual(parseAll(bytes).raws.map((b) => b!.toString()), replies);
    const big = Buffer.alloc(1_000_000, 7);
    const msg = Buffer.concat([Buffer.from(`*2\r\n$${big.length}\r\n`), big, Buffer.from('\r\n:5\r\n')]);
    const chunks: Buffer[] = [];
    for (let i = 0; i < msg.length; i += 65536) chunks.push(msg.subarray(i, i + 65536));
    const { replies: r, raws } = parseAll(chunks);
    assert.equal(r.length, 1);
    assert.deepEqual((r[0] as Reply[])[0], big);
    assert.equal((r[0] as Reply[])[1], 5);
    assert.deepEqual(raws[0], msg);
  });

  test('no raw capture unless asked; protocol errors throw', () => {
    assert.equal(parseAll([stream], false).raws.every((r) => r === undefined), true);
    assert.throws(() => parseAll([Buffer.from('?what\r\n')]), (e: unknown) => e instanceof KvError && e.code === 'databaseProtocolError');
  });
});

describe('RESP encoder and request parsing', () => {
  test('commands are encoded binary-safely', () => {
    assert.equal(encodeCommand(['SET', 'k', 'héllo']), '*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$6\r\nhéllo\r\n');
    const b = encodeCommand(['SET', Buffer.from([0xff, 0x0d]), 'v']);
    assert.deepEqual(b, Buffer.concat([Buffer.from('*3\r\n$3\r\nSET\r\n$2\r\n'), Buffer.from([0xff, 0x0d]), Buffer.from('\r\n$1\r\nv\r\n')]));
    // only the last argument binary (a SET value from a request body): UTF-8 text before it, empty and large values
    for (const v of [Buffer.from([0, 0x0d, 0x0a, 0xff]), Buffer.alloc(0), Buffer.alloc(70_000, 0x7a)]) {
      const last = encodeCommand(['SET', 'ké€', v]);
      assert.deepEqual(last, Buffer.concat([Buffer.from(`*3\r\n$3\r\nSET\r\n$6\r\nké€\r\n$${v.length}\r\n`), v, Buffer.from('\r\n')]));
    }
    assert.deepEqual(encodeCommand([Buffer.from('PING')]), Buffer.from('*1\r\n$4\r\nPING\r\n'));
    assert.equal(encodeCommands([['PING'], ['GET', 'a']]), '*1\r\n$4\r\nPING\r\n*2\r\n$3\r\nGET\r\n$1\r\na\r\n');
    assert.ok(Buffer.isBuffer(encodeCommands([['PING'], ['GET', Buffer.from('a')]])));
  });

  test('path segments, query arguments and percent-decoding', () => {
    assert.deepEqual(pathSegments('/set/a%2Fb/x%20y/'), ['set', 'a/b', 'x y']);
    // empty segments kept in place, one trailing empty one dropped, a lone `/` is one empty segment
    assert.deepEqual(pathSegments('/'), ['']);
    assert.deepEqual(pathSegments('//'), ['']);
    assert.deepEqual(pathSegments('/a//b//'), ['a', '', 'b', '']);
    assert.deepEqual(pathSegments('/get'), ['get']);
    assert.deepEqual(pathSegments('/get/%E2%82%AC'), ['get', '€']);
    assert.deepEqual(decodePiece('%FFa'), Buffer.from([0xff, 0x61]));
    assert.deepEqual(queryArgs('EX=100&_token=abc&NX&a+b=c%26d'), ['EX', '100', 'NX', 'a b', 'c&d']);
  });

  test('JSON encoding of replies', () => {
    const r: Reply = [Buffer.from('a'), 1, null, new SimpleString('OK'), [Buffer.from([0xff])], new RespError('ERR x')];
    assert.equal(replyJson(r, false, true), '["a",1,null,"OK",["\uFFFD"],"ERR x"]');
    assert.equal(replyJson(r, true, true), '["YQ==",1,null,"T0s=",["/w=="],"RVJSIHg="]');
    assert.equal(replyJson(OK, true, true), '"OK"');
    assert.equal(replyJson(2n ** 63n - 1n, false, true), '9223372036854775807');
  });

  test('monitor lines are masked', () => {
    assert.equal(maskMonitorLine('1795315947.175392 [0 127.0.0.1:54068] "set" "k 1" "v\\"x"'), '1795315947.175392 [0 0.0.0.0:0] "set" "k 1" "v\\"x"');
    assert.equal(maskMonitorLine('1795315947.175392 [0 unix:/tmp/x/redis.sock] "get" "k"'), '1795315947.175392 [0 0.0.0.0:0] "get" "k"');
    assert.equal(maskMonitorLine('1795315947.175392 [0 lua] "get" "k"'), '1795315947.175392 [0 lua] "get" "k"');
  });
});
