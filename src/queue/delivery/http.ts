/**
 * The outgoing HTTP side of delivery: one undici `Agent` (a keep-alive connection pool per
 * origin), optional egress address (`SVC_QUEUE_EGRESS_ADDRESS` -> `localAddress`), optional refusal
 * of loopback/private addresses at connect time (`SVC_QUEUE_BLOCK_PRIVATE_DESTINATIONS`, checked on
 * the resolved address so DNS cannot smuggle a private target past the publish-time check).
 *
 * Requests go through `Agent.dispatch` with a small handler object ({@link AttemptHandler}) instead
 * of `undici.request`: no AbortController, no body stream, no async iteration per attempt (the
 * `request()` path was about a third of svc's delivery CPU in the bench profile,
 * `docs/readme/queue-bench.md`). The attempt timeout is one timer per attempt that aborts the
 * request (queued or on the wire); undici's `headersTimeout`/`bodyTimeout` are set to the same value.
 *
 * `send` never throws: every failure (timeout, refused connection, bad URL, blocked address)
 * becomes an {@link AttemptOutcome} with `error` set and no `status` (destinations are
 * untrusted).
 */
import dns from 'node:dns';
import { Agent, type Dispatcher } from 'undici';
import type { AttemptOutcome, HeaderMap } from '../model.js';
import { canonicalHeader } from '../message-json.js';
import { blockedHost, publicOnlyLookup } from '../../private-address.js';
import { splitUrl } from './url-cache.js';

export interface HttpSenderOptions {
  egressAddress?: string;
  blockPrivate: boolean;
  /** Largest response body kept (bytes); past it the attempt ends with the status and what was kept, and the rest is not read. */
  maxResponseBytes: number;
  /** Keep-alive connections per origin. */
  connectionsPerOrigin: number;
  /** Name resolution (`dns.lookup` shape); default `dns.lookup`. Tests give a resolver whose answers they control. */
  lookup?: typeof dns.lookup;
}

/**
 * Header names (lower-case) never forwarded to a destination: hop-by-hop headers (RFC 9110
 * 7.6.1: `Connection`, `Keep-Alive`, `Proxy-Connection`, `TE`, `Trailer`, `Transfer-Encoding`,
 * `Upgrade`) and the message framing and routing that the delivery request sets itself
 * (`Content-Length`, `Host`, `Expect`). Given as `Upstash-Forward-X`/`Svc-Forward-X` they are
 * dropped, so the message is still delivered (as the hosted service does).
 */
export const NOT_FORWARDED = new Set(['connection', 'keep-alive', 'proxy-connection', 'te', 'trailer', 'transfer-encoding', 'upgrade', 'content-length', 'host', 'expect']);

export interface OutgoingRequest {
  url: string;
  method: string;
  /** Flat `[name, value, ...]` list (undici's array form; a name repeats for each of its values). */
  headers: string[];
  body: Buffer;
  timeoutMs: number;
}

/** Canonical header names seen in responses (`content-type` -> `Content-Type`), bounded. */
const canonicalCache = new Map<string, string>();
function canonical(raw: string): string {
  let c = canonicalCache.get(raw);
  if (c === undefined) {
    c = canonicalHeader(raw);
    if (canonicalCache.size < 1000) canonicalCache.set(raw, c);
  }
  return c;
}

/**
 * The outcome of an attempt that got a response. Its `headers` are decoded from undici's raw
 * `[name, value, ...]` Buffers at their first read, not per response: a delivered message's
 * response headers are read only when something needs them (a callback, a failed attempt's log
 * row, a workflow step), and decoding them (a string per name and per value, the canonical name)
 * cost ~13,000 CPU instructions per delivery (`npm run bench:instructions`). The Buffers are views
 * of the socket's read chunks, as the body's are.
 */
class ResponseOutcome implements AttemptOutcome {
  private decoded: HeaderMap | undefined;
  constructor(
    readonly status: number,
    private raw: Buffer[] | undefined,
    public body: Buffer,
    public error: string | undefined,
  ) {}

  get headers(): HeaderMap {
    if (this.decoded === undefined) {
      const h: HeaderMap = {};
      const raw = this.raw ?? [];
      for (let i = 0; i + 1 < raw.length; i += 2) {
        const name = canonical(raw[i].toString('latin1'));
        const value = raw[i + 1].toString('latin1');
        const prev = h[name];
        if (prev) prev.push(value);
        else h[name] = [value];
      }
      this.decoded = h;
      this.raw = undefined;
    }
    return this.decoded;
  }

  set headers(h: HeaderMap) {
    this.decoded = h;
    this.raw = undefined;
  }
}

/**
 * One attempt as an undici dispatch handler (the `onConnect`/`onHeaders`/`onData`/`onComplete`/
 * `onError` protocol of `Dispatcher.dispatch`, undici 7 `types/dispatcher.d.ts`). Settles exactly
 * once with an {@link AttemptOutcome}.
 */
class AttemptHandler implements Dispatcher.DispatchHandler {
  private abortFn: ((err?: Error) => void) | undefined;
  private timedOut = false;
  private done = false;
  private status = 0;
  private rawHeaders: Buffer[] | undefined;
  private chunks: Buffer[] = [];
  private size = 0;
  readonly timer: NodeJS.Timeout;

  constructor(
    private readonly timeoutMs: number,
    private readonly maxBytes: number,
    private readonly settle: (o: AttemptOutcome) => void,
  ) {
    this.timer = setTimeout(() => this.timeout(), timeoutMs);
  }

  private finish(o: AttemptOutcome): void {
    if (this.done) return;
    this.done = true;
    clearTimeout(this.timer);
    this.settle(o);
  }

  private timeout(): void {
    this.timedOut = true;
    const err = new Error(`timeout after ${this.timeoutMs} ms`);
    this.abortFn?.(err); // not connected yet: aborted in onConnect
    this.finish({ error: `delivery failed: timeout after ${this.timeoutMs} ms` });
  }

  onConnect(abort: (err?: Error) => void): void {
    this.abortFn = abort;
    if (this.timedOut) abort(new Error(`timeout after ${this.timeoutMs} ms`));
  }

  onHeaders(statusCode: number, raw: Buffer[]): boolean {
    if (statusCode < 200) return true; // 1xx informational: the final head follows
    this.status = statusCode;
    this.rawHeaders = raw; // decoded when read (ResponseOutcome)
    return true;
  }

  onData(chunk: Buffer): boolean {
    if (this.size < this.maxBytes) this.chunks.push(chunk.length <= this.maxBytes - this.size ? chunk : chunk.subarray(0, this.maxBytes - this.size));
    this.size += chunk.length;
    if (this.size > this.maxBytes) {
      // the kept part is all svc uses: the attempt ends with the status now and the rest is not
      // read (reading a large answer to its end could outlast the attempt's timeout and fail a
      // delivery the destination took, which would then be retried)
      this.onComplete();
      this.abortFn?.(new Error(`response body past ${this.maxBytes} bytes`));
      return false;
    }
    return true;
  }

  onComplete(): void {
    const status = this.status;
    const ok = status >= 200 && status < 300;
    const body = this.chunks.length === 1 ? this.chunks[0] : Buffer.concat(this.chunks);
    this.finish(new ResponseOutcome(status, this.rawHeaders, body, ok ? undefined : `destination answered ${status}`));
  }

  onError(err: Error): void {
    const e = err as Error & { cause?: Error };
    const reason = this.timedOut ? `timeout after ${this.timeoutMs} ms` : e.cause?.message ?? e.message ?? String(err);
    this.finish({ error: `delivery failed: ${reason}` });
  }
}

export class HttpSender {
  private readonly agent: Agent;

  constructor(private readonly opts: HttpSenderOptions) {
    const lookup = publicOnlyLookup(opts.lookup ?? dns.lookup);
    this.agent = new Agent({
      connections: opts.connectionsPerOrigin,
      pipelining: 1,
      keepAliveTimeout: 30_000,
      connect: {
        ...(opts.egressAddress ? { localAddress: opts.egressAddress } : {}),
        ...(opts.blockPrivate ? { lookup } : opts.lookup ? { lookup: opts.lookup } : {}),
      },
    });
  }

  /** Performs one attempt; resolves with the outcome (never rejects). */
  send(req: OutgoingRequest): Promise<AttemptOutcome> {
    const target = splitUrl(req.url);
    if (!target) return Promise.resolve({ error: 'delivery failed: invalid destination url' });
    if (this.opts.blockPrivate) {
      // an address literal is connected to without a lookup: check it here
      const why = blockedHost(target.hostname);
      if (why) return Promise.resolve({ error: `delivery refused: destination ${why}` });
    }
    return new Promise<AttemptOutcome>((resolve) => {
      const handler = new AttemptHandler(req.timeoutMs, this.opts.maxResponseBytes, resolve);
      try {
        this.agent.dispatch(
          {
            origin: target.origin,
            path: target.path,
            method: req.method as Dispatcher.HttpMethod,
            headers: req.headers,
            body: req.method === 'GET' || req.method === 'HEAD' ? null : req.body,
            headersTimeout: req.timeoutMs,
            bodyTimeout: req.timeoutMs,
          },
          handler,
        );
      } catch (err) {
        handler.onError(err as Error);
      }
    });
  }

  async close(): Promise<void> {
    await this.agent.destroy().catch(() => undefined);
  }
}
