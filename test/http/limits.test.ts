/**
 * Time and connection bounds of the kv, vector and queue ports (`src/http/fast.ts` and the
 * `node:http` servers behind it), with small `SVC_HTTP_*` values: a head or a body trickled in is
 * answered 408 and closed (on the fast path and after the hand-off), connections past
 * `SVC_HTTP_MAX_CONNECTIONS` get 503 with `Retry-After` and are closed while the open ones are
 * served, and absolute-form targets are served on every port.
 */
import assert from 'node:assert/strict';
import net from 'node:net';
import { after, before, describe, test } from 'node:test';
import { startTestSvc } from '../helpers/env.js';

const HEADERS_TIMEOUT_MS = 1000;
const REQUEST_TIMEOUT_MS = 2500;

type Svc = Awaited<ReturnType<typeof startTestSvc>>;

interface Port {
  port: number;
  auth: string;
  /** A target the port answers a GET to with 200. */
  get: string;
}

function portsOf(svc: Svc): Record<string, Port> {
  const p = (u: string) => Number(new URL(u).port);
  const bearer = (t: string) => `Authorization: Bearer ${t}\r\n`;
  return {
    kv: { port: p(svc.urls.kv!), auth: bearer(svc.ctx.credentials.get('kv.token')), get: '/echo/hi' },
    vector: { port: p(svc.urls.vector!), auth: bearer(svc.ctx.credentials.get('vector.default.token')), get: '/info' },
    queue: { port: p(svc.urls.queue!), auth: bearer(svc.ctx.credentials.get('queue.token')), get: '/v2/queues' },
  };
}

/** A raw connection: what arrived so far, whether the server closed it, and when (ms since open). */
interface Conn {
  socket: net.Socket;
  text(): string;
  closedAfterMs: number | undefined;
  opened: number;
  closed: Promise<void>;
}

function connect(port: number): Promise<Conn> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1');
    let got = '';
    const c: Conn = { socket, text: () => got, closedAfterMs: undefined, opened: Date.now(), closed: Promise.resolve() };
    c.closed = new Promise((r) => {
      const done = () => {
        c.closedAfterMs ??= Date.now() - c.opened;
        r();
      };
      socket.on('end', done);
      socket.on('close', done);
    });
    socket.on('data', (d: Buffer) => (got += d.toString('latin1')));
    socket.on('error', () => undefined);
    socket.once('connect', () => resolve(c));
    socket.once('error', reject);
  });
}

/** Writes `first`, then `next` every 300 ms until the server closes the connection (at most `maxMs`). */
async function trickle(c: Conn, first: string, next: string, maxMs = 20_000): Promise<void> {
  c.socket.write(first);
  const timer = setInterval(() => {
    if (!c.socket.destroyed && c.socket.writable) c.socket.write(next);
  }, 300);
  await Promise.race([c.closed, new Promise((r) => setTimeout(r, maxMs))]);
  clearInterval(timer);
  c.socket.destroy();
}

/** The statuses of the answers in `text`. */
const statuses = (text: string) => [...text.matchAll(/HTTP\/1\.1 (\d{3})/g)].map((m) => Number(m[1]));

/** One GET of `p.get` on a new connection; its status. */
async function get(p: Port): Promise<number> {
  const c = await connect(p.port);
  c.socket.write(`GET ${p.get} HTTP/1.1\r\nHost: x\r\n${p.auth}Connection: close\r\n\r\n`);
  await c.closed;
  return statuses(c.text())[0];
}

describe('deadlines', () => {
  let svc: Svc;
  let ports: Record<string, Port>;
  before(async () => {
    svc = await startTestSvc(['kv', 'vector', 'queue'], {
      env: { SVC_VECTOR_DIMENSION: '2', SVC_KV_WORKERS: '0', SVC_HTTP_HEADERS_TIMEOUT_MS: String(HEADERS_TIMEOUT_MS), SVC_HTTP_REQUEST_TIMEOUT_MS: String(REQUEST_TIMEOUT_MS) },
    });
    ports = portsOf(svc);
  });
  after(async () => {
    await svc?.close();
  });

  /** The hand-off prefix: a chunked request (the fast path hands the connection over), answered before the trickle. */
  const handOff = (p: Port) => `POST ${p.get} HTTP/1.1\r\nHost: x\r\n${p.auth}Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n`;

  for (const area of ['kv', 'vector', 'queue']) {
    test(`${area}: a head trickled one line at a time gets 408 and is closed, on the fast path and after the hand-off; other clients are served meanwhile`, async () => {
      const p = ports[area];
      const fast = await connect(p.port);
      const handed = await connect(p.port);
      handed.socket.write(handOff(p));
      await new Promise((r) => setTimeout(r, 300));
      const served: number[] = [];
      const trickles = [
        trickle(fast, `GET ${p.get} HTTP/1.1\r\nHost: x\r\n`, 'X-A: 1\r\n'),
        trickle(handed, `GET ${p.get} HTTP/1.1\r\nHost: x\r\n`, 'X-A: 1\r\n'),
        (async () => {
          for (let i = 0; i < 3; i++) served.push(await get(p));
        })(),
      ];
      await Promise.all(trickles);
      assert.deepEqual(served, [200, 200, 200]);
      assert.deepEqual(statuses(fast.text()), [408]);
      assert.equal(statuses(handed.text()).at(-1), 408);
      for (const c of [fast, handed]) {
        assert.ok(c.closedAfterMs !== undefined && c.closedAfterMs >= HEADERS_TIMEOUT_MS && c.closedAfterMs < 15_000, `closed after ${c.closedAfterMs} ms`);
      }
    });

    test(`${area}: a body trickled one byte at a time gets 408 and is closed, on the fast path and after the hand-off`, async () => {
      const p = ports[area];
      const fast = await connect(p.port);
      const chunked = await connect(p.port);
      await Promise.all([
        trickle(fast, `POST ${p.get} HTTP/1.1\r\nHost: x\r\n${p.auth}Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n `, ' '),
        trickle(chunked, `POST ${p.get} HTTP/1.1\r\nHost: x\r\n${p.auth}Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n`, '1\r\n \r\n'),
      ]);
      for (const c of [fast, chunked]) {
        assert.deepEqual(statuses(c.text()), [408]);
        assert.ok(c.closedAfterMs !== undefined && c.closedAfterMs >= REQUEST_TIMEOUT_MS && c.closedAfterMs < 15_000, `closed after ${c.closedAfterMs} ms`);
      }
    });
  }

  test('absolute-form targets are served on every port', async () => {
    for (const [area, p] of Object.entries(ports)) {
      const c = await connect(p.port);
      c.socket.write(`GET http://x${p.get} HTTP/1.1\r\nHost: x\r\n${p.auth}Connection: close\r\n\r\n`);
      await c.closed;
      assert.deepEqual(statuses(c.text()), [200], area);
      if (area === 'kv') assert.match(c.text(), /\{"result":"hi"\}$/);
    }
  });
});

describe('connection cap', () => {
  const MAX = 10;
  let svc: Svc;
  let ports: Record<string, Port>;
  before(async () => {
    svc = await startTestSvc(['kv', 'vector', 'queue'], { env: { SVC_VECTOR_DIMENSION: '2', SVC_KV_WORKERS: '0', SVC_HTTP_MAX_CONNECTIONS: String(MAX) } });
    ports = portsOf(svc);
  });
  after(async () => {
    await svc?.close();
  });

  for (const area of ['kv', 'vector', 'queue']) {
    test(`${area}: past ${MAX} open connections a new one gets 503 with Retry-After and is closed; the open ones are served, and new ones once some close`, async () => {
      const p = ports[area];
      const held = await Promise.all(Array.from({ length: MAX }, () => connect(p.port)));
      // each is served (and keeps its connection)
      for (const c of held) c.socket.write(`GET ${p.get} HTTP/1.1\r\nHost: x\r\n${p.auth}\r\n`);
      for (const c of held) {
        for (let i = 0; i < 100 && statuses(c.text()).length === 0; i++) await new Promise((r) => setTimeout(r, 50));
        assert.deepEqual(statuses(c.text()), [200]);
      }
      const extra = await connect(p.port);
      extra.socket.write(`GET ${p.get} HTTP/1.1\r\nHost: x\r\n${p.auth}\r\n`);
      await extra.closed;
      assert.deepEqual(statuses(extra.text()), [503]);
      assert.match(extra.text(), /\r\nRetry-After: 1\r\n/i);
      assert.match(extra.text(), /\r\nConnection: close\r\n/i);
      assert.match(extra.text(), /too many connections/i);
      // the held ones are still served
      held[0].socket.write(`GET ${p.get} HTTP/1.1\r\nHost: x\r\n${p.auth}\r\n`);
      for (let i = 0; i < 100 && statuses(held[0].text()).length < 2; i++) await new Promise((r) => setTimeout(r, 50));
      assert.deepEqual(statuses(held[0].text()), [200, 200]);
      // once some close, new connections are served again
      for (const c of held.slice(0, 3)) c.socket.destroy();
      let status = 0;
      for (let i = 0; i < 100 && status !== 200; i++) {
        status = await get(p);
        if (status !== 200) await new Promise((r) => setTimeout(r, 50));
      }
      assert.equal(status, 200);
      for (const c of held) c.socket.destroy();
    });
  }
});
