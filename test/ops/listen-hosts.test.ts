/**
 * `SVC_MGMT_HOST`: the management port (console, management API, `/metrics`) binds its own address,
 * so an operator can serve the SDK ports on one address (`SVC_HOST`) and keep management on
 * another; without it every listener binds `SVC_HOST`. Two loopback addresses (127.0.0.1 and
 * 127.0.0.2, both on `lo` in Linux) stand for a public and a private one.
 */
import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { spawnSvc, type SvcProcess } from '../helpers/svc-process.js';

const started: SvcProcess[] = [];
after(async () => {
  for (const s of started) await s.close();
});

/** True when a TCP connection to `host:port` is accepted and answered over HTTP. */
async function answers(host: string, port: number, path: string): Promise<boolean> {
  try {
    await fetch(`http://${host}:${port}${path}`, { signal: AbortSignal.timeout(10_000) });
    return true;
  } catch {
    return false;
  }
}

test('SVC_MGMT_HOST binds the management port alone; the queue port stays on SVC_HOST', async () => {
  const svc = await spawnSvc(['queue', 'mgmt'], { SVC_HOST: '127.0.0.1', SVC_MGMT_HOST: '127.0.0.2' });
  started.push(svc);
  assert.equal(new URL(svc.urls.mgmt).hostname, '127.0.0.2', 'the banner names the management address');
  assert.equal(new URL(svc.urls.queue).hostname, '127.0.0.1');
  assert.equal(await answers('127.0.0.2', svc.ports.mgmt, '/v2/health'), true);
  assert.equal(await answers('127.0.0.1', svc.ports.mgmt, '/v2/health'), false, 'management is not on SVC_HOST');
  assert.equal(await answers('127.0.0.1', svc.ports.queue, '/v2/health'), true);
  assert.equal(await answers('127.0.0.2', svc.ports.queue, '/v2/health'), false, 'the queue is not on SVC_MGMT_HOST');
  assert.match(svc.output(), /SVC_MGMT_URL=http:\/\/127\.0\.0\.2:/, 'the .env block points at the management address');
});

test('without SVC_MGMT_HOST the management port binds SVC_HOST', async () => {
  const svc = await spawnSvc(['queue', 'mgmt'], { SVC_HOST: '127.0.0.2' });
  started.push(svc);
  assert.equal(new URL(svc.urls.mgmt).hostname, '127.0.0.2');
  assert.equal(await answers('127.0.0.2', svc.ports.mgmt, '/v2/health'), true);
  assert.equal(await answers('127.0.0.1', svc.ports.mgmt, '/v2/health'), false);
});
