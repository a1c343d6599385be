/**
 * A seeded fuzzer of hostile requests against a running svc, one generator per area (queue, kv,
 * vector, mgmt): malformed and deeply nested JSON, huge bodies, invalid UTF-8, hostile headers,
 * cron and retry-delay expressions, filter strings, bad URLs, paths and tokens, and raw HTTP bytes
 * that no client library would send.
 *
 * Expectation ({@link FuzzReport.failures}): no answer 5xx other than 503 with `Retry-After` or
 * 507 (documented temporary conditions), no dropped connection without an answer on a request a
 * client library can send, and every area still answers a correct request afterwards (checked by
 * the caller). `npm test` runs a small run (`test/fuzz/fuzz.test.ts`), `npm run fuzz` a long one.
 */
import net from 'node:net';
import { rng as prng } from '../vector/helpers.js';

export type Area = 'queue' | 'kv' | 'vector' | 'mgmt';

/** What the fuzzer needs to know about the svc under test. */
export interface FuzzTarget {
  urls: Record<Area, string>;
  /** Valid credentials: bearer tokens per area, mgmt Basic user/password. */
  tokens: { queue: string; kv: string; kvReadonly: string; vector: string; vectorReadonly: string; mgmtUser: string; mgmtPassword: string };
  /** A loopback URL that answers 200 to anything (queue destinations). */
  sinkUrl: string;
}

/** One generated request. `raw` = bytes written as they are on a fresh socket (no client library). */
export interface FuzzRequest {
  method: string;
  path: string;
  headers: Record<string, string>;
  body?: Buffer | string;
  raw?: Buffer;
}

export interface FuzzFailure {
  area: Area;
  request: string;
  outcome: string;
}

export interface FuzzReport {
  requests: number;
  /** Answers per status class and area, e.g. `{kv: {'2xx': 10, '4xx': 290}}`. */
  statuses: Record<Area, Record<string, number>>;
  failures: FuzzFailure[];
  ms: number;
}

type R = () => number;

/** `encodeURIComponent`, with a lone surrogate sent as its (invalid) UTF-8 bytes instead of throwing. */
const enc = (s: string): string => {
  try {
    return encodeURIComponent(s);
  } catch {
    return '%ED%A0%80';
  }
};
const pick = <T>(r: R, xs: readonly T[]): T => xs[Math.floor(r() * xs.length)];
const int = (r: R, lo: number, hi: number): number => lo + Math.floor(r() * (hi - lo + 1));

const NASTY_STRINGS = [
  '', ' ', '%', '%%', '%zz', '%E0%A4%A', '%00', '%ff%fe', '..', '../..', '/', '//', '\\', '?', '#', '&', '=', ';',
  '\u0000', '\uffff', '\ud800', '😀', 'a'.repeat(5000), '-1', '0', '1e309', 'NaN', 'null', 'true', '[]', '{}', '__proto__',
  'constructor', 'toString', '$', '*', '?*[', "'", '"', '`', '<script>', 'DROP TABLE', '\r\n', '\n', 'a b', 'ü', 'ü',
];

/** Something that may or may not be JSON: valid random values, truncations, deep nesting, huge. */
function jsonish(r: R, depthBudget = 3): string {
  const k = r();
  if (k < 0.05) return '['.repeat(int(r, 1000, 20_000)) + ']'.repeat(r() < 0.5 ? 0 : 20_000);
  if (k < 0.1) return '{"a":'.repeat(int(r, 200, 6000)) + '1' + '}'.repeat(6000);
  if (k < 0.15) return JSON.stringify(randomValue(r, depthBudget)).slice(0, int(r, 0, 40)); // truncated
  if (k < 0.18) return pick(r, ['{', '[', '"', '{"a":}', '[1,]', 'nul', '1e999999', '-', '{"__proto__":{"x":1}}', '\ufeff{}', '{"a":1}{"b":2}']);
  return JSON.stringify(randomValue(r, depthBudget));
}

function randomValue(r: R, depth: number): unknown {
  const k = r();
  if (depth <= 0 || k < 0.35) {
    return pick(r, [() => int(r, -1e9, 1e9), () => r() * 1e6, () => pick(r, NASTY_STRINGS), () => null, () => r() < 0.5, () => 1e308, () => -0, () => 2 ** 53 + 1])();
  }
  if (k < 0.6) return Array.from({ length: int(r, 0, 5) }, () => randomValue(r, depth - 1));
  const o: Record<string, unknown> = {};
  for (let i = int(r, 0, 5); i > 0; i--) o[pick(r, [...NASTY_STRINGS.slice(0, 20), 'id', 'vector', 'topK', 'filter', 'metadata', 'data'])] = randomValue(r, depth - 1);
  return o;
}

/** A body: JSON-ish text, invalid UTF-8 bytes, or (rarely) a big one. */
function body(r: R, json: () => unknown): Buffer | string {
  const k = r();
  if (k < 0.06) return Buffer.from(Array.from({ length: int(r, 1, 300) }, () => int(r, 0x80, 0xff)));
  if (k < 0.08) return 'x'.repeat(int(r, 1, 3) * 1024 * 1024);
  if (k < 0.35) return jsonish(r);
  // {"__deep__": n} stands for an object nested n levels (built as text: JSON.stringify would overflow)
  return JSON.stringify(json()).replace(/\{"__deep__":(\d+)\}/g, (_, n: string) => '{"a":'.repeat(Number(n)) + '1' + '}'.repeat(Number(n)));
}

/** A value {@link body} turns into an object nested `levels` deep. */
const deep = (levels: number) => ({ __deep__: levels });

const CRON = ['* * * * *', '*/5 * * * *', '0 0 31 2 *', '60 * * * *', '* * * *', '@yearly', '@every 1s', 'CRON_TZ=Mars/Olympus * * * * *', 'CRON_TZ=Europe/Berlin 0 9 * * 1-5', '*/0 * * * *', '1-1000000 * * * *', '* * * * * * *', '', '9'.repeat(400), 'L W # ?', '0 0 ? * MON#5'];
const RETRY_DELAY = ['1000', 'pow(2, retried) * 1000', 'max(10, min(100, retried))', 'retried / 0', '1e309', '-1', 'pow(pow(pow(2,2),2),2000)', '(((((((((((1)))))))))))', '('.repeat(5000) + '1' + ')'.repeat(5000), 'retried retried', 'abs(', '', 'x', '9'.repeat(400)];
const FILTERS = [
  'a = 1', "a = 'x' AND b > 2", 'a IN (1, 2, 3)', 'a NOT GLOB "*x"', 'HAS FIELD a', 'a.b[0] = 1', 'a[#-1] = 2', 'CONTAINS', '(a = 1', 'a = 1)',
  '('.repeat(5000) + 'a = 1' + ')'.repeat(5000), 'NOT '.repeat(3000) + 'a = 1', 'a GLOB "' + '['.repeat(2000) + '"', 'a = 1 ' + 'OR a = 1 '.repeat(3000),
  'a = "\\u0000"', "a = '" + 'x'.repeat(100_000) + "'", 'a >= 1e309', 'a[99999999999] = 1', '', '$$$', 'a = 1 AND',
];

function token(r: R, good: string, readonly?: string): Record<string, string> {
  const k = r();
  if (k < 0.6) return { authorization: `Bearer ${good}` };
  if (k < 0.7 && readonly) return { authorization: `Bearer ${readonly}` };
  return pick<Record<string, string>>(r, [
    {},
    { authorization: 'Bearer ' },
    { authorization: `Bearer ${good}x` },
    { authorization: `bearer  ${good}` },
    { authorization: `Basic ${Buffer.from('a:b').toString('base64')}` },
    { authorization: `Bearer ${'a'.repeat(8000)}` },
    { authorization: 'Bearer \u00ff\u00fe' },
  ]);
}

/** Hostile extra headers (values a client library can send). */
function headers(r: R): Record<string, string> {
  const h: Record<string, string> = {};
  for (let i = int(r, 0, 3); i > 0; i--) {
    const name = pick(r, ['content-type', 'upstash-encoding', 'upstash-response-format', 'upstash-sync-token', 'upstash-retries', 'upstash-delay', 'upstash-not-before', 'upstash-timeout', 'upstash-method', 'upstash-callback', 'upstash-failure-callback', 'upstash-deduplication-id', 'upstash-content-based-deduplication', 'upstash-flow-control-key', 'upstash-flow-control-value', 'upstash-forward-x', 'upstash-forward-host', 'svc-forward-content-length', 'upstash-cron', 'upstash-retry-delay', 'upstash-label', 'upstash-queue-name', 'accept', 'x-forwarded-for']);
    h[name] = pick(r, [() => pick(r, NASTY_STRINGS).replace(/[\r\n\u0000-\u001f\u0100-\uffff]/g, ''), () => pick(r, CRON), () => pick(r, RETRY_DELAY).slice(0, 6000), () => String(int(r, -5, 1e12)), () => 'http://[::ffff:127.0.0.1]:1/x', () => 'parallelism=0, rate=-1, period=1y', () => 'base64', () => 'resp2', () => 'application/json'])();
  }
  return h;
}

const mangle = (r: R, path: string): string => (r() < 0.25 ? path.replace(/\/[^/]*$/, `/${enc(pick(r, NASTY_STRINGS)).replace(/%25/g, r() < 0.5 ? '%' : '%25')}`) : path);

function queueRequest(r: R, t: FuzzTarget): FuzzRequest {
  const dest = pick(r, [`${t.sinkUrl}/x`, `${t.sinkUrl}/${enc(pick(r, NASTY_STRINGS))}`, 'http://[::ffff:127.0.0.1]:1/', 'ftp://x/', 'http://', 'http://a b/', 'https://256.256.256.256/', pick(r, NASTY_STRINGS)]);
  const id = pick(r, ['msg_x', 'scd_x', pick(r, NASTY_STRINGS), 'a'.repeat(3000)]);
  const [method, path] = pick(r, [
    ['POST', `/v2/publish/${dest}`], ['POST', `/v2/enqueue/${pick(r, ['q1', '?%:9:', '%E0%A4', 'a'.repeat(300)])}/${dest}`], ['POST', '/v2/batch'],
    ['POST', `/v2/schedules/${dest}`], ['GET', '/v2/schedules'], ['GET', `/v2/schedules/${id}`], ['DELETE', `/v2/schedules/${id}`],
    ['GET', '/v2/messages/' + id], ['DELETE', '/v2/messages/' + id], ['DELETE', '/v2/messages'], ['GET', '/v2/dlq'], ['GET', `/v2/dlq/${id}`],
    ['POST', '/v2/dlq/retry'], ['DELETE', '/v2/dlq'], ['GET', '/v2/logs'], ['GET', '/v2/events'], ['GET', '/v2/queues'], ['POST', '/v2/queues'],
    ['GET', `/v2/queues/${id}`], ['DELETE', `/v2/queues/${id}`], ['GET', '/v2/topics'], ['POST', `/v2/topics/${id}/endpoints`],
    ['DELETE', `/v2/topics/${id}/endpoints`], ['GET', `/v2/flowControl/${id}`], ['POST', `/v2/notify/${id}`], ['POST', `/v2/wait/${id}`],
    ['GET', '/v2/workflows/logs'], ['DELETE', `/v2/workflows/runs/${id}`], ['POST', `/v2/trigger/${dest}`], ['GET', '/v2/stats'], ['PATCH', '/v2/queues'],
  ] as const);
  const query = r() < 0.3 ? `?${pick(r, ['cursor', 'count', 'filter', 'topicName', 'state', 'fromDate', 'order'])}=${enc(pick(r, [...NASTY_STRINGS, '-1', '1e20', '999999999999']))}` : '';
  const json = () =>
    path === '/v2/batch' ? Array.from({ length: int(r, 0, 4) }, () => ({ destination: dest, body: pick(r, NASTY_STRINGS), headers: headers(r), queue: pick(r, NASTY_STRINGS) })) : randomValue(r, 3);
  return { method, path: mangle(r, path) + query, headers: { ...token(r, t.tokens.queue), ...headers(r) }, body: method === 'GET' || method === 'DELETE' ? undefined : body(r, json) };
}

const KV_COMMANDS = ['GET', 'SET', 'DEL', 'INCR', 'HSET', 'HGETALL', 'LPUSH', 'LRANGE', 'ZADD', 'ZRANGE', 'XADD', 'EXPIRE', 'TTL', 'SCAN', 'KEYS', 'EVAL', 'EVALSHA', 'SCRIPT', 'FUNCTION', 'JSON.SET', 'JSON.GET', 'BLPOP', 'SUBSCRIBE', 'MULTI', 'CLIENT', 'CONFIG', 'DEBUG', 'ACL', 'OBJECT', 'DUMP', 'RESTORE', 'SETRANGE', 'GETRANGE', 'BITFIELD', 'SORT', 'PFADD', 'GEOADD', 'WAIT', 'INFO', 'MEMORY', 'LATENCY', 'NOPE', ''];

function kvArgs(r: R): unknown[] {
  const cmd = pick(r, KV_COMMANDS);
  const args: unknown[] = [r() < 0.8 ? cmd : cmd.toLowerCase()];
  if (cmd === 'EVAL') args.push(pick(r, ['return 1', 'return redis.call("GET", KEYS[1])', 'error(', 'return {1,{2,{3}}}', 'return string.rep("x", 1000)', 'local t = {} for i=1,100 do t[i]=i end return t']), '1', 'k');
  else if (cmd === 'JSON.SET') args.push('j', '$', jsonish(r));
  else if (cmd === 'SETRANGE') args.push('k', String(pick(r, [0, 1, -1, 536870911, 536870912])), 'x');
  for (let i = int(r, 0, 4); i > 0; i--) args.push(randomValue(r, 0));
  return args;
}

function kvRequest(r: R, t: FuzzTarget): FuzzRequest {
  const auth = token(r, t.tokens.kv, t.tokens.kvReadonly);
  const k = r();
  if (k < 0.35) {
    const segs = kvArgs(r).map((a) => (r() < 0.8 ? enc(String(a)) : String(a).replace(/[/?#\s]/g, '%')));
    return { method: pick(r, ['GET', 'POST', 'PUT', 'HEAD', 'DELETE']), path: `/${segs.join('/')}`, headers: { ...auth, ...headers(r) } };
  }
  const path = pick(r, ['/', '/pipeline', '/multi-exec', '/PIPELINE', '/pipeline/x', '/', '/set/k', '/' + '%'.repeat(3)]);
  const json = () => (path === '/' || path === '/set/k' ? kvArgs(r) : Array.from({ length: int(r, 0, 5) }, () => (r() < 0.9 ? kvArgs(r) : randomValue(r, 2))));
  return { method: 'POST', path, headers: { ...auth, ...headers(r) }, body: body(r, json) };
}

const VECTOR_ENDPOINTS = ['upsert', 'upsert-data', 'query', 'query-data', 'fetch', 'range', 'delete', 'update', 'info', 'reset', 'list-namespaces', 'delete-namespace', 'random', 'resumable-query', 'resumable-query-next', 'resumable-query-end', 'nope'];

function vectorBody(r: R, endpoint: string): unknown {
  const vec = () => pick(r, [[1, 0], [0.5, 0.5], [], [1, 0, 0], ['a', 1], [NaN], [1e308, 1e308], null, Array.from({ length: 3000 }, () => r())]);
  const meta = () => (r() < 0.3 ? deep(int(r, 100, 6000)) : randomValue(r, 4));
  const filter = () => (r() < 0.6 ? pick(r, FILTERS) : String(pick(r, NASTY_STRINGS)) + pick(r, FILTERS).slice(0, int(r, 0, 20)));
  switch (endpoint) {
    case 'upsert':
      return Array.from({ length: int(r, 0, 4) }, () => ({ id: randomValue(r, 0), vector: vec(), metadata: meta(), data: randomValue(r, 0), sparseVector: r() < 0.2 ? { indices: [1, 1, -1], values: [1] } : undefined }));
    case 'query':
    case 'resumable-query':
      return { vector: vec(), topK: pick(r, [1, 0, -1, 1e9, 2.5, '3', null]), filter: filter(), includeMetadata: r() < 0.5, includeVectors: randomValue(r, 0), maxIdle: pick(r, [1, 0, -1, 1e12, 'x']) };
    case 'fetch':
      return { ids: pick(r, [['a'], [], [null], 'a', [[['a']]]]), prefix: randomValue(r, 0), includeMetadata: true };
    case 'range':
      return { cursor: r() < 0.1 ? [deep(int(r, 100, 6000))] : randomValue(r, 2), limit: pick(r, [1, 0, -1, 1e9, '1']), prefix: randomValue(r, 0) };
    case 'delete':
      return pick(r, [{ ids: ['a'] }, { filter: filter() }, { prefix: randomValue(r, 0) }, { ids: [], filter: 'a = 1' }, ['a', 'b']]);
    case 'update':
      return { id: randomValue(r, 0), vector: vec(), metadata: meta(), metadataUpdateMode: pick(r, ['PATCH', 'OVERWRITE', 'x']) };
    case 'resumable-query-next':
    case 'resumable-query-end':
      return { uuid: randomValue(r, 1), additionalK: pick(r, [1, -1, 1e9, 'x']) };
    default:
      return randomValue(r, 3);
  }
}

function vectorRequest(r: R, t: FuzzTarget): FuzzRequest {
  const endpoint = pick(r, VECTOR_ENDPOINTS);
  const ns = r() < 0.3 ? `/${pick(r, ['ns', '%E0%A4%A', '%', 'a'.repeat(3000), enc(pick(r, NASTY_STRINGS))])}` : '';
  return {
    method: pick(r, ['POST', 'POST', 'POST', 'GET', 'PUT', 'DELETE', 'PATCH']),
    path: `/${endpoint}${ns}`,
    headers: { ...token(r, t.tokens.vector, t.tokens.vectorReadonly), 'content-type': 'application/json', ...headers(r) },
    body: body(r, () => vectorBody(r, endpoint)),
  };
}

function mgmtRequest(r: R, t: FuzzTarget): FuzzRequest {
  const good = `Basic ${Buffer.from(`${t.tokens.mgmtUser}:${t.tokens.mgmtPassword}`).toString('base64')}`;
  // valid credentials only on reads: the writes would rotate the credentials the fuzzer uses
  const read = r() < 0.7;
  const path = read
    ? pick(r, ['/v2/health', '/v2/mq/ipv4', '/v2/keys', '/healthz', '/console', '/console/api/session', '/console/api/overview', `/v2/${enc(pick(r, NASTY_STRINGS))}`, '/console/api/proxy/vector/%E0%A4%A/info', '/console/api/proxy/vector/' + pick(r, NASTY_STRINGS) + '/info'])
    : pick(r, ['/v2/keys/rotate', '/v2/credentials/queue/token/rotate', '/v2/credentials/kv/reset-password', '/console/api/login', '/v2/credentials/vector/%E0%A4/rotate']);
  const auth = read && r() < 0.6 ? { authorization: good } : pick<Record<string, string>>(r, [{}, { authorization: 'Basic ' }, { authorization: 'Basic !!!' }, { authorization: `Basic ${Buffer.from('\u00ff:\u00fe').toString('base64')}` }, { authorization: 'Bearer x' }]);
  return { method: read ? pick(r, ['GET', 'GET', 'HEAD', 'OPTIONS']) : 'POST', path: mangle(r, path), headers: { ...auth, ...headers(r) }, body: read ? undefined : body(r, () => randomValue(r, 3)) };
}

/** Raw bytes no client library would send: broken request lines, bad header syntax, smuggling attempts. */
function rawRequest(r: R): FuzzRequest {
  const junk = () => Buffer.from(Array.from({ length: int(r, 1, 64) }, () => int(r, 0, 255)));
  const variants = [
    () => Buffer.from(`GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n`),
    () => Buffer.from(`POST /pipeline HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n`),
    () => Buffer.from(`POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999999999999999\r\n\r\n[]`),
    () => Buffer.from(`GET /${'a'.repeat(70_000)} HTTP/1.1\r\nHost: x\r\n\r\n`),
    () => Buffer.from(`GET / HTTP/1.1\r\n${'X-A: b\r\n'.repeat(3000)}\r\n`),
    () => Buffer.from(`GET / HTTP/9.9\r\n\r\n`),
    () => Buffer.concat([Buffer.from('GET /'), junk(), Buffer.from(' HTTP/1.1\r\nHost: x\r\n\r\n')]),
    () => Buffer.concat([Buffer.from('POST / HTTP/1.1\r\nHost: x\r\nX: '), junk(), Buffer.from('\r\n\r\n')]),
    () => Buffer.from(`POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nabc\r\n0\r\n\r\n`),
    () => Buffer.from(`GET / HTTP/1.1\r\nHost: x\r\n\r\nGET / HTTP/1.1\r\nHost: x\r\n\r\n`),
    () => junk(),
  ];
  return { method: 'RAW', path: '', headers: {}, raw: pick(r, variants)() };
}

/** Sends raw bytes; resolves to the status of the first answer, or 'closed' when the socket ended without one. */
function sendRaw(base: string, bytes: Buffer, timeoutMs: number): Promise<number | 'closed' | 'timeout'> {
  const u = new URL(base);
  return new Promise((resolve) => {
    const s = net.connect({ host: u.hostname, port: Number(u.port) });
    let got = '';
    const done = (v: number | 'closed' | 'timeout') => {
      clearTimeout(timer);
      s.destroy();
      resolve(v);
    };
    const timer = setTimeout(() => done('timeout'), timeoutMs);
    s.on('error', () => done(got ? status(got) : 'closed'));
    s.on('data', (c: Buffer) => {
      got += c.toString('latin1');
      if (got.includes('\r\n')) done(status(got));
    });
    s.on('close', () => done(got ? status(got) : 'closed'));
    s.write(bytes, () => s.end());
  });
  function status(text: string): number | 'closed' {
    const m = /^HTTP\/1\.[01] (\d{3})/.exec(text);
    return m ? Number(m[1]) : 'closed';
  }
}

const describe = (q: FuzzRequest): string => {
  if (q.raw) return `RAW ${JSON.stringify(q.raw.subarray(0, 120).toString('latin1'))}`;
  const b = q.body === undefined ? '' : ` body=${JSON.stringify((typeof q.body === 'string' ? q.body : q.body.toString('latin1')).slice(0, 160))}${(q.body.length ?? 0) > 160 ? `…(${q.body.length})` : ''}`;
  return `${q.method} ${q.path.slice(0, 200)} headers=${JSON.stringify(q.headers).slice(0, 300)}${b}`;
};

const GENERATORS: Record<Area, (r: R, t: FuzzTarget) => FuzzRequest> = { queue: queueRequest, kv: kvRequest, vector: vectorRequest, mgmt: mgmtRequest };

/**
 * Sends `perArea` generated requests to each area (seeded by `seed`; `concurrency` at a time per
 * area; about 3 % raw-byte requests) and classifies the answers. Never throws for a bad answer:
 * failures are listed in the report.
 */
export async function runFuzz(target: FuzzTarget, opts: { seed: number; perArea: number; concurrency?: number; timeoutMs?: number; areas?: Area[] }): Promise<FuzzReport> {
  const started = Date.now();
  const timeoutMs = opts.timeoutMs ?? 30_000;
  const report: FuzzReport = { requests: 0, statuses: { queue: {}, kv: {}, vector: {}, mgmt: {} }, failures: [], ms: 0 };
  const areas = opts.areas ?? (['queue', 'kv', 'vector', 'mgmt'] as Area[]);
  await Promise.all(
    areas.map(async (area, ai) => {
      const r = prng(opts.seed * 31 + ai);
      const base = target.urls[area];
      let next = 0;
      const worker = async () => {
        while (next < opts.perArea) {
          next++;
          const q = r() < 0.03 ? rawRequest(r) : GENERATORS[area](r, target);
          const outcome = await send(base, q, timeoutMs);
          report.requests++;
          const cls = typeof outcome === 'number' ? `${Math.floor(outcome / 100)}xx` : outcome;
          report.statuses[area][cls] = (report.statuses[area][cls] ?? 0) + 1;
          const bad =
            (typeof outcome === 'number' && outcome >= 500 && outcome !== 503 && outcome !== 507) ||
            outcome === 'timeout' ||
            (outcome === 'closed' && !q.raw) ||
            outcome === 'no-retry-after';
          if (bad) report.failures.push({ area, request: describe(q), outcome: String(outcome) });
        }
      };
      await Promise.all(Array.from({ length: opts.concurrency ?? 4 }, worker));
    }),
  );
  report.ms = Date.now() - started;
  return report;
}

async function send(base: string, q: FuzzRequest, timeoutMs: number): Promise<number | 'closed' | 'timeout' | 'no-retry-after'> {
  if (q.raw) return sendRaw(base, q.raw, timeoutMs);
  try {
    const res = await fetch(base + q.path, {
      method: q.method,
      headers: q.headers,
      body: q.method === 'GET' || q.method === 'HEAD' || q.body === undefined ? undefined : typeof q.body === 'string' ? q.body : new Uint8Array(q.body),
      signal: AbortSignal.timeout(timeoutMs),
      redirect: 'manual',
    });
    // an SSE stream (/subscribe, /psubscribe, /monitor) never ends: its answer is the status
    if (res.headers.get('content-type')?.startsWith('text/event-stream')) await res.body?.cancel();
    else await res.arrayBuffer();
    if (res.status === 503 && !res.headers.get('retry-after')) return 'no-retry-after';
    return res.status;
  } catch (err) {
    const e = err as Error & { cause?: { code?: string } };
    if (e.name === 'TimeoutError') return 'timeout';
    if (e.name === 'TypeError' && /header|ByteString|invalid/i.test(e.message) && !e.cause) return 400; // refused by fetch itself, never sent
    return 'closed';
  }
}
