/**
 * What an unauthenticated client can make the management port hold: nothing but its headers. 120
 * concurrent connections each announce and send an 8 MiB body — to the console's forwarding without
 * a session, with a made-up session cookie, and to the management API without credentials — while
 * the svc process's peak resident memory is measured (`VmHWM`, svc runs as its own process). Every
 * one is refused with 401 from its headers alone; the peak grows by less than 64 MiB (reading the
 * bodies first, as the console once did, takes it up by about 1 GB). A signed-in console works
 * afterwards, and the sign-in form's own body is bounded (413 past 4 KiB).
 */
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { sendLargeBody, spawnSvc, basic, type SvcProcess } from './helpers.js';

const MiB = 1024 * 1024;
const BODY = 8 * MiB;

let svc: SvcProcess;
before(async () => {
  svc = await spawnSvc(['kv', 'mgmt']);
});
after(() => svc?.close());

async function signIn(): Promise<{ cookie: string; csrf: string }> {
  const c = svc.credentials();
  const r = await fetch(`${svc.urls.mgmt}/console/api/login`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ user: c['mgmt.user'], password: c['mgmt.password'] }),
  });
  assert.equal(r.status, 200);
  const cookie = /svc_console=([^;]+)/.exec(r.headers.get('set-cookie') ?? '')![1];
  return { cookie, csrf: ((await r.json()) as { csrf: string }).csrf };
}

test('120 anonymous connections sending 8 MiB bodies: every one refused with 401 from its headers; peak RSS grows < 64 MiB', async () => {
  const kinds: { path: string; headers: Record<string, string> }[] = [
    { path: '/console/api/kv/', headers: { 'content-type': 'application/json' } },
    { path: '/console/api/kv/pipeline', headers: { 'content-type': 'application/json', cookie: 'svc_console=made-up-session' } },
    { path: '/console/api/queue/v2/publish/http://127.0.0.1:9/x', headers: { 'content-type': 'text/plain', cookie: 'svc_console=x' } },
    { path: '/v2/credentials/kv/reset-password', headers: { 'content-type': 'application/json' } },
  ];
  // warm-up: each path once (code loaded, buffers allocated) before the baseline is taken
  for (const k of kinds) assert.equal((await sendLargeBody(svc.urls.mgmt, k.path, k.headers, 256 * 1024)).status, 401, k.path);
  const s = await signIn();
  svc.resetPeak();
  const baseline = svc.rss();

  const clients = Array.from({ length: 120 }, (_, i) => {
    const k = kinds[i % kinds.length];
    return sendLargeBody(svc.urls.mgmt, k.path, k.headers, BODY).then((o) => ({ ...o, path: k.path }));
  });
  const outcomes = await Promise.all(clients);
  const peak = svc.peakRss();
  const grew = peak - baseline;
  console.log(`# RSS baseline ${(baseline / MiB).toFixed(1)} MiB, peak during 120 x 8 MiB anonymous bodies ${(peak / MiB).toFixed(1)} MiB (+${(grew / MiB).toFixed(1)} MiB)`);
  const statuses = new Map<string, number>();
  for (const o of outcomes) statuses.set(`${o.path} ${o.status}`, (statuses.get(`${o.path} ${o.status}`) ?? 0) + 1);
  assert.deepEqual(
    outcomes.filter((o) => o.status !== 401),
    [],
    `every connection refused with 401: ${JSON.stringify([...statuses])}`,
  );
  assert.ok(grew < 64 * MiB, `peak RSS grew by ${(grew / MiB).toFixed(1)} MiB`);

  // the signed-in console still works, and its sign-in form takes 4 KiB at most
  const r = await fetch(`${svc.urls.mgmt}/console/api/kv/`, {
    method: 'POST',
    headers: { cookie: `svc_console=${s.cookie}`, 'x-csrf-token': s.csrf, 'content-type': 'application/json' },
    body: JSON.stringify(['SET', 'k', 'v']),
  });
  assert.deepEqual([r.status, await r.json()], [200, { result: 'OK' }]);
  const big = await fetch(`${svc.urls.mgmt}/console/api/login`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ user: 'admin', password: 'x'.repeat(8192) }) });
  assert.equal(big.status, 413);
  const ok = await fetch(`${svc.urls.mgmt}/v2/mq/ipv4`, { headers: { authorization: basic(svc.credentials()['mgmt.user'], svc.credentials()['mgmt.password']) } });
  assert.equal(ok.status, 200);
});
