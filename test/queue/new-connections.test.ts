/**
 * New connections while the queue's event loop is busy (`src/http/accept.ts`,
 * `SVC_QUEUE_ACCEPT_HANDLES`, `SVC_QUEUE_LISTEN_BACKLOG`).
 *
 * libuv (Node 20 and later) takes one connection from a listening handle per event-loop iteration,
 * so while keep-alive clients make every iteration long, new connections wait in the kernel's
 * accept queue. The first test makes one long iteration on purpose (this process, which runs the
 * server, blocks while a child process opens connections that each send a publish) and then reads
 * the listening socket's accept queue from `/proc/net/tcp` after each following iteration: it must
 * empty in a few iterations, several connections per iteration. The second keeps the server
 * saturated by keep-alive publishers (a child process) while another child publishes on new
 * connections in bursts, and checks every new-connection publish is answered, with a p99 within
 * 5x the keep-alive p99 (plus 1 s of slack for the loaded test machine).
 */
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { startQueue } from './helpers.js';

/** Opens `n` connections, each sends one publish; writes `marker` once all are connected; prints the statuses as JSON. */
const BURST = `
const net = require('net'), fs = require('fs');
const [port, token, dest, n, marker] = process.argv.slice(1);
const N = Number(n), statuses = [];
let connected = 0;
const done = (s) => { statuses.push(s); if (statuses.length === N) { process.stdout.write(JSON.stringify(statuses), () => process.exit(0)); } };
for (let i = 0; i < N; i++) {
  const s = net.connect(Number(port), '127.0.0.1');
  let buf = '';
  s.on('connect', () => {
    s.write('POST /v2/publish/' + dest + ' HTTP/1.1\\r\\nHost: x\\r\\nAuthorization: Bearer ' + token + '\\r\\nContent-Length: 1\\r\\n\\r\\nx');
    if (++connected === N) fs.writeFileSync(marker, '1');
  });
  s.on('data', (d) => { buf += d; if (buf.includes('\\r\\n\\r\\n')) { s.destroy(); done(Number(buf.split(' ')[1])); } });
  s.on('error', (e) => done(e.code));
}
`;

/**
 * Keep-alive publishers (`clients`, one request in flight each) for `ms`; or, with `mode` = new,
 * bursts of `clients` publishes on new connections every 300 ms. Prints {lat, failed} as JSON.
 */
const LOAD = `
const http = require('http');
const [mode, port, token, dest, clients, ms] = process.argv.slice(1);
const agent = mode === 'keepalive' ? new http.Agent({ keepAlive: true, maxSockets: Number(clients) }) : false;
const lat = []; let failed = 0; const end = Date.now() + Number(ms);
const one = () => new Promise((resolve) => {
  const t = performance.now();
  const req = http.request({ host: '127.0.0.1', port, method: 'POST', path: '/v2/publish/' + dest, agent, headers: { authorization: 'Bearer ' + token, 'content-length': 1 } }, (res) => {
    res.resume();
    res.on('end', () => { if (res.statusCode < 300) lat.push(performance.now() - t); else failed++; resolve(); });
  });
  req.on('error', () => { failed++; resolve(); });
  req.end('x');
});
const main = async () => {
  if (mode === 'keepalive') {
    await Promise.all(Array.from({ length: Number(clients) }, async () => { while (Date.now() < end) await one(); }));
  } else {
    const all = [];
    while (Date.now() < end) {
      for (let i = 0; i < Number(clients); i++) all.push(one());
      await new Promise((r) => setTimeout(r, 300));
    }
    await Promise.all(all);
  }
  // exit once the write is flushed: a pipe may take it in parts, and exit drops the rest
  process.stdout.write(JSON.stringify({ lat, failed }), () => process.exit(0));
};
main();
`;

/** Runs `script` in a child Node process; resolves to its stdout parsed as JSON. */
function runChild<T>(script: string, args: string[]): { result: Promise<T> } {
  const child = spawn(process.execPath, ['-e', script, ...args], { stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  return { result: new Promise<T>((resolve, reject) => child.on('exit', (code) => (code === 0 ? resolve(JSON.parse(out) as T) : reject(new Error(`child exited ${code}: ${out}`))))) };
}

/** Connections waiting in the accept queue of the IPv4 socket listening on `port` (Linux `/proc/net/tcp`). */
function acceptQueue(port: number): number {
  const local = `0100007F:${port.toString(16).toUpperCase().padStart(4, '0')}`;
  for (const line of fs.readFileSync('/proc/net/tcp', 'latin1').split('\n')) {
    const f = line.trim().split(/\s+/);
    // sl local rem st tx_queue:rx_queue ...; for a LISTEN (0A) socket rx_queue is the accept queue
    if (f[1] === local && f[3] === '0A') return parseInt(f[4].split(':')[1], 16);
  }
  throw new Error(`no listening socket on port ${port}`);
}

function p99(values: number[]): number {
  const s = [...values].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.ceil(s.length * 0.99) - 1)];
}

describe('new connections under a busy event loop', () => {
  let q: Awaited<ReturnType<typeof startQueue>>;
  let port: number;
  let sink: http.Server;
  let dest: string;
  let dir: string;

  before(async () => {
    q = await startQueue();
    port = Number(new URL(q.url).port);
    sink = http.createServer((req, res) => req.resume().on('end', () => res.end('ok')));
    await new Promise<void>((r) => sink.listen(0, '127.0.0.1', r));
    dest = `http://127.0.0.1:${(sink.address() as AddressInfo).port}/hook`;
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'svc-newconn-'));
  });
  after(async () => {
    await q?.close();
    sink?.closeAllConnections();
    await new Promise((r) => sink?.close(r));
    if (dir) fs.rmSync(dir, { recursive: true, force: true });
  });

  test('one loop iteration accepts several waiting connections', { skip: process.platform !== 'linux' && 'reads /proc/net/tcp' }, async () => {
    const n = 24;
    const marker = path.join(dir, 'connected');
    const burst = runChild<(number | string)[]>(BURST, [String(port), q.token, dest, String(n), marker]);
    // One long iteration: this process (the server) blocks until the kernel has completed all n
    // handshakes; nothing accepts them meanwhile.
    const sleeper = new Int32Array(new SharedArrayBuffer(4));
    const deadline = Date.now() + 120_000;
    while (!fs.existsSync(marker)) {
      assert.ok(Date.now() < deadline, 'the child did not connect within 120 s');
      Atomics.wait(sleeper, 0, 0, 5);
    }
    const depths = [acceptQueue(port)];
    for (let i = 0; i < 6; i++) {
      await new Promise((r) => setImmediate(r));
      depths.push(acceptQueue(port));
    }
    assert.equal(depths[0], n, `all ${n} connections wait to be accepted: ${depths}`);
    // one handle takes one connection per iteration (24, 23, 22, ...); 8 handles take 8 (24, 16, 8, 0)
    assert.equal(depths.at(-1), 0, `accept queue after each loop iteration: ${depths}`);
    const drops = depths.slice(1).map((d, i) => depths[i] - d);
    assert.ok(Math.max(...drops) >= 4, `connections accepted per iteration: ${drops}`);
    const statuses = await burst.result;
    assert.deepEqual(
      statuses.filter((s) => typeof s !== 'number' || s >= 300),
      [],
      `every publish answered with 2xx: ${statuses}`,
    );
  });

  test('new-connection publishes are answered under keep-alive saturation', async () => {
    const ms = 6000;
    const ka = runChild<{ lat: number[]; failed: number }>(LOAD, ['keepalive', String(port), q.token, dest, '64', String(ms)]);
    const fresh = runChild<{ lat: number[]; failed: number }>(LOAD, ['new', String(port), q.token, dest, '16', String(ms - 1000)]);
    const [k, f] = await Promise.all([ka.result, fresh.result]);
    assert.equal(f.failed, 0, 'every new-connection publish answered with 2xx');
    assert.equal(k.failed, 0, 'every keep-alive publish answered with 2xx');
    assert.ok(k.lat.length > 100 && f.lat.length >= 16, `publishes: keep-alive ${k.lat.length}, new ${f.lat.length}`);
    const kp = p99(k.lat);
    const fp = p99(f.lat);
    assert.ok(fp <= 5 * kp + 1000, `new-connection p99 ${Math.round(fp)} ms vs keep-alive p99 ${Math.round(kp)} ms`);
  });
});
