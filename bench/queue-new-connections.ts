/**
 * New connections under keep-alive saturation (`npm run bench:queue-connections`): svc's queue
 * area as a child process (`node bin/svc.js serve`), `--keepalive` clients (default 200, undici
 * pool, one request in flight each) publishing as fast as they can, and meanwhile one publish on
 * a NEW connection every `--every` ms (default 50) from a separate probe process, for `--seconds`
 * (default 15). Prints keep-alive and new-connection latency percentiles, the new connections
 * that timed out (10 s), and the listening socket's accept-queue depth (`ss -ltn` Recv-Q) sampled
 * every 2 s, and the kernel's listen-queue overflow counters over the run (`ListenOverflows` +
 * `ListenDrops`, whole host). svc's own settings pass through the environment, e.g.
 * `SVC_QUEUE_ACCEPT_HANDLES=1` for Node's single listening handle.
 *
 * The accept-queue column is the point: libuv 1.45+ (Node 20 and later) accepts at most one
 * connection per event-loop iteration and listening handle, so when each iteration serves hundreds
 * of keep-alive requests, connections wait in the kernel's queue. svc's queue port therefore
 * listens through `SVC_QUEUE_ACCEPT_HANDLES` handles (`src/http/accept.ts`; see
 * docs/readme/queue-bench.md "New connections under saturation").
 * `--demo-accept [--handles N]` runs the bare demonstration instead: a plain `net` server doing
 * 1 ms of work per request for 300 busy connections while 500 new connections a second arrive,
 * printing accepted connections and loop iterations per second.
 * Internal: `--probe <url> <sinkUrl> <ms> <every>` (the probe process).
 */
import { execSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Pool } from 'undici';
import { listenAccepting } from '../src/http/accept.js';
import { percentile } from './lib/stats.js';
import { installCleanupHandlers, makeTempDir, startProcess, waitFor } from './lib/proc.js';
import { requirePrograms } from './lib/needs.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const TOKEN = 'bench-token';
const arg = (name: string, def: number) => {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? Number(process.argv[i + 1]) : def;
};
const ms = (v: number) => (Number.isFinite(v) ? `${Math.round(v)} ms` : '-');

/**
 * The kernel's `TcpExt` `ListenOverflows` + `ListenDrops` counters (Linux `/proc/net/netstat`, the
 * whole network namespace): connections refused because a listen queue was full. Undefined elsewhere.
 */
function listenDrops(): number | undefined {
  try {
    const lines = fs.readFileSync('/proc/net/netstat', 'latin1').split('\n');
    for (let i = 0; i + 1 < lines.length; i += 2) {
      if (!lines[i].startsWith('TcpExt:')) continue;
      const names = lines[i].split(/\s+/);
      const values = lines[i + 1].split(/\s+/);
      return Number(values[names.indexOf('ListenOverflows')]) + Number(values[names.indexOf('ListenDrops')]);
    }
  } catch {
    /* not Linux */
  }
  return undefined;
}

/** The probe process: one publish per new connection (`agent: false`) every `every` ms. */
async function probe(url: string, sinkUrl: string, durationMs: number, every: number): Promise<void> {
  const u = new URL(url);
  const lat: number[] = [];
  let timedOut = 0;
  const all: Promise<void>[] = [];
  const one = () =>
    new Promise<void>((resolve) => {
      const t = performance.now();
      const req = http.request(
        { host: u.hostname, port: u.port, method: 'POST', path: `/v2/publish/${sinkUrl}/new`, agent: false, timeout: 10_000, headers: { authorization: `Bearer ${TOKEN}`, 'content-length': 1 } },
        (res) => {
          res.resume();
          res.on('end', () => (lat.push(performance.now() - t), resolve()));
        },
      );
      req.on('timeout', () => (timedOut++, req.destroy(), resolve()));
      req.on('error', () => resolve());
      req.end('x');
    });
  const t0 = Date.now();
  while (Date.now() - t0 < durationMs) {
    all.push(one());
    await new Promise((r) => setTimeout(r, every));
  }
  await Promise.all(all);
  process.stdout.write(JSON.stringify({ lat, timedOut }) + '\n');
}

/**
 * Bare Node: accepted connections vs loop iterations per second while 300 connections keep the
 * loop busy and 500 new connections a second arrive, with `--handles` listening handles (default
 * 1, `src/http/accept.ts`).
 */
async function demoAccept(): Promise<void> {
  let accepted = 0;
  let iterations = 0;
  const srv = net.createServer((s) => {
    accepted++;
    s.on('data', () => {
      const t = performance.now();
      while (performance.now() - t < 1);
      setImmediate(() => s.write('x'));
    });
    s.on('error', () => undefined);
  });
  const { url, handles } = await listenAccepting(srv, '127.0.0.1', 0, { backlog: 4096, acceptHandles: arg('handles', 1) });
  const port = new URL(url).port;
  const tick = () => {
    iterations++;
    setImmediate(tick);
  };
  tick();
  const script =
    `const net=require('net');for(let i=0;i<300;i++){const s=net.connect(${port},'127.0.0.1',()=>s.write('a'));s.on('data',()=>s.write('a'));s.on('error',()=>{})}` +
    `setTimeout(()=>setInterval(()=>{for(let j=0;j<5;j++){const s=net.connect(${port},'127.0.0.1',()=>s.end());s.on('error',()=>{})}},10),2000)`;
  const load = spawn(process.execPath, ['-e', script], { stdio: 'ignore' });
  let a = 0;
  let i = 0;
  for (let k = 0; k < 7; k++) {
    await new Promise((r) => setTimeout(r, 1000));
    console.log(`handles ${handles}\taccepted/s ${accepted - a}\titerations/s ${iterations - i}`);
    a = accepted;
    i = iterations;
  }
  load.kill();
  process.exit(0);
}

async function main(): Promise<void> {
  if (process.argv.includes('--probe')) {
    const i = process.argv.indexOf('--probe');
    return probe(process.argv[i + 1], process.argv[i + 2], Number(process.argv[i + 3]), Number(process.argv[i + 4]));
  }
  if (process.argv.includes('--demo-accept')) return demoAccept();
  requirePrograms('bench:queue-connections', [{ cmd: 'ss', pkg: 'iproute2' }]);
  installCleanupHandlers();
  const keepalive = arg('keepalive', 200);
  const seconds = arg('seconds', 15);
  const every = arg('every', 50);

  const sink = http.createServer((req, res) => {
    req.resume();
    req.on('end', () => res.end('ok'));
  });
  await new Promise<void>((r) => sink.listen(0, '127.0.0.1', r));
  const sinkUrl = `http://127.0.0.1:${(sink.address() as net.AddressInfo).port}`;
  const dataDir = makeTempDir('svc-bench-newconn-');
  const svc = await startProcess({
    name: 'svc',
    cmd: process.execPath,
    args: [path.join(ROOT, 'bin/svc.js'), 'serve'],
    cwd: ROOT,
    env: { ...process.env, SVC_AREAS: 'queue', SVC_QUEUE_PORT: '0', SVC_HOST: '127.0.0.1', SVC_DATA_DIR: dataDir, SVC_LOG_LEVEL: 'warn', SVC_QUEUE_TOKEN: TOKEN },
  });
  let url = '';
  await waitFor('svc banner', () => Boolean((url = /^queue\s+(http:\/\/\S+)/m.exec(svc.output())?.[1] ?? '')), 30_000);
  const port = new URL(url).port;

  const pool = new Pool(url, { connections: keepalive, pipelining: 1 });
  const ka: number[] = [];
  let stop = false;
  const loops = Array.from({ length: keepalive }, async () => {
    while (!stop) {
      const t = performance.now();
      try {
        const r = await pool.request({ method: 'POST', path: `/v2/publish/${sinkUrl}/ka`, headers: { authorization: `Bearer ${TOKEN}` }, body: 'x' });
        await r.body.text();
        ka.push(performance.now() - t);
      } catch {
        /* counted as missing */
      }
    }
  });
  await new Promise((r) => setTimeout(r, 2000)); // saturation first
  const dropsBefore = listenDrops();
  const queueDepth: number[] = [];
  const sampler = setInterval(() => {
    try {
      const line = execSync(`ss -ltn 'sport = :${port}'`).toString().split('\n')[1] ?? '';
      queueDepth.push(Number(line.trim().split(/\s+/)[1]));
    } catch {
      /* ss missing */
    }
  }, 2000);
  const probeOut = await new Promise<string>((resolve) => {
    const c = spawn(process.execPath, ['--import', 'tsx', fileURLToPath(import.meta.url), '--probe', url, sinkUrl, String(seconds * 1000), String(every)], { stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    c.stdout.on('data', (d: Buffer) => (out += d.toString()));
    c.on('exit', () => resolve(out));
  });
  clearInterval(sampler);
  const dropsAfter = listenDrops();
  stop = true;
  await Promise.all(loops);
  await pool.close();
  sink.close();
  const { lat, timedOut } = JSON.parse(probeOut.trim().split('\n').pop() ?? '{"lat":[],"timedOut":0}') as { lat: number[]; timedOut: number };
  console.log(`| clients | keep-alive publishes | keep-alive p50 / p99 | new-connection publishes | new p50 / p99 | timed out (10 s) | accept queue (max) | listen overflows |`);
  console.log(`| --- | --- | --- | --- | --- | --- | --- | --- |`);
  console.log(
    `| ${keepalive} keep-alive + 1 new every ${every} ms | ${ka.length} | ${ms(percentile(ka, 50))} / ${ms(percentile(ka, 99))} | ${lat.length} | ${ms(percentile(lat, 50))} / ${ms(percentile(lat, 99))} | ${timedOut} | ${Math.max(0, ...queueDepth)} | ${dropsBefore === undefined || dropsAfter === undefined ? '-' : dropsAfter - dropsBefore} |`,
  );
  await svc.stop();
}

main().then(
  () => process.exit(0),
  (err) => {
    console.error(err);
    process.exit(1);
  },
);
