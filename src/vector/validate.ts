/**
 * Request body parsing and validation for every endpoint.
 * Every function throws {@link VectorError} 400 with a readable message on bad input; the
 * dimension check (422) is done by the index, which knows its dimension.
 */
import { vectorError } from './errors.js';
import type { SparseVector } from './engine/store.js';

/** At most 1,000 non-zero entries per sparse vector (sparseindexes.mdx). */
export const MAX_SPARSE_NONZERO = 1000;
/** Records returned by `fetch` with a prefix (fetch.mdx). */
export const MAX_FETCH_PREFIX = 1000;
/** Default `topK` (query.mdx). */
export const DEFAULT_TOP_K = 10;

/**
 * What one request may make svc compute and send, from the configuration (`src/config.ts`,
 * `SVC_VECTOR_MAX_*`). The hosted service documents none of these; its SDKs send none of them
 * past the defaults.
 */
export interface RequestLimits {
  /** Largest `topK` / `additionalK` (`SVC_VECTOR_MAX_TOP_K`); above it: 400 `topKTooLarge`. */
  maxTopK: number;
  /** Most records of one `range` page (`SVC_VECTOR_MAX_RANGE_LIMIT`); a larger `limit` is clamped. */
  maxRangeLimit: number;
  /** Most queries in one array of queries (`SVC_VECTOR_MAX_BATCH_QUERIES`); above it: 400 `tooManyQueries`. */
  maxBatchQueries: number;
  /** Most results one array of queries asks for in all, the sum of its `topK` (`SVC_VECTOR_MAX_BATCH_RESULTS`); above it: 400 `tooManyResults`. */
  maxBatchResults: number;
  /** Most ids one `fetch` names (`SVC_VECTOR_MAX_FETCH_IDS`); above it: 400 `tooManyIds`. */
  maxFetchIds: number;
}

export type Metadata = Record<string, unknown>;

export interface UpsertItem {
  id: string;
  /** A `Float64Array` when the body was parsed off the event loop (`http/upload-parse.ts`). */
  vector?: number[] | Float64Array;
  sparse?: SparseVector;
  metadata?: Metadata;
  data?: string;
}

export interface Include {
  includeVectors: boolean;
  includeMetadata: boolean;
  includeData: boolean;
}

export interface QueryRequest extends Include {
  vector?: number[];
  sparse?: SparseVector;
  data?: string;
  topK: number;
  filter?: string;
  useIdf: boolean;
  /** True when `weightingStrategy` was given (data queries default to IDF otherwise). */
  weightingGiven: boolean;
  fusion: 'RRF' | 'DBSF';
  mode: 'HYBRID' | 'DENSE' | 'SPARSE';
}

const isObj = (x: unknown): x is Record<string, unknown> => !!x && typeof x === 'object' && !Array.isArray(x);

/** An id: non-empty string, or a finite number converted to its string (`33` -> `"33"`). */
export function parseId(x: unknown, where = 'id'): string {
  if (typeof x === 'number' && Number.isFinite(x)) return String(x);
  if (typeof x === 'string' && x.length > 0) return x;
  throw vectorError('invalidId', where);
}

/**
 * The `ids` of a `fetch` or `delete`: one id or an array of at most `max` (a fetch's
 * `SVC_VECTOR_MAX_FETCH_IDS`; a delete, whose answer is one number, passes Infinity). The
 * hosted service documents a limit only for a fetch by prefix (1,000 records); by ids, the answer
 * holds one record per id (with `includeVectors`, the whole vector), so a body of millions of
 * short ids would make svc build an answer thousands of times its size.
 * @throws VectorError 400 `tooManyIds` (before any id is read), `invalidId`
 */
export function parseIdList(x: unknown, max: number): string[] {
  const arr = Array.isArray(x) ? x : [x];
  if (arr.length > max) throw vectorError('tooManyIds', arr.length, max);
  return arr.map((v) => parseId(v, 'ids[]'));
}

/** A dense vector of finite numbers (dimension checked by the index). */
export function parseVector(x: unknown, where = 'vector'): number[] {
  if (!Array.isArray(x) || x.length === 0) throw vectorError('invalidVector', where);
  for (const v of x) if (typeof v !== 'number' || !Number.isFinite(v)) throw vectorError('nonFiniteVector', where);
  return x as number[];
}

/**
 * `{indices, values}`: same length, ≤ 1,000 entries, int32 indices, finite values. A repeated
 * index is accepted as the hosted service does: its values are summed into one entry, at the
 * place of the index's first occurrence (`{indices:[7,7], values:[0.1,0.2]}` is `{[7], [0.3]}`).
 */
export function parseSparse(x: unknown, where = 'sparseVector'): SparseVector {
  if (!isObj(x) || !Array.isArray(x.indices) || !Array.isArray(x.values)) {
    throw vectorError('invalidSparseVector', where);
  }
  const { indices, values } = x as { indices: unknown[]; values: unknown[] };
  if (indices.length !== values.length) throw vectorError('sparseLengthMismatch', where);
  if (indices.length > MAX_SPARSE_NONZERO) throw vectorError('sparseTooLarge', where, MAX_SPARSE_NONZERO, indices.length);
  /** index -> its position in the output */
  const at = new Map<number, number>();
  const sums: number[] = [];
  for (let i = 0; i < indices.length; i++) {
    const ix = indices[i];
    const v = values[i];
    if (typeof ix !== 'number' || !Number.isInteger(ix) || ix < 0 || ix > 2 ** 31 - 1) throw vectorError('invalidSparseIndex', where);
    if (typeof v !== 'number' || !Number.isFinite(v)) throw vectorError('invalidSparseValue', where);
    const k = at.get(ix);
    if (k === undefined) {
      at.set(ix, sums.length);
      sums.push(v);
    } else sums[k] += v;
  }
  const out = { indices: new Int32Array(sums.length), values: new Float32Array(sums.length) };
  let k = 0;
  for (const ix of at.keys()) {
    out.indices[k] = ix;
    out.values[k] = sums[k];
    k++;
  }
  return out;
}

function parseMetadata(x: unknown, where: string): Metadata | undefined {
  if (x === undefined || x === null) return undefined;
  if (!isObj(x)) throw vectorError('invalidMetadata', where);
  return x;
}

function parseData(x: unknown, where: string): string | undefined {
  if (x === undefined || x === null) return undefined;
  if (typeof x !== 'string') throw vectorError('invalidData', where);
  return x;
}

/** Object or array of objects -> array (with `wasArray`). */
export function asList(body: unknown, what: string): { items: unknown[]; wasArray: boolean } {
  if (Array.isArray(body)) {
    if (body.length === 0) throw vectorError('requestArrayEmpty', what);
    return { items: body, wasArray: true };
  }
  if (isObj(body)) return { items: [body], wasArray: false };
  throw vectorError('requestNotObjectOrArray', what);
}

/** `/upsert` items: each needs `vector` and/or `sparseVector` (which ones the index checks). */
export function parseUpsert(body: unknown): UpsertItem[] {
  return asList(body, 'upsert').items.map((it, i) => {
    const where = `[${i}]`;
    if (!isObj(it)) throw vectorError('itemNotObject', where);
    const id = parseId(it.id, `${where}.id`);
    // a Float64Array comes from the upload parser, which packs only non-empty all-finite vectors
    const vector = it.vector === undefined || it.vector === null ? undefined : it.vector instanceof Float64Array ? it.vector : parseVector(it.vector, `${where}.vector`);
    const sparse = it.sparseVector === undefined || it.sparseVector === null ? undefined : parseSparse(it.sparseVector, `${where}.sparseVector`);
    if (!vector && !sparse) throw vectorError('upsertNeedsVector', where);
    return { id, vector, sparse, metadata: parseMetadata(it.metadata, where), data: parseData(it.data, where) };
  });
}

/** `/upsert-data` items: `{id, data, metadata?}`. */
export function parseUpsertData(body: unknown): (UpsertItem & { data: string })[] {
  return asList(body, 'upsert-data').items.map((it, i) => {
    const where = `[${i}]`;
    if (!isObj(it)) throw vectorError('itemNotObject', where);
    const id = parseId(it.id, `${where}.id`);
    const data = parseData(it.data, where);
    if (data === undefined) throw vectorError('upsertDataNeedsData', where);
    if (it.vector !== undefined || it.sparseVector !== undefined) throw vectorError('upsertDataNoVectors', where);
    return { id, data, metadata: parseMetadata(it.metadata, where) };
  });
}

function bool(o: Record<string, unknown>, k: string): boolean {
  const v = o[k];
  if (v === undefined || v === null) return false;
  if (typeof v !== 'boolean') throw vectorError('notBoolean', k);
  return v;
}

/** Include flags (default false). */
export function parseInclude(o: Record<string, unknown>): Include {
  return { includeVectors: bool(o, 'includeVectors'), includeMetadata: bool(o, 'includeMetadata'), includeData: bool(o, 'includeData') };
}

/** A filter string; `""`/absent = none. */
export function parseFilter(x: unknown): string | undefined {
  if (x === undefined || x === null || x === '') return undefined;
  if (typeof x !== 'string') throw vectorError('filterNotString');
  return x;
}

/**
 * A result count (`topK`, `additionalK`) of at most `maxTopK`.
 * @throws VectorError 400 `topKTooLarge` (naming `name`) when larger; the caller checked the type
 */
export function checkTopK(name: string, k: number, maxTopK: number): number {
  if (k > maxTopK) throw vectorError('topKTooLarge', name, k, maxTopK);
  return k;
}

/**
 * One query object (`data` only when `dataEndpoint`); `topK` at most `maxTopK`.
 * @throws VectorError 400 on a bad field, `topKTooLarge` above `maxTopK`
 */
export function parseQuery(x: unknown, dataEndpoint: boolean, maxTopK: number): QueryRequest {
  if (!isObj(x)) throw vectorError('bodyNotObject', 'query');
  let topK = DEFAULT_TOP_K;
  if (x.topK !== undefined && x.topK !== null) {
    if (typeof x.topK !== 'number' || !Number.isInteger(x.topK) || x.topK < 0) throw vectorError('invalidTopK');
    topK = checkTopK('topK', x.topK, maxTopK);
  }
  const ws = x.weightingStrategy;
  if (ws !== undefined && ws !== null && ws !== 'IDF' && ws !== '') throw vectorError('invalidWeightingStrategy');
  const fusion = x.fusionAlgorithm ?? 'RRF';
  if (fusion !== 'RRF' && fusion !== 'DBSF') throw vectorError('invalidFusion');
  const mode = x.queryMode ?? 'HYBRID';
  if (mode !== 'HYBRID' && mode !== 'DENSE' && mode !== 'SPARSE') throw vectorError('invalidQueryMode');
  const q: QueryRequest = {
    topK,
    filter: parseFilter(x.filter),
    useIdf: ws === 'IDF',
    weightingGiven: ws === 'IDF',
    fusion,
    mode,
    ...parseInclude(x),
  };
  if (dataEndpoint) {
    if (typeof x.data !== 'string') throw vectorError('dataNotString');
    q.data = x.data;
  } else {
    if (x.vector !== undefined && x.vector !== null) q.vector = parseVector(x.vector);
    if (x.sparseVector !== undefined && x.sparseVector !== null) q.sparse = parseSparse(x.sparseVector);
    if (!q.vector && !q.sparse) throw vectorError('queryNeedsVector');
  }
  return q;
}

/** A range cursor: `0`, `"0"`, `""` -> 0; a decimal position otherwise. */
export function parseCursor(x: unknown): number {
  if (x === undefined || x === null || x === '' || x === 0) return 0;
  if (typeof x !== 'string' && typeof x !== 'number') throw vectorError('cursorType');
  const s = String(x);
  if (!/^\d{1,15}$/.test(s)) throw vectorError('invalidCursor', s.slice(0, 100));
  return Number(s);
}

export { isObj };
