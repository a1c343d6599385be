/**
 * Retry timing of the queue: the safe retry-delay expression evaluator (`Upstash-Retry-Delay`), the
 * default backoff, and `Retry-After` / `X-RateLimit-Reset` parsing.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { compileExpression } from '../../src/queue/delivery/expr.js';
import { defaultBackoffMs, parseRetryAfter, retryAfterMs, retryDelayMs } from '../../src/queue/delivery/backoff.js';

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
