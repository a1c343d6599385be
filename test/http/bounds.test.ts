/**
 * What a client can make svc hold, measured on a real svc process (kv, vector and queue ports):
 * - a connection that pipelines requests and never reads the answers stops being read once its
 *   unsent output is past the socket's high-water mark (svc's memory stays bounded), and is served
 *   to the end once the client reads — without a token (401 answers) and with one (large answers,
 *   also after the hand-off to the `node:http` server);
 * - requests with a wrong token and a large body are refused from their head (401, connection
 *   closed) without their bodies being buffered, however many clients send them at once;
 * - a body that arrives in many small reads is copied once, not once per read.
 * The bound: svc's resident set grows by less than {@link RSS_BOUND_MB} MiB.
 */
import assert from 'node:assert/strict';
import fs from 'node:fs';
import net from 'node:net';
import { after, before, describe, test } from 'node:test';
import { spawnSvc, type SvcProcess } from '../helpers/svc-process.js';

/**
 * Peak growth measured on 2026-11-27 with bounded reading: 13-66 MiB per flood (the peak includes
 * garbage of the large answers not yet collected, so it varies with GC timing, most at a high
 * base); reading without bounds grew by 236 MiB (vector) and the refused uploads by hundreds.
 */
const RSS_BOUND_MB = 96;

let svc: SvcProcess;
before(async () => {
  svc = await spawnSvc(['kv', 'vector', 'queue']);
});
after(async () => {
  await svc?.close();
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Samples svc's resident set every 100 ms; the returned function stops and gives the peak (MiB). */
function rssPeak(): () => number {
  let peak = svc.rssMb();
  const t = setInterval(() => {
    if (svc.alive()) peak = Math.max(peak, svc.rssMb());
  }, 100);
  return () => {
    clearInterval(t);
    if (svc.alive()) peak = Math.max(peak, svc.rssMb());
    return peak;
  };
}

/** Counts the HTTP/1.1 responses in a byte stream by their status lines (bodies here never hold one). */
class Responses {
  count = 0;
  readonly statuses = new Map<number, number>();
  private carry = '';
  feed(chunk: Buffer): void {
    const s = this.carry + chunk.toString('latin1');
    let from = 0;
    for (;;) {
      const i = s.indexOf('HTTP/1.1 ', from);
      if (i < 0) {
        this.carry = s.slice(Math.max(from, s.length - 11));
        return;
      }
      if (i + 12 > s.length) {
        this.carry = s.slice(i);
        return;
      }
      const status = Number(s.slice(i + 9, i + 12));
      this.statuses.set(status, (this.statuses.get(status) ?? 0) + 1);
      this.count++;
      from = i + 12;
    }
  }
}

interface Flood {
  socket: net.Socket;
  /** Requests handed to the socket (all are sent eventually). */
  written: number;
  /** True when svc stopped reading the connection (no `'drain'` for `stallMs`). */
  stalled: boolean;
  responses: Responses;
}

/**
 * One connection that writes up to `total` copies of `request` (at most 1000 per write) and does not read
 * what comes back; resolves when svc stopped reading it, when all are written, or after `windowMs`.
 */
async function flood(port: number, request: string, total: number, windowMs = 10_000, stallMs = 1500): Promise<Flood> {
  const socket = net.connect(port, '127.0.0.1');
  socket.pause();
  socket.on('error', () => undefined);
  await new Promise<void>((resolve, reject) => {
    socket.once('connect', () => resolve());
    socket.once('error', reject);
  });
  const per = Math.min(1000, total);
  const batch = Buffer.from(request.repeat(per), 'latin1');
  const f: Flood = { socket, written: 0, stalled: false, responses: new Responses() };
  const until = Date.now() + windowMs;
  while (f.written < total && Date.now() < until) {
    // exactly `total` requests: the last write is cut to what is left
    const n = Math.min(per, total - f.written);
    const ok = socket.write(n === per ? batch : batch.subarray(0, n * Buffer.byteLength(request, 'latin1')));
    f.written += n;
    if (!ok) {
      const drained = await new Promise<boolean>((resolve) => {
        const t = setTimeout(() => {
          socket.off('drain', onDrain);
          resolve(false);
        }, stallMs);
        const onDrain = () => {
          clearTimeout(t);
          resolve(true);
        };
        socket.once('drain', onDrain);
      });
      if (!drained) {
        f.stalled = true;
        break;
      }
    }
  }
  return f;
}

/** Starts reading `f`'s answers; resolves once `expected` arrived (fails after `timeoutMs`). */
async function readAll(f: Flood, expected: number, timeoutMs = 120_000): Promise<void> {
  await new Promise<void>((resolve, reject) => {
    const t = setTimeout(() => reject(new Error(`only ${f.responses.count} of ${expected} answers arrived`)), timeoutMs);
    const check = () => {
      if (f.responses.count >= expected) {
        clearTimeout(t);
        resolve();
      }
    };
    f.socket.on('data', (d: Buffer) => {
      f.responses.feed(d);
      check();
    });
    f.socket.once('close', () => {
      clearTimeout(t);
      if (f.responses.count >= expected) resolve();
      else reject(new Error(`closed after ${f.responses.count} of ${expected} answers`));
    });
    f.socket.resume();
    check();
  });
  f.socket.destroy();
}

/** `head` (request line and headers, each ending in CRLF) with a 2 KB padding header: fills buffers with fewer requests. */
const padded = (head: string) => `${head}X-Pad: ${'p'.repeat(2000)}\r\n\r\n`;

/**
 * Runs an anonymous flood (answers 401) and `reader` (a flood of authorised requests with large
 * answers) on `port` at once; checks that svc stopped reading the anonymous one, that its memory
 * grew less than the bound, then reads both to the end.
 */
async function floodBoth(port: number, anonHead: string, anonStatus: number, reader: string, readerCount: number): Promise<void> {
  const base = svc.rssMb();
  const peak = rssPeak();
  const [anon, big] = await Promise.all([flood(port, padded(anonHead), 32_000), flood(port, reader, readerCount)]);
  await sleep(2000); // svc works on what it read
  const grown = peak() - base;
  assert.ok(svc.alive(), `svc died:\n${svc.output()}`);
  assert.ok(anon.stalled, `svc read all ${anon.written} requests of a client that reads nothing`);
  assert.ok(grown < RSS_BOUND_MB, `svc grew by ${grown.toFixed(0)} MiB (base ${base.toFixed(0)} MiB)`);
  await Promise.all([readAll(anon, anon.written), readAll(big, readerCount)]);
  assert.deepEqual([...anon.responses.statuses], [[anonStatus, anon.written]]);
  assert.deepEqual([...big.responses.statuses], [[200, readerCount]]);
  assert.ok(svc.alive());
}

/** Sends `head` (with a `Content-Length` of `bodyBytes`) and streams the body until svc answers; the answer's status, `Connection` header and whether svc closed. */
function upload(port: number, head: string, bodyBytes: number): Promise<{ status: number; connection: string | undefined; closed: boolean }> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1');
    let got = Buffer.alloc(0);
    let answered: { status: number; connection: string | undefined } | undefined;
    let done = false;
    const timer = setTimeout(() => finish(false), 30_000);
    const finish = (closed: boolean) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      socket.destroy();
      if (answered) resolve({ ...answered, closed });
      else reject(new Error(`no answer: ${got.toString('latin1').slice(0, 200)}`));
    };
    socket.on('error', () => finish(true));
    socket.on('end', () => finish(true));
    socket.on('close', () => finish(true));
    socket.on('data', (d: Buffer) => {
      got = Buffer.concat([got, d]);
      const end = got.indexOf('\r\n\r\n');
      if (end >= 0 && !answered) {
        const lines = got.toString('latin1', 0, end).split('\r\n');
        const conn = lines.find((l) => /^connection:/i.test(l));
        answered = { status: Number(lines[0].split(' ')[1]), connection: conn?.slice(11).trim().toLowerCase() };
      }
    });
    socket.on('connect', async () => {
      socket.write(head);
      const chunk = Buffer.alloc(64 * 1024);
      for (let sent = 0; sent < bodyBytes && !answered && !done; sent += chunk.length) {
        if (!socket.write(chunk.subarray(0, Math.min(chunk.length, bodyBytes - sent)))) {
          await new Promise<void>((r) => {
            socket.once('drain', r);
            socket.once('close', r);
            setTimeout(r, 1000);
          });
        }
      }
    });
  });
}

/** `clients` concurrent uploads of `head` per entry of `heads`; svc's growth and every answer checked. */
async function refusedUploads(port: number, heads: { head: string; bytes: number }[], clients: number): Promise<void> {
  const base = svc.rssMb();
  const peak = rssPeak();
  const results = await Promise.all(heads.flatMap(({ head, bytes }) => Array.from({ length: clients }, () => upload(port, head, bytes))));
  const grown = peak() - base;
  assert.ok(svc.alive(), `svc died:\n${svc.output()}`);
  for (const r of results) {
    assert.equal(r.status, 401);
    assert.equal(r.connection, 'close');
    assert.equal(r.closed, true);
  }
  assert.ok(grown < RSS_BOUND_MB, `svc grew by ${grown.toFixed(0)} MiB (base ${base.toFixed(0)} MiB) for ${results.length} refused uploads`);
}

const bearer = (t: string) => `Authorization: Bearer ${t}\r\n`;

describe('a client that does not read its answers', () => {
  test('kv: svc stops reading it; its memory stays bounded; everything is answered once the client reads', async () => {
    const port = svc.ports.kv;
    const token = svc.credentials()['kv.token'];
    const set = await fetch(`http://127.0.0.1:${port}/set/big`, { method: 'POST', headers: { authorization: `Bearer ${token}` }, body: 'x'.repeat(1024 * 1024) });
    assert.equal(set.status, 200);
    await floodBoth(port, 'GET / HTTP/1.1\r\nHost: x\r\n', 401, `GET /get/big HTTP/1.1\r\nHost: x\r\n${bearer(token)}\r\n`, 200);
  });

  test('vector: the same', async () => {
    const port = svc.ports.vector;
    const token = svc.credentials()['vector.default.token'];
    const up = await fetch(`http://127.0.0.1:${port}/upsert`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ id: 'big', vector: [1, 0], metadata: { s: 'x'.repeat(60_000) } }),
    });
    assert.equal(up.status, 200);
    const body = '{"ids":["big"],"includeMetadata":true}';
    const fetchBig = `POST /fetch HTTP/1.1\r\nHost: x\r\n${bearer(token)}Content-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`;
    await floodBoth(port, 'GET / HTTP/1.1\r\nHost: x\r\n', 401, fetchBig, 1500);
  });

  test('queue: the same (the large answers come from the node:http server after the hand-off)', async () => {
    const port = svc.ports.queue;
    const token = svc.credentials()['queue.token'];
    const pub = await fetch(`http://127.0.0.1:${port}/v2/publish/https://example.com/x`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'upstash-delay': '3600s', 'content-type': 'text/plain' },
      body: 'x'.repeat(48_000),
    });
    assert.equal(pub.status, 200);
    const { messageId } = (await pub.json()) as { messageId: string };
    await floodBoth(port, 'POST /v2/publish/https://example.com/x HTTP/1.1\r\nHost: x\r\n', 401, `GET /v2/messages/${messageId} HTTP/1.1\r\nHost: x\r\n${bearer(token)}\r\n`, 1500);
  });
});

describe('credentials are checked before a body is read', () => {
  const post = (target: string, length: number) =>
    `POST ${target} HTTP/1.1\r\nHost: x\r\n${bearer('wrong-token')}Content-Type: application/json\r\nContent-Length: ${length}\r\n\r\n`;

  test('kv: 100 clients sending 8 MiB bodies with a wrong token get 401 and a closed connection; svc does not buffer the bodies', async () => {
    await refusedUploads(svc.ports.kv, [{ head: post('/', 8 << 20), bytes: 8 << 20 }], 100);
  });

  test('vector: the same, on the fast path (1 MiB) and the node:http path (8 MiB)', async () => {
    await refusedUploads(svc.ports.vector, [{ head: post('/upsert', 1 << 20), bytes: 1 << 20 }, { head: post('/upsert', 8 << 20), bytes: 8 << 20 }], 50);
  });

  test('queue: the same, on the fast publish path (1 MiB) and the Fastify path (8 MiB)', async () => {
    await refusedUploads(svc.ports.queue, [{ head: post('/v2/publish/https://example.com/x', 1 << 20), bytes: 1 << 20 }, { head: post('/v2/batch', 8 << 20), bytes: 8 << 20 }], 50);
  });
});

describe('a body sent in small pieces', () => {
  /** CPU time (user + system) svc has used, in ms (`/proc/<pid>/stat`, clock ticks of 10 ms). */
  const cpuMs = () => {
    const f = fs.readFileSync(`/proc/${svc.child.pid}/stat`, 'utf8').split(') ')[1].split(' ');
    return (Number(f[11]) + Number(f[12])) * 10;
  };

  test('kv: a 1 MB body in 250-byte writes, one a millisecond, is buffered once (svc CPU stays far below the quadratic cost)', async () => {
    const port = svc.ports.kv;
    const token = svc.credentials()['kv.token'];
    const size = 1_000_000;
    const socket = net.connect(port, '127.0.0.1');
    socket.setNoDelay(true);
    socket.on('error', () => undefined);
    await new Promise<void>((r) => socket.once('connect', () => r()));
    let got = '';
    socket.on('data', (d: Buffer) => (got += d.toString('latin1')));
    const before = cpuMs();
    socket.write(`POST /set/pieces HTTP/1.1\r\nHost: x\r\n${bearer(token)}Content-Type: text/plain\r\nContent-Length: ${size}\r\n\r\n`);
    // one piece per millisecond: each reaches svc as a read of its own
    const piece = Buffer.alloc(250, 'x');
    for (let sent = 0; sent < size; sent += piece.length) {
      socket.write(piece);
      await new Promise((r) => setTimeout(r, 1));
    }
    for (let i = 0; i < 600 && !got.includes('{"result":"OK"}'); i++) await sleep(100);
    const used = cpuMs() - before;
    socket.destroy();
    assert.match(got, /^HTTP\/1\.1 200 /);
    // joined once: about 0.2 s of svc's CPU on the loaded 2-core machine; copying the buffer again
    // at every piece took 1.7 s there
    assert.ok(used < 800, `svc used ${used} ms of CPU`);
  });
});
