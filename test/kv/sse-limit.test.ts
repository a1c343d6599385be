/**
 * The output limit of SSE streams (`SVC_KV_SSE_HARD_LIMIT_BYTES`, `SVC_KV_SSE_SOFT_LIMIT_BYTES`,
 * `SVC_KV_SSE_SOFT_LIMIT_MS`): a subscriber that never reads (a raw socket paused after the
 * stream started, so the kernel buffers fill and svc's output grows) is dropped once its unsent
 * output passes the hard limit, or stays above the soft limit too long; its Redis connection is
 * closed (PUBLISH counts 0 receivers) and the socket is closed.
 */
import assert from 'node:assert/strict';
import net from 'node:net';
import { after, before, describe, test } from 'node:test';
import { Redis } from '@upstash/redis';
import { startTestSvc } from '../helpers/env.js';
import { call } from './helpers.js';

type Svc = Awaited<ReturnType<typeof startTestSvc>>;

/** A raw HTTP/1.1 client of one SSE stream: paused once the first `data:` line arrived. */
async function pausedStream(base: string, token: string, path: string): Promise<{ socket: net.Socket; closed: Promise<void> }> {
  const { hostname, port } = new URL(base);
  const socket = net.connect({ host: hostname, port: Number(port) });
  const closed = new Promise<void>((resolve) => socket.on('close', () => resolve()));
  socket.on('error', () => {});
  await new Promise<void>((resolve) => socket.once('connect', () => resolve()));
  socket.write(`GET ${path} HTTP/1.1\r\nhost: ${hostname}\r\nauthorization: Bearer ${token}\r\naccept: text/event-stream\r\n\r\n`);
  let seen = '';
  await new Promise<void>((resolve, reject) => {
    const onData = (chunk: Buffer) => {
      seen += chunk.toString('latin1');
      if (seen.includes('\ndata: ')) {
        socket.off('data', onData);
        socket.pause(); // from now on the client reads nothing
        resolve();
      }
    };
    socket.on('data', onData);
    socket.once('close', () => reject(new Error(`stream closed before it started: ${seen}`)));
  });
  assert.match(seen, /^HTTP\/1\.1 200/);
  return { socket, closed };
}

/** Publishes `chunk` on `channel` until nobody receives it; returns the bytes published (throws past `maxBytes`). */
async function publishUntilDropped(redis: Redis, channel: string, chunk: string, maxBytes: number): Promise<number> {
  let sent = 0;
  while (sent < maxBytes) {
    const receivers = await redis.publish(channel, chunk);
    if (receivers === 0) return sent;
    sent += chunk.length;
  }
  throw new Error(`the stream was still subscribed after ${sent} bytes`);
}

/** Resolves when `p` does, fails after `ms`. */
function within(p: Promise<void>, ms: number, what: string): Promise<void> {
  let timer: NodeJS.Timeout;
  return Promise.race([p, new Promise<void>((_, reject) => (timer = setTimeout(() => reject(new Error(`${what} in ${ms} ms`)), ms)))]).finally(() =>
    clearTimeout(timer),
  );
}

const CHUNK = 'x'.repeat(256 * 1024);
const MAX_BYTES = 300 * 1024 * 1024;

describe('SSE hard output limit (2 MiB, soft limit off)', () => {
  let svc: Svc;
  let base: string;
  let token: string;
  let redis: Redis;
  before(async () => {
    svc = await startTestSvc(['kv'], { env: { SVC_KV_SSE_HARD_LIMIT_BYTES: String(2 * 1024 * 1024), SVC_KV_SSE_SOFT_LIMIT_BYTES: '0' } });
    base = svc.urls.kv!;
    token = svc.ctx.credentials.get('kv.token');
    redis = new Redis({ url: base, token });
  });
  after(async () => {
    await svc?.close();
  });

  test('a subscriber that never reads is dropped; other subscribers and requests are unaffected', async () => {
    const slow = await pausedStream(base, token, '/subscribe/firehose');
    const sent = await publishUntilDropped(redis, 'firehose', CHUNK, MAX_BYTES);
    assert.ok(sent >= 2 * 1024 * 1024, `dropped after ${sent} bytes only`);
    // the client sees the connection end once it reads again
    slow.socket.resume();
    await within(slow.closed, 30_000, 'the dropped stream did not close');
    assert.equal(await redis.set('after', 'ok'), 'OK');
    assert.equal(await redis.get('after'), 'ok');
  });

  test('psubscribe and monitor streams are limited too', async () => {
    const p = await pausedStream(base, token, '/psubscribe/hose:*');
    await publishUntilDropped(redis, 'hose:1', CHUNK, MAX_BYTES);
    p.socket.resume();
    await within(p.closed, 30_000, 'the psubscribe stream did not close');

    const m = await pausedStream(base, token, '/monitor');
    // every command shows in MONITOR with its arguments: big SETs fill the stream; 48 MiB is far
    // past what the kernel buffers of a loopback connection hold plus the 2 MiB limit
    for (let sent = 0; sent < 48 * 1024 * 1024; sent += CHUNK.length) {
      assert.equal((await call(base, '/set/big', { token, method: 'POST', body: CHUNK })).status, 200);
    }
    m.socket.resume();
    await within(m.closed, 30_000, 'the monitor stream did not close');
  });
});

describe('SSE soft output limit (256 KiB for 1 s; hard limit 1 GiB)', () => {
  let svc: Svc;
  let base: string;
  let token: string;
  before(async () => {
    svc = await startTestSvc(['kv'], {
      env: {
        SVC_KV_SSE_HARD_LIMIT_BYTES: String(1024 * 1024 * 1024),
        SVC_KV_SSE_SOFT_LIMIT_BYTES: String(256 * 1024),
        SVC_KV_SSE_SOFT_LIMIT_MS: '1000',
        SVC_KV_SSE_HEARTBEAT_MS: '100',
      },
    });
    base = svc.urls.kv!;
    token = svc.ctx.credentials.get('kv.token');
  });
  after(async () => {
    await svc?.close();
  });

  test('a subscriber above the soft limit for longer than allowed is dropped', async () => {
    const redis = new Redis({ url: base, token });
    const slow = await pausedStream(base, token, '/subscribe/drip');
    // publish until the stream is dropped; then PUBLISH counts nobody
    await publishUntilDropped(redis, 'drip', CHUNK, MAX_BYTES);
    slow.socket.resume();
    await within(slow.closed, 30_000, 'the dropped stream did not close');
  });
});
