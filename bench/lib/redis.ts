/**
 * The Redis-side peers of the benches, all Debian packages: a throw-away `redis-server` (no
 * persistence: `--save '' --appendonly no`), `webdis` (the C HTTP gateway, `nicolasff/webdis`,
 * Debian 0.1.9) in front of it, and `redis-benchmark` (the ceiling: raw RESP with no HTTP layer).
 * webdis config and API: see webdis's README.
 */
import fs from 'node:fs';
import path from 'node:path';
import { runToCompletion, startProcess, waitFor, type ManagedProcess } from './proc.js';

/**
 * Starts `redis-server` on 127.0.0.1:`port` with persistence off, data dir `dir`.
 * @throws Error when it does not print "Ready to accept connections" within 15 s.
 */
export function startRedisServer(port: number, dir: string): Promise<ManagedProcess> {
  return startProcess({
    name: `redis-server:${port}`,
    cmd: 'redis-server',
    args: ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir, '--daemonize', 'no', '--loglevel', 'notice'],
    readyPattern: /Ready to accept connections/,
    readyTimeoutMs: 15_000,
  });
}

export interface WebdisOptions {
  httpPort: number;
  redisPort: number;
  /** Worker threads (webdis `threads`; its own default is 4, Debian's sample config 2). */
  threads: number;
  /** Redis connections per thread (webdis `pool_size`; default 2). */
  poolSize: number;
  /** Directory for the generated config and log file. */
  dir: string;
}

/**
 * Writes a webdis config (loopback only, not daemonized, minimal logging, no ACL) and starts
 * webdis; ready when `GET /PING` answers `{"PING":[true,"PONG"]}`.
 * @throws Error when it does not answer within 15 s.
 */
export async function startWebdis(o: WebdisOptions): Promise<ManagedProcess> {
  const conf = path.join(o.dir, `webdis-${o.httpPort}.json`);
  fs.writeFileSync(
    conf,
    JSON.stringify(
      {
        redis_host: '127.0.0.1',
        redis_port: o.redisPort,
        redis_auth: null,
        http_host: '127.0.0.1',
        http_port: o.httpPort,
        threads: o.threads,
        pool_size: o.poolSize,
        daemonize: false,
        database: 0,
        verbosity: 0,
        logfile: path.join(o.dir, `webdis-${o.httpPort}.log`),
      },
      null,
      2,
    ),
  );
  const proc = await startProcess({ name: `webdis:${o.httpPort}`, cmd: 'webdis', args: [conf] });
  try {
    await waitFor('webdis to answer /PING', async () => {
      const r = await fetch(`http://127.0.0.1:${o.httpPort}/PING`);
      return r.ok && (await r.text()).includes('PONG');
    });
  } catch (err) {
    await proc.stop();
    throw err;
  }
  return proc;
}

export interface RedisBenchmarkResult {
  test: string;
  /** Commands per second as redis-benchmark reports them (each pipelined command counts). */
  rps: number;
  p50Ms: number;
  p99Ms: number;
  requests: number;
}

/**
 * Runs `redis-benchmark --csv -t <test> -d <valueBytes> -c <clients> -P <pipeline> -n <requests>`
 * against 127.0.0.1:`port` and parses the CSV line (redis-benchmark 7.x prints rps and
 * p50/p99 latency in ms; with `-P` the latency is that of a whole pipelined batch).
 * @throws Error on a non-zero exit or an unparsable output.
 */
export async function runRedisBenchmark(o: {
  port: number;
  test: 'get' | 'set';
  valueBytes: number;
  clients: number;
  pipeline: number;
  requests: number;
}): Promise<RedisBenchmarkResult> {
  const args = ['-h', '127.0.0.1', '-p', String(o.port), '--csv', '-t', o.test, '-d', String(o.valueBytes), '-c', String(o.clients), '-P', String(o.pipeline), '-n', String(o.requests)];
  const r = await runToCompletion('redis-benchmark', 'redis-benchmark', args);
  const line = r.stdout.split('\n').find((l) => l.toUpperCase().startsWith(`"${o.test.toUpperCase()}"`));
  if (r.code !== 0 || !line) throw new Error(`redis-benchmark ${args.join(' ')} failed (exit ${r.code}):\n${r.stdout}\n${r.stderr}`);
  // "test","rps","avg_latency_ms","min_latency_ms","p50_latency_ms","p95_latency_ms","p99_latency_ms","max_latency_ms"
  const f = line.split(',').map((s) => s.replace(/"/g, ''));
  return { test: f[0], rps: Number(f[1]), p50Ms: Number(f[4]), p99Ms: Number(f[6]), requests: o.requests };
}

/**
 * Runs redis-benchmark for about `seconds`: a short probe estimates the rate, then a run sized to
 * last that long (redis-benchmark has no duration option, only a request count).
 */
export async function runRedisBenchmarkFor(
  seconds: number,
  o: { port: number; test: 'get' | 'set'; valueBytes: number; clients: number; pipeline: number },
): Promise<RedisBenchmarkResult> {
  const probeN = Math.max(2000, o.clients * o.pipeline * 20);
  const probe = await runRedisBenchmark({ ...o, requests: probeN });
  const n = Math.max(probeN, Math.round(probe.rps * seconds));
  return runRedisBenchmark({ ...o, requests: n });
}
