/**
 * The SSRF switch (`SVC_QUEUE_BLOCK_PRIVATE_DESTINATIONS=true`): every URL of a request
 * (destination, callback, failure-callback; publish, batch, enqueue, URL-group endpoints,
 * schedules) that names a non-public address in any spelling — IPv4-mapped/compatible IPv6,
 * NAT64, numeric IPv4 forms — is refused at publish with 400 naming the URL, and a name whose DNS
 * answer is private is refused again when delivery connects. Through @upstash/qstash and raw HTTP.
 */
import assert from 'node:assert/strict';
import type dns from 'node:dns';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { Client } from '@upstash/qstash';
import { createLogger } from '../../src/logger.js';
import { createContext } from '../../src/main.js';
import { blockedHost, isBlockedAddress } from '../../src/private-address.js';
import { createQueueServer } from '../../src/queue/server.js';
import { tempDir, testConfig } from '../helpers/env.js';
import { startQueue, startSink, waitFor, type Sink } from './helpers.js';

/** Hosts (as written in a URL) that must all be refused; each reaches loopback or a private net. */
const BAD_HOSTS = [
  '127.0.0.1',
  '[::ffff:127.0.0.1]',
  '[::ffff:7f00:1]',
  '[0:0:0:0:0:ffff:127.0.0.1]',
  '[::127.0.0.1]',
  '[64:ff9b::7f00:1]',
  '[::]',
  '[::1]',
  '[fc00::1]',
  '[fd12:3456::1]',
  '[fe80::1]',
  '0.0.0.0',
  '0.1.2.3',
  '169.254.169.254',
  '100.64.0.1',
  '10.0.0.1',
  '172.16.3.4',
  '192.168.1.1',
  '2130706433',
  '0x7f.1',
  '127.1',
  '0177.0.0.1',
  'localhost',
  'LOCALHOST.',
  'api.localhost',
];

describe('SSRF address rules', () => {
  test('ipaddr.js classification: private forms refused, public addresses allowed', () => {
    for (const ip of ['::ffff:127.0.0.1', '::ffff:10.1.2.3', '::7f00:1', '64:ff9b::a00:1', '::', '::1', 'fc00::1', 'fe80::1', '0.0.0.0', '0.255.0.1', '169.254.1.1', '100.127.255.255', '224.0.0.1', '255.255.255.255', '2002:7f00:1::1']) {
      assert.equal(isBlockedAddress(ip), true, ip);
    }
    for (const ip of ['8.8.8.8', '1.1.1.1', '100.128.0.1', '2606:4700:4700::1111', '::ffff:8.8.8.8']) {
      assert.equal(isBlockedAddress(ip), false, ip);
    }
    for (const h of BAD_HOSTS) assert.ok(blockedHost(new URL(`http://${h}:80/`).hostname), h);
    assert.equal(blockedHost(new URL('http://example.com/').hostname), undefined);
    assert.equal(blockedHost(new URL('http://[2606:4700:4700::1111]/').hostname), undefined);
  });
});

describe('SSRF switch on', () => {
  let sink: Sink;
  let q: Awaited<ReturnType<typeof startQueue>>;
  before(async () => {
    sink = await startSink();
    q = await startQueue({ SVC_QUEUE_BLOCK_PRIVATE_DESTINATIONS: 'true' });
  });
  after(async () => {
    await q.close();
    await sink.close();
  });
  const port = () => new URL(sink.url).port;
  const raw = (p: string, headers: Record<string, string> = {}, body = 'x') =>
    fetch(`${q.url}${p}`, { method: 'POST', headers: { authorization: `Bearer ${q.token}`, ...headers }, body });
  const expect400 = async (res: Response, url: string) => {
    const text = await res.text();
    assert.equal(res.status, 400, `${url}: ${res.status} ${text}`);
    const msg = (JSON.parse(text) as { error: string }).error;
    assert.ok(msg.includes(url), `error names the URL ${url}: ${msg}`);
    assert.match(msg, /refused/);
  };

  test('raw publish: every private spelling of the destination is refused with 400 naming it', async () => {
    for (const h of BAD_HOSTS) {
      const url = `http://${h}:${port()}/ssrf`;
      await expect400(await raw(`/v2/publish/${url}`), url);
    }
    assert.equal(sink.requests.length, 0);
  });

  test('raw publish: callback and failure-callback to private addresses are refused', async () => {
    const cb = `http://[::ffff:127.0.0.1]:${port()}/cb`;
    await expect400(await raw('/v2/publish/https://example.com/x', { 'Upstash-Callback': cb }), cb);
    await expect400(await raw('/v2/publish/https://example.com/x', { 'Upstash-Failure-Callback': cb }), cb);
    await expect400(await raw('/v2/publish/https://example.com/x', { 'Upstash-Callback': 'https://example.com/cb', 'Upstash-Callback-Failure-Callback': cb }), cb);
  });

  test('SDK: publish, callbacks, batch, enqueue, URL group and schedule refuse private URLs', async () => {
    const bad = `http://[::ffff:7f00:1]:${port()}/sdk`;
    const ok = 'https://example.com/sdk';
    await assert.rejects(q.client.publish({ url: bad, body: 'b' }), /refused/);
    await assert.rejects(q.client.publish({ url: ok, body: 'b', callback: bad }), /refused/);
    await assert.rejects(q.client.publish({ url: ok, body: 'b', failureCallback: bad }), /refused/);
    await assert.rejects(q.client.batchJSON([{ url: ok, body: {} }, { url: bad, body: {} }]), /refused/);
    await assert.rejects(q.client.batchJSON([{ url: ok, body: {}, callback: bad }]), /refused/);
    await assert.rejects(q.client.queue({ queueName: 'ssrf-q' }).enqueueJSON({ url: bad, body: {} }), /refused/);
    await assert.rejects(q.client.queue({ queueName: 'ssrf-q' }).enqueueJSON({ url: ok, body: {}, failureCallback: bad }), /refused/);
    await assert.rejects(q.client.urlGroups.addEndpoints({ name: 'ssrf-g', endpoints: [{ url: bad }] }), /refused/);
    await assert.rejects(q.client.schedules.create({ destination: bad, cron: '* * * * *' }), /refused/);
    await assert.rejects(q.client.schedules.create({ destination: ok, cron: '* * * * *', callback: bad }), /refused/);
    // the DLQ and logs stay empty: nothing was stored
    assert.equal((await q.client.logs({} as never)).logs.length, 0);
    // a public destination is still accepted
    const res = await q.client.publish({ url: ok, body: 'b', retries: 0 });
    assert.ok(res.messageId);
  });
});

describe('SSRF switch: checked again on the address delivery connects to', () => {
  /** A resolver that answers 127.0.0.1 for `*.rebind.test` (as a DNS name that changed after publish would). */
  const lookup = ((hostname: string, options: dns.LookupOptions, cb: (err: Error | null, addrs: dns.LookupAddress[]) => void) => {
    if (!hostname.endsWith('.rebind.test')) return cb(Object.assign(new Error(`ENOTFOUND ${hostname}`), { code: 'ENOTFOUND' }), []);
    cb(null, [{ address: '127.0.0.1', family: 4 }]);
  }) as unknown as typeof dns.lookup;

  async function start(block: boolean) {
    const tmp = tempDir('svc-q-ssrf-');
    const config = testConfig(tmp.dir, { SVC_AREAS: 'queue', SVC_QUEUE_BLOCK_PRIVATE_DESTINATIONS: String(block) });
    const actx = createContext(config, { logger: createLogger('fatal'), env: {} });
    const server = await createQueueServer(actx, { lookup });
    const url = await server.listen();
    const client = new Client({ baseUrl: url, token: actx.credentials.get('queue.token'), retry: false });
    return { client, close: async () => (await server.close(), tmp.cleanup()) };
  }

  test('a name resolving to loopback is accepted at publish and refused at connect', async () => {
    const sink = await startSink();
    const dest = `http://svc.rebind.test:${new URL(sink.url).port}`;
    const open = await start(false);
    const blocked = await start(true);
    try {
      // control: without the switch the same name reaches the sink through the same resolver
      await open.client.publish({ url: `${dest}/open`, body: 'o' });
      await waitFor('control delivery', () => sink.at('/open')[0], 30_000);

      const { messageId } = await blocked.client.publish({ url: `${dest}/blocked`, body: 'b', retries: 0 });
      const entry = await waitFor('DLQ entry', async () => (await blocked.client.dlq.listMessages({ filter: { messageId } } as never)).messages[0], 30_000);
      assert.equal(sink.at('/blocked').length, 0, 'the blocked delivery never reached the sink');
      const logs = await blocked.client.logs({ filter: { messageId } } as never);
      const failed = logs.logs.find((l) => (l as { error?: string }).error);
      assert.match(String((failed as { error?: string } | undefined)?.error ?? JSON.stringify(entry)), /not a public address/);
    } finally {
      await open.close();
      await blocked.close();
      await sink.close();
    }
  });
});
