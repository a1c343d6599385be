/**
 * The kv gateway's HTTP/1.1 front (`src/http/fast.ts` with the kv handler) over raw sockets: the fast path serves
 * plain requests in order on one keep-alive connection, and hands the connection to Node's `http`
 * server at the first request it does not serve itself (chunked body, 100-continue, HTTP/1.0,
 * `Connection: close`, other methods, oversized or malformed heads), which then keeps serving it.
 */
import assert from 'node:assert/strict';
import http from 'node:http';
import net from 'node:net';
import { createHash } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { createFastServer, parseHead, readWithoutStream, type FastHandler } from '../../src/http/fast.js';
import { isStreamPath } from '../../src/kv/routes.js';
import { startTestSvc } from '../helpers/env.js';

let svc: Awaited<ReturnType<typeof startTestSvc>>;
let port: number;
let auth: string;

before(async () => {
  svc = await startTestSvc(['kv']);
  port = Number(new URL(svc.urls.kv!).port);
  auth = `Host: x\r\nAuthorization: Bearer ${svc.ctx.credentials.get('kv.token')}\r\n`;
});
after(async () => {
  await svc?.close();
});

interface Parsed {
  status: number;
  headers: Record<string, string>;
  body: string;
}

/** Splits a byte stream of HTTP/1.1 responses (each with Content-Length, or none for HEAD/1xx). */
function parseResponses(raw: Buffer, heads: readonly boolean[] = []): Parsed[] {
  const out: Parsed[] = [];
  let at = 0;
  while (at < raw.length) {
    const end = raw.indexOf('\r\n\r\n', at);
    if (end < 0) break;
    const lines = raw.toString('latin1', at, end).split('\r\n');
    const status = Number(lines[0].split(' ')[1]);
    const headers: Record<string, string> = {};
    for (const l of lines.slice(1)) headers[l.slice(0, l.indexOf(':')).toLowerCase()] = l.slice(l.indexOf(':') + 1).trim();
    const noBody = status < 200 || heads[out.filter((r) => r.status >= 200).length] === true;
    const len = noBody ? 0 : Number(headers['content-length'] ?? 0);
    if (end + 4 + len > raw.length) break; // body still arriving
    out.push({ status, headers, body: raw.toString('utf8', end + 4, end + 4 + len) });
    at = end + 4 + len;
  }
  return out;
}

/**
 * Opens one connection, writes each piece (a short pause between pieces), and collects bytes until
 * `expect` final (non-1xx) responses arrived or the server closed the connection.
 */
function exchange(pieces: (string | Buffer)[], expect: number, heads: readonly boolean[] = []): Promise<{ responses: Parsed[]; closed: boolean }> {
  return new Promise((resolve, reject) => {
    const s = net.connect(port, '127.0.0.1');
    const chunks: Buffer[] = [];
    let closed = false;
    const timer = setTimeout(() => {
      s.destroy();
      reject(new Error(`timed out; got ${Buffer.concat(chunks).toString('latin1')}`));
    }, 10_000);
    const check = () => {
      const responses = parseResponses(Buffer.concat(chunks), heads);
      if (closed || responses.filter((r) => r.status >= 200).length >= expect) {
        clearTimeout(timer);
        s.destroy();
        resolve({ responses, closed });
      }
    };
    s.on('data', (d) => {
      chunks.push(d);
      check();
    });
    s.on('close', () => {
      closed = true;
      check();
    });
    s.on('error', () => {});
    s.on('connect', async () => {
      for (const p of pieces) {
        s.write(p);
        await new Promise((r) => setTimeout(r, 20));
      }
    });
  });
}

const finals = (rs: Parsed[]) => rs.filter((r) => r.status >= 200);

describe('fast HTTP/1.1 path', () => {
  test('pipelined requests on one connection are answered in order, with all headers', async () => {
    const reqs = [`GET /set/fh:a/1 HTTP/1.1\r\n${auth}\r\n`];
    for (let i = 0; i < 50; i++) reqs.push(`GET /incr/fh:a HTTP/1.1\r\n${auth}\r\n`);
    reqs.push(`POST /set/fh:b HTTP/1.1\r\n${auth}Content-Type: text/plain\r\nContent-Length: 5\r\n\r\nhello`);
    reqs.push(`POST / HTTP/1.1\r\n${auth}Content-Type: application/json\r\nContent-Length: 22\r\n\r\n["mget","fh:a","fh:b"]`);
    const { responses } = await exchange([reqs.join('')], 53);
    assert.equal(responses.length, 53);
    assert.deepEqual(JSON.parse(responses[0].body), { result: 'OK' });
    for (let i = 1; i <= 50; i++) assert.deepEqual(JSON.parse(responses[i].body), { result: i + 1 });
    assert.deepEqual(JSON.parse(responses[52].body), { result: ['51', 'hello'] });
    const h = responses[52].headers;
    assert.equal(h['content-type'], 'application/json; charset=utf-8');
    assert.equal(h['access-control-allow-origin'], '*');
    assert.ok(h['upstash-sync-token'] && h['svc-sync-token'] === h['upstash-sync-token']);
    assert.equal(h['connection'], 'keep-alive');
    assert.ok(h['date']);
  });

  test('a head and body split across packets; HEAD has no body', async () => {
    const { responses } = await exchange(
      [`POST /set/fh:c HTTP/1.1\r\nHo`, `st: x\r\n${auth.slice(9)}Content-Type: a/b\r\nContent-Length: 6\r\n\r\nab`, 'cdef', `HEAD /get/fh:c HTTP/1.1\r\n${auth}\r\nGET /get/fh:c HTTP/1.1\r\n${auth}\r\n`],
      3,
      [false, true, false],
    );
    assert.deepEqual(responses.map((r) => r.status), [200, 200, 200]);
    assert.equal(responses[1].body, '');
    assert.equal(responses[1].headers['content-length'], String('{"result":"abcdef"}'.length));
    assert.deepEqual(JSON.parse(responses[2].body), { result: 'abcdef' });
  });

  test('hand-off to the Node server mid-connection: chunked body, then plain requests keep working', async () => {
    const { responses } = await exchange(
      [
        `GET /set/fh:d/1 HTTP/1.1\r\n${auth}\r\n` +
          `POST /set/fh:d HTTP/1.1\r\n${auth}Transfer-Encoding: chunked\r\nContent-Type: text/plain\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n`,
        // a separate write: Node's http server runs the handlers of pipelined requests concurrently
        `GET /get/fh:d HTTP/1.1\r\n${auth}\r\n`,
      ],
      3,
    );
    assert.deepEqual(responses.map((r) => JSON.parse(r.body)), [{ result: 'OK' }, { result: 'OK' }, { result: 'abcde' }]);
  });

  test('Expect: 100-continue, HTTP/1.0 and Connection: close are served by the Node server', async () => {
    const e = await exchange([`POST /set/fh:e HTTP/1.1\r\n${auth}Content-Type: a\r\nContent-Length: 3\r\nExpect: 100-continue\r\n\r\n`, `xyz`], 1);
    assert.equal(e.responses[0].status, 100);
    assert.deepEqual(JSON.parse(finals(e.responses)[0].body), { result: 'OK' });
    const h10 = await exchange([`GET /get/fh:e HTTP/1.0\r\n${auth}\r\n`], 1);
    assert.deepEqual(JSON.parse(h10.responses[0].body), { result: 'xyz' });
    const close = await exchange([`GET /get/fh:e HTTP/1.1\r\n${auth}Connection: close\r\n\r\n`], 2);
    assert.equal(close.responses.length, 1);
    assert.deepEqual(JSON.parse(close.responses[0].body), { result: 'xyz' });
    assert.equal(close.closed, true);
  });

  test('other methods, preflight and malformed requests after a fast one get the Node server answers', async () => {
    const m = await exchange([`GET /ping HTTP/1.1\r\n${auth}\r\nDELETE /get/x HTTP/1.1\r\n${auth}\r\nOPTIONS /get/x HTTP/1.1\r\nHost: x\r\nAccess-Control-Request-Method: POST\r\n\r\n`], 3);
    assert.deepEqual(m.responses.map((r) => r.status), [200, 405, 204]);
    assert.deepEqual(JSON.parse(m.responses[1].body), { error: 'ERR method DELETE not allowed' });
    const bad = await exchange([`GET /ping HTTP/1.1\r\n${auth}\r\nBLAH\r\n\r\n`], 2);
    assert.deepEqual(bad.responses.map((r) => r.status), [200, 400]);
    assert.deepEqual(JSON.parse(bad.responses[1].body), { error: 'ERR bad HTTP request' });
    const huge = await exchange([`GET /ping HTTP/1.1\r\n${auth}X-Big: ${'a'.repeat(20_000)}\r\n\r\n`], 1);
    assert.ok(huge.responses[0].status >= 400 && huge.responses[0].status < 500);
  });

  test('a client that half-closes after its request still gets the answer', async () => {
    const res = await new Promise<string>((resolve) => {
      const s = net.connect(port, '127.0.0.1', () => s.end(`GET /echo/bye HTTP/1.1\r\n${auth}\r\n`));
      let got = '';
      s.on('data', (d) => (got += d.toString()));
      s.on('close', () => resolve(got));
    });
    assert.match(res, /\{"result":"bye"\}$/);
  });
});

describe('idle connections', () => {
  test('an idle keep-alive connection is closed after keepAliveMs, never before; one in use is not', async () => {
    const keepAliveMs = 400;
    const handler: FastHandler = { accepts: () => true, handle: (_h, _b, out) => out.send(200, 'text/plain', 'ok', '') };
    const server = createFastServer(handler, http.createServer(), {
      keepAliveMs,
      bodyLimit: 1024,
      headersTimeoutMs: 60_000,
      requestTimeoutMs: 300_000,
      maxConnections: 100,
      busyBody: '{}',
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const { port: p } = server.address() as net.AddressInfo;
    const open = () =>
      new Promise<{ s: net.Socket; closedAt: Promise<number>; answers: () => number }>((resolve) => {
        const s = net.connect(p, '127.0.0.1');
        let got = '';
        s.on('data', (d) => (got += d.toString('latin1')));
        s.on('error', () => {});
        const closedAt = new Promise<number>((r) => s.on('close', () => r(performance.now())));
        s.on('connect', () => resolve({ s, closedAt, answers: () => got.split('HTTP/1.1 200').length - 1 }));
      });
    try {
      const idle = await open();
      const busy = await open();
      const start = performance.now();
      idle.s.write('GET /a HTTP/1.1\r\nHost: x\r\n\r\n');
      const lastIdleRequest = performance.now();
      // the busy one sends a request every keepAliveMs / 4 for 3 x keepAliveMs
      let sent = 0;
      while (performance.now() - start < 3 * keepAliveMs) {
        busy.s.write('GET /b HTTP/1.1\r\nHost: x\r\n\r\n');
        sent++;
        await new Promise((r) => setTimeout(r, keepAliveMs / 4));
      }
      const idleClosed = await Promise.race([idle.closedAt, new Promise<number>((r) => setTimeout(() => r(-1), 30_000))]);
      assert.ok(idleClosed > 0, 'the idle connection was closed');
      assert.ok(idleClosed - lastIdleRequest >= keepAliveMs, `closed ${Math.round(idleClosed - lastIdleRequest)} ms after its last request, not before ${keepAliveMs}`);
      assert.equal(idle.answers(), 1);
      assert.equal(busy.s.destroyed, false, 'the connection in use is still open');
      for (let i = 0; i < 300 && busy.answers() < sent; i++) await new Promise((r) => setTimeout(r, 10));
      assert.equal(busy.answers(), sent);
      const busyClosed = await Promise.race([busy.closedAt, new Promise<number>((r) => setTimeout(() => r(-1), 30_000))]);
      assert.ok(busyClosed > 0, 'and it is closed once idle');
    } finally {
      server.closeAll();
      server.close();
    }
  });
});

describe('identical heads on one connection', () => {
  /** A fast server whose handler records each head it serves and answers its headers, body and precheck mark. */
  const recorder = async (sharedHeaders: boolean) => {
    const seen: { headers: http.IncomingHttpHeaders; url: string; bodyLength: number; auth: unknown }[] = [];
    let prechecks = 0;
    const handler: FastHandler = {
      sharedHeaders,
      accepts: () => true,
      precheck: (h) => {
        assert.equal(h.auth, undefined, 'a head reaches precheck without the mark of an earlier request');
        h.auth = ++prechecks;
        return undefined;
      },
      handle: (h, body, out) => {
        seen.push({ headers: h.headers, url: h.url, bodyLength: h.bodyLength, auth: h.auth });
        out.send(200, 'application/json', JSON.stringify({ x: h.headers['x-v'], url: h.url, body: body?.toString('latin1') ?? null, auth: h.auth ?? null }), '');
      },
    };
    const server = createFastServer(handler, http.createServer(), { keepAliveMs: 60_000, bodyLimit: 65_536, headersTimeoutMs: 60_000, requestTimeoutMs: 300_000, maxConnections: 100, busyBody: '{}' });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    return { server, seen, port: (server.address() as net.AddressInfo).port };
  };
  /** Writes each piece (a pause between them) on one connection; resolves with the `n` answers' bodies. */
  const send = (p: number, pieces: string[], n: number) =>
    new Promise<string[]>((resolve, reject) => {
      const s = net.connect(p, '127.0.0.1');
      const chunks: Buffer[] = [];
      const timer = setTimeout(() => reject(new Error(`timed out: ${Buffer.concat(chunks).toString('latin1')}`)), 30_000);
      s.on('data', (d) => {
        chunks.push(d);
        const r = parseResponses(Buffer.concat(chunks));
        if (r.length >= n) {
          clearTimeout(timer);
          s.destroy();
          resolve(r.map((x) => x.body));
        }
      });
      s.on('connect', async () => {
        for (const piece of pieces) {
          s.write(piece);
          await new Promise((r) => setTimeout(r, 20));
        }
      });
    });
  const req = (v: string, body: string, target = '/t') => `POST ${target} HTTP/1.1\r\nHost: x\r\nX-V: ${v}\r\nContent-Length: ${body.length}\r\n\r\n${body}`;

  test('share one parse (the headers object) when the handler only reads headers; any other byte is parsed anew', async () => {
    const { server, seen, port: p } = await recorder(true);
    try {
      const a = req('one', 'abc');
      // the same head again (alone, pipelined, split inside the head), then heads that differ in a
      // header value, the body length, the target, and the first head once more
      // then twice the same head with a 5,000-byte body (the head is kept, copied out of the large
      // buffer), and last, twice a head of 5,000 bytes: a head that large is not kept
      const big = req('one', 'x'.repeat(5000));
      const longHead = req('v'.repeat(5000), 'abc');
      const pieces = [a, a, a + a, a.slice(0, 20), a.slice(20), req('onf', 'abc'), req('one', 'abcd'), req('one', 'abc', '/u'), a, big, big, longHead, longHead];
      const bodies = await send(p, pieces, 13);
      assert.deepEqual(
        bodies.map((b) => JSON.parse(b) as unknown),
        [
          ...[1, 2, 3, 4, 5].map((auth) => ({ x: 'one', url: '/t', body: 'abc', auth })),
          { x: 'onf', url: '/t', body: 'abc', auth: 6 },
          { x: 'one', url: '/t', body: 'abcd', auth: 7 },
          { x: 'one', url: '/u', body: 'abc', auth: 8 },
          { x: 'one', url: '/t', body: 'abc', auth: 9 },
          { x: 'one', url: '/t', body: 'x'.repeat(5000), auth: 10 },
          { x: 'one', url: '/t', body: 'x'.repeat(5000), auth: 11 },
          { x: 'v'.repeat(5000), url: '/t', body: 'abc', auth: 12 },
          { x: 'v'.repeat(5000), url: '/t', body: 'abc', auth: 13 },
        ],
      );
      // requests 1-5 share the first parse; each change is a new one; the last head is parsed again
      for (let i = 1; i < 5; i++) assert.equal(seen[i].headers, seen[0].headers, `request ${i + 1} shares the first head's headers`);
      for (let i = 5; i < 9; i++) for (let k = 0; k < i; k++) assert.notEqual(seen[i].headers, seen[k].headers, `request ${i + 1} is parsed anew`);
      assert.equal(seen[10].headers, seen[9].headers, 'a small head received in a buffer above 4 KiB is kept (a copy)');
      assert.notEqual(seen[12].headers, seen[11].headers, 'a head above 4 KiB is parsed each time');
      assert.deepEqual(seen.map((s) => s.bodyLength), [3, 3, 3, 3, 3, 3, 4, 3, 3, 5000, 5000, 3, 3]);
    } finally {
      server.closeAll();
      server.close();
    }
  });

  test('are parsed each time for a handler that may change its headers', async () => {
    const { server, seen, port: p } = await recorder(false);
    try {
      const a = req('one', 'abc');
      await send(p, [a, a + a], 3);
      assert.notEqual(seen[1].headers, seen[0].headers);
      assert.notEqual(seen[2].headers, seen[1].headers);
    } finally {
      server.closeAll();
      server.close();
    }
  });
});

describe('reads of accepted sockets', () => {
  test('go through one shared buffer with onread, each read copied out; pause, resume, end and hand-off keep working', async () => {
    const handler: FastHandler = {
      accepts: () => true,
      handle: (h, body, out) => {
        // slow answers: the client's next requests pile up and reading pauses (READ_AHEAD_MAX)
        setTimeout(() => out.send(200, 'text/plain', `${h.url} ${body?.length ?? 0} ${createHash('sha256').update(body ?? Buffer.alloc(0)).digest('hex')}`, ''), 2);
      },
    };
    const node = http.createServer((req, res) => {
      let n = 0;
      req.on('data', (c: Buffer) => (n += c.length));
      req.on('end', () => res.end(`node ${req.url} ${n}`));
    });
    const server = createFastServer(handler, node, { keepAliveMs: 60_000, bodyLimit: 1 << 20, headersTimeoutMs: 60_000, requestTimeoutMs: 300_000, maxConnections: 100, busyBody: '{}' });
    const onread: boolean[] = [];
    server.on('connection', (s: net.Socket) => {
      const field = Object.getOwnPropertySymbols(s).find((k) => k.description === 'kBuffer');
      onread.push(field !== undefined && Buffer.isBuffer((s as unknown as Record<symbol, unknown>)[field]));
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const p = (server.address() as net.AddressInfo).port;
    try {
      // three connections at once, each: 6 requests with bodies of 1-1,000,000 bytes of its own
      // pattern, pipelined in one write (more than the read-ahead limit: reading pauses and resumes),
      // then a chunked request (handed to the Node server) and a plain one after it, then half-close
      const conn = (k: number) =>
        new Promise<{ got: string; want: string }>((resolve, reject) => {
          const sizes = [1, 70_000, 1_000_000, 100, 900_000, 5];
          const bodies = sizes.map((n, i) => Buffer.alloc(n, `${k}${i}abcdefgh`.repeat(3)));
          const want: string[] = [];
          const out: Buffer[] = [];
          bodies.forEach((b, i) => {
            out.push(Buffer.from(`POST /c${k}/${i} HTTP/1.1\r\nHost: x\r\nContent-Length: ${b.length}\r\n\r\n`), b);
            want.push(`/c${k}/${i} ${b.length} ${createHash('sha256').update(b).digest('hex')}`);
          });
          out.push(Buffer.from(`POST /n${k} HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\nPOST /m${k} HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nxy`));
          want.push(`node /n${k} 3`, `node /m${k} 2`);
          const s = net.connect(p, '127.0.0.1');
          const chunks: Buffer[] = [];
          const timer = setTimeout(() => reject(new Error(`timed out: ${Buffer.concat(chunks).toString('latin1').slice(0, 2000)}`)), 120_000);
          s.on('data', (c: Buffer) => chunks.push(c));
          s.on('error', reject);
          s.on('close', () => {
            clearTimeout(timer);
            const got = parseResponses(Buffer.concat(chunks)).map((r) => r.body);
            resolve({ got: got.join('\n'), want: want.join('\n') });
          });
          s.end(Buffer.concat(out));
        });
      const results = await Promise.all([0, 1, 2].map(conn));
      for (const r of results) assert.equal(r.got, r.want);
      assert.deepEqual(onread, [true, true, true], 'each accepted socket reads with onread');
    } finally {
      server.closeAll();
      server.close();
    }
  });
});

describe('readWithoutStream', () => {
  test('leaves a socket on its stream when its onread fields are set or its stream already holds bytes', async () => {
    const held: net.Socket[] = [];
    const server = net.createServer((s) => {
      s.pause();
      held.push(s);
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const p = (server.address() as net.AddressInfo).port;
    const client = net.connect({ port: p, host: '127.0.0.1', onread: { buffer: Buffer.alloc(16), callback: () => true } });
    try {
      await new Promise<void>((r) => client.once('connect', r));
      assert.equal(readWithoutStream(client), false, 'a socket opened with onread keeps it');
      client.write('hello');
      const accepted = await new Promise<net.Socket>((resolve) => {
        const poll = () => (held.length > 0 && held[0].readableLength > 0 ? resolve(held[0]) : setTimeout(poll, 10));
        poll();
      });
      assert.equal(readWithoutStream(accepted), false, 'bytes already in the stream: left on it');
      const got: Buffer[] = [];
      accepted.on('data', (c: Buffer) => got.push(c));
      accepted.resume();
      client.write(' world');
      const deadline = Date.now() + 60_000;
      while (Buffer.concat(got).toString() !== 'hello world' && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
      assert.equal(Buffer.concat(got).toString(), 'hello world', 'read through its stream, in order');
    } finally {
      client.destroy();
      for (const s of held) s.destroy();
      server.close();
    }
  });
});

describe('parseHead', () => {
  const kvLike: FastHandler = { accepts: (_m, path) => !isStreamPath(path), handle: () => undefined };
  const head = (s: string, handler = kvLike, host = '\r\nHost: x') => {
    const b = Buffer.from(s + host + '\r\n\r\n', 'latin1');
    return parseHead(b, b.length - 4, 1024, handler);
  };
  test('serves only the plain form', () => {
    assert.deepEqual(head('GET /get/k HTTP/1.1\r\nAuthorization: Bearer t')?.headers.authorization, 'Bearer t');
    assert.equal(head('POST / HTTP/1.1\r\nContent-Length: 10')?.bodyLength, 10);
    for (const bad of [
      'GET /get/k HTTP/1.0',
      'DELETE /k HTTP/1.1',
      'GET http://x/get/k HTTP/1.1',
      'GET /get/k  HTTP/1.1',
      'POST / HTTP/1.1\r\nContent-Length: 2048',
      'POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 1',
      'POST / HTTP/1.1\r\nContent-Length: -1',
      'POST / HTTP/1.1\r\nContent-Length: 1\r\nTransfer-Encoding: chunked',
      'GET / HTTP/1.1\r\nExpect: 100-continue',
      'GET / HTTP/1.1\r\nConnection: close',
      'GET / HTTP/1.1\r\nBad Name: 1',
      'GET / HTTP/1.1\r\n folded',
      'GET / HTTP/1.1\r\nX: a\x00b',
      'GET /subscribe/ch HTTP/1.1',
      'GET /MONITOR HTTP/1.1',
      'GET /get/a\tb HTTP/1.1',
      'GET /get/\xe9 HTTP/1.1',
      'GET /get/k HTTP/1.1\nX: y',
    ]) {
      assert.equal(head(bad), undefined, bad);
    }
    // header names in any case come out lower-case, known or not; values are trimmed of SP/HTAB
    const mixed = head('POST /set/k HTTP/1.1\r\nAuThOrIzAtIoN: Bearer t\r\nCONTENT-length:\t7 \r\nX-Custom-Thing: a b\r\nUser-agent:  ua');
    assert.deepEqual({ ...mixed?.headers }, { authorization: 'Bearer t', 'content-length': '7', 'x-custom-thing': 'a b', 'user-agent': 'ua', host: 'x' });
    assert.equal(mixed?.bodyLength, 7);
    assert.equal(mixed?.method, 'POST');
    assert.equal(mixed?.url, '/set/k');
    // a known name given twice in different cases is a repeated header
    assert.equal(head('GET / HTTP/1.1\r\nauthorization: a\r\nAuthorization: b'), undefined);
    // Content-Length: digits only, at most 15 of them
    assert.equal(head('POST / HTTP/1.1\r\nContent-Length: 999999999999999', kvLike)?.bodyLength, undefined); // above the limit
    assert.equal(parseHead(Buffer.from('POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 999999999999999\r\n\r\n'), 57, Number.MAX_SAFE_INTEGER, kvLike)?.bodyLength, 999999999999999);
    for (const bad of ['1a', '1000000000000000', '', '0x1', '1 1']) assert.equal(head(`POST / HTTP/1.1\r\nContent-Length: ${bad}`), undefined, bad);
    // lower-case methods are not the plain form
    assert.equal(head('get /get/k HTTP/1.1'), undefined);
    // Host is required (Node answers 400 without it)
    assert.equal(head('GET /get/k HTTP/1.1', kvLike, ''), undefined);
    // extra methods only when the handler lists them
    assert.equal(head('DELETE /k HTTP/1.1', { ...kvLike, methods: ['DELETE'] })?.method, 'DELETE');
  });
});

/**
 * The framing table: each raw request is sent to svc's kv, vector and queue ports and to a plain
 * `node:http` server (llhttp, Node's defaults) in the same test, and the outcomes must agree:
 * the status when the HTTP layer answers it (400, 408, 413, 431, 505) or "served" when the area
 * does, and whether the connection is closed. `{auth}` becomes the port's token header, `{get}` a
 * target each answers a GET to with 200, `{post}` one it answers a POST to without reading the
 * body as the area's JSON (kv `/echo`, vector `/info`, queue an unknown route).
 */
describe('differential: svc ports against node:http', () => {
  const FRAMING = new Set([400, 408, 413, 431, 505]);
  const FIN = Symbol('FIN');
  /** Between two writes: waits for the answer to what was written (at most 3 s). */
  const WAIT = Symbol('WAIT');
  const TABLE: Record<string, (string | Buffer | typeof FIN | typeof WAIT)[]> = {
    'bare-LF line ends': ['GET {get} HTTP/1.1\n{auth-lf}Host: x\n\n'],
    'a bare LF after the first line': ['GET {get} HTTP/1.1\r\n{auth}Host: x\nX: y\r\n\r\n'],
    'HTAB in the target': ['GET {get}\tb HTTP/1.1\r\n{auth}Host: x\r\n\r\n'],
    'byte 0x80 in the target': ['GET {get}\x80 HTTP/1.1\r\n{auth}Host: x\r\n\r\n'],
    'byte 0xff in the target': ['GET {get}\xff HTTP/1.1\r\n{auth}Host: x\r\n\r\n'],
    'no Host': ['GET {get} HTTP/1.1\r\n{auth}\r\n'],
    'two Host headers': ['GET {get} HTTP/1.1\r\n{auth}Host: x\r\nHost: y\r\n\r\n'],
    'a 20 KB head': [`GET {get} HTTP/1.1\r\n{auth}Host: x\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`],
    'a body shorter than Content-Length, then FIN': ['POST {post} HTTP/1.1\r\n{auth}Host: x\r\nContent-Type: text/plain\r\nContent-Length: 10\r\n\r\nabc', FIN],
    'half a head, then FIN': ['GET {get} HTTP/1.1\r\n{auth}Host: x\r\n', FIN],
    'Content-Length and Transfer-Encoding': ['POST {post} HTTP/1.1\r\n{auth}Host: x\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n'],
    'two different Content-Lengths': ['POST {post} HTTP/1.1\r\n{auth}Host: x\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab'],
    'Content-Length +1': ['POST {post} HTTP/1.1\r\n{auth}Host: x\r\nContent-Length: +1\r\n\r\na'],
    'Content-Length 1,1': ['POST {post} HTTP/1.1\r\n{auth}Host: x\r\nContent-Length: 1,1\r\n\r\na'],
    'a bad chunk size': ['POST {post} HTTP/1.1\r\n{auth}Host: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n'],
    'Transfer-Encoding gzip alone': ['POST {post} HTTP/1.1\r\n{auth}Host: x\r\nTransfer-Encoding: gzip\r\n\r\n'],
    'a space before the colon': ['GET {get} HTTP/1.1\r\n{auth}Host : x\r\n\r\n'],
    'an obs-fold line': ['GET {get} HTTP/1.1\r\n{auth}Host: x\r\nX: a\r\n b\r\n\r\n'],
    'NUL in a header value': ['GET {get} HTTP/1.1\r\n{auth}Host: x\r\nX: a\x00b\r\n\r\n'],
    'CR-only line ends': ['GET {get} HTTP/1.1\r{auth-cr}Host: x\r\r'],
    'a method with a bad byte': ['G(ET {get} HTTP/1.1\r\n{auth}Host: x\r\n\r\n'],
    'HTTP/2.0 in the request line': ['GET {get} HTTP/2.0\r\n{auth}Host: x\r\n\r\n'],
    'an absolute-form target': ['GET http://x{get} HTTP/1.1\r\n{auth}Host: x\r\n\r\n'],
    'two spaces after the method': ['GET  {get} HTTP/1.1\r\n{auth}Host: x\r\n\r\n'],
    'a plain GET after a served one, both pipelined': ['GET {get} HTTP/1.1\r\n{auth}Host: x\r\n\r\nGET {get} HTTP/1.1\r\n{auth}Host: x\r\n\r\n'],
    'a served GET, then a malformed one': ['GET {get} HTTP/1.1\r\n{auth}Host: x\r\n\r\n', WAIT, 'GET {get} HTTP/1.1\r\n{auth}Host: x\nX: y\r\n\r\n'],
    'a served GET, then half a head and FIN': ['GET {get} HTTP/1.1\r\n{auth}Host: x\r\n\r\n', WAIT, 'GET {get} HTTP/1.1\r\n', FIN],
    'a chunked POST, then FIN (half-close after the hand-off)': ['POST {post} HTTP/1.1\r\n{auth}Host: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n', FIN],
    'a chunked POST, then a plain GET, then FIN': ['POST {post} HTTP/1.1\r\n{auth}Host: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n', WAIT, 'GET {get} HTTP/1.1\r\n{auth}Host: x\r\n\r\n', FIN],
    'a plain GET, then FIN': ['GET {get} HTTP/1.1\r\n{auth}Host: x\r\n\r\n', FIN],
  };
  interface Target {
    port: number;
    token?: string;
    get: string;
    post: string;
  }
  const targets: Record<string, Target> = {};
  let all: Awaited<ReturnType<typeof startTestSvc>>;
  let reference: http.Server;

  before(async () => {
    all = await startTestSvc(['kv', 'vector', 'queue'], { env: { SVC_VECTOR_DIMENSION: '2', SVC_KV_WORKERS: '0' } });
    reference = http.createServer((req, res) => {
      req.resume();
      req.on('end', () => res.end('ok'));
    });
    await new Promise<void>((r) => reference.listen(0, '127.0.0.1', r));
    const portOf = (u: string) => Number(new URL(u).port);
    targets.node = { port: (reference.address() as net.AddressInfo).port, get: '/x', post: '/x' };
    targets.kv = { port: portOf(all.urls.kv!), token: all.ctx.credentials.get('kv.token'), get: '/ping', post: '/echo' };
    targets.vector = { port: portOf(all.urls.vector!), token: all.ctx.credentials.get('vector.default.token'), get: '/info', post: '/info' };
    targets.queue = { port: portOf(all.urls.queue!), token: all.ctx.credentials.get('queue.token'), get: '/v2/queues', post: '/v2/none' };
  });
  after(async () => {
    await all?.close();
    reference?.close();
  });

  /** Sends `pieces` on a new connection; the statuses as the table compares them, and whether the server closed within 1 s of its last answer. */
  function outcome(t: Target, pieces: (string | Buffer | typeof FIN | typeof WAIT)[]): Promise<{ answers: string[]; closed: boolean }> {
    const fill = (p: string) =>
      p
        .replaceAll('{get}', t.get)
        .replaceAll('{post}', t.post)
        .replaceAll('{auth}', t.token ? `Authorization: Bearer ${t.token}\r\n` : '')
        .replaceAll('{auth-lf}', t.token ? `Authorization: Bearer ${t.token}\n` : '')
        .replaceAll('{auth-cr}', t.token ? `Authorization: Bearer ${t.token}\r` : '');
    return new Promise((resolve) => {
      const s = net.connect(t.port, '127.0.0.1');
      let got = Buffer.alloc(0);
      let closed = false;
      let timer: NodeJS.Timeout | undefined;
      const done = () => {
        clearTimeout(timer);
        s.destroy();
        const statuses = [...got.toString('latin1').matchAll(/HTTP\/1\.[01] (\d{3})/g)].map((m) => Number(m[1])).filter((n) => n >= 200);
        resolve({ answers: statuses.map((n) => (FRAMING.has(n) ? String(n) : 'served')), closed });
      };
      // the answer, then 1 s to see whether the connection closes (10 s when nothing came)
      const arm = (ms: number) => {
        clearTimeout(timer);
        timer = setTimeout(done, ms);
      };
      s.on('data', (d: Buffer) => {
        got = Buffer.concat([got, d]);
        arm(1000);
      });
      s.on('error', () => undefined);
      s.on('close', () => {
        closed = true;
        done();
      });
      s.on('connect', async () => {
        arm(10_000);
        for (const p of pieces) {
          if (p === FIN) s.end();
          else if (p === WAIT) {
            for (let i = 0; i < 60 && !/HTTP\/1\.[01] [2-5]\d\d/.test(got.toString('latin1')); i++) await new Promise((r) => setTimeout(r, 50));
          }
          else s.write(typeof p === 'string' ? Buffer.from(fill(p), 'latin1') : p);
        }
        arm(10_000);
      });
    });
  }

  test('every framing case gets the answer and the close node:http gives it, on every port', async () => {
    const rows = await Promise.all(
      Object.entries(TABLE).map(async ([name, pieces]) => {
        const got: Record<string, { answers: string[]; closed: boolean }> = {};
        await Promise.all(Object.entries(targets).map(async ([k, t]) => (got[k] = await outcome(t, pieces))));
        return { name, got };
      }),
    );
    const diffs: string[] = [];
    for (const { name, got } of rows) {
      for (const k of ['kv', 'vector', 'queue']) {
        if (JSON.stringify(got[k]) !== JSON.stringify(got.node)) diffs.push(`${name}: ${k} ${JSON.stringify(got[k])}, node:http ${JSON.stringify(got.node)}`);
      }
    }
    assert.deepEqual(diffs, []);
  });
});
