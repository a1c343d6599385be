/**
 * Endpoint handlers: one function per endpoint, from parsed JSON body
 * to the `result` value. Read-only tokens may call only {@link READONLY_ENDPOINTS}.
 */
import type { VectorIndex } from '../engine/vector-index.js';
import { vectorError } from '../errors.js';
import { HYBRID_DEPTH, runQuery, type ResolvedQuery } from '../query/execute.js';
import { fetchRecords, formatScored, info, randomRecord, rangeRecords } from '../query/records.js';
import type { ResumableQueries } from './resumable.js';
import {
  asList, isObj, parseCursor, parseFilter, parseId, parseIdList, parseInclude, parseQuery, parseSparse, parseUpsert,
  parseUpsertData, parseVector, checkTopK, type QueryRequest, type RequestLimits, type UpsertItem,
} from '../validate.js';

export interface HandlerContext {
  index: VectorIndex;
  ns: string;
  body: unknown;
  /** Raw query string (`reset?all`). */
  search: URLSearchParams;
  resumable: ResumableQueries;
  /** Bounds on what one request may compute and send (`SVC_VECTOR_MAX_*`). */
  limits: RequestLimits;
  /**
   * The queries of a `query-data` / `resumable-query-data` request as its first run embedded them
   * (set by the handler): a run again after reading vectors not filled yet (`routes.ts`
   * `withVectors`, the same context) reuses them instead of calling the embedder again.
   */
  embedded?: Promise<ResolvedQuery[]>;
}

export type Handler = (c: HandlerContext) => unknown | Promise<unknown>;

/** Endpoints a read-only token may call. */
export const READONLY_ENDPOINTS = new Set([
  'query', 'query-data', 'fetch', 'range', 'info', 'list-namespaces', 'random',
  'resumable-query', 'resumable-query-data', 'resumable-query-next', 'resumable-query-end',
]);

/** Embeds the text of a data query per index type and `queryMode`. @throws 422 without an embedder. */
async function resolve(index: VectorIndex, q: QueryRequest): Promise<ResolvedQuery> {
  if (q.data === undefined) return q;
  const t = index.def.type;
  const wantDense = t === 'DENSE' || (t === 'HYBRID' && q.mode !== 'SPARSE');
  const wantSparse = t === 'SPARSE' || (t === 'HYBRID' && q.mode !== 'DENSE');
  if ((wantDense && !index.denseEmbedder) || (wantSparse && !index.sparseEmbedder)) throw vectorError('noEmbedder');
  const out: ResolvedQuery = { ...q };
  if (wantDense) out.vector = (await index.denseEmbedder!.embed([q.data]))[0];
  if (wantSparse) {
    out.sparse = index.sparseEmbedder!.query(q.data);
    if (!q.weightingGiven) out.useIdf = true;
  }
  return out;
}

/** Embeds upsert-data items into records for this index type. */
async function embedItems(index: VectorIndex, items: (UpsertItem & { data: string })[]): Promise<UpsertItem[]> {
  if ((index.hasDense && !index.denseEmbedder) || (index.hasSparse && !index.sparseEmbedder)) throw vectorError('noEmbedder');
  const dense = index.hasDense ? await index.denseEmbedder!.embed(items.map((i) => i.data)) : undefined;
  return items.map((it, i) => ({
    ...it,
    vector: dense?.[i],
    sparse: index.hasSparse ? index.sparseEmbedder!.document(it.data) : undefined,
  }));
}

/**
 * New `data` in an update on an index with embedders: the parts the index embeds (dense with an
 * `embedder.dense`, sparse with `embedder.sparse`) are embedded from the new text, as
 * `upsert-data` does, so `query-data` finds the record by its new text. A vector the update gives
 * itself is kept; a part without an embedder keeps its stored vector. Mutates `u`.
 * @throws VectorError 422 when the embedding endpoint fails
 */
async function embedUpdate(index: VectorIndex, u: { data?: string; vector?: number[]; sparse?: UpsertItem['sparse'] }): Promise<void> {
  const text = u.data!;
  if (index.hasDense && index.denseEmbedder && u.vector === undefined) u.vector = (await index.denseEmbedder.embed([text]))[0];
  if (index.hasSparse && index.sparseEmbedder && u.sparse === undefined) u.sparse = index.sparseEmbedder.document(text);
}

/**
 * `query` / `query-data`: one query object or an array of them (array answer for more than one).
 * Synchronous for `query` (the HTTP hot path answers without a Promise); `query-data` awaits the
 * embedder.
 * @throws VectorError 400 `tooManyQueries` for an array longer than `limits.maxBatchQueries`,
 *         `topKTooLarge` for a `topK` above `limits.maxTopK`, `tooManyResults` for an array whose
 *         `topK` add up to more than `limits.maxBatchResults` (all before any query runs)
 */
function query(c: HandlerContext, data: boolean): unknown {
  const { items, wasArray } = asList(c.body, 'query');
  if (items.length > c.limits.maxBatchQueries) throw vectorError('tooManyQueries', items.length, c.limits.maxBatchQueries);
  const run = (qs: ResolvedQuery[]) => {
    const ns = c.index.ns(c.ns);
    const results = qs.map((q) => formatScored(c.index, ns, runQuery(c.index, ns, q, q.topK, Math.max(q.topK, HYBRID_DEPTH)), q));
    return wasArray && results.length > 1 ? results : results[0];
  };
  const parsed = items.map((x) => parseQuery(x, data, c.limits.maxTopK));
  if (parsed.length > 1) {
    let total = 0;
    for (const q of parsed) total += q.topK;
    if (total > c.limits.maxBatchResults) throw vectorError('tooManyResults', parsed.length, total, c.limits.maxBatchResults);
  }
  if (!data) return run(parsed);
  return (c.embedded ??= Promise.all(parsed.map((q) => resolve(c.index, q)))).then(run);
}

async function resumableStart(c: HandlerContext, data: boolean): Promise<unknown> {
  if (!isObj(c.body)) throw vectorError('bodyNotObject', 'resumable-query');
  const parsed = parseQuery(c.body, data, c.limits.maxTopK);
  const [q] = await (c.embedded ??= resolve(c.index, parsed).then((r) => [r]));
  return c.resumable.startQuery(c.index, c.ns, q, c.body.maxIdle);
}

function obj(body: unknown, what: string): Record<string, unknown> {
  if (!isObj(body)) throw vectorError('bodyNotObject', what);
  return body;
}

export const HANDLERS: Record<string, Handler> = {
  upsert: (c) => c.index.upsert(c.ns, parseUpsert(c.body)),
  'upsert-data': async (c) => c.index.upsert(c.ns, await embedItems(c.index, parseUpsertData(c.body))),
  query: (c) => query(c, false),
  'query-data': (c) => query(c, true),
  fetch: (c) => {
    const b = obj(c.body, 'fetch');
    const hasIds = b.ids !== undefined && b.ids !== null;
    const hasPrefix = b.prefix !== undefined && b.prefix !== null;
    if (hasIds && hasPrefix) throw vectorError('fetchOneOf');
    if (!hasIds && !hasPrefix) throw vectorError('fetchNeedsIdsOrPrefix');
    if (hasPrefix && typeof b.prefix !== 'string') throw vectorError('prefixNotString');
    return fetchRecords(c.index, c.ns, hasIds ? { ids: parseIdList(b.ids, c.limits.maxFetchIds) } : { prefix: b.prefix as string }, parseInclude(b));
  },
  delete: async (c) => {
    const b = Array.isArray(c.body) ? { ids: c.body } : obj(c.body, 'delete');
    const given = ['ids', 'prefix', 'filter'].filter((k) => b[k] !== undefined && b[k] !== null && b[k] !== '');
    if (given.length !== 1) throw vectorError('deleteOneOf');
    if (given[0] === 'prefix' && typeof b.prefix !== 'string') throw vectorError('prefixNotString');
    const by = given[0] === 'ids' ? { ids: parseIdList(b.ids, Number.POSITIVE_INFINITY) } : given[0] === 'prefix' ? { prefix: b.prefix as string } : { filter: parseFilter(b.filter) };
    return { deleted: await c.index.delete(c.ns, by) };
  },
  range: (c) => {
    const b = obj(c.body, 'range');
    const limit = b.limit;
    if (typeof limit !== 'number' || !Number.isInteger(limit) || limit < 0) throw vectorError('invalidLimit');
    if (b.prefix !== undefined && b.prefix !== null && typeof b.prefix !== 'string') throw vectorError('prefixNotString');
    // a larger page is clamped, not refused: range is a paging API (both SDKs return one page per
    // call and leave following `nextCursor` to the caller), so the cursor carries on after it
    const page = Math.min(limit, c.limits.maxRangeLimit);
    return rangeRecords(c.index, c.ns, parseCursor(b.cursor), page, (b.prefix as string | undefined) || undefined, parseInclude(b));
  },
  update: async (c) => {
    const b = obj(c.body, 'update');
    const mode = b.metadataUpdateMode ?? 'OVERWRITE';
    if (mode !== 'OVERWRITE' && mode !== 'PATCH') throw vectorError('invalidUpdateMode');
    if (b.metadata !== undefined && b.metadata !== null && !isObj(b.metadata)) throw vectorError('metadataNotObject');
    if (b.data !== undefined && b.data !== null && typeof b.data !== 'string') throw vectorError('dataNotString');
    const u = {
      id: parseId(b.id),
      vector: b.vector == null ? undefined : parseVector(b.vector),
      sparse: b.sparseVector == null ? undefined : parseSparse(b.sparseVector),
      data: (b.data as string | undefined) ?? undefined,
      metadata: (b.metadata as Record<string, unknown> | undefined) ?? undefined,
      patch: mode === 'PATCH',
    };
    if (u.data !== undefined) await embedUpdate(c.index, u);
    return { updated: await c.index.update(c.ns, u) };
  },
  reset: (c) => c.index.reset(c.ns, c.search.has('all')),
  info: (c) => info(c.index),
  'list-namespaces': (c) => [...c.index.namespaces.keys()],
  'delete-namespace': (c) => c.index.deleteNamespace(c.ns),
  'rename-namespace': async (c) => {
    const b = obj(c.body, 'rename-namespace');
    if (typeof b.namespace !== 'string' || typeof b.newNamespace !== 'string') throw vectorError('renameNamesNotStrings');
    if (b.deleteExisting !== undefined && typeof b.deleteExisting !== 'boolean') throw vectorError('deleteExistingNotBoolean');
    return { renamed: await c.index.renameNamespace(b.namespace, b.newNamespace, b.deleteExisting === true) };
  },
  random: (c) => randomRecord(c.index, c.ns),
  'resumable-query': (c) => resumableStart(c, false),
  'resumable-query-data': (c) => resumableStart(c, true),
  'resumable-query-next': (c) => {
    const b = obj(c.body, 'resumable-query-next');
    if (typeof b.additionalK === 'number') checkTopK('additionalK', b.additionalK, c.limits.maxTopK);
    return c.resumable.nextBatch(c.index, b.uuid, b.additionalK);
  },
  'resumable-query-end': (c) => c.resumable.endQuery(c.index, obj(c.body, 'resumable-query-end').uuid),
};
