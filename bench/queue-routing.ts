/**
 * Queue benchmark, (run from `bench/queue.ts`): fan-out to a 10-endpoint URL group,
 * a queue with parallelism 1 vs 10, and flow-control rate / parallelism keys. Reports delivered
 * msg/s and how exactly the limits hold as observed at the destination: max requests in flight
 * and max request starts within any window of one period.
 */
import http from 'node:http';
import type net from 'node:net';
import { Pool } from 'undici';

interface RSink {
  url: string;
  /** Resolves when `n` requests finished since the call. */
  expect(n: number): Promise<void>;
  starts: number[];
  maxInFlight: number;
  reset(delayMs: number): void;
  close(): Promise<void>;
}

async function startRSink(): Promise<RSink> {
  let delay = 0;
  let inFlight = 0;
  let done = 0;
  let want = Infinity;
  let resolve: (() => void) | undefined;
  const sink: RSink = {
    url: '',
    starts: [],
    maxInFlight: 0,
    expect(n) {
      done = 0;
      want = n;
      return new Promise((r) => (resolve = r));
    },
    reset(d) {
      delay = d;
      sink.starts = [];
      sink.maxInFlight = 0;
    },
    close: () => new Promise<void>((r) => { server.closeAllConnections(); server.close(() => r()); }),
  };
  const server = http.createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      sink.starts.push(performance.now());
      inFlight++;
      sink.maxInFlight = Math.max(sink.maxInFlight, inFlight);
      setTimeout(() => {
        inFlight--;
        res.end('ok');
        if (++done >= want && resolve) {
          const r = resolve;
          resolve = undefined;
          r();
        }
      }, delay);
    });
  });
  server.keepAliveTimeout = 60_000;
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  sink.url = `http://127.0.0.1:${(server.address() as net.AddressInfo).port}`;
  return sink;
}

/** Max number of `starts` (ms) inside any window of `windowMs`. */
function maxPerWindow(starts: number[], windowMs: number): number {
  const s = [...starts].sort((a, b) => a - b);
  let max = 0;
  let j = 0;
  for (let i = 0; i < s.length; i++) {
    while (s[i] - s[j] >= windowMs) j++;
    max = Math.max(max, i - j + 1);
  }
  return max;
}

/** Runs the issue-4 scenarios against a running svc at `url`; returns markdown lines. */
export async function benchRouting(url: string, token: string, opts: { fanout: number; queueN: number }): Promise<string[]> {
  const sink = await startRSink();
  const pool = new Pool(url, { connections: 16, pipelining: 1 });
  const call = async (path: string, method: string, body: string, headers: Record<string, string> = {}) => {
    const res = await pool.request({ path, method: method as 'POST', headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', ...headers }, body });
    const text = await res.body.text();
    if (res.statusCode >= 300) throw new Error(`${method} ${path} answered ${res.statusCode}: ${text}`);
  };
  const many = async (n: number, conc: number, fn: (i: number) => Promise<void>) => {
    let next = 0;
    await Promise.all(Array.from({ length: conc }, async () => { while (next < n) await fn(next++); }));
  };
  const rows: string[] = [
    `| scenario | messages | sink time per request (ms) | delivered msg/s | limit | max observed in flight | max observed starts per period |`,
    `| --- | ---: | ---: | ---: | --- | ---: | ---: |`,
  ];
  try {
    // fan-out: one publish -> 10 deliveries
    const endpoints = Array.from({ length: 10 }, (_, i) => ({ url: `${sink.url}/ep${i}`, name: `ep${i}` }));
    await call('/v2/topics/bench-fan/endpoints', 'POST', JSON.stringify({ endpoints }));
    sink.reset(0);
    const pubs = opts.fanout;
    let wait = sink.expect(pubs * 10);
    let t0 = performance.now();
    await many(pubs, 16, () => call('/v2/publish/bench-fan', 'POST', '{}'));
    await wait;
    rows.push(`| URL group, 10 endpoints (${pubs} publishes, 16 publishers) | ${pubs * 10} | 0 | ${((pubs * 10) / ((performance.now() - t0) / 1000)).toFixed(0)} | – | ${sink.maxInFlight} | – |`);

    // queues: parallelism 1 vs 10 (sink holds each request 5 ms)
    for (const par of [1, 10]) {
      const n = par === 1 ? Math.max(50, Math.round(opts.queueN / 5)) : opts.queueN;
      await call('/v2/queues', 'POST', JSON.stringify({ queueName: `bench-q${par}`, parallelism: par, paused: true }));
      sink.reset(5);
      await many(n, 16, () => call(`/v2/enqueue/bench-q${par}/${sink.url}/q${par}`, 'POST', '{}'));
      wait = sink.expect(n);
      t0 = performance.now();
      await call(`/v2/queues/bench-q${par}/resume`, 'POST', '');
      await wait;
      rows.push(`| queue parallelism=${par} (enqueued paused, then resumed) | ${n} | 5 | ${(n / ((performance.now() - t0) / 1000)).toFixed(0)} | parallelism ${par} | ${sink.maxInFlight} | – |`);
    }

    // flow control: rate 100 per 1 s, and parallelism 5
    {
      const n = 400;
      sink.reset(0);
      wait = sink.expect(n);
      t0 = performance.now();
      await many(n, 16, () => call(`/v2/publish/${sink.url}/rate`, 'POST', '{}', { 'Upstash-Flow-Control-Key': 'bench-rate', 'Upstash-Flow-Control-Value': 'rate=100, period=1s' }));
      await wait;
      const secs = (performance.now() - t0) / 1000;
      rows.push(`| flow control rate=100 period=1s | ${n} | 0 | ${(n / secs).toFixed(0)} | 100 per 1 s | ${sink.maxInFlight} | ${maxPerWindow(sink.starts, 1000)} (any 1 s window) |`);
    }
    {
      const n = opts.queueN;
      sink.reset(5);
      wait = sink.expect(n);
      t0 = performance.now();
      await many(n, 16, () => call(`/v2/publish/${sink.url}/par`, 'POST', '{}', { 'Upstash-Flow-Control-Key': 'bench-par', 'Upstash-Flow-Control-Value': 'parallelism=5' }));
      await wait;
      rows.push(`| flow control parallelism=5 | ${n} | 5 | ${(n / ((performance.now() - t0) / 1000)).toFixed(0)} | parallelism 5 | ${sink.maxInFlight} | – |`);
    }
  } finally {
    await pool.close();
    await sink.close();
  }
  return rows;
}
