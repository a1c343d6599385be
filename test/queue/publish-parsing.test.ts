/**
 * Parsing of publish requests: durations (`Upstash-Delay`, timeouts), the destination rebuilt from
 * the raw path, and Go-canonical header keys as stored and returned.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { parseDuration } from '../../src/queue/delivery/backoff.js';
import { destinationFromRawUrl } from '../../src/queue/api/publish.js';
import { canonicalHeader } from '../../src/queue/message-json.js';
import { svcHeadersWithPrefix } from '../../src/http/headers.js';

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

test('Svc-/Upstash- configuration headers: Svc- wins, repeated values joined, Upstash- names first in request order', () => {
  const headers = {
    host: 'svc.local',
    'svc-retries': '5',
    'upstash-retries': '2',
    'upstash-forward-b': ['1', '2'],
    'svc-forward-a': 'svc',
    'upstash-forward-a': 'upstash',
    'upstash-delay': '10s',
    'svcx-other': 'x',
    'upstashy-other': 'y',
  };
  const cfg = svcHeadersWithPrefix(headers, '');
  assert.deepEqual(Object.entries(cfg), [
    ['retries', '5'],
    ['forward-b', '1, 2'],
    ['forward-a', 'svc'],
    ['delay', '10s'],
  ]);
  assert.deepEqual(svcHeadersWithPrefix(headers, 'Forward-'), { b: '1, 2', a: 'svc' });
});
