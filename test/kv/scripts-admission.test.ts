/**
 * Back-to-back runaway scripts: one token looping `EVAL_RO "while true do end" 0` must not keep kv
 * unavailable for everyone else. After a script svc killed, that token's scripts are refused (429)
 * for a cool-down that doubles with each kill, and on probation run one at a time
 * (`ScriptAdmission`, `src/kv/watchdog.ts`). Measured: the other clients' success rate and p99
 * latency during a 25 s attack with SVC_KV_SCRIPT_TIMEOUT_MS=300.
 */
import assert from 'node:assert/strict';
import http from 'node:http';
import { after, before, describe, test } from 'node:test';
import { Redis } from '@upstash/redis';
import type { KvServer } from '../../src/kv/index.js';
import { RedisConnection } from '../../src/kv/redis/connection.js';
import { COOL_DOWN_FACTOR, MAX_COOL_DOWN_MS, PROBATION_MS, ScriptAdmission, SCRIPTS_IN_FLIGHT, SCRIPTS_WAITING } from '../../src/kv/watchdog.js';
import { KvError } from '../../src/kv/errors.js';
import { startTestSvc } from '../helpers/env.js';
import { ACL_ALLOWED_COMMANDS, call } from './helpers.js';

type Svc = Awaited<ReturnType<typeof startTestSvc>>;

const LIMIT_MS = 300;
const ATTACK_MS = 25_000;
const RUNAWAY = '/eval_ro/while%20true%20do%20end/0';

/** Kills whatever script runs, on a connection of svc's admin user (test clean-up). */
async function killScripts(svc: Svc): Promise<void> {
  const backend = (svc.servers.kv as KvServer).backend;
  const c = await RedisConnection.connect(backend.endpoint, backend.admin);
  try {
    await c.send(['SCRIPT', 'KILL']);
  } finally {
    c.close();
  }
}

function percentile(xs: number[], p: number): number {
  const s = xs.slice().sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))];
}

describe(`runaway scripts in a loop (SVC_KV_SCRIPT_TIMEOUT_MS=${LIMIT_MS})`, () => {
  let svc: Svc;
  let base: string;
  let token: string;
  let readonly: string;
  before(async () => {
    svc = await startTestSvc(['kv'], { env: { SVC_KV_SCRIPT_TIMEOUT_MS: String(LIMIT_MS), SVC_KV_WORKERS: '0' } });
    base = svc.urls.kv!;
    token = svc.ctx.credentials.get('kv.token');
    readonly = svc.ctx.credentials.get('kv.readonlyToken');
  });
  after(async () => {
    await killScripts(svc).catch(() => {});
    await svc?.close();
  });

  test('other clients keep being served (success rate, p99) while the read-only token loops runaway scripts', async () => {
    await call(base, '/set/victim-key/v', { token });
    const end = Date.now() + ATTACK_MS;
    const attacker = { killed: 0, coolDown: 0, busy: 0, other: [] as string[], coolDownText: '' };
    // two attacker loops: one runaway script at a time each, the next sent as soon as one is answered
    const attack = async (pipeline: boolean) => {
      while (Date.now() < end) {
        const r = pipeline
          ? await call(base, '/pipeline', { token: readonly, method: 'POST', body: JSON.stringify([['EVAL_RO', 'while true do end', '0']]) })
          : await call(base, RUNAWAY, { token: readonly });
        const error: string | undefined = pipeline ? r.json?.[0]?.error : r.json?.error;
        if (error !== undefined && /script killed by svc/.test(error)) attacker.killed++;
        else if ((pipeline ? r.status === 200 : r.status === 429) && error !== undefined && /refused for another \d+ s/.test(error)) {
          attacker.coolDown++;
          attacker.coolDownText = error;
        } else if (r.status === 503 && /^BUSY /.test(r.json?.error)) attacker.busy++; // its other loop's script was running
        else attacker.other.push(`${r.status} ${r.text.slice(0, 120)}`);
        if (r.status === 429 || error?.includes('refused')) await new Promise((res) => setTimeout(res, 20));
      }
    };
    // victims: the standard token through the SDK (plain commands, and short scripts of their own)
    const latencies: number[] = [];
    let ok = 0;
    let failed = 0;
    const failures = new Map<string, number>();
    const victim = async (n: number) => {
      const redis = new Redis({ url: base, token, retry: false, enableTelemetry: false, signal: () => AbortSignal.timeout(20_000) });
      for (let i = 0; Date.now() < end; i++) {
        const t0 = performance.now();
        try {
          if (n === 0) assert.equal(await redis.eval('return ARGV[1] + 1', [], [String(i)]), i + 1);
          else if (i % 2) await redis.set(`victim-${n}`, i);
          else assert.equal(await redis.get('victim-key'), 'v');
          ok++;
        } catch (err) {
          failed++;
          const m = (err as Error).message.slice(0, 60);
          failures.set(m, (failures.get(m) ?? 0) + 1);
        }
        latencies.push(performance.now() - t0);
      }
    };
    await Promise.all([attack(false), attack(true), victim(0), victim(1), victim(2), victim(3)]);
    const rate = ok / (ok + failed);
    const p99 = percentile(latencies, 99);
    const p50 = percentile(latencies, 50);
    console.log(
      `victims: ${ok} ok, ${failed} failed (${(100 * rate).toFixed(2)} % success), p50 ${p50.toFixed(1)} ms, p99 ${p99.toFixed(1)} ms; ` +
        `attacker: ${attacker.killed} scripts killed, ${attacker.coolDown} refused, ${attacker.busy} BUSY; failures ${JSON.stringify([...failures].slice(0, 5))}`,
    );
    assert.deepEqual(attacker.other, [], 'every attacker request was killed or refused');
    assert.ok(attacker.killed >= 1, 'the runaway script was killed');
    assert.ok(attacker.coolDown >= 1, 'the attacker got 429s');
    assert.match(attacker.coolDownText, /^ERR scripts of this token are refused for another \d+ s: svc killed a script of it that ran longer than 300 ms/);
    // cool-downs of 3, 6, 12, 24 s: at most 4 kills in 25 s after the first round (2 in flight then)
    assert.ok(attacker.killed <= 8, `${attacker.killed} scripts killed in ${ATTACK_MS} ms`);
    assert.ok(rate >= 0.9, `other clients' success rate ${(100 * rate).toFixed(2)} %`);
    assert.ok(ok >= 200, `only ${ok} requests of the other clients succeeded`);
    assert.ok(p99 < 5_000, `p99 ${p99} ms`);
  });

  test('in the cool-down: the token\'s scripts are refused in single commands, pipelines and transactions; its other commands run', async () => {
    // the attack above left the read-only token cooling down (its last cool-down is 12 s or more)
    const single = await call(base, '/eval_ro/return%201/0', { token: readonly });
    assert.equal(single.status, 429, single.text);
    const waitSeconds = Number(/refused for another (\d+) s/.exec(single.json.error)?.[1]);
    assert.ok(waitSeconds >= 1, single.text);
    // the header tells the same wait as the text (RFC 6585: a 429 MAY say when to retry)
    assert.equal(single.headers.get('retry-after'), String(waitSeconds));
    const pipe = await call(base, '/pipeline', { token: readonly, method: 'POST', body: JSON.stringify([['GET', 'victim-key'], ['EVAL_RO', 'return 1', '0']]) });
    assert.equal(pipe.status, 200, pipe.text);
    assert.equal(pipe.json[0].result, 'v');
    assert.match(pipe.json[1].error, /refused for another \d+ s/);
    const multi = await call(base, '/multi-exec', { token: readonly, method: 'POST', body: JSON.stringify([['EVAL_RO', 'return 1', '0']]) });
    assert.equal(multi.status, 429, multi.text);
    assert.ok(Number(multi.headers.get('retry-after')) >= 1, 'a refused transaction says when to retry');
    assert.equal((await call(base, '/get/victim-key', { token: readonly })).json.result, 'v');
    // another token's scripts are not affected
    assert.equal((await call(base, '/eval/return%2042/0', { token })).json.result, 42);
  });

  test(`a burst of 100 runaway scripts sent at once: at most ${SCRIPTS_IN_FLIGHT} reach Redis, the others are refused after the first kill`, async () => {
    const run = async (...args: string[]) => (await call(base, '/', { token, method: 'POST', body: JSON.stringify(args) })).json.result;
    assert.equal(await run('ACL', 'SETUSER', 'burst', 'reset', 'on', '>burst-pw', '~*', '&*', ...ACL_ALLOWED_COMMANDS), 'OK');
    const acl = (await run('ACL', 'RESTTOKEN', 'burst', 'burst-pw')) as string;
    const started = Date.now();
    const answers = await Promise.all(Array.from({ length: 100 }, () => call(base, RUNAWAY, { token: acl })));
    const count = (re: RegExp, status: number) => answers.filter((r) => r.status === status && re.test(r.json?.error)).length;
    const killed = count(/script killed by svc/, 400);
    const busy = count(/^BUSY /, 503);
    const refused = count(/refused for another \d+ s/, 429);
    console.log(`burst: ${killed} killed, ${busy} BUSY, ${refused} refused in ${Date.now() - started} ms`);
    assert.equal(killed + busy + refused, 100, JSON.stringify(answers.map((r) => `${r.status} ${r.text.slice(0, 60)}`)));
    assert.ok(killed >= 1);
    assert.ok(killed + busy <= SCRIPTS_IN_FLIGHT, `${killed + busy} scripts reached Redis`);
    assert.equal((await call(base, '/get/victim-key', { token })).json.result, 'v');
  });
});

/** GET `path` on a connection of its own (`agent: false`), so that the kv primary hands it to its next worker. */
function getOnNewConnection(base: string, path: string, token: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = http.get(base + path, { agent: false, headers: { authorization: `Bearer ${token}` } }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (c) => (body += c));
      res.on('end', () => resolve({ status: res.statusCode!, body }));
    });
    req.on('error', reject);
  });
}

describe('with worker processes (SVC_KV_WORKERS=2)', () => {
  let svc: Svc;
  before(async () => {
    svc = await startTestSvc(['kv'], { env: { SVC_KV_SCRIPT_TIMEOUT_MS: String(LIMIT_MS), SVC_KV_WORKERS: '2' } });
    assert.equal((svc.servers.kv as KvServer).workerPids().length, 2);
  });
  after(async () => {
    await killScripts(svc).catch(() => {});
    await svc?.close();
  });

  test('a script killed on one worker puts the token in its cool-down on every worker', async () => {
    const base = svc.urls.kv!;
    const readonly = svc.ctx.credentials.get('kv.readonlyToken');
    const killed = await getOnNewConnection(base, RUNAWAY, readonly);
    assert.equal(killed.status, 400, killed.body);
    assert.match(killed.body, /script killed by svc/);
    // consecutive connections go to the workers in turn: both must refuse the token's scripts
    const answers = [];
    for (let i = 0; i < 6; i++) answers.push(await getOnNewConnection(base, '/eval_ro/return%201/0', readonly));
    assert.deepEqual(answers.map((a) => a.status), [429, 429, 429, 429, 429, 429], JSON.stringify(answers));
    const token = svc.ctx.credentials.get('kv.token');
    for (let i = 0; i < 4; i++) assert.equal((await getOnNewConnection(base, '/eval/return%207/0', token)).body, '{"result":7}');
  });
});

describe('ScriptAdmission (clock of the test)', () => {
  const LIMIT = 1000;
  let now = 0;
  const make = () => new ScriptAdmission(LIMIT, undefined, () => now);
  const refusal = (x: unknown) => (x instanceof KvError ? `${x.status} ${x.code}` : x === undefined ? 'go' : 'wait');

  test('cool-downs double with each kill up to the cap; kills of scripts sent before the cool-down do not double it', () => {
    now = 1_000_000;
    const a = make();
    assert.equal(refusal(a.enter('t')), 'go');
    assert.equal(refusal(a.enter('t')), 'go');
    a.leave('t', true); // first kill: COOL_DOWN_FACTOR x the limit
    assert.equal(refusal(a.enter('t')), '429 scriptCoolDown');
    assert.equal(refusal(a.enter('other')), 'go', 'another identity is not refused');
    a.leave('other', false);
    now += 2000;
    a.leave('t', true); // the second was in flight already: extends, does not double
    assert.equal(a.strikes('t'), 1);
    now += COOL_DOWN_FACTOR * LIMIT - 1;
    assert.equal(refusal(a.enter('t')), '429 scriptCoolDown');
    now += 1;
    assert.equal(refusal(a.enter('t')), 'go');
    a.leave('t', true);
    assert.equal(a.strikes('t'), 2);
    now += 2 * COOL_DOWN_FACTOR * LIMIT - 1;
    assert.equal(refusal(a.enter('t')), '429 scriptCoolDown');
    for (let i = 3; i < 12; i++) {
      now += a.coolDownMs(i - 1);
      assert.equal(refusal(a.enter('t')), 'go');
      a.leave('t', true);
    }
    assert.equal(a.coolDownMs(11), MAX_COOL_DOWN_MS);
    // strikes are forgotten after the probation passes without a kill
    now += MAX_COOL_DOWN_MS + PROBATION_MS;
    assert.equal(refusal(a.enter('t')), 'go');
    a.leave('t', false);
    assert.equal(a.strikes('t'), 0);
  });

  test('in flight: at most SCRIPTS_IN_FLIGHT (one on probation); waiting requests go in turn, or are refused by a kill', async () => {
    now = 5_000_000;
    const a = make();
    for (let i = 0; i < SCRIPTS_IN_FLIGHT; i++) assert.equal(refusal(a.enter('t')), 'go');
    const waiting = a.enter('t') as Promise<KvError | undefined>;
    assert.equal(refusal(waiting), 'wait');
    a.leave('t', false);
    assert.equal(await waiting, undefined);
    const refused = a.enter('t') as Promise<KvError | undefined>;
    a.leave('t', true);
    assert.equal(refusal(await refused), '429 scriptCoolDown');
    for (let i = 0; i < SCRIPTS_IN_FLIGHT - 1; i++) a.leave('t', false);
    now += a.coolDownMs(1);
    // probation: one at a time
    assert.equal(refusal(a.enter('t')), 'go');
    const second = a.enter('t') as Promise<KvError | undefined>;
    assert.equal(refusal(second), 'wait');
    a.leave('t', false);
    assert.equal(await second, undefined);
    a.leave('t', false);
    // the waiting line is bounded
    const b = make();
    for (let i = 0; i < SCRIPTS_IN_FLIGHT; i++) b.enter('u');
    for (let i = 0; i < SCRIPTS_WAITING; i++) b.enter('u');
    assert.equal(refusal(b.enter('u')), '429 scriptsWaiting');
  });
});
