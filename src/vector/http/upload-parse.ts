/**
 * `JSON.parse` of large `upsert` bodies on a worker thread, so the event loop keeps answering
 * queries meanwhile (at 768-d, parsing costs about 70 µs per vector on this 2-core machine: 7 ms
 * for a batch of 100, 70 ms for 1,000, all of it blocking every other request when done inline).
 *
 * The worker parses the text and moves the `vector` arrays of the top-level items (the body array's
 * elements, or the body object itself) that hold only finite numbers into one `Float64Array`,
 * transferred back without a copy; each such item's `vector` becomes a view into it (exactly the
 * numbers `JSON.parse` gave: validation treats them as an already checked vector, `validate.ts`
 * `parseVector`). Everything else (ids, metadata, vectors with bad entries, which validation then
 * refuses) comes back by structured clone: small next to the vectors — except the top-level items'
 * `metadata` objects, which come back as JSON text parsed here (below). A body that is not JSON
 * resolves to the `JSON.parse` error message (the same V8, the same message as inline).
 *
 * Memory (measured with glibc malloc, docs/readme/vector.md "Memory"): the body text goes to the
 * worker in pieces of {@link PIECE_CHARS} characters, not in one message. One message of a 15 MB
 * body (1,000 vectors at 768-d) needs a serialization buffer of that size; freeing it raises
 * glibc's mmap threshold to 15 MB (and its trim threshold to twice that), after which the worker's
 * vector arrays and the next bodies' buffers come from malloc arenas that keep the freed memory:
 * RSS growth of 146 MB after a 20k × 768 upload (raw 61 MB), 115–132 MB with pieces (glibc's
 * retention varies from run to run by about ±15 MB). Small pieces keep every buffer of the
 * transfer below the default threshold. Metadata objects made by structured clone take 56 bytes
 * for `{"s": 1}` (V8 gives a cloned object four in-object property slots) against 32 from
 * `JSON.parse`, and the namespace keeps every record's metadata object: JSON text re-parsed here
 * costs about as much as the clone and keeps them compact. The round trip is `JSON.stringify`'s,
 * the form SQLite stores anyway (a number too large for a double, parsed as Infinity, is `null`).
 *
 * One worker per process, started on first use and stopped after {@link PARSE_WORKER_IDLE_MS}
 * without a body, keeping the process alive only while it holds a body; it parses in
 * arrival order, so writes keep the order their requests arrived in (the caller sends every upsert
 * body here while an earlier one is still being parsed: {@link parsingUploads}). A worker that dies
 * fails the bodies it held (rejects) and is replaced on the next call.
 */
import { Worker } from 'node:worker_threads';
import { jsonTooDeep, MAX_JSON_DEPTH } from '../../http/json-depth.js';

/** Upsert bodies from this many characters are parsed on the worker (100 vectors at 128-d are ~250 kB). */
export const OFF_THREAD_PARSE_CHARS = 64 * 1024;
/**
 * Characters per message carrying a body to the worker: at most 64 kB serialized (two bytes per
 * character), below glibc's default mmap threshold of 128 kB (module doc).
 */
export const PIECE_CHARS = 32 * 1024;

/** A parsed body, the `JSON.parse` error message, or a body nested too deep (`http/json-depth.ts`). */
export type ParsedUpload = { body: unknown } | { error: string } | { tooDeep: true };

/**
 * The worker (CommonJS, evaluated). The depth check runs there too: a body nested thousands of
 * levels deep cannot be cloned back (the serializer recurses); the function is the one the inline
 * path uses, its source inserted here.
 */
const WORKER_SOURCE = `
const { parentPort } = require('node:worker_threads');
const jsonTooDeep = ${jsonTooDeep.toString()};
let pieces = [];
parentPort.on('message', (piece) => {
  if (typeof piece === 'string') {
    pieces.push(piece);
    return;
  }
  const text = pieces.length === 1 ? pieces[0] : pieces.join('');
  pieces = [];
  let body;
  try {
    body = JSON.parse(text);
  } catch (err) {
    parentPort.postMessage({ error: String(err && err.message) });
    return;
  }
  if (jsonTooDeep(body, ${MAX_JSON_DEPTH})) {
    parentPort.postMessage({ tooDeep: true });
    return;
  }
  const items = Array.isArray(body) ? body : body !== null && typeof body === 'object' ? [body] : [];
  const picked = [];
  let total = 0;
  for (let i = 0; i < items.length; i++) {
    const it = items[i];
    if (it === null || typeof it !== 'object' || Array.isArray(it) || !Array.isArray(it.vector) || it.vector.length === 0) continue;
    const v = it.vector;
    let ok = true;
    for (let j = 0; j < v.length && ok; j++) ok = typeof v[j] === 'number' && Number.isFinite(v[j]);
    if (!ok) continue;
    picked.push(i);
    total += v.length;
  }
  const vectors = new Float64Array(total);
  const at = new Int32Array(picked.length * 2);
  let o = 0;
  for (let k = 0; k < picked.length; k++) {
    const it = items[picked[k]];
    vectors.set(it.vector, o);
    at[2 * k] = picked[k];
    at[2 * k + 1] = it.vector.length;
    o += it.vector.length;
    it.vector = null;
  }
  const metaAt = [];
  const metaText = [];
  for (let i = 0; i < items.length; i++) {
    const it = items[i];
    if (it === null || typeof it !== 'object' || Array.isArray(it)) continue;
    const m = it.metadata;
    if (m === null || typeof m !== 'object' || Array.isArray(m)) continue;
    metaAt.push(i);
    metaText.push(JSON.stringify(m));
    it.metadata = null;
  }
  parentPort.postMessage({ body, vectors, at, metaAt, metaText }, [vectors.buffer, at.buffer]);
});
`;

interface Reply {
  body?: unknown;
  vectors?: Float64Array;
  /** Pairs (item index, vector length), in the order of {@link vectors}. */
  at?: Int32Array;
  /** Items whose `metadata` object comes back as JSON text ({@link metaText}, same order). */
  metaAt?: number[];
  metaText?: string[];
  error?: string;
  tooDeep?: boolean;
}

/**
 * A worker idle this long (ms) is stopped: its heap keeps the garbage of the bodies it parsed (tens
 * of MB after a bulk upload at 768-d), which only its own garbage collection would free, and an
 * idle worker allocates nothing that would trigger one. Starting one again costs a few ms.
 */
export const PARSE_WORKER_IDLE_MS = 500;

let worker: Worker | undefined;
const waiting: { resolve: (r: Reply) => void; reject: (e: Error) => void }[] = [];
let idleTimer: NodeJS.Timeout | undefined;

/** After a reply: when `w` holds no more bodies, unreferences it and stops it once idle long enough. */
function settle(w: Worker): void {
  if (waiting.length > 0) return;
  w.unref();
  clearTimeout(idleTimer);
  idleTimer = setTimeout(() => {
    if (worker !== w || waiting.length > 0) return;
    worker = undefined;
    void w.terminate();
  }, PARSE_WORKER_IDLE_MS).unref();
}

function start(): Worker {
  const w = new Worker(WORKER_SOURCE, { eval: true });
  w.on('message', (r: Reply) => {
    waiting.shift()?.resolve(r);
    settle(w);
  });
  const fail = (err: Error) => {
    // a worker stopped when idle (or already replaced) holds none of the waiting bodies
    if (worker !== w) return;
    worker = undefined;
    for (const p of waiting.splice(0)) p.reject(err);
  };
  w.on('error', fail);
  // a reply that cannot be deserialized here is lost: fail its waiter, keep the order of the others
  w.on('messageerror', (err) => {
    waiting.shift()?.reject(err);
    settle(w);
  });
  w.on('exit', (code) => fail(new Error(`upload parse worker exited with code ${code}`)));
  // referenced only while it holds a body (after the listeners: adding one references it again)
  w.unref();
  return w;
}

/** True while the parse worker runs (started, not yet stopped as idle or dead). */
export function parseWorkerRunning(): boolean {
  return worker !== undefined;
}

/** Bodies sent to the worker and not answered yet. */
export function parsingUploads(): number {
  return waiting.length;
}

/**
 * Parses `text` (a JSON upsert body) on the worker thread; vectors of the top-level items come back
 * as `Float64Array` views (module doc). Resolves to `{error}` for invalid JSON, `{tooDeep}` past
 * `MAX_JSON_DEPTH`. @throws (rejects) when the worker dies.
 */
export function parseUpload(text: string): Promise<ParsedUpload> {
  clearTimeout(idleTimer);
  worker ??= start();
  const w = worker;
  return new Promise<Reply>((resolve, reject) => {
    waiting.push({ resolve, reject });
    w.ref();
    for (let i = 0; i < text.length; i += PIECE_CHARS) w.postMessage(text.slice(i, i + PIECE_CHARS));
    w.postMessage(null); // end of the body
  }).then((r) => {
    if (r.error !== undefined) return { error: r.error };
    if (r.tooDeep) return { tooDeep: true };
    const items = Array.isArray(r.body) ? r.body : [r.body];
    const at = r.at!;
    let o = 0;
    for (let k = 0; k < at.length; k += 2) {
      (items[at[k]] as { vector: unknown }).vector = r.vectors!.subarray(o, o + at[k + 1]);
      o += at[k + 1];
    }
    const metaAt = r.metaAt!;
    for (let k = 0; k < metaAt.length; k++) (items[metaAt[k]] as { metadata: unknown }).metadata = JSON.parse(r.metaText![k]);
    return { body: r.body };
  });
}
