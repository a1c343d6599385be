/**
 * Test helper: a TCP proxy on a free loopback port in front of `target` (host:port), which a test
 * can cut and restore, to cut one svc node off its PostgreSQL while the others keep theirs.
 *
 * A cut destroys the node's side of every proxied connection and refuses new ones (accepted and
 * closed at once) until {@link TcpProxy.restore}. `partition` (default) keeps the server's side
 * open, as a network partition does: PostgreSQL does not notice, its sessions of the cut node stay
 * (with their locks) until they time out. `reset` closes both sides (the server sees the node go).
 * `silent` closes nothing: bytes stop flowing both ways (new connections are held too), as when a
 * network drops packets, and flow again, with what was held back, at {@link TcpProxy.restore}
 * (TCP retransmitting after the network heals).
 */
import net from 'node:net';

export interface TcpProxy {
  port: number;
  cut(mode?: 'partition' | 'reset' | 'silent'): void;
  restore(): void;
  close(): Promise<void>;
}

export async function startTcpProxy(targetHost: string, targetPort: number): Promise<TcpProxy> {
  const pairs = new Set<{ client: net.Socket; upstream: net.Socket }>();
  /** Server sides kept open by a partition (closed by {@link TcpProxy.close}). */
  const orphans = new Set<net.Socket>();
  let cut = false;
  let silenced = false;
  const server = net.createServer((client) => {
    if (cut && !silenced) {
      client.destroy();
      return;
    }
    const upstream = net.connect(targetPort, targetHost);
    const pair = { client, upstream };
    pairs.add(pair);
    const drop = () => {
      if (!pairs.delete(pair)) return;
      client.destroy();
      upstream.destroy();
    };
    client.on('error', drop).on('close', drop);
    upstream.on('error', drop).on('close', drop);
    if (silenced) {
      // held: piped at restore()
      client.pause();
      upstream.pause();
      return;
    }
    client.pipe(upstream);
    upstream.pipe(client);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as net.AddressInfo).port,
    cut(mode = 'partition') {
      cut = true;
      if (mode === 'silent') {
        silenced = true;
        for (const pair of pairs) {
          pair.client.unpipe(pair.upstream);
          pair.upstream.unpipe(pair.client);
          pair.client.pause();
          pair.upstream.pause();
        }
        return;
      }
      for (const pair of [...pairs]) {
        pairs.delete(pair);
        if (mode === 'partition') {
          pair.client.unpipe(pair.upstream);
          pair.upstream.unpipe(pair.client);
          pair.upstream.on('data', () => undefined); // whatever the server still sends is lost
          orphans.add(pair.upstream);
        } else pair.upstream.destroy();
        pair.client.destroy();
      }
    },
    restore() {
      cut = false;
      if (!silenced) return;
      silenced = false;
      for (const pair of pairs) {
        pair.client.pipe(pair.upstream);
        pair.upstream.pipe(pair.client);
      }
    },
    close: () =>
      new Promise<void>((resolve) => {
        cut = true;
        for (const { client, upstream } of pairs) {
          client.destroy();
          upstream.destroy();
        }
        for (const s of orphans) s.destroy();
        server.close(() => resolve());
      }),
  };
}
