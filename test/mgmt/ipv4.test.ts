/**
 * `GET /v2/mq/ipv4` (spec "Get sender IPv4 blocks"): configured blocks, detected blocks, the
 * queue's egress address, and a bad `SVC_MGMT_IPV4_CIDRS` stopping `svc serve` (exit code 2).
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { isIpv4Cidr } from '../../src/config.js';
import { senderIpv4Blocks, type InterfaceTable } from '../../src/mgmt/ipv4.js';
import { startTestSvc, tempDir, testConfig } from '../helpers/env.js';
import { mgmt } from './helpers.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

/** What the host's interfaces say, computed independently of the implementation. */
function hostBlocks(): string[] {
  const out: string[] = [];
  for (const list of Object.values(os.networkInterfaces())) {
    for (const a of list ?? []) if (a.family === 'IPv4' && !a.internal && !out.includes(`${a.address}/32`)) out.push(`${a.address}/32`);
  }
  return out;
}

test('SVC_MGMT_IPV4_CIDRS: exactly the configured blocks, as application/json', async () => {
  const svc = await startTestSvc(['mgmt'], {
    env: { SVC_MGMT_IPV4_CIDRS: '203.0.113.0/24, 198.51.100.7/32,203.0.113.0/24', SVC_QUEUE_EGRESS_ADDRESS: '127.0.0.1' },
  });
  try {
    const r = await mgmt(svc, '/v2/mq/ipv4');
    assert.equal(r.status, 200);
    assert.match(r.headers.get('content-type') ?? '', /^application\/json/);
    assert.deepEqual(r.body, ['203.0.113.0/24', '198.51.100.7/32']);
  } finally {
    await svc.close();
  }
});

test('detected: the host\'s non-internal IPv4 addresses as /32 blocks', async () => {
  const svc = await startTestSvc(['mgmt']);
  try {
    const r = await mgmt(svc, '/v2/mq/ipv4');
    assert.equal(r.status, 200);
    assert.deepEqual(r.body, hostBlocks());
    for (const b of r.body) assert.ok(isIpv4Cidr(b), b);
    assert.ok(!r.body.includes('127.0.0.1/32'));
  } finally {
    await svc.close();
  }
});

test('detected + SVC_QUEUE_EGRESS_ADDRESS: the egress address is listed', async () => {
  const svc = await startTestSvc(['mgmt'], { env: { SVC_QUEUE_EGRESS_ADDRESS: '127.0.0.1' } });
  try {
    const r = await mgmt(svc, '/v2/mq/ipv4');
    assert.equal(r.status, 200);
    assert.deepEqual(r.body, [...hostBlocks(), '127.0.0.1/32']);
  } finally {
    await svc.close();
  }
});

test('detection rules on a given interface table: IPv6 and internal skipped, duplicates removed', () => {
  const { dir, cleanup } = tempDir();
  try {
    const nic = (address: string, family: 'IPv4' | 'IPv6', internal = false) =>
      ({ address, family, internal, netmask: '', mac: '00:00:00:00:00:00', cidr: null, ...(family === 'IPv6' ? { scopeid: 0 } : {}) }) as never;
    const table: InterfaceTable = {
      lo: [nic('127.0.0.1', 'IPv4', true), nic('::1', 'IPv6', true)],
      eth0: [nic('10.1.2.3', 'IPv4'), nic('fe80::1', 'IPv6')],
      eth1: [nic('192.0.2.10', 'IPv4'), nic('10.1.2.3', 'IPv4')],
    };
    assert.deepEqual(senderIpv4Blocks(testConfig(dir), table), ['10.1.2.3/32', '192.0.2.10/32']);
    assert.deepEqual(senderIpv4Blocks(testConfig(dir, { SVC_QUEUE_EGRESS_ADDRESS: '192.0.2.10' }), table), ['10.1.2.3/32', '192.0.2.10/32']);
    assert.deepEqual(senderIpv4Blocks(testConfig(dir, { SVC_QUEUE_EGRESS_ADDRESS: '127.0.0.1' }), { lo: table.lo }), ['127.0.0.1/32']);
    assert.deepEqual(senderIpv4Blocks(testConfig(dir), { lo: table.lo }), []);
  } finally {
    cleanup();
  }
});

test('a bad SVC_MGMT_IPV4_CIDRS stops `svc serve` with exit code 2 and names the bad blocks', async () => {
  const { dir, cleanup } = tempDir();
  try {
    const child = spawn(process.execPath, [path.join(ROOT, 'bin/svc.js'), 'serve'], {
      cwd: ROOT,
      env: {
        PATH: process.env.PATH,
        SVC_AREAS: 'mgmt',
        SVC_MGMT_PORT: '0',
        SVC_DATA_DIR: dir,
        SVC_MGMT_IPV4_CIDRS: 'bad,10.0.0.1/8,192.0.2.0/24',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    const killer = setTimeout(() => child.kill('SIGKILL'), 20_000);
    const code = await new Promise<number | null>((resolve) => child.on('exit', (c) => resolve(c)));
    clearTimeout(killer);
    assert.equal(code, 2, `stderr: ${stderr}`);
    assert.match(stderr, /invalid configuration/);
    assert.match(stderr, /SVC_MGMT_IPV4_CIDRS: not IPv4 CIDR blocks: bad, 10\.0\.0\.1\/8/);
    assert.doesNotMatch(stdout, /svc is running/);
  } finally {
    cleanup();
  }
});
