/**
 * Delivery signatures (`Upstash-Signature`), verified by the SDK's own `Receiver`.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Receiver } from '@upstash/qstash';
import { signDelivery } from '../../src/queue/delivery/signing.js';

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

test('signatures verify for keys of every length (longer than the 64-byte HMAC block, non-ASCII) and alternating keys', async () => {
  const body = Buffer.from('{"b":2}');
  const url = 'https://example.com/' + 'p'.repeat(700) + '?q=%C3%A4';
  const keys = ['k', 'x'.repeat(63), 'x'.repeat(64), 'y'.repeat(65), 'z'.repeat(300), 'schlüssel-ü'.repeat(10)];
  for (const round of [0, 1]) {
    for (const key of keys) {
      const receiver = new Receiver({ currentSigningKey: key, nextSigningKey: `${key}-next` });
      const signature = signDelivery(key, url, body, Date.now());
      assert.equal(await receiver.verify({ signature, body: body.toString(), url }), true, `key of ${key.length} chars, round ${round}`);
      await assert.rejects(receiver.verify({ signature: signDelivery(`${key}!`, url, body, Date.now()), body: body.toString(), url }));
    }
  }
});
