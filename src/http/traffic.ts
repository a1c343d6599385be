/**
 * Process-wide request counters per area, for the web console's overview (request rate and error
 * rate). Shared plumbing: an area's HTTP front records each answered request with
 * {@link trafficCounter}`(area).record(status)`; the management area reads {@link trafficTotals}
 * and derives rates from successive samples. Counting is two integer increments per request.
 *
 * Counted: every response an area's fast front (`fast.ts`) writes and every response of its Node
 * `http` server (fallback, Fastify). Errors are responses with status >= 500 (server faults) and
 * 4xx (client faults) counted apart. Requests served in kv worker processes (`SVC_KV_WORKERS` > 0)
 * are counted in those processes and not seen here.
 */
import type http from 'node:http';

export interface TrafficTotals {
  /** Responses written since start. */
  requests: number;
  /** Of those, status 400..499. */
  clientErrors: number;
  /** Of those, status >= 500. */
  serverErrors: number;
}

export class TrafficCounter {
  requests = 0;
  clientErrors = 0;
  serverErrors = 0;

  /** Counts one response with HTTP status `status`. */
  record(status: number): void {
    this.requests++;
    if (status >= 500) this.serverErrors++;
    else if (status >= 400) this.clientErrors++;
  }

  /**
   * Counts every response of a Node `http` server (the listener runs once per request and once
   * per response `finish`). Returns the server.
   */
  countServer<S extends http.Server>(server: S): S {
    server.on('request', (_req: http.IncomingMessage, res: http.ServerResponse) => {
      res.once('finish', () => this.record(res.statusCode));
    });
    return server;
  }
}

const counters = new Map<string, TrafficCounter>();

/** The counter of `area` (created on first use). */
export function trafficCounter(area: string): TrafficCounter {
  let c = counters.get(area);
  if (!c) counters.set(area, (c = new TrafficCounter()));
  return c;
}

/** Totals of every area that has a counter. */
export function trafficTotals(): Record<string, TrafficTotals> {
  const out: Record<string, TrafficTotals> = {};
  for (const [area, c] of counters) out[area] = { requests: c.requests, clientErrors: c.clientErrors, serverErrors: c.serverErrors };
  return out;
}
