/**
 * Which destination addresses the SSRF switches refuse (`SVC_QUEUE_BLOCK_PRIVATE_DESTINATIONS` for queue
 * deliveries, `SVC_VECTOR_BLOCK_PRIVATE_EMBEDDERS` for the embedders of indexes created through the
 * management API).
 * Classification is ipaddr.js's (its IANA special-purpose ranges), not a hand-written list: an
 * address is allowed only when ipaddr.js calls it global `unicast`. IPv4-mapped (`::ffff:a.b.c.d`)
 * and IPv4-compatible (`::a.b.c.d`) IPv6 addresses are judged by the IPv4 address they carry;
 * NAT64 (`64:ff9b::/96`), 6to4, Teredo, `::`, `::1`, `fc00::/7`, `fe80::/10`, `0.0.0.0/8`,
 * `169.254.0.0/16`, `100.64.0.0/10`, RFC 1918, multicast, broadcast and documentation ranges are
 * refused. The rules are applied twice: to the URL's host at publish time ({@link blockedHost}; a
 * WHATWG `URL` has already turned numeric forms such as `2130706433`, `0x7f.1` and `127.1` into
 * dotted IPv4) and to every address a destination name resolves to at connect time
 * ({@link publicOnlyLookup}), so a DNS answer that changes after publish cannot reach a private address.
 */
import type dns from 'node:dns';
import net from 'node:net';
import ipaddr from 'ipaddr.js';

/**
 * True when `ip` (an IPv4 or IPv6 literal, without brackets; a zone id is allowed) is not a
 * global unicast address. Anything that does not parse as an address counts as blocked.
 */
export function isBlockedAddress(ip: string): boolean {
  let addr: ipaddr.IPv4 | ipaddr.IPv6;
  try {
    addr = ipaddr.parse(ip);
  } catch {
    return true;
  }
  if (addr.kind() === 'ipv6') {
    const v6 = addr as ipaddr.IPv6;
    if (v6.isIPv4MappedAddress()) return isBlockedV4(v6.toIPv4Address());
    const p = v6.parts;
    // IPv4-compatible ::a.b.c.d (deprecated, RFC 4291 2.5.5.1): ipaddr.js calls it unicast
    if (p[0] === 0 && p[1] === 0 && p[2] === 0 && p[3] === 0 && p[4] === 0 && p[5] === 0) {
      return isBlockedV4(new ipaddr.IPv4([p[6] >> 8, p[6] & 255, p[7] >> 8, p[7] & 255]));
    }
    return v6.range() !== 'unicast';
  }
  return isBlockedV4(addr as ipaddr.IPv4);
}

function isBlockedV4(addr: ipaddr.IPv4): boolean {
  return addr.range() !== 'unicast';
}

/**
 * Why the host of a parsed URL is refused, or undefined when it may be used (a DNS name other
 * than `localhost` is checked later, on the addresses it resolves to). `hostname` is
 * `URL.hostname` (IPv6 in brackets).
 */
export function blockedHost(hostname: string): string | undefined {
  const host = hostname.startsWith('[') ? hostname.slice(1, -1) : hostname;
  const name = host.toLowerCase().replace(/\.$/, '');
  if (name === 'localhost' || name.endsWith('.localhost')) return 'localhost';
  if (net.isIP(host)) return isBlockedAddress(host) ? `${host} is not a public address` : undefined;
  return undefined;
}

/**
 * A `dns.lookup` (undici `connect.lookup` shape) that resolves through `resolve` and fails when any
 * answer is not a public address ({@link isBlockedAddress}): every answer is checked, not only the
 * first, because the connection may use any of them. Errors name the host and the refused address.
 */
export function publicOnlyLookup(resolve: typeof dns.lookup): typeof dns.lookup {
  return ((hostname: string, options: dns.LookupOptions, cb: (...a: unknown[]) => void) => {
    resolve(hostname, { ...options, all: true }, (err, addrs) => {
      if (err) return cb(err);
      const list = addrs as dns.LookupAddress[];
      if (list.length === 0) return cb(new Error(`destination ${hostname} has no address`));
      const bad = list.find((a) => isBlockedAddress(a.address));
      if (bad) return cb(new Error(`destination ${hostname} resolves to ${bad.address}, which is not a public address; refused`));
      if (options.all) return cb(null, list);
      cb(null, list[0].address, list[0].family);
    });
  }) as typeof dns.lookup;
}
