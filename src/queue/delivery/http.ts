/**
 * The outgoing HTTP side of delivery: svc's own keep-alive HTTP/1.1 client ({@link DeliveryClient}
 * in `client.ts`: a connection pool per origin, the head written with the body in one write, the
 * response parsed in the socket's read callback), an optional egress address
 * (`SVC_QUEUE_EGRESS_ADDRESS` -> `localAddress`), and the optional refusal of loopback/private
 * addresses (`SVC_QUEUE_BLOCK_PRIVATE_DESTINATIONS`): an address literal is checked here before
 * anything is sent, a name on every address it resolves to at connect time
 * (`publicOnlyLookup`), so DNS cannot smuggle a private target past the publish-time check.
 *
 * The attempt timeout (`timeoutMs`, ms) covers waiting for a connection, connecting, sending and
 * the whole response. `send` never throws: every failure (timeout, refused connection, bad URL,
 * blocked address) becomes an {@link AttemptOutcome} with `error` set and no `status`
 * (destinations are untrusted).
 */
import dns from 'node:dns';
import type { AttemptOutcome } from '../model.js';
import { DeliveryClient, type ClientRequest } from './client.js';
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
  /** Flat `[name, value, ...]` list, written in this order and spelling (a name repeats for each of its values). */
  headers: string[];
  /** A value of `headers` svc built from valid field-value characters (the signature), not scanned again ({@link ClientRequest.trusted}). */
  trusted?: string;
  /** Sent for every method but GET and HEAD (as before). */
  body: Buffer;
  /** The whole attempt's limit (ms). */
  timeoutMs: number;
}

/** Sends delivery attempts ({@link OutgoingRequest}) and turns each into an {@link AttemptOutcome}. */
export class HttpSender {
  private readonly client: DeliveryClient;

  constructor(private readonly opts: HttpSenderOptions) {
    this.client = new DeliveryClient({
      connectionsPerOrigin: opts.connectionsPerOrigin,
      maxResponseBytes: opts.maxResponseBytes,
      egressAddress: opts.egressAddress,
      lookup: opts.blockPrivate ? publicOnlyLookup(opts.lookup ?? dns.lookup) : opts.lookup,
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
      this.client.request(
        {
          origin: target.origin,
          path: target.path,
          method: req.method,
          headers: req.headers,
          trusted: req.trusted,
          body: req.method === 'GET' || req.method === 'HEAD' ? null : req.body,
          timeoutMs: req.timeoutMs,
        },
        resolve,
      );
    });
  }

  /** Closes every delivery connection; attempts in flight settle with an error. */
  async close(): Promise<void> {
    this.client.close();
  }
}
