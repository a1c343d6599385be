/**
 * The vector port's two HTTP fronts (src/vector/http/fast-front.ts on src/http/fast.ts, and the node:http
 * server it hands connections to, routes.ts): the same answers on both, over raw sockets so the
 * exact bytes on the wire are controlled — pipelined keep-alive queries on the fast path, a
 * chunked upsert and a body above 1 MiB (handed over), HEAD (handed over, 405), UTF-8 ids and
 * metadata through the fast path's body decoding, malformed requests (JSON 400, connection closed),
 * and a fast-path connection that keeps working after answering errors.
 */
import assert from 'node:assert/strict';
import net from 'node:net';
import { after, before, describe, test } from 'node:test';
import { raw, startVector } from './helpers.js';

interface Reply {
  status: number;
  headers: Record<string, string>;
  body: string;
}

/**
 * Writes `payload` on one connection and reads `count` HTTP/1.1 responses (Content-Length
 * framed), or until the server closes. @throws Error after 10 s.
 */
function exchange(url: string, payload: string | Buffer, count: number): Promise<{ replies: Reply[]; closed: boolean }> {
  const u = new URL(url);
  return new Promise((resolve, reject) => {
    const sock = net.connect(Number(u.port), u.hostname);
    let buf = Buffer.alloc(0);
    const replies: Reply[] = [];
    let closed = false;
    const timer = setTimeout(() => {
      sock.destroy();
      reject(new Error(`timeout; got ${replies.length} replies: ${buf.toString()}`));
    }, 10_000);
    const finish = () => {
      clearTimeout(timer);
      sock.destroy();
      resolve({ replies, closed });
    };
    const parse = () => {
      for (;;) {
        const end = buf.indexOf('\r\n\r\n');
        if (end < 0) return;
        const lines = buf.subarray(0, end).toString('latin1').split('\r\n');
        const headers: Record<string, string> = {};
        for (const l of lines.slice(1)) headers[l.slice(0, l.indexOf(':')).toLowerCase()] = l.slice(l.indexOf(':') + 1).trim();
        const len = Number(headers['content-length'] ?? 0);
        if (buf.length < end + 4 + len) return;
        replies.push({ status: Number(lines[0].split(' ')[1]), headers, body: buf.subarray(end + 4, end + 4 + len).toString('utf8') });
        buf = buf.subarray(end + 4 + len);
        if (replies.length === count) return finish();
      }
    };
    sock.on('data', (d) => {
      buf = Buffer.concat([buf, d]);
      parse();
    });
    sock.on('end', () => {
      closed = true;
      finish();
    });
    sock.on('error', (e) => {
      clearTimeout(timer);
      reject(e);
    });
    sock.write(payload);
  });
}

describe('vector HTTP fronts (fast path and node:http hand-over)', () => {
  let svc: Awaited<ReturnType<typeof startVector>>;
  let url: string;
  let token: string;
  before(async () => {
    svc = await startVector([], { env: { SVC_VECTOR_DIMENSION: '2' } });
    url = svc.indexUrl();
    token = svc.token();
    const r = await raw(`${url}/upsert`, token, JSON.stringify([{ id: 'a', vector: [1, 0] }, { id: 'b', vector: [0, 1] }]));
    assert.equal(r.status, 200);
  });
  after(() => svc.close());

  const req = (method: string, path: string, body: string, extra = '') =>
    `${method} ${path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${token}\r\nContent-Type: application/json\r\n${extra}Content-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;

  test('pipelined keep-alive queries and errors are answered in order on one connection', async () => {
    const q = (v: number[]) => req('POST', '/query', JSON.stringify({ vector: v, topK: 1 }));
    const payload = q([1, 0]) + req('POST', '/nope', '{}') + req('POST', '/query', '{bad') + q([0, 1]) + req('GET', '/info', '');
    const { replies, closed } = await exchange(url, payload, 5);
    assert.equal(closed, false);
    assert.deepEqual(replies.map((r) => r.status), [200, 404, 400, 200, 200]);
    assert.equal(JSON.parse(replies[0].body).result[0].id, 'a');
    assert.equal(JSON.parse(replies[3].body).result[0].id, 'b');
    assert.match(JSON.parse(replies[2].body).error, /^Invalid JSON body/);
    assert.equal(JSON.parse(replies[4].body).result.vectorCount, 2);
    for (const r of replies) assert.equal(r.headers['content-type'], 'application/json; charset=utf-8');
  });

  test('UTF-8 ids, metadata and namespaces survive the fast path', async () => {
    const body = JSON.stringify([{ id: 'ünï-日本', vector: [0.6, 0.8], metadata: { city: 'Zürich', emoji: '🙂' } }]);
    const ns = encodeURIComponent('名前');
    const { replies } = await exchange(url, req('POST', `/upsert/${ns}`, body) + req('POST', `/fetch/${ns}`, JSON.stringify({ ids: ['ünï-日本'], includeMetadata: true })), 2);
    assert.deepEqual(replies.map((r) => r.status), [200, 200]);
    assert.deepEqual(JSON.parse(replies[1].body).result, [{ id: 'ünï-日本', metadata: { city: 'Zürich', emoji: '🙂' } }]);
  });

  test('a chunked upsert and a body above 1 MiB are handed to node:http and served the same', async () => {
    const body = JSON.stringify([{ id: 'c', vector: [0.5, 0.5] }]);
    const chunked =
      `POST /upsert HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${token}\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n` +
      `${Buffer.byteLength(body).toString(16)}\r\n${body}\r\n0\r\n\r\n`;
    // (not pipelined behind it: node:http starts a pipelined request before the previous answer)
    const { replies } = await exchange(url, chunked, 1);
    assert.equal(replies[0].status, 200, replies[0].body);
    assert.deepEqual((await raw(`${url}/fetch`, token, JSON.stringify({ ids: ['c'] }))).body.result, [{ id: 'c' }]);
    // > 1 MiB (FAST_BODY_MAX): 1,000 records with padding metadata
    const big = JSON.stringify(Array.from({ length: 1000 }, (_, i) => ({ id: `big-${i}`, vector: [1, i / 1000], metadata: { pad: 'x'.repeat(1100) } })));
    assert.ok(Buffer.byteLength(big) > 1024 * 1024);
    const r = await raw(`${url}/upsert`, token, big);
    assert.equal(r.status, 200);
    assert.equal((await raw(`${url}/info`, token, '')).body.result.namespaces[''].vectorCount, 1003);
  });

  test('HEAD and unknown methods get JSON 405 from the node:http front', async () => {
    const head = await fetch(`${url}/info`, { method: 'HEAD', headers: { authorization: `Bearer ${token}` } });
    assert.equal(head.status, 405);
    const patch = await raw(`${url}/info`, token, '{}', 'PATCH');
    assert.equal(patch.status, 405);
    assert.deepEqual(Object.keys(patch.body).sort(), ['error', 'status']);
  });

  test('a malformed request head gets a JSON 400 and the connection is closed', async () => {
    const { replies, closed } = await exchange(url, 'POST /query HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n', 1);
    assert.equal(replies.length, 1);
    assert.equal(replies[0].status, 400);
    assert.deepEqual(JSON.parse(replies[0].body), { error: 'Bad HTTP request', status: 400 });
    assert.ok(closed || replies[0].headers.connection === 'close');
  });

  test('401 on the fast path: without a body the connection stays usable; with a body it is refused from the head and closed', async () => {
    const badGet = `GET /info HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer nope\r\n\r\n`;
    const kept = await exchange(url, badGet + req('POST', '/query', JSON.stringify({ vector: [1, 0], topK: 1 })), 2);
    assert.equal(kept.closed, false);
    assert.deepEqual(kept.replies.map((r) => r.status), [401, 200]);
    assert.deepEqual(JSON.parse(kept.replies[0].body), { error: 'Unauthorized: Invalid auth token', status: 401 });
    const bad = `POST /query HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer nope\r\nContent-Length: 2\r\n\r\n{}`;
    const { replies, closed } = await exchange(url, bad + req('POST', '/query', JSON.stringify({ vector: [1, 0], topK: 1 })), 2);
    assert.equal(closed, true);
    assert.deepEqual(replies.map((r) => r.status), [401]);
    assert.equal(replies[0].headers.connection, 'close');
    assert.deepEqual(JSON.parse(replies[0].body), { error: 'Unauthorized: Invalid auth token', status: 401 });
  });
});
