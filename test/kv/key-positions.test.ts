/**
 * The router's key positions (`src/kv/redis/keys.ts`, from the server's `COMMAND` key
 * specifications) against the server's own answer, `COMMAND GETKEYS`, on a real redis-server, for
 * commands whose keys are found by index, by keyword and by key count; and the hash slots of
 * Redis Cluster's specification examples.
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { KeyTable, keySlot } from '../../src/kv/redis/keys.js';
import { nodeCommand, replyText, startRedisNode } from './topology-helpers.js';

let node: Awaited<ReturnType<typeof startRedisNode>>;
let table: KeyTable;

before(async () => {
  node = await startRedisNode();
  table = new KeyTable(await nodeCommand(node.port, ['COMMAND']));
});
after(() => node?.close());

const COMMANDS: string[][] = [
  ['GET', 'a'],
  ['SET', 'a', '1', 'EX', '10'],
  ['MSET', 'a', '1', 'b', '2', 'c', '3'],
  ['MGET', 'a', 'b', 'c'],
  ['DEL', 'a', 'b'],
  ['RENAME', 'a', 'b'],
  ['LMOVE', 'a', 'b', 'LEFT', 'RIGHT'],
  ['ZUNIONSTORE', 'dst', '2', 'z1', 'z2', 'WEIGHTS', '1', '2'],
  ['ZINTER', '2', 'z1', 'z2'],
  ['SINTERCARD', '2', 's1', 's2', 'LIMIT', '1'],
  ['LMPOP', '2', 'l1', 'l2', 'LEFT'],
  ['EVAL', 'return 1', '2', 'k1', 'k2', 'arg'],
  ['EVALSHA_RO', 'ffffffffffffffffffffffffffffffffffffffff', '1', 'k1', 'arg'],
  ['FCALL', 'fn', '1', 'k1', 'arg'],
  ['XREAD', 'COUNT', '2', 'STREAMS', 'x1', 'x2', '0', '0'],
  ['XREADGROUP', 'GROUP', 'g', 'c', 'STREAMS', 'x1', '>'],
  ['GEORADIUS', 'geo', '0', '0', '1', 'km', 'STORE', 'dst'],
  ['OBJECT', 'ENCODING', 'a'],
  ['XINFO', 'STREAM', 'x1'],
  ['BITOP', 'AND', 'dst', 'a', 'b'],
  ['PFMERGE', 'dst', 'h1', 'h2'],
  ['PUBLISH', 'ch', 'msg'],
  ['PING'],
];

test('key positions from the COMMAND key specifications match COMMAND GETKEYS', async () => {
  let compared = 0;
  for (const cmd of COMMANDS) {
    const l = table.lookup(cmd);
    assert.ok(l.known, cmd[0]);
    if (l.keys === undefined) continue; // the router asks COMMAND GETKEYS itself
    const server = await nodeCommand(node.port, ['COMMAND', 'GETKEYS', ...cmd]);
    const expected = Array.isArray(server) ? server.map(replyText) : []; // keyless: an error reply
    assert.deepEqual(l.keys.map(String), expected, cmd.join(' '));
    compared++;
  }
  assert.ok(compared >= COMMANDS.length - 2, `${compared} compared`);
  assert.equal(table.lookup(['SET', 'a', '1']).write, true);
  assert.equal(table.lookup(['GET', 'a']).write, false);
});

test('hash slots follow the Redis Cluster specification (CRC16 mod 16384, hash tags)', () => {
  // the specification's CRC16 test vector (0x31C3) and the CLUSTER KEYSLOT examples of Redis's documentation
  assert.equal(keySlot('123456789'), 0x31c3);
  assert.equal(keySlot('somekey'), 11058);
  assert.equal(keySlot('foo{hash_tag}'), 2515);
  assert.equal(keySlot('foo'), 12182);
  // hash tags: the first {...} with something inside
  assert.equal(keySlot('{user1000}.following'), keySlot('user1000'));
  assert.notEqual(keySlot('foo{}{bar}'), keySlot('bar'));
  assert.equal(keySlot('foo{{bar}}zap'), keySlot('{bar'));
  assert.equal(keySlot('foo{bar}{zap}'), keySlot('bar'));
});
