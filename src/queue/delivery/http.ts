/**
 * The outgoing HTTP side of delivery: one undici `Agent` (a keep-alive connection pool per
 * origin), optional egress address (`SVC_QUEUE_EGRESS_ADDRESS` -> `localAddress`), optional refusal
 * of loopback/private addresses at connect time (`SVC_QUEUE_BLOCK_PRIVATE_DESTINATIONS`, checked on
 * the resolved address so DNS cannot smuggle a private target past the publish-time check).
 *
 * `send` never throws: every failure (timeout, refused connection, bad URL, blocked address)
 * becomes an {@link AttemptOutcome} with `error` set and no `status` (STYLE.md §9: destinations are
 * untrusted).
 */
import dns from 'node:dns';
import net from 'node:net';
import { Agent, request } from 'undici';
import type { AttemptOutcome, HeaderMap } from '../model.js';
import { canonicalHeader } from '../wire.js';

export interface HttpSenderOptions {
  egressAddress?: string;
  blockPrivate: boolean;
  /** Largest response body kept (bytes); the rest is discarded. */
  maxResponseBytes: number;
  /** Keep-alive connections per origin. */
  connectionsPerOrigin: number;
}

export interface OutgoingRequest {
  url: string;
  method: string;
  headers: Record<string, string | string[]>;
  body: Buffer;
  timeoutMs: number;
}

/** True for loopback, private, link-local, CGNAT, unspecified and unique-local addresses. */
export function isPrivateAddress(ip: string): boolean {
  if (net.isIPv4(ip)) {
    const [a, b] = ip.split('.').map(Number);
    return (
      a === 0 || a === 10 || a === 127 || (a === 169 && b === 254) || (a === 172 && b >= 16 && b <= 31) ||
      (a === 192 && b === 168) || (a === 100 && b >= 64 && b <= 127)
    );
  }
  if (net.isIPv6(ip)) {
    const s = ip.toLowerCase();
    if (s === '::1' || s === '::') return true;
    if (s.startsWith('::ffff:')) return isPrivateAddress(s.slice(7));
    return s.startsWith('fc') || s.startsWith('fd') || s.startsWith('fe80');
  }
  return false;
}

export class HttpSender {
  private readonly agent: Agent;

  constructor(private readonly opts: HttpSenderOptions) {
    const lookup: typeof dns.lookup = ((hostname: string, options: dns.LookupOptions, cb: (...a: unknown[]) => void) => {
      dns.lookup(hostname, { ...options, all: true }, (err, addrs) => {
        if (err) return cb(err);
        const list = addrs as dns.LookupAddress[];
        const bad = list.find((a) => isPrivateAddress(a.address));
        if (bad) return cb(new Error(`destination ${hostname} resolves to private address ${bad.address}, refused`));
        if (options.all) return cb(null, list);
        cb(null, list[0].address, list[0].family);
      });
    }) as typeof dns.lookup;
    this.agent = new Agent({
      connections: opts.connectionsPerOrigin,
      pipelining: 1,
      keepAliveTimeout: 30_000,
      connect: {
        ...(opts.egressAddress ? { localAddress: opts.egressAddress } : {}),
        ...(opts.blockPrivate ? { lookup } : {}),
      },
    });
  }

  /** Performs one attempt; resolves with the outcome (never rejects). */
  async send(req: OutgoingRequest): Promise<AttemptOutcome> {
    if (this.opts.blockPrivate) {
      try {
        const host = new URL(req.url).hostname.replace(/^\[|\]$/g, '');
        if (net.isIP(host) && isPrivateAddress(host)) return { error: `destination ${host} is a private address, refused` };
      } catch {
        return { error: 'invalid destination url' };
      }
    }
    const ac = new AbortController();
    const timer = setTimeout(() => ac.abort(new Error(`timeout after ${req.timeoutMs} ms`)), req.timeoutMs);
    try {
      const res = await request(req.url, {
        dispatcher: this.agent,
        method: req.method as 'POST',
        headers: req.headers,
        body: req.method === 'GET' || req.method === 'HEAD' ? undefined : req.body,
        signal: ac.signal,
        headersTimeout: req.timeoutMs,
        bodyTimeout: req.timeoutMs,
      });
      const chunks: Buffer[] = [];
      let size = 0;
      for await (const chunk of res.body) {
        const b = chunk as Buffer;
        if (size < this.opts.maxResponseBytes) chunks.push(b.subarray(0, this.opts.maxResponseBytes - size));
        size += b.length;
      }
      const headers: HeaderMap = {};
      for (const [k, v] of Object.entries(res.headers)) {
        if (v === undefined) continue;
        headers[canonicalHeader(k)] = Array.isArray(v) ? v : [v];
      }
      const ok = res.statusCode >= 200 && res.statusCode < 300;
      return {
        status: res.statusCode,
        headers,
        body: Buffer.concat(chunks),
        error: ok ? undefined : `destination answered ${res.statusCode}`,
      };
    } catch (err) {
      const e = err as Error & { cause?: Error; code?: string };
      const reason = ac.signal.aborted ? `timeout after ${req.timeoutMs} ms` : e.cause?.message ?? e.message ?? String(err);
      return { error: `delivery failed: ${reason}` };
    } finally {
      clearTimeout(timer);
    }
  }

  async close(): Promise<void> {
    await this.agent.destroy().catch(() => undefined);
  }
}
