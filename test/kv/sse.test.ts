/**
 * SSE streams (spec "Key-value REST interface"): `/subscribe/<ch>`,
 * `/psubscribe/<pattern>`, `/monitor`, read with fetch and a stream reader; one Redis connection
 * per stream, released when the client disconnects.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { setHeartbeatMs } from '../../src/kv/sse.js';
import { startTestSvc } from '../helpers/env.js';
import { call, until } from './helpers.js';

let svc: Awaited<ReturnType<typeof startTestSvc>>;
let base: string;
let token: string;

before(async () => {
  // heartbeats every 500 ms (worker processes take the interval from the config, not setHeartbeatMs)
  svc = await startTestSvc(['kv'], { env: { SVC_KV_SSE_HEARTBEAT_MS: '500' } });
  base = svc.urls.kv!;
  token = svc.ctx.credentials.get('kv.token');
});
after(async () => {
  await svc?.close();
});

/** Opens an SSE stream; `lines` collects every `data:` payload, `raw` the whole text. */
async function open(path: string, t = token) {
  const ac = new AbortController();
  const res = await fetch(base + path, {
    method: 'POST',
    headers: { authorization: `Bearer ${t}`, accept: 'text/event-stream', 'content-type': 'application/json', 'upstash-encoding': 'base64' },
    body: '[]',
    signal: ac.signal,
  });
  const lines: string[] = [];
  let raw = '';
  const reader = res.body!.getReader();
  const dec = new TextDecoder();
  const done = (async () => {
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        raw += dec.decode(value, { stream: true });
        const parts = raw.split('\n');
        lines.length = 0;
        for (const l of parts) if (l.startsWith('data: ')) lines.push(l.slice(6));
      }
    } catch {
      /* aborted */
    }
  })();
  return { res, lines, get raw() { return raw; }, close: async () => { ac.abort(); await done; } };
}

const publish = async (ch: string, msg: string) => (await call(base, `/publish/${encodeURIComponent(ch)}/${encodeURIComponent(msg)}`, { token })).json.result as number;

describe('SSE streams', () => {
  test('subscribe: confirmation, messages raw (not base64), release on disconnect', async () => {
    const s = await open('/subscribe/chat');
    assert.equal(s.res.status, 200);
    assert.match(String(s.res.headers.get('content-type')), /text\/event-stream/);
    assert.ok(s.res.headers.get('upstash-sync-token'));
    await until(() => s.lines.length >= 1);
    assert.equal(s.lines[0], 'subscribe,chat,1');
    // a second subscriber has its own connection: its count is 1 too
    const s2 = await open('/subscribe/chat');
    await until(() => s2.lines.length >= 1);
    assert.equal(s2.lines[0], 'subscribe,chat,1');
    assert.equal(await publish('chat', 'hello'), 2);
    assert.equal(await publish('chat', 'how are you today?'), 2);
    await until(() => s.lines.length >= 3);
    assert.deepEqual(s.lines, ['subscribe,chat,1', 'message,chat,hello', 'message,chat,how are you today?']);
    await s.close();
    await s2.close();
    assert.equal(await until(async () => (await publish('chat', 'x')) === 0 || undefined), true);
  });

  test('psubscribe: pmessage lines with pattern and channel', async () => {
    const s = await open('/psubscribe/user:*');
    await until(() => s.lines.length >= 1);
    assert.equal(s.lines[0], 'psubscribe,user:*,1');
    assert.equal(await publish('user:42', 'joined'), 1);
    await until(() => s.lines.length >= 2);
    assert.equal(s.lines[1], 'pmessage,user:*,user:42,joined');
    await s.close();
  });

  test('monitor: "OK" first, then commands with the client address masked', async () => {
    const s = await open('/monitor');
    await until(() => s.lines.length >= 1);
    assert.equal(s.lines[0], '"OK"');
    await call(base, '/set/monkey/v%22x', { token });
    const line = await until(() => s.lines.find((l) => l.includes('"monkey"')));
    assert.match(line!, /^\d+\.\d+ \[0 0\.0\.0\.0:0\] "set" "monkey" "v\\"x"$/);
    await s.close();
  });

  test('heartbeat comments, read-only token and errors before the stream', async () => {
    // the read-only user may subscribe but not monitor
    const ro = svc.ctx.credentials.get('kv.readonlyToken');
    setHeartbeatMs(50);
    const s = await open('/subscribe/rochan', ro);
    await until(() => s.lines.length >= 1);
    assert.equal(s.lines[0], 'subscribe,rochan,1');
    await until(() => s.raw.includes('\n: heartbeat\n'));
    setHeartbeatMs(15_000);
    await s.close();
    const m = await call(base, '/monitor', { token: ro, method: 'POST' });
    assert.equal(m.status, 400);
    assert.match(m.json.error, /NOPERM/);
    const unauth = await call(base, '/subscribe/x', { method: 'POST' });
    assert.equal(unauth.status, 401);
  });
});
