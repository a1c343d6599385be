/**
 * The delivery target of `npm run bench:queue`: a local `node:http` server that answers every
 * POST with `200 ok` and records, per delivered request, the latency `now - t` where `t` is the
 * send time (ms since the epoch, `performance.timeOrigin + performance.now()`) that the publisher
 * put in the JSON body `{ "t": <ms>, "r"?: <run id> }`. svc delivers the published body as it
 * is; the peers' jobs POST their payload, so every system is measured the same way.
 */
import http from 'node:http';
import type net from 'node:net';

/** Wall clock in ms with sub-ms precision, comparable across processes on this machine. */
export const now = (): number => performance.timeOrigin + performance.now();

/** Closed loop: `total` calls of `fn` (given the call's index) from `conc` concurrent callers; resolves to the elapsed ms. */
export async function closedLoop(total: number, conc: number, fn: (i: number) => Promise<void>): Promise<number> {
  let next = 0;
  const t0 = now();
  await Promise.all(
    Array.from({ length: conc }, async () => {
      while (next < total) await fn(next++);
    }),
  );
  return now() - t0;
}

export interface Delivered {
  /** Latency (ms) of each counted delivery, in arrival order. */
  lat: number[];
  /** {@link now} at the last counted delivery (at the call when none arrived). */
  lastAt: number;
  /** False when `timeoutMs` passed before `n` deliveries arrived. */
  complete: boolean;
}

export interface Sink {
  url: string;
  /**
   * Resolves when `n` deliveries have arrived since this call, counting only bodies whose `r`
   * equals `runId` when one is given (late duplicates of an earlier run are ignored), or when
   * `timeoutMs` (default: none) passes first.
   */
  expect(n: number, runId?: string, timeoutMs?: number): Promise<Delivered>;
  close(): Promise<void>;
}

/** Starts the sink on a free loopback port. */
export async function startSink(): Promise<Sink> {
  let want = 0;
  let run: string | undefined;
  let lat: number[] = [];
  let lastAt = 0;
  let done: ((complete: boolean) => void) | undefined;
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      res.end('ok');
      let body: { t: number; r?: string };
      try {
        body = JSON.parse(Buffer.concat(chunks).toString()) as { t: number; r?: string };
      } catch {
        return;
      }
      if (!done || (run !== undefined && body.r !== run)) return;
      lastAt = now();
      lat.push(lastAt - body.t);
      if (lat.length >= want) done(true);
    });
  });
  server.keepAliveTimeout = 60_000;
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as net.AddressInfo).port}`,
    expect(n, runId, timeoutMs) {
      want = n;
      run = runId;
      lat = [];
      lastAt = now();
      return new Promise((resolve) => {
        const timer = timeoutMs === undefined ? undefined : setTimeout(() => done?.(false), timeoutMs);
        done = (complete) => {
          clearTimeout(timer);
          done = undefined;
          resolve({ lat, lastAt, complete });
        };
      });
    },
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}
