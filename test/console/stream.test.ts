/**
 * The console's relay of kv event streams (`/console/api/kv/subscribe/<channel>`): streamed as it
 * comes, under the kv port's slow-reader limits (`SVC_KV_SSE_*`), and closed upstream when the
 * browser goes.
 *
 * - 10 streams whose client never reads while 100 MiB are published to each (svc as its own
 *   process, hard limit 2 MiB): every stream is dropped, the Redis subscriptions end, and svc's
 *   peak resident memory grows by less than 192 MiB whatever the volume (buffering without a limit,
 *   as the console once did, grows it by the published volume times the streams: 1 GB here).
 *   Typical growth is 65-72 MiB (the streams' buffers plus the 256 KiB messages V8 has not
 *   collected yet); one run on a loaded machine peaked at +142 MiB, hence the margin.
 * - A client that disconnects: the relay closes its connection to kv, which ends the Redis
 *   subscription (PUBSUB NUMSUB back to 0) — with heartbeats every 500 ms, which would keep an
 *   abandoned upstream alive forever.
 */
import assert from 'node:assert/strict';
import net from 'node:net';
import { after, before, describe, test } from 'node:test';
import { Redis } from '@upstash/redis';
import { startTestSvc } from '../helpers/env.js';
import { waitFor } from '../helpers/wait.js';
import { spawnSvc, type SvcProcess } from '../mgmt/helpers.js';
import { consoleLogin } from './helpers.js';

const MiB = 1024 * 1024;

describe('console: event streams of a client that does not read', () => {
  let svc: SvcProcess;
  before(async () => {
    svc = await spawnSvc(['kv', 'mgmt'], {
      SVC_KV_SSE_HARD_LIMIT_BYTES: String(2 * MiB),
      SVC_KV_SSE_SOFT_LIMIT_BYTES: String(512 * 1024),
      SVC_KV_SSE_SOFT_LIMIT_MS: '2000',
    });
  });
  after(() => svc?.close());

  test('10 unread streams, 100 MiB published to each: all dropped, subscriptions ended, peak RSS grows < 192 MiB', async () => {
    const c = svc.credentials();
    const redis = new Redis({ url: svc.urls.kv, token: c['kv.token'] });
    const login = await fetch(`${svc.urls.mgmt}/console/api/login`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ user: c['mgmt.user'], password: c['mgmt.password'] }),
    });
    const cookie = /svc_console=([^;]+)/.exec(login.headers.get('set-cookie') ?? '')![1];
    const { csrf } = (await login.json()) as { csrf: string };
    const port = Number(new URL(svc.urls.mgmt).port);

    await redis.publish('warm', 'x'.repeat(256 * 1024)); // code paths loaded before the baseline
    svc.resetPeak();
    const baseline = svc.rss();
    const closed: Promise<void>[] = [];
    const sockets: net.Socket[] = [];
    for (let i = 0; i < 10; i++) {
      const s = net.connect(port, '127.0.0.1');
      s.on('error', () => undefined);
      closed.push(new Promise((r) => s.once('close', () => r())));
      s.write(`GET /console/api/kv/subscribe/firehose?csrf=${encodeURIComponent(csrf)} HTTP/1.1\r\nhost: 127.0.0.1:${port}\r\ncookie: svc_console=${cookie}\r\n\r\n`);
      sockets.push(s); // no 'data' listener: this client reads nothing
    }
    await waitFor('10 subscribers', async () => ((await redis.exec(['PUBSUB', 'NUMSUB', 'firehose'])) as [string, number])[1] === 10, 60_000);
    // 4 messages of 256 KiB per call, made by Redis itself: the test's own requests stay small
    const PUBLISH4 = "local n = 0 for i = 1, 4 do n = n + redis.call('PUBLISH', KEYS[1], string.rep('m', 262144)) end return n";
    let delivered = 0;
    for (let i = 0; i < 100; i++) delivered += (await redis.eval(PUBLISH4, ['firehose'], [])) as number;
    await waitFor('subscriptions ended', async () => ((await redis.exec(['PUBSUB', 'NUMSUB', 'firehose'])) as [string, number])[1] === 0, 60_000);
    const peak = svc.peakRss();
    const grew = peak - baseline;
    console.log(`# RSS baseline ${(baseline / MiB).toFixed(1)} MiB, peak ${(peak / MiB).toFixed(1)} MiB (+${(grew / MiB).toFixed(1)} MiB); ${delivered} of 4000 messages handed to a stream before it was dropped`);
    assert.ok(delivered < 4000, 'streams were dropped while publishing');
    for (const s of sockets) s.resume(); // read what was sent before the drop, then see the close
    await Promise.all(closed);
    // per stream: the 2 MiB limit plus one message unsent; the rest is the garbage of handing
    // ~9 MiB per stream to the kernel's socket buffers before the limit is reached, not held
    assert.ok(grew < 192 * MiB, `peak RSS grew by ${(grew / MiB).toFixed(1)} MiB`);
    assert.match(svc.output(), /console: event stream closed: the browser does not read fast enough/);
  });
});

describe('console: a client that goes away', () => {
  let svc: Awaited<ReturnType<typeof startTestSvc>>;
  before(async () => {
    svc = await startTestSvc(['kv', 'mgmt'], { env: { SVC_KV_SSE_HEARTBEAT_MS: '500' } });
  });
  after(() => svc?.close());

  test('closing the browser side closes the stream to kv (its Redis subscription ends)', async () => {
    const redis = new Redis({ url: svc.urls.kv!, token: svc.ctx.credentials.get('kv.token') });
    const numsub = async () => ((await redis.exec(['PUBSUB', 'NUMSUB', 'gone'])) as [string, number])[1];
    const s = await consoleLogin(svc);
    const ac = new AbortController();
    const res = await fetch(`${svc.urls.mgmt}/console/api/kv/subscribe/gone`, { headers: { cookie: `svc_console=${s.cookie}`, 'x-csrf-token': s.csrf }, signal: ac.signal });
    assert.equal(res.status, 200);
    assert.equal(res.headers.get('content-type'), 'text/event-stream');
    const reader = res.body!.getReader();
    const first = new TextDecoder().decode((await reader.read()).value);
    assert.match(first, /data: subscribe,gone,1/);
    assert.equal(await numsub(), 1);
    ac.abort();
    await reader.cancel().catch(() => undefined);
    await waitFor('the subscription to end', async () => (await numsub()) === 0, 30_000);
  });
});
