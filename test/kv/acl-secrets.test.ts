/**
 * What the standard token can learn or do about the database's ACL users through the gateway:
 * `ACL LIST` and `ACL GETUSER` do not show the password hashes of svc's own users (other users'
 * lines are unchanged, in single commands, pipelines and transactions); AUTH and HELLO ... AUTH
 * (switching the gateway's connection to another user) are refused. Raw HTTP: @upstash/redis has
 * no ACL methods.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { startTestSvc } from '../helpers/env.js';
import { ACL_ALLOWED_COMMANDS, call } from './helpers.js';

let svc: Awaited<ReturnType<typeof startTestSvc>>;
const HASH = /#[0-9a-f]{64}/;

before(async () => {
  svc = await startTestSvc(['kv']);
});
after(async () => {
  await svc?.close();
});

async function post(path: string, body: unknown): Promise<{ status: number; json: any }> {
  const r = await call(svc.urls.kv!, path, { token: svc.ctx.credentials.get('kv.token'), method: 'POST', body: JSON.stringify(body) });
  return { status: r.status, json: r.json };
}

describe('ACL users through the gateway', () => {
  test('ACL LIST and ACL GETUSER hide the password hashes of svc\'s users, not of others', async () => {
    assert.equal((await post('/', ['ACL', 'SETUSER', 'own-user', 'on', '>own-pw', '~*', ...ACL_ALLOWED_COMMANDS])).status, 200);
    const list = await post('/', ['ACL', 'LIST']);
    assert.equal(list.status, 200);
    const lines: string[] = list.json.result;
    const svcLines = lines.filter((l) => /^user svc-/.test(l));
    assert.ok(svcLines.length >= 3, JSON.stringify(lines));
    for (const l of svcLines) assert.doesNotMatch(l, HASH, l);
    assert.match(lines.find((l) => l.startsWith('user own-user '))!, HASH);
    for (const u of ['svc-admin', 'svc-standard', 'svc-readonly']) {
      const g = await post('/', ['ACL', 'GETUSER', u]);
      assert.equal(g.status, 200, JSON.stringify(g.json));
      const r: unknown[] = g.json.result;
      assert.deepEqual(r[r.indexOf('passwords') + 1], [], `${u}: ${JSON.stringify(r)}`);
    }
    const own = (await post('/', ['ACL', 'GETUSER', 'own-user'])).json.result as unknown[];
    assert.equal((own[own.indexOf('passwords') + 1] as string[]).length, 1);
    // the same in a pipeline and a transaction
    const piped = await post('/pipeline', [['ACL', 'LIST'], ['ACL', 'GETUSER', 'svc-standard']]);
    assert.equal(piped.status, 200);
    assert.doesNotMatch(JSON.stringify(piped.json[0].result.filter((l: string) => l.startsWith('user svc-'))), HASH);
    assert.deepEqual(piped.json[1].result[piped.json[1].result.indexOf('passwords') + 1], []);
    const tx = await post('/multi-exec', [['ACL', 'LIST']]);
    assert.equal(tx.status, 200);
    assert.doesNotMatch(JSON.stringify(tx.json[0].result.filter((l: string) => l.startsWith('user svc-'))), HASH);
  });

  test('AUTH and HELLO ... AUTH are refused: the gateway\'s connection never changes user', async () => {
    assert.equal((await post('/', ['ACL', 'SETUSER', 'auth-target', 'on', '>pw', '~*', ...ACL_ALLOWED_COMMANDS])).status, 200);
    for (const cmd of [['AUTH', 'auth-target', 'pw'], ['HELLO', '2', 'AUTH', 'auth-target', 'pw'], ['HELLO', '3']]) {
      const r = await post('/', cmd);
      assert.equal(r.status, 400, JSON.stringify(r.json));
      assert.match(r.json.error, /not (allowed|supported)|connection/i);
    }
    // scripts cannot either (Redis flags AUTH and HELLO noscript)
    const e = await post('/', ['EVAL', "return redis.call('AUTH', 'auth-target', 'pw')", '0']);
    assert.equal(e.status, 400);
    assert.equal((await post('/', ['ACL', 'WHOAMI'])).json.result, 'svc-standard');
  });
});
