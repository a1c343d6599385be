/**
 * Sender IPv4 blocks (spec "Get sender IPv4 blocks", "IP block list (area D)"): the IPv4 CIDR
 * blocks from which the queue area's deliveries leave, so destination owners can allow-list them.
 */
import os from 'node:os';
import type { Config } from '../config.js';

export type InterfaceTable = ReturnType<typeof os.networkInterfaces>;

/**
 * The sender blocks, as IPv4 CIDR strings, in a stable order without duplicates:
 * - `config.mgmt.ipv4Cidrs` (`SVC_MGMT_IPV4_CIDRS`, validated by `loadConfig`) exactly as given
 *   when set: the operator states what destinations see (e.g. a NAT gateway's public block);
 * - otherwise every non-internal IPv4 address of the host's interfaces as a /32, followed by
 *   `config.queue.egressAddress` (`SVC_QUEUE_EGRESS_ADDRESS`, the local address the queue binds its
 *   outgoing requests to) as a /32 when set and not already listed.
 *
 * Detection runs per call (cheap) so that address changes (DHCP, new interface) show up without
 * a restart. `interfaces` is injectable for tests; default `os.networkInterfaces()`.
 * Can be empty (a host with loopback only and no egress address).
 */
export function senderIpv4Blocks(config: Config, interfaces: InterfaceTable = os.networkInterfaces()): string[] {
  if (config.mgmt.ipv4Cidrs) return [...new Set(config.mgmt.ipv4Cidrs)];
  const blocks: string[] = [];
  for (const addrs of Object.values(interfaces)) {
    for (const a of addrs ?? []) {
      if (a.family === 'IPv4' && !a.internal) blocks.push(`${a.address}/32`);
    }
  }
  if (config.queue.egressAddress) blocks.push(`${config.queue.egressAddress}/32`);
  return [...new Set(blocks)];
}
