/**
 * Vector index management for the management API (`AreaContext.vectorIndexes`, `src/area.ts`):
 * list, create, rename, new tokens and delete while the area serves.
 *
 * Indexes created here are keyed by a UUID (`id`): files `<dataDir>/vector/<id>.*`, tokens
 * `vector.<id>.token` / `.readonlyToken`, endpoint `<vector url>/<id>`; their name is only a label
 * (unique over every index), so a rename changes no URL and a deleted name can be reused at once.
 * The default index (id `default`) and the `SVC_VECTOR_INDEXES` ones (id = name) are listed too;
 * the API gives them new tokens but neither renames nor deletes them (409 `fixed`: the operator's
 * configuration owns them).
 *
 * Durability, local store (`catalogue.ts`): a create writes a `creating` row first, then the
 * index's files and tokens, then marks the row `ready` (the commit); a delete marks the row
 * `deleting` and removes the index from serving first, then its files and tokens, then the row.
 * Start-up ({@link recoverUnfinished}) finishes what a crash interrupted by removing the index.
 * PostgreSQL store (`engine/store-pg.ts`, `vector_catalogue`): create and delete are one
 * transaction each; every node follows the catalogue ({@link VectorIndexAdminImpl.follow}, run by
 * the area's poll and on `NOTIFY`).
 *
 * Request bodies (snake_case, after the hosted developer API): `{name, similarity_function:
 * COSINE|EUCLIDEAN|DOT_PRODUCT, dimension_count, type?: DENSE|SPARSE|HYBRID, embedding_model?,
 * sparse_embedding_model?: BM25, hnsw?: {m, ef_construction, ef_search}, quantization?: none|int8,
 * embedder?: {url, model, api_key?}}`; rules in {@link parseCreate}.
 */
import { randomUUID } from 'node:crypto';
import type { AreaContext, VectorIndexResult, VectorIndexView } from '../area.js';
import { generateSecret } from '../credentials.js';
import { blockedHost } from '../private-address.js';
import { Catalogue, NameTakenError, removeIndexFiles, type CatalogueEntry } from './catalogue.js';
import type { PgVectorStore } from './engine/store-pg.js';
import { DEFAULT_HNSW, ENDPOINTS, type IndexDefinition, type IndexType, type Metric, type Quantization } from './definitions.js';
import type { VectorIndex } from './engine/vector-index.js';

/** Name rule of every index: what the `SVC_VECTOR_INDEXES` file allows. */
const NAME_RE = /^[A-Za-z0-9_-]{1,64}$/;
const MAX_DIMENSION = 65536;

/** Credential names of index key `key`. */
const tokenOf = (key: string) => `vector.${key}.token`;
const roTokenOf = (key: string) => `vector.${key}.readonlyToken`;

type Fail = Extract<VectorIndexResult, { ok: false }>;
const fail = (code: Fail['code'], message: string): Fail => ({ ok: false, code, message });
const ok = <T>(value: T): VectorIndexResult<T> => ({ ok: true, value });

/** What the admin needs of the running area. */
export interface AdminDeps {
  ctx: AreaContext;
  /** The served indexes by key (the HTTP fronts route through it). */
  indexes: Map<string, VectorIndex>;
  /** The configured definitions (default + `SVC_VECTOR_INDEXES`, and on PostgreSQL the other nodes'), by key. */
  configured: IndexDefinition[];
  /** Where the created indexes are kept; undefined until the area has loaded (`start`). */
  runtime(): RuntimeStore | undefined;
  /** Opens the index of a definition (the local files, or the cache of the PostgreSQL store). */
  open(def: IndexDefinition): Promise<VectorIndex>;
  /** Called after an index was added to `indexes` (snapshot timer). */
  added(key: string, index: VectorIndex): void;
}

/** Fields a create body may carry. */
const CREATE_FIELDS = new Set([
  'name', 'similarity_function', 'dimension_count', 'type', 'embedding_model', 'sparse_embedding_model', 'hnsw', 'quantization', 'embedder',
  'region', 'index_plan', // hosted-API fields svc accepts and ignores (one place, no plans)
]);

/**
 * Checks a create body; returns the definition (its `name` is set by the caller to the key) and
 * the display name, or an `invalid` refusal naming the first bad field.
 */
export function parseCreate(body: unknown, blockPrivate = false): { def: Omit<IndexDefinition, 'name'>; name: string } | Fail {
  if (!body || typeof body !== 'object' || Array.isArray(body)) return fail('invalid', 'expected a JSON object {name, similarity_function, dimension_count, type?, …}');
  const o = body as Record<string, unknown>;
  for (const k of Object.keys(o)) if (!CREATE_FIELDS.has(k)) return fail('invalid', `${k}: unknown field`);
  const name = checkName(o.name);
  if (typeof name !== 'string') return name;
  const type = (o.type ?? 'DENSE') as IndexType;
  if (!['DENSE', 'SPARSE', 'HYBRID'].includes(type as string)) return fail('invalid', 'type: expected DENSE, SPARSE or HYBRID');
  const metric = o.similarity_function as Metric;
  if (!['COSINE', 'EUCLIDEAN', 'DOT_PRODUCT'].includes(metric as string)) return fail('invalid', 'similarity_function: expected COSINE, EUCLIDEAN or DOT_PRODUCT');
  let dimension: number | undefined;
  if (type === 'SPARSE') {
    if (o.dimension_count !== undefined && o.dimension_count !== 0) return fail('invalid', 'dimension_count: a SPARSE index has no dense dimension (omit it or send 0)');
  } else {
    const d = o.dimension_count;
    if (!Number.isInteger(d) || (d as number) < 1 || (d as number) > MAX_DIMENSION) return fail('invalid', `dimension_count: expected an integer from 1 to ${MAX_DIMENSION}`);
    dimension = d as number;
  }
  const embedder: IndexDefinition['embedder'] = {};
  if (o.embedder !== undefined) {
    const e = o.embedder as Record<string, unknown>;
    if (type === 'SPARSE') return fail('invalid', 'embedder: a SPARSE index has no dense part');
    if (!e || typeof e !== 'object' || typeof e.url !== 'string' || !/^https?:\/\/\S+$/.test(e.url) || typeof e.model !== 'string' || !e.model) {
      return fail('invalid', 'embedder: expected {url: "http(s)://…/v1/embeddings", model: string, api_key?: string}');
    }
    if (e.api_key !== undefined && typeof e.api_key !== 'string') return fail('invalid', 'embedder.api_key: expected a string');
    embedder.dense = { url: e.url, model: e.model, apiKey: e.api_key as string | undefined };
    let host: string;
    try {
      host = new URL(e.url).hostname;
    } catch {
      return fail('invalid', `embedder.url ${JSON.stringify(e.url.slice(0, 200))}: not a valid URL`);
    }
    if (blockPrivate) {
      const why = blockedHost(host);
      if (why) return fail('invalid', `embedder.url ${JSON.stringify(e.url.slice(0, 200))} refused: ${why}; this server refuses loopback and private embedder addresses (SVC_VECTOR_BLOCK_PRIVATE_EMBEDDERS)`);
      embedder.dense.publicOnly = true;
    }
  }
  if (o.embedding_model !== undefined) {
    if (typeof o.embedding_model !== 'string' || !o.embedding_model) return fail('invalid', 'embedding_model: expected a string');
    if (!embedder.dense) {
      return fail('invalid', `embedding_model: unknown model ${JSON.stringify(o.embedding_model.slice(0, 100))}: svc has no built-in embedding models; give an OpenAI-compatible embeddings endpoint as embedder {url, model} (embedding_model is then the name shown)`);
    }
    embedder.dense.name = o.embedding_model;
  }
  if (o.sparse_embedding_model !== undefined) {
    if (o.sparse_embedding_model !== 'BM25') return fail('invalid', `sparse_embedding_model: unknown model ${JSON.stringify(String(o.sparse_embedding_model).slice(0, 100))}: only BM25 is built in`);
    if (type === 'DENSE') return fail('invalid', 'sparse_embedding_model: a DENSE index has no sparse part');
    embedder.sparse = 'BM25';
  }
  let quantization: Quantization = 'none';
  if (o.quantization !== undefined) {
    if (o.quantization !== 'none' && o.quantization !== 'int8') return fail('invalid', 'quantization: expected "none" or "int8"');
    quantization = o.quantization;
    if (quantization === 'int8' && type === 'SPARSE') return fail('invalid', 'quantization: a SPARSE index has no dense vectors to quantize');
    if (quantization === 'int8' && o.hnsw !== undefined) return fail('invalid', 'hnsw: an int8 index has no HNSW graph (drop hnsw or quantization)');
  }
  const hnsw = { ...DEFAULT_HNSW };
  if (o.hnsw !== undefined) {
    const h = o.hnsw as Record<string, unknown>;
    if (!h || typeof h !== 'object' || Array.isArray(h)) return fail('invalid', 'hnsw: expected {m?, ef_construction?, ef_search?}');
    const keys = { m: 'm', ef_construction: 'efConstruction', ef_search: 'efSearch' } as const;
    for (const k of Object.keys(h)) {
      if (!(k in keys)) return fail('invalid', `hnsw.${k}: unknown field (m, ef_construction, ef_search)`);
      const v = h[k];
      if (!Number.isInteger(v) || (v as number) < 2 || (v as number) > 4096) return fail('invalid', `hnsw.${k}: expected an integer from 2 to 4096`);
      hnsw[keys[k as keyof typeof keys]] = v as number;
    }
  }
  return { name, def: { type, dimension, metric, embedder, hnsw, quantization } };
}

function checkName(v: unknown): string | Fail {
  if (typeof v !== 'string' || !NAME_RE.test(v) || (ENDPOINTS as readonly string[]).includes(v)) {
    return fail('invalid', 'name: expected 1 to 64 characters of A-Z, a-z, 0-9, _ and -, not an endpoint name (upsert, query, info, …)');
  }
  return v;
}

/**
 * Removes what interrupted creates and deletes left (`creating` / `deleting` rows): the index's
 * files, its tokens, then the row. Called at start-up before any index is opened.
 */
export function recoverUnfinished(ctx: AreaContext, catalogue: Catalogue): CatalogueEntry[] {
  const left = catalogue.unfinished();
  for (const e of left) {
    removeIndexFiles(ctx.config.dataDir, e.id);
    ctx.credentials.delete([tokenOf(e.id), roTokenOf(e.id)]);
    catalogue.remove(e.id);
    ctx.logger.warn({ index: e.name, id: e.id, state: e.state }, `vector: removed the leftovers of an interrupted ${e.state === 'creating' ? 'create' : 'delete'} of an index`);
  }
  return left;
}

/** A created index as its store keeps it. */
export interface RuntimeEntry {
  id: string;
  name: string;
  definition: IndexDefinition;
  /** ms since the epoch */
  createdAt: number;
}

/**
 * Where the created indexes are kept: the SQLite catalogue next to the local indexes
 * ({@link localRuntimeStore}) or the PostgreSQL store every node shares ({@link pgRuntimeStore}).
 * Each operation is whole or absent after a crash.
 */
export interface RuntimeStore {
  list(): Promise<RuntimeEntry[]>;
  /** Creates and opens the index (definition, tokens, files); undefined (nothing changed) when `name` is taken. */
  create(name: string, def: IndexDefinition, createdAt: number, taken: string[]): Promise<VectorIndex | undefined>;
  /** false (nothing changed) when `name` is taken. */
  rename(id: string, name: string, taken: string[]): Promise<boolean>;
  /** Deletes the index and its data; `index` (already out of serving) is closed on the way. */
  delete(id: string, index: VectorIndex | undefined): Promise<void>;
}

/** New tokens of index `id` (credential name -> value). */
const freshTokens = (id: string) => new Map([[tokenOf(id), generateSecret()], [roTokenOf(id), generateSecret()]]);

/** Closes `index` and removes its files and this node's copy of its tokens. */
async function discard(ctx: AreaContext, id: string, index: VectorIndex | undefined): Promise<void> {
  await index?.close().catch((err: unknown) => ctx.logger.warn({ err, id }, 'vector: closing a deleted index failed (its files are removed anyway)'));
  removeIndexFiles(ctx.config.dataDir, id);
  ctx.credentials.delete([tokenOf(id), roTokenOf(id)]);
}

/**
 * The created indexes in `<dataDir>/vector/catalogue.db` (`catalogue.ts`): a create writes the
 * `creating` row first and marks it `ready` last; a delete marks the row `deleting` first and
 * removes it last ({@link recoverUnfinished} finishes either after a crash).
 */
export function localRuntimeStore(ctx: AreaContext, catalogue: Catalogue, open: (def: IndexDefinition) => Promise<VectorIndex>): RuntimeStore {
  return {
    list: async () => catalogue.list(),
    async create(name, def, createdAt, taken) {
      const id = def.name;
      if (taken.includes(name)) return undefined;
      try {
        catalogue.reserve(id, name, def, createdAt);
      } catch (err) {
        if (err instanceof NameTakenError) return undefined;
        throw err;
      }
      let index: VectorIndex | undefined;
      try {
        for (const [n, v] of freshTokens(id)) ctx.credentials.set(n, v);
        index = await open(def);
        crashPoint('vector-index-files-created');
        catalogue.setState(id, 'ready');
        return index;
      } catch (err) {
        await discard(ctx, id, index);
        catalogue.remove(id);
        throw err;
      }
    },
    async rename(id, name, taken) {
      if (taken.includes(name)) return false;
      try {
        catalogue.rename(id, name);
        return true;
      } catch (err) {
        if (err instanceof NameTakenError) return false;
        throw err;
      }
    },
    async delete(id, index) {
      catalogue.setState(id, 'deleting');
      await index?.close().catch(() => undefined);
      crashPoint('vector-index-delete-marked');
      await discard(ctx, id, undefined);
      catalogue.remove(id);
    },
  };
}

/**
 * The created indexes in the PostgreSQL store (`vector_catalogue`): create and delete are one
 * transaction each; the other nodes open and drop the index when they see it
 * ({@link VectorIndexAdminImpl.follow}).
 */
export function pgRuntimeStore(ctx: AreaContext, db: PgVectorStore, open: (def: IndexDefinition) => Promise<VectorIndex>): RuntimeStore {
  return {
    list: () => db.runtimeIndexes(),
    async create(name, def, createdAt, taken) {
      const tokens = freshTokens(def.name);
      if (!(await db.createRuntimeIndex(name, def, createdAt, tokens, taken))) return undefined;
      for (const [n, v] of tokens) ctx.credentials.set(n, v);
      return open(def);
    },
    rename: (id, name, taken) => db.renameRuntimeIndex(id, name, taken),
    async delete(id, index) {
      await db.deleteRuntimeIndex(id, [tokenOf(id), roTokenOf(id)]);
      await discard(ctx, id, index);
    },
  };
}

/** The admin interface plus what the area itself calls. */
export interface VectorIndexAdminImpl extends NonNullable<AreaContext['vectorIndexes']> {
  /**
   * Makes the served created indexes those of the store (PostgreSQL: the ones other nodes created
   * or deleted): opens the new ones, drops the gone ones. Run by the area's poll.
   */
  follow(): Promise<void>;
}

/** The management interface of the vector area (see the module doc). */
export function vectorIndexAdmin(deps: AdminDeps): VectorIndexAdminImpl {
  const { ctx, indexes } = deps;
  /** One operation at a time (creates and deletes touch files and the catalogue in steps). */
  let tail: Promise<unknown> = Promise.resolve();
  const serial = <T>(fn: () => Promise<T>): Promise<T> => {
    const p = tail.then(fn, fn);
    tail = p.catch(() => undefined);
    return p;
  };
  /** Keys of the created indexes this node serves. */
  const served = new Set<string>();
  const configured = (id: string) => deps.configured.find((d) => d.name === id);
  const notFound = (id: string) => fail('notFound', `vector index not found: ${JSON.stringify(id.slice(0, 200))}`);

  const view = (id: string, name: string, def: IndexDefinition, origin: VectorIndexView['origin'], createdAt: number, withSize: boolean): VectorIndexView => {
    const base = ctx.urls.get('vector') ?? '';
    const v: VectorIndexView = {
      id,
      name,
      endpoint: id === 'default' ? base : `${base}/${id}`,
      // peek: a token not here yet (another node's new index, before the sync) is never generated
      token: ctx.credentials.peek(tokenOf(id)) ?? '',
      read_only_token: ctx.credentials.peek(roTokenOf(id)) ?? '',
      creation_time: Math.floor(createdAt / 1000),
      similarity_function: def.metric,
      dimension_count: def.type === 'SPARSE' ? 0 : (indexes.get(id)?.dimension ?? def.dimension ?? 0),
      type: def.type,
      origin,
      quantization: def.quantization ?? 'none',
    };
    if (def.embedder.dense) {
      v.embedding_model = def.embedder.dense.name ?? def.embedder.dense.model;
      v.embedder = { url: def.embedder.dense.url, model: def.embedder.dense.model };
    }
    if (def.embedder.sparse) v.sparse_embedding_model = def.embedder.sparse;
    if (def.type !== 'SPARSE' && def.quantization !== 'int8') v.hnsw = { m: def.hnsw.m, ef_construction: def.hnsw.efConstruction, ef_search: def.hnsw.efSearch };
    if (withSize) {
      const idx = indexes.get(id);
      let count = 0;
      for (const ns of idx?.namespaces.values() ?? []) count += ns.count;
      v.vector_count = count;
      v.index_size = idx?.store.size() ?? 0;
    }
    return v;
  };
  const configuredView = (d: IndexDefinition, withSize: boolean) => view(d.name, d.name, d, d.name === 'default' ? 'env' : 'file', 0, withSize);
  const runtimeView = (e: RuntimeEntry, withSize: boolean) => view(e.id, e.name, e.definition, 'runtime', e.createdAt, withSize);
  const notLoaded = () => fail('unavailable', 'svc is starting: the vector indexes are not loaded yet');
  const taken = () => deps.configured.map((d) => d.name);
  const changeable = async (store: RuntimeStore, id: string): Promise<Fail | RuntimeEntry> => {
    if (configured(id)) {
      return fail('fixed', `vector index ${id} is ${id === 'default' ? 'the default index (SVC_VECTOR_*)' : 'defined in SVC_VECTOR_INDEXES'}: only new tokens can be made through the API; rename or remove it in the configuration`);
    }
    return (await store.list()).find((e) => e.id === id) ?? notFound(id);
  };
  const nameTaken = (name: string) => fail('invalid', `name: an index named ${name} exists already`);

  return {
    list: async () => {
      const store = deps.runtime();
      if (!store) return notLoaded();
      return ok([...deps.configured.map((d) => configuredView(d, false)), ...(await store.list()).map((e) => runtimeView(e, false))]);
    },
    get: async (id) => {
      const store = deps.runtime();
      if (!store) return notLoaded();
      const c = configured(id);
      if (c) return ok(configuredView(c, true));
      const e = (await store.list()).find((x) => x.id === id);
      return e ? ok(runtimeView(e, true)) : notFound(id);
    },
    create: (body) =>
      serial(async () => {
        const store = deps.runtime();
        if (!store) return notLoaded();
        const parsed = parseCreate(body, ctx.config.vector.blockPrivateEmbedders);
        if ('ok' in parsed) return parsed;
        const id = randomUUID();
        const def: IndexDefinition = { ...parsed.def, name: id };
        const now = Date.now();
        const index = await store.create(parsed.name, def, now, taken());
        if (!index) return nameTaken(parsed.name);
        indexes.set(id, index);
        served.add(id);
        deps.added(id, index);
        ctx.logger.info({ index: parsed.name, id }, 'vector: index created');
        return ok(runtimeView({ id, name: parsed.name, definition: def, createdAt: now }, false));
      }),
    rename: (id, body) =>
      serial(async () => {
        const store = deps.runtime();
        if (!store) return notLoaded();
        const e = await changeable(store, id);
        if ('ok' in e) return e;
        const name = checkName((body as { name?: unknown } | null)?.name);
        if (typeof name !== 'string') return name;
        if (!(await store.rename(id, name, taken()))) return nameTaken(name);
        ctx.logger.info({ index: name, from: e.name, id }, 'vector: index renamed');
        return ok(runtimeView({ ...e, name }, false));
      }),
    resetPassword: (id) =>
      serial(async () => {
        const store = deps.runtime();
        if (!store) return notLoaded();
        const c = configured(id);
        const e = c ? undefined : (await store.list()).find((x) => x.id === id);
        if (!c && !e) return notFound(id);
        for (const [n, v] of freshTokens(id)) ctx.credentials.set(n, v);
        await ctx.credentials.settled();
        ctx.logger.info({ id }, 'vector: index tokens reset');
        return ok(c ? configuredView(c, true) : runtimeView(e!, true));
      }),
    delete: (id) =>
      serial(async () => {
        const store = deps.runtime();
        if (!store) return notLoaded();
        const e = await changeable(store, id);
        if ('ok' in e) return e;
        const index = indexes.get(id);
        indexes.delete(id);
        served.delete(id);
        await store.delete(id, index);
        ctx.logger.info({ index: e.name, id }, 'vector: index deleted');
        return ok({ id, name: e.name });
      }),
    follow: () =>
      serial(async () => {
        // an index created while SVC_VECTOR_BLOCK_PRIVATE_EMBEDDERS was off is held to it once it is on
        const guarded = (d: IndexDefinition): IndexDefinition =>
          ctx.config.vector.blockPrivateEmbedders && d.embedder.dense && !d.embedder.dense.publicOnly
            ? { ...d, embedder: { ...d.embedder, dense: { ...d.embedder.dense, publicOnly: true } } }
            : d;
        const store = deps.runtime();
        if (!store) return;
        const now = await store.list();
        const ids = new Set(now.map((e) => e.id));
        for (const e of now) {
          if (served.has(e.id)) continue;
          const index = await deps.open(guarded(e.definition));
          indexes.set(e.id, index);
          served.add(e.id);
          deps.added(e.id, index);
          ctx.logger.info({ index: e.name, id: e.id }, 'vector: serving an index another node created');
        }
        for (const id of [...served]) {
          if (ids.has(id)) continue;
          const index = indexes.get(id);
          indexes.delete(id);
          served.delete(id);
          await discard(ctx, id, index);
          ctx.logger.info({ id }, 'vector: dropped an index another node deleted');
        }
      }),
  };
}

/**
 * Fault injection for the crash tests (`test/mgmt/vector-indexes.test.ts`): when the environment
 * variable `VECTOR_TEST_CRASH_POINT` names `point`, the process kills itself with SIGKILL there.
 * Unset (always, outside those tests): nothing happens. Deliberately not an `SVC_*` setting.
 */
const CRASH_AT = process.env.VECTOR_TEST_CRASH_POINT;
function crashPoint(point: 'vector-index-files-created' | 'vector-index-delete-marked'): void {
  if (CRASH_AT === point) process.kill(process.pid, 'SIGKILL');
}
