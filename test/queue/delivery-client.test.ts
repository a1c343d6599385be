/**
 * The delivery HTTP client (`src/queue/delivery/client.ts`, through `HttpSender`) against real
 * sockets: raw `node:net` servers that answer with chunked bodies, close-delimited bodies, 1xx
 * heads, malformed heads, bodies past the limit, nothing at all, or one byte at a time; a server
 * that closes a kept-alive connection while it is idle (the next request opens a new one) or when
 * the next request comes (the request is sent again once, on a new connection; never a request
 * sent on a new connection, never after a response byte; end to end through the queue too); the
 * per-origin connection limit; https with a self-signed certificate (refused until it is trusted,
 * as Node's default trust store decides, and for a name the certificate does not carry); the
 * request head byte for byte as undici wrote it (the previous delivery client, still a dependency
 * of other areas); header values HTTP cannot carry refused before anything is sent; blocked
 * destinations; `close()` settling attempts in flight. Bounds, not timings, are asserted.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import tls from 'node:tls';
import { after, describe, test } from 'node:test';
import { Agent, type Dispatcher } from 'undici';
import { HttpSender, type HttpSenderOptions } from '../../src/queue/delivery/http.js';
import type { AttemptOutcome } from '../../src/queue/model.js';
import { waitFor } from '../helpers/wait.js';
import { startQueue } from './helpers.js';

/** A raw TCP server on port 0; `onConn` gets every socket; `sockets` counts them. */
async function rawServer(onConn: (s: net.Socket, nth: number) => void): Promise<{ url: string; sockets: net.Socket[]; close(): Promise<void> }> {
  const sockets: net.Socket[] = [];
  const server = net.createServer((s) => {
    sockets.push(s);
    s.on('error', () => undefined);
    onConn(s, sockets.length);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as net.AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}`,
    sockets,
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}

/** Calls `fn` with each complete request head + body (Content-Length framing) seen on `s`. */
function onRequests(s: net.Socket, fn: (raw: string, nth: number) => void): void {
  let buf = '';
  let n = 0;
  s.setEncoding('latin1');
  s.on('data', (d: string) => {
    buf += d;
    for (;;) {
      const end = buf.indexOf('\r\n\r\n');
      if (end < 0) return;
      const m = /\r\ncontent-length: (\d+)\r\n/i.exec(buf.slice(0, end + 2));
      const total = end + 4 + (m ? Number(m[1]) : 0);
      if (buf.length < total) return;
      const raw = buf.slice(0, total);
      buf = buf.slice(total);
      fn(raw, ++n);
    }
  });
}

/** Node 24's trust-store calls (newer than the installed `@types/node`). */
const tlsCa = tls as typeof tls & { getCACertificates(type: 'default'): string[]; setDefaultCACertificates(certs: string[]): void };

const senders: HttpSender[] = [];
function sender(o: Partial<HttpSenderOptions> = {}): HttpSender {
  const s = new HttpSender({ blockPrivate: false, maxResponseBytes: 1024 * 1024, connectionsPerOrigin: 4, ...o });
  senders.push(s);
  return s;
}
after(async () => {
  for (const s of senders) await s.close();
});

const post = (url: string, body = 'hello', timeoutMs = 60_000, headers: string[] = ['Content-Type', 'text/plain']) => ({
  url,
  method: 'POST',
  headers,
  body: Buffer.from(body),
  timeoutMs,
});

describe('delivery client', () => {
  test('the request head is byte for byte what undici wrote, for each method and body shape', async () => {
    const seen: string[] = [];
    const srv = await rawServer((s) => onRequests(s, (raw) => {
      seen.push(raw);
      s.write('HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n');
    }));
    const agent = new Agent({ connections: 2, pipelining: 1, keepAliveTimeout: 30_000 });
    try {
      const headers = ['Upstash-Forward-X', 'a b', 'content-type', 'application/json', 'User-Agent', 'Upstash-QStash', 'Upstash-Signature', 'eyJ.x.y', 'Svc-Signature', 'eyJ.x.y', 'X-Multi', '1', 'X-Multi', '2', 'X-Latin1', 'caf\u00e9\tb\u00ff', 'X-Empty', ''];
      const cases: [string, string, Buffer | null][] = [
        ['POST', '/p?q=1&r=%C3%A4', Buffer.from('{"a":1}')],
        ['POST', '/empty', Buffer.alloc(0)],
        ['PUT', '/put', Buffer.from('x')],
        ['GET', '/get', null],
        ['DELETE', '/del', Buffer.alloc(0)],
        ['PATCH', '/patch', Buffer.alloc(0)],
        ['DELETE', '/delbody', Buffer.from('gone')],
        ['HEAD', '/head', null],
      ];
      const s = sender();
      for (const [method, p, body] of cases) {
        // undici's Agent.dispatch, as the previous sender called it
        await new Promise<void>((resolve, reject) => {
          agent.dispatch({ origin: srv.url, path: p, method: method as Dispatcher.HttpMethod, headers, body }, {
            onConnect() {},
            onHeaders: () => true,
            onData: () => true,
            onComplete: () => resolve(),
            onError: reject,
          });
        });
        const o = await s.send({ url: `${srv.url}${p}`, method, headers, body: body ?? Buffer.alloc(0), timeoutMs: 60_000 });
        assert.equal(o.status, 200, o.error);
        const [undiciHead, ours] = seen.slice(-2);
        assert.equal(ours, undiciHead, `${method} ${p}`);
      }
      assert.equal(seen.length, cases.length * 2);
    } finally {
      await agent.destroy();
      await srv.close();
    }
  });

  test('a chunked body (extensions, trailers, split across writes) is read whole and the connection kept', async () => {
    const srv = await rawServer((s) => onRequests(s, () => {
      const parts = ['HTTP/1.1 201 Created\r\nTransfer-Encoding: chunked\r\nX-A: 1\r\n', '\r\n5;ext=1\r', '\nhello\r\n', '1', '0\r\n', '0123456789abcdef\r\n0\r\nX-Trailer: t\r\n', '\r\n'];
      for (const p of parts) s.write(p);
    }));
    try {
      const s = sender();
      for (let k = 0; k < 3; k++) {
        const o = await s.send(post(`${srv.url}/c`));
        assert.equal(o.status, 201, o.error);
        assert.equal(o.body?.toString(), 'hello0123456789abcdef');
        assert.deepEqual(o.headers?.['X-A'], ['1']);
      }
      assert.equal(srv.sockets.length, 1, 'one kept-alive connection for the three requests');
    } finally {
      await srv.close();
    }
  });

  test('a close-delimited body is read up to the close; 1xx heads before the answer are skipped', async () => {
    const srv = await rawServer((s) => onRequests(s, () => {
      s.write('HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n');
      s.write('HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nfirst part, ');
      setTimeout(() => s.end('second part'), 20);
    }));
    try {
      const s = sender();
      const o = await s.send(post(`${srv.url}/close`));
      assert.equal(o.status, 200, o.error);
      assert.equal(o.body?.toString(), 'first part, second part');
      assert.deepEqual(o.headers, { 'Content-Type': ['text/plain'] });
      const o2 = await s.send(post(`${srv.url}/close`));
      assert.equal(o2.body?.toString(), 'first part, second part');
      assert.equal(srv.sockets.length, 2, 'a close-delimited response ends its connection');
    } finally {
      await srv.close();
    }
  });

  test('a kept-alive connection the server closes at the next request: sent again once on a new connection', async () => {
    let requests = 0;
    const srv = await rawServer((s, nth) => onRequests(s, (_raw, k) => {
      requests++;
      // the first connection answers its first request, then closes without answering the second
      if (nth === 1 && k === 2) return s.destroy();
      s.write('HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok');
    }));
    try {
      const s = sender();
      assert.equal((await s.send(post(`${srv.url}/a`))).status, 200);
      const o = await s.send(post(`${srv.url}/b`));
      assert.equal(o.status, 200, o.error);
      assert.equal(o.body?.toString(), 'ok');
      assert.equal(requests, 3, 'the second request reached the server twice');
      assert.equal(srv.sockets.length, 2);
    } finally {
      await srv.close();
    }
  });

  test('a kept-alive connection the server closes while idle: the next request goes on a new connection', async () => {
    const closed: net.Socket[] = [];
    const srv = await rawServer((s) => onRequests(s, () => {
      s.write('HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok');
      setTimeout(() => s.end(() => closed.push(s)), 20); // no `Connection: close`: closed between requests
    }));
    try {
      const s = sender();
      for (let i = 0; i < 3; i++) {
        const o = await s.send(post(`${srv.url}/idle${i}`));
        assert.equal(o.status, 200, o.error);
        await waitFor(`connection ${i} closed by the server`, () => closed.length === i + 1, 60_000);
      }
      assert.equal(srv.sockets.length, 3);
    } finally {
      await srv.close();
    }
  });

  test('no second send: a new connection closed before the answer, or a response cut after its first byte', async () => {
    let requests = 0;
    const srv = await rawServer((s, nth) => onRequests(s, (_raw, k) => {
      requests++;
      if (nth === 1) return s.destroy(); // a new connection: not retried
      if (k === 1) return s.write('HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok');
      s.end('HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\nabc'); // kept-alive, but a response byte came: not retried
    }));
    try {
      const s = sender();
      const o1 = await s.send(post(`${srv.url}/a`));
      assert.equal(o1.status, undefined);
      assert.match(o1.error ?? '', /^delivery failed: /);
      assert.equal(requests, 1);
      assert.equal((await s.send(post(`${srv.url}/b`))).status, 200);
      const o3 = await s.send(post(`${srv.url}/c`));
      assert.equal(o3.status, undefined);
      assert.match(o3.error ?? '', /^delivery failed: other side closed/);
      assert.equal(requests, 3);
    } finally {
      await srv.close();
    }
  });

  test('a server that never answers, and a slow-loris one, end at the attempt timeout', async () => {
    const timers: NodeJS.Timeout[] = [];
    const srv = await rawServer((s, nth) => onRequests(s, () => {
      if (nth === 1) return; // silent
      // one byte of a never-ending head every 20 ms
      const text = 'HTTP/1.1 200 OK\r\nX-Slow: ' + 'a'.repeat(1_000_000);
      let i = 0;
      const t = setInterval(() => {
        if (!s.destroyed) s.write(text[i++]);
      }, 20);
      timers.push(t);
    }));
    try {
      const s = sender();
      for (const p of ['/silent', '/loris']) {
        const t0 = Date.now();
        const o = await s.send(post(`${srv.url}${p}`, 'x', 400));
        assert.equal(o.status, undefined);
        assert.equal(o.error, 'delivery failed: timeout after 400 ms');
        assert.ok(Date.now() - t0 >= 390, `not before the timeout (${Date.now() - t0} ms)`);
      }
    } finally {
      for (const t of timers) clearInterval(t);
      await srv.close();
    }
  });

  test('a huge body ends the attempt at the limit with the status and the kept part', async () => {
    const srv = await rawServer((s) => onRequests(s, () => {
      s.write('HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n');
      const chunk = Buffer.alloc(64 * 1024, 'z');
      const more = () => {
        while (!s.destroyed && s.write(`${chunk.length.toString(16)}\r\n`) && s.write(chunk) && s.write('\r\n'));
      };
      s.on('drain', more);
      more();
    }));
    try {
      const s = sender({ maxResponseBytes: 100_000 });
      const o = await s.send(post(`${srv.url}/huge`, 'x', 120_000));
      assert.equal(o.status, 200, o.error);
      assert.equal(o.error, undefined);
      assert.equal(o.body?.length, 100_000);
      assert.ok(o.body?.every((b) => b === 0x7a));
    } finally {
      await srv.close();
    }
  });

  test('at most connectionsPerOrigin connections; the rest wait their turn', async () => {
    const srv = await rawServer((s) => onRequests(s, () => {
      setTimeout(() => s.write('HTTP/1.1 200 OK\r\ncontent-length: 1\r\n\r\n!'), 30);
    }));
    try {
      const s = sender({ connectionsPerOrigin: 2 });
      const outcomes = await Promise.all(Array.from({ length: 9 }, (_, i) => s.send(post(`${srv.url}/n${i}`))));
      for (const o of outcomes) assert.equal(o.status, 200, o.error);
      assert.equal(srv.sockets.length, 2);
    } finally {
      await srv.close();
    }
  });

  test('a header value HTTP cannot carry is refused before anything is sent', async () => {
    const srv = await rawServer((s) => onRequests(s, () => s.write('HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n')));
    try {
      const s = sender();
      for (const h of [['X-Bad', 'a\r\nInjected: 1'], ['X-Bad', 'nul\0'], ['X-Bad', 'wide \u0100'], ['Bad Name', 'v']]) {
        const o = await s.send(post(`${srv.url}/h`, 'x', 60_000, h));
        assert.equal(o.status, undefined);
        assert.match(o.error ?? '', /^delivery failed: invalid .* header$/);
      }
      assert.equal(srv.sockets.length, 0);
    } finally {
      await srv.close();
    }
  });

  test('malformed responses fail the attempt (status line, content-length, chunk framing)', async () => {
    const answers = [
      'HTTP/1.1 2x0 OK\r\n\r\n',
      'HTTP/1.1 200 OK\r\ncontent-length: 1x\r\n\r\n',
      'HTTP/1.1 200 OK\r\ncontent-length: 2\r\ncontent-length: 3\r\n\r\nabc',
      'HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\nzz\r\n',
      'HTTP/1.1 200 OK\r\nbad header\r\n\r\n',
    ];
    const srv = await rawServer((s, nth) => onRequests(s, () => s.write(answers[nth - 1])));
    try {
      const s = sender();
      for (const a of answers) {
        const o = await s.send(post(`${srv.url}/m`));
        assert.equal(o.status, undefined, a);
        assert.match(o.error ?? '', /^delivery failed: (invalid|conflicting) /, a);
      }
    } finally {
      await srv.close();
    }
  });

  test('https: a self-signed certificate is refused until trusted (Node default trust store)', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'svc-tls-'));
    const cert = path.join(dir, 'cert.pem');
    const key = path.join(dir, 'key.pem');
    execFileSync('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', key, '-out', cert, '-days', '1',
      '-subj', '/CN=localhost', '-addext', 'subjectAltName=DNS:localhost,IP:127.0.0.1'], { stdio: 'ignore' });
    const server = tls.createServer({ cert: fs.readFileSync(cert), key: fs.readFileSync(key) }, (s) => {
      s.on('error', () => undefined);
      onRequests(s, (raw) => s.write(`HTTP/1.1 200 OK\r\ncontent-length: ${raw.length}\r\n\r\n${raw}`));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const port = (server.address() as net.AddressInfo).port;
    const defaults = tlsCa.getCACertificates('default');
    // a name the certificate does not carry, resolving to the same server
    const lookup = ((_h: string, _o: unknown, cb: (e: Error | null, a: { address: string; family: number }[]) => void) =>
      cb(null, [{ address: '127.0.0.1', family: 4 }])) as unknown as HttpSenderOptions['lookup'];
    const s = new HttpSender({ blockPrivate: false, maxResponseBytes: 1024 * 1024, connectionsPerOrigin: 4 });
    const s2 = new HttpSender({ blockPrivate: false, maxResponseBytes: 1024 * 1024, connectionsPerOrigin: 4, lookup });
    try {
      const refused = await s.send(post(`https://localhost:${port}/t`));
      assert.equal(refused.status, undefined);
      assert.match(refused.error ?? '', /^delivery failed: self[- ]signed certificate/);
      tlsCa.setDefaultCACertificates([...defaults, fs.readFileSync(cert, 'utf8')]);
      for (const host of ['localhost', '127.0.0.1']) {
        const o = await s2.send(post(`https://${host}:${port}/t`));
        assert.equal(o.status, 200, o.error);
        assert.match(o.body?.toString() ?? '', new RegExp(`^POST /t HTTP/1.1\r\nhost: ${host.replace(/\./g, '\\.')}:${port}\r\n`));
      }
      // the name is checked against the certificate
      const wrongName = await s2.send(post(`https://wrong.test:${port}/t`));
      assert.equal(wrongName.status, undefined);
      assert.match(wrongName.error ?? '', /^delivery failed: .*wrong\.test.*altnames/);
    } finally {
      tlsCa.setDefaultCACertificates(defaults);
      await s.close();
      await s2.close();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  test('close() settles attempts in flight and waiting; later sends fail at once', async () => {
    const srv = await rawServer(() => undefined); // accepts, never answers
    try {
      const s = new HttpSender({ blockPrivate: false, maxResponseBytes: 1024, connectionsPerOrigin: 1 });
      const pending: Promise<AttemptOutcome>[] = [s.send(post(`${srv.url}/1`)), s.send(post(`${srv.url}/2`))];
      await waitFor('the first connection', () => srv.sockets.length === 1, 60_000);
      await s.close();
      for (const o of await Promise.all(pending)) assert.equal(o.error, 'delivery failed: the sender is closed');
      assert.equal((await s.send(post(`${srv.url}/3`))).error, 'delivery failed: the sender is closed');
    } finally {
      await srv.close();
    }
  });

  test('end to end: messages to a destination that closes each kept-alive connection at its next request are delivered once each, on the first attempt', async () => {
    const got: string[] = [];
    const srv = await rawServer((s) => onRequests(s, (raw, k) => {
      if (k === 2) return s.destroy(); // a stale keep-alive connection: closed, nothing answered
      got.push(raw.slice(raw.indexOf('\r\n\r\n') + 4));
      s.write('HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok');
    }));
    const q = await startQueue();
    try {
      const ids: string[] = [];
      for (let i = 0; i < 4; i++) {
        ids.push((await q.client.publish({ url: `${srv.url}/m${i}`, body: `body ${i}`, retries: 0 })).messageId);
        await waitFor(`delivery ${i}`, () => got.includes(`body ${i}`), 120_000);
      }
      for (const messageId of ids) {
        const states = await waitFor(`logs of ${messageId}`, async () => {
          const l = (await q.client.logs({ filter: { messageId } } as never)).logs.map((e) => e.state);
          return l.includes('DELIVERED') ? l : undefined;
        }, 60_000);
        assert.deepEqual([...states].reverse(), ['CREATED', 'ACTIVE', 'DELIVERED'], messageId);
      }
      assert.deepEqual(got, ['body 0', 'body 1', 'body 2', 'body 3']);
      assert.ok(srv.sockets.length >= 4, 'a new connection after each closed one');
    } finally {
      await q.close();
      await srv.close();
    }
  });

  test('blocked destinations: an address literal (IPv4-mapped too) and a name resolving to a private address', async () => {
    const srv = await rawServer((s) => onRequests(s, () => s.write('HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n')));
    const port = new URL(srv.url).port;
    try {
      const lookup = ((_h: string, _o: unknown, cb: (e: Error | null, a: { address: string; family: number }[]) => void) =>
        cb(null, [{ address: '93.184.215.14', family: 4 }, { address: '127.0.0.1', family: 4 }])) as unknown as HttpSenderOptions['lookup'];
      const s = sender({ blockPrivate: true, lookup });
      for (const host of ['127.0.0.1', '[::ffff:127.0.0.1]', '[::ffff:7f00:1]', 'localhost']) {
        const o = await s.send(post(`http://${host}:${port}/x`));
        assert.match(o.error ?? '', /^delivery refused: destination /, host);
      }
      const o = await s.send(post(`http://example.test:${port}/x`));
      assert.match(o.error ?? '', /resolves to 127\.0\.0\.1, which is not a public address/);
      assert.equal(srv.sockets.length, 0);
    } finally {
      await srv.close();
    }
  });
});
