/**
 * Pure functions of the queue: the safe retry-delay evaluator, backoff, Retry-After parsing,
 * durations, destination rebuilding, signing (verified by the SDK's Receiver).
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Receiver } from '@upstash/qstash';
import { compileExpression } from '../../src/queue/delivery/expr.js';
import { defaultBackoffMs, parseDuration, parseRetryAfter, retryAfterMs, retryDelayMs } from '../../src/queue/delivery/backoff.js';
import { signDelivery } from '../../src/queue/delivery/signing.js';
import { destinationFromRawUrl } from '../../src/queue/api/publish.js';
import { canonicalHeader } from '../../src/queue/wire.js';

test('expression evaluator: arithmetic, precedence, functions, retried', () => {
  const cases: [string, number, number][] = [
    ['1000', 0, 1000],
    ['1000 * (1 + retried)', 2, 3000],
    ['pow(retried, 2) * 1000', 3, 9000],
    ['2 + 3 * 4 - 6 / 2', 0, 11],
    ['-retried + 10', 4, 6],
    ['max(100, min(5000, exp(retried) * 10))', 1, 100],
    ['sqrt(16) + abs(-2) + floor(1.7) + ceil(1.2) + round(2.5)', 0, 4 + 2 + 1 + 2 + 3],
    ['2 ^ 3', 0, 8],
    ['10 % 4', 0, 2],
    ['1e3', 0, 1000],
  ];
  for (const [src, retried, want] of cases) assert.equal(compileExpression(src)(retried), want, src);
});

test('expression evaluator rejects anything that is not arithmetic', () => {
  for (const bad of ['', 'process.exit(1)', 'retried()', 'foo', 'pow(1)', '1 +', '(1', '1)', 'constructor', 'a=1', '`x`', "'s'", 'x'.repeat(2000)]) {
    assert.throws(() => compileExpression(bad), Error, bad);
  }
});

test('default backoff is min(86400, e^(2.5n)) seconds', () => {
  assert.equal(defaultBackoffMs(1), Math.round(Math.exp(2.5) * 1000));
  assert.equal(Math.round(defaultBackoffMs(2) / 1000), 148);
  assert.equal(Math.round(defaultBackoffMs(3) / 1000), 1808);
  assert.equal(defaultBackoffMs(5), 86_400_000);
  assert.equal(defaultBackoffMs(50), 86_400_000);
  assert.equal(retryDelayMs(1, '500 * (retried + 1)'), 500);
  assert.equal(retryDelayMs(3, '500 * (retried + 1)'), 1500);
  assert.equal(retryDelayMs(2, '1/0'), defaultBackoffMs(2), 'non-finite falls back to the default');
  assert.equal(retryDelayMs(1, '-5'), 0, 'clamped at 0');
  assert.equal(retryDelayMs(1, '1e12'), 86_400_000, 'clamped at one day');
});

test('Retry-After and X-RateLimit-Reset parsing', () => {
  const now = Date.parse('2026-01-01T00:00:00Z');
  assert.equal(parseRetryAfter('120', now), 120_000);
  assert.equal(parseRetryAfter('0', now), 0);
  assert.equal(parseRetryAfter('6m5s', now), 365_000);
  assert.equal(parseRetryAfter('300ms', now), 300);
  assert.equal(parseRetryAfter('Thu, 01 Jan 2026 00:00:30 GMT', now), 30_000);
  assert.equal(parseRetryAfter('soon', now), undefined);
  assert.equal(retryAfterMs({ 'x-ratelimit-reset-requests': '2s' }, now), 2000);
  assert.equal(retryAfterMs({ 'retry-after': String(2 * 86400) }, now), undefined, 'beyond a day is ignored');
});

test('publish durations', () => {
  assert.equal(parseDuration('10s'), 10_000);
  assert.equal(parseDuration('1d10h30m'), 86_400_000 + 10 * 3_600_000 + 30 * 60_000);
  assert.equal(parseDuration('10'), 10_000);
  assert.equal(parseDuration('250ms'), 250);
  assert.equal(parseDuration('ten'), undefined);
  assert.equal(parseDuration('-1s'), undefined);
});

test('destination is rebuilt from the raw path with its query string, keeping //', () => {
  assert.equal(destinationFromRawUrl('/v2/publish/https://a.example/x//y?q=1&r=2', '/v2/publish/'), 'https://a.example/x//y?q=1&r=2');
  assert.equal(destinationFromRawUrl('/v2/publish/https%3A%2F%2Fa.example%2Fp', '/v2/publish/'), 'https://a.example/p');
  assert.equal(destinationFromRawUrl('/v2/publish/https://a.example/p?qstash_token=t&k=v', '/v2/publish/'), 'https://a.example/p?k=v');
});

test('canonical header keys', () => {
  assert.equal(canonicalHeader('content-type'), 'Content-Type');
  assert.equal(canonicalHeader('BYPASS-TUNNEL-REMINDER'), 'Bypass-Tunnel-Reminder');
  assert.equal(canonicalHeader('x-api-key'), 'X-Api-Key');
});

test('signatures verify with the SDK Receiver (current or next key), and fail on tampering', async () => {
  const current = 'sig_current_key_for_test';
  const next = 'sig_next_key_for_test';
  const body = Buffer.from('{"a":1}');
  const url = 'https://example.com/hook?x=1';
  const receiver = new Receiver({ currentSigningKey: current, nextSigningKey: next });
  assert.equal(await receiver.verify({ signature: signDelivery(current, url, body, Date.now()), body: body.toString(), url }), true);
  assert.equal(await receiver.verify({ signature: signDelivery(next, url, body, Date.now()), body: body.toString(), url }), true);
  await assert.rejects(receiver.verify({ signature: signDelivery('other', url, body, Date.now()), body: body.toString(), url }));
  await assert.rejects(receiver.verify({ signature: signDelivery(current, url, body, Date.now()), body: '{"a":2}', url }));
  await assert.rejects(receiver.verify({ signature: signDelivery(current, url, body, Date.now()), body: body.toString(), url: 'https://example.com/other' }));
  const expired = signDelivery(current, url, body, Date.now() - 600_000);
  await assert.rejects(receiver.verify({ signature: expired, body: body.toString(), url }));
});

test('flow-control gate: an attempt whose outcome is committed but not yet ended still counts against the rate', async () => {
  // The race behind a 4th arrival in a rate-3 window: the store already counts the finished
  // message as no longer admitted while the dispatcher has not yet reported the attempt's end.
  const { AdmissionGate } = await import('../../src/queue/flow-control/gate.js');
  let admitted = 3;
  const released: number[] = [];
  let nextSeq = 10;
  const tx = {
    heldQueues: () => [],
    heldKeys: () => ['rk'],
    queueConfig: () => undefined,
    flowKey: (key: string) => ({ key, rate: 3, periodS: 1, paused: false, admitted }),
    admittedInQueue: () => 0,
    admittedForKey: () => admitted,
    queueHeads: () => [],
    keyHeads: (_k: string, limit: number) => Array.from({ length: Math.max(0, limit) }, () => ({ seq: nextSeq++, flowControlKey: 'rk' })),
    release: (seqs: number[]) => released.push(...seqs),
    nextHeldDue: () => undefined,
  };
  let now = 1_000_000;
  const routing = { admit: async <T>(fn: (t: typeof tx) => T) => fn(tx) };
  const gate = new AdmissionGate({
    routing: routing as never,
    clock: { now: () => now },
    logger: { error() {}, warn() {}, info() {} } as never,
    onRelease: () => undefined,
  });
  const round = async () => {
    gate.start();
    await new Promise((r) => setTimeout(r, 5));
    gate.stop();
  };
  for (let i = 0; i < 3; i++) gate.onStart({ flowControlKey: 'rk', retried: 0 });
  admitted = 2; // one attempt's outcome committed; onEnd not called yet
  await round();
  assert.deepEqual(released, [], 'no slot while three attempts are running or just ended');
  gate.onEnd({ flowControlKey: 'rk' }, now);
  admitted = 0; // all three finished in the store, only one end reported
  await round();
  assert.deepEqual(released, [], 'two attempts still running, one ended within the period');
  gate.onEnd({ flowControlKey: 'rk' }, now);
  gate.onEnd({ flowControlKey: 'rk' }, now);
  now += 1000; // one period after the ends: the window is free again
  await round();
  assert.equal(released.length, 3);
});
