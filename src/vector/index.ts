/**
 * The vector area (area C): every index of `definitions.ts` served under the vector
 * port — the default index at `/`, each other index at `/<name>` — speaking the `@upstash/vector`
 * wire protocol. Tokens: `vector.<index>.token` and
 * `vector.<index>.readonlyToken` from the credential store, read at request time.
 */
import type { AreaContext, AreaModule, AreaServer } from '../area.js';
import { sqliteUserVersion, type StoredSchema } from '../backup.js';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { constants, PerformanceObserver } from 'node:perf_hooks';
import { listenRaw } from '../http/raw.js';
import { startingGate } from '../http/starting.js';
import { FAST_KEEP_ALIVE_MS, clientErrorStatus, createFastServer } from '../http/fast.js';
import { errorBody, VECTOR_ERRORS, vectorMessage } from './errors.js';
import { vectorFastHandler } from './http/fast-front.js';
import { loadIndexDefinitions, type IndexDefinition } from './definitions.js';
import { VectorIndex } from './engine/vector-index.js';
import { mallocTrim } from './engine/hnswlib.js';
import { VECTOR_SCHEMA_VERSION } from './engine/store.js';
import { VectorMetrics } from './metrics.js';
import { ResumableQueries } from './http/resumable.js';
import { vectorRequestListener } from './http/routes.js';
import { PgSessions, PgVectorStore, POLL_MS, readListing } from './engine/store-pg.js';
import { startCredentialSync } from '../credential-sync.js';
import { localRuntimeStore, pgRuntimeStore, recoverUnfinished, vectorIndexAdmin, type RuntimeStore } from './admin.js';
import { Catalogue, CATALOGUE_FILE } from './catalogue.js';

/** Request body limit: 1,000 vectors × 3,072 dims of JSON plus metadata fit. */
export const VECTOR_BODY_LIMIT = 128 * 1024 * 1024;
/** Background snapshot: every minute, namespaces with at least this many unsnapshotted writes. */
export const SNAPSHOT_INTERVAL_MS = 60_000;
export const SNAPSHOT_MIN_WRITES = 1000;
/**
 * Once the indexes' writes have stopped (no new write, nothing queued for a graph) for this long
 * (ms), glibc's `malloc_trim` hands the memory it kept free after the burst back to the kernel: a
 * bulk upload frees tens of MB (parsed bodies, copies of vectors, the upload parse worker's and
 * the insertion threads' allocations) that glibc's arenas otherwise keep for good (measured in
 * `docs/readme/vector.md`, "Memory"). Buffers of the burst that V8 still holds are freed by its
 * next major GC: `malloc_trim` runs once more after it. Checked every {@link TRIM_CHECK_MS}.
 */
export const MEMORY_TRIM_QUIET_MS = 2000;
export const TRIM_CHECK_MS = 500;

/** Credential names of an index. */
export const tokenName = (index: string) => `vector.${index}.token`;
export const readonlyTokenName = (index: string) => `vector.${index}.readonlyToken`;

/** Base URL of an index given the area URL. */
export function indexUrl(areaUrl: string, index: string): string {
  return index === 'default' ? areaUrl : `${areaUrl}/${index}`;
}

function envKey(name: string): string {
  return name.toUpperCase().replace(/[^A-Z0-9]/g, '_');
}

/** A running vector area plus its indexes (tests reach the engines, e.g. to force a snapshot). */
export interface VectorServer extends AreaServer {
  indexes: Map<string, VectorIndex>;
}

/**
 * Creates the vector area without touching stored state: its HTTP front behind a
 * {@link startingGate} (503 + `Retry-After` until loaded). `start` (called once every area's port
 * is bound, `src/main.ts`) opens each index (snapshot + write-log replay) and then opens the gate.
 * `start` @throws Error when an index cannot be opened (e.g. its stored dimension differs).
 */
async function create(ctx: AreaContext): Promise<VectorServer> {
  const defs = loadIndexDefinitions(ctx.config);
  for (const d of defs) {
    ctx.credentials.get(tokenName(d.name));
    ctx.credentials.get(readonlyTokenName(d.name));
  }
  const indexes = new Map<string, VectorIndex>();
  const resumable = new ResumableQueries();
  const metrics = new VectorMetrics(ctx.metrics, defs.map((d) => d.name), indexes);
  const { maxTopK, maxRangeLimit, maxBatchQueries, maxBatchResults, maxFetchIds } = ctx.config.vector;
  const limits = { maxTopK, maxRangeLimit, maxBatchQueries, maxBatchResults, maxFetchIds };
  const deps = { indexes, credentials: ctx.credentials, resumable, logger: ctx.logger, bodyLimit: VECTOR_BODY_LIMIT, metrics, limits };
  // The fast HTTP/1.1 front (http/fast-front.ts on src/http/fast.ts) serves plain keep-alive requests; the raw
  // node:http server (http/routes.ts, not listening itself) serves what it hands over. Keep-alive,
  // inactivity and the head/request deadlines of both are set by createFastServer (config.http).
  const nodeServer = http.createServer({ noDelay: true }, vectorRequestListener(deps));
  nodeServer.on('clientError', (err: NodeJS.ErrnoException, socket) => {
    if (socket.writable && !socket.destroyed) {
      const [status, text] = clientErrorStatus(err);
      const body = `{"error":"${status === 408 ? 'Request timeout' : 'Bad HTTP request'}","status":${status}}`;
      socket.end(`HTTP/1.1 ${status} ${text}\r\ncontent-type: application/json; charset=utf-8\r\ncontent-length: ${body.length}\r\nconnection: close\r\n\r\n${body}`);
    }
    socket.destroy();
  });
  const server = createFastServer(vectorFastHandler(deps), nodeServer, {
    keepAliveMs: FAST_KEEP_ALIVE_MS,
    bodyLimit: VECTOR_BODY_LIMIT,
    ...ctx.config.http,
    busyBody: errorBody(VECTOR_ERRORS.tooManyConnections.status, vectorMessage('tooManyConnections')),
  });
  // the port's socket: every request is answered 503 until start() has loaded the indexes
  const gate = startingGate('{"error":"svc is starting: the vector indexes are not loaded yet, retry shortly","status":503}');
  let timer: NodeJS.Timeout | undefined;
  let stopTrimmer: (() => void) | undefined;
  let loaded = false;
  let starting: Promise<void> | undefined;
  let shared: SharedWiring | undefined;
  let catalogue: Catalogue | undefined;
  let runtime: RuntimeStore | undefined;
  const open = (def: IndexDefinition) => VectorIndex.open(def, ctx.config.dataDir, ctx.logger, shared?.db.index(def.name));
  const admin = vectorIndexAdmin({
    ctx,
    indexes,
    // on PostgreSQL, openShared adds the indexes other nodes defined
    configured: defs,
    runtime: () => runtime,
    open,
    added: (name, index) => {
      index.snapshotTimer = metrics.snapshot(name);
    },
  });
  ctx.vectorIndexes = admin;
  const load = async () => {
    try {
      let created: { id: string; name: string }[];
      if (ctx.config.vector.databaseUrl) {
        shared = await openShared(ctx, defs, indexes, () => admin.follow());
        resumable.shared = { sessions: new PgSessions(shared.db) };
        runtime = pgRuntimeStore(ctx, shared.db, open);
        created = await runtime.list();
        // listed by the banner (startSvc asks for it after start)
        listings.set(ctx, { indexes: await shared.db.runtimeIndexes(), tokens: await shared.db.storedTokens() });
      } else {
        // the indexes created through the management API (admin.ts): interrupted creates and
        // deletes are undone before anything is opened
        catalogue = Catalogue.open(ctx.config.dataDir);
        recoverUnfinished(ctx, catalogue);
        runtime = localRuntimeStore(ctx, catalogue, open);
        created = catalogue.list();
        for (const d of defs) indexes.set(d.name, await VectorIndex.open(d, ctx.config.dataDir, ctx.logger));
      }
      const clash = created.filter((e) => defs.some((d) => d.name === e.name));
      if (clash.length) {
        throw new Error(
          `SVC_VECTOR_INDEXES: ${clash.map((e) => `index ${e.name} is also the name of an index created through the management API (id ${e.id})`).join('; ')}: rename one of them`,
        );
      }
      // the created indexes (on PostgreSQL: the ones any node created)
      await admin.follow();
    } catch (err) {
      for (const i of indexes.values()) await i.close();
      indexes.clear();
      await shared?.close();
      catalogue?.close();
      throw err;
    }
    for (const [name, index] of indexes) index.snapshotTimer = metrics.snapshot(name);
    timer = setInterval(() => {
      for (const i of indexes.values()) i.maintain(SNAPSHOT_MIN_WRITES);
    }, SNAPSHOT_INTERVAL_MS);
    timer.unref();
    stopTrimmer = memoryTrimmer(indexes, ctx);
    gate.open((socket) => {
      server.emit('connection', socket);
      socket.resume();
    });
    loaded = true;
  };
  let closing: Promise<void> | undefined;
  return {
    indexes,
    listen: () => listenRaw(gate.server, ctx.config.host, ctx.config.ports.vector),
    start: () => (starting ??= load()),
    close: () =>
      (closing ??= (async () => {
        await starting?.catch(() => undefined);
        if (timer) clearInterval(timer);
        stopTrimmer?.();
        const accepting = gate.close();
        const closed = new Promise<void>((resolve) => server.close(() => resolve()));
        server.closeAll();
        await accepting;
        if (server.listening) await closed;
        resumable.close();
        shared?.stopFollowing();
        for (const i of indexes.values()) await i.close();
        await shared?.close();
        catalogue?.close();
      })()),
    // The records only: graph snapshots are not copied, the restored index rebuilds its graphs
    // from the records at its first start (docs/operations.md, "Backup and restore").
    async backup(target) {
      if (!loaded) throw new Error('vector: the indexes are not loaded yet');
      if (shared) {
        target.skip('vector', 'vector', 'the vector store is PostgreSQL (SVC_VECTOR_DATABASE_URL): svc does not copy it (the local files are a cache); back it up with pg_dump (e.g. `pg_dump -n <SVC_VECTOR_DATABASE_SCHEMA>`) or base backups with WAL archiving (pg_basebackup)');
        return;
      }
      // the catalogue of the indexes created through the management API, when there are any
      if (catalogue?.list().length) {
        const rel = `vector/${CATALOGUE_FILE}`;
        await catalogue.backup(target.path(rel));
        target.add({
          path: rel,
          area: 'vector',
          store: 'vector-catalogue',
          holds: 'the vector indexes created through the management API: id, name, definition, creation time (SQLite; their records are in vector/<id>.sqlite)',
        });
      }
      for (const [name, index] of indexes) {
        const rel = `vector/${name}.sqlite`;
        const { schemaVersion } = await index.store.backup(target.path(rel));
        target.add({
          path: rel,
          area: 'vector',
          store: 'vector',
          holds: `vector index ${JSON.stringify(name)}: every namespace's records (id, dense and sparse vectors, metadata, data) and its dimension (SQLite, online backup API); the HNSW graph is rebuilt from them at start-up`,
          schemaVersion,
        });
      }
    },
    // every index was loaded by start(); ready while listening and each SQLite file answers (and,
    // on PostgreSQL, the database answers and this node has caught up with it)
    ready: () => loaded && gate.server.listening && [...indexes.values()].every((i) => i.ready()) && (shared?.ready() ?? true),
  };
}

/**
 * Readiness on PostgreSQL: the database answered within this many ms (the poll runs every
 * {@link POLL_MS}), and no index has stayed behind the sequence number the poll saw for longer
 * than {@link LAG_GRACE_MS}.
 */
export const CONTACT_MS = 3 * POLL_MS;
export const LAG_GRACE_MS = 2000;
/** Pruning of old changes (`store-pg.ts` `prune`) runs this often (ms). */
export const PRUNE_MS = 60_000;

/** The PostgreSQL store of a running area and what follows it. */
interface SharedWiring {
  db: PgVectorStore;
  ready(): boolean;
  stopFollowing(): void;
  close(): Promise<void>;
}

/**
 * Opens the PostgreSQL store (`SVC_VECTOR_DATABASE_URL`): registers this node's definitions
 * (every index of the database is served, `defs` gets the ones other nodes created), shares the
 * indexes' tokens (`src/credential-sync.ts`), opens every index as a cache of the database
 * (`VectorIndex.open` with its log) and follows the changes of the other nodes: `LISTEN` (each
 * notification catches the index up) and a poll every {@link POLL_MS} (fallback and heartbeat).
 * @throws PgStartupError (unreachable, wrong password, newer schema, conflicting definitions).
 */
async function openShared(ctx: AreaContext, defs: IndexDefinition[], indexes: Map<string, VectorIndex>, followCreated: () => Promise<void>): Promise<SharedWiring> {
  const db = await PgVectorStore.open(ctx.config.vector.databaseUrl!, ctx.config.vector.databaseSchema, ctx.logger);
  let sync: { stop(): void } | undefined;
  try {
    const all = await db.registerIndexes(defs);
    // the indexes created through the management API are opened by the admin (admin.ts follow)
    const created = new Set((await db.runtimeIndexes()).map((e) => e.id));
    for (const d of all) if (!created.has(d.name) && !defs.some((x) => x.name === d.name)) defs.push(d);
    const names = defs.flatMap((d) => [tokenName(d.name), readonlyTokenName(d.name)]);
    for (const n of names) ctx.credentials.get(n);
    // tokens of created indexes: taken from the database as they come (never generated here)
    const isIndexToken = (n: string) => /^vector\.[^.]+\.(token|readonlyToken)$/.test(n);
    sync = await startCredentialSync(names, ctx.credentials, db.sharedCredentials(), ctx.logger, Date.now, 'vector', isIndexToken);
    for (const d of defs) indexes.set(d.name, await VectorIndex.open(d, ctx.config.dataDir, ctx.logger, db.index(d.name)));
  } catch (err) {
    sync?.stop();
    await db.close();
    throw err;
  }
  const behindSince = new Map<string, number>();
  const running = new Map<VectorIndex, Promise<void>>();
  const again = new Set<VectorIndex>();
  /** Catches `idx` up (one catch-up per index at a time; a request meanwhile runs once more after it). */
  const follow = (idx: VectorIndex): Promise<void> => {
    const busy = running.get(idx);
    if (busy) {
      again.add(idx);
      return busy;
    }
    const p = (async () => {
      do {
        again.delete(idx);
        const t0 = Date.now();
        const from = idx.seq;
        const applied = await idx.catchUp();
        ctx.logger.trace({ index: idx.def.name, from, applied, seq: idx.seq, ms: Date.now() - t0 }, 'vector catch-up done');
      } while (again.has(idx));
    })()
      .catch((err: unknown) => db.warn(err, `catching up index ${idx.def.name} failed (retried)`))
      .finally(() => running.delete(idx));
    running.set(idx, p);
    return p;
  };
  const created = () => void followCreated().catch((err: unknown) => db.warn(err, 'following the created indexes failed (retried)'));
  const unsubscribe = db.onChange((name, seq) => {
    ctx.logger.trace({ index: name, seq }, 'vector change notified');
    if (name && !indexes.has(name)) created(); // an index another node created (or deleted)
    for (const idx of name ? [indexes.get(name)] : indexes.values()) if (idx && idx.seq < seq) void follow(idx);
  });
  let polling = false;
  let lastPrune = Date.now();
  const poll = async () => {
    if (polling) return;
    polling = true;
    try {
      await followCreated();
      const seqs = await db.sequences();
      await Promise.all(
        [...indexes].map(async ([name, idx]) => {
          const remote = seqs.get(name) ?? 0;
          if (idx.seq >= remote) return void behindSince.delete(name);
          if (!behindSince.has(name)) behindSince.set(name, Date.now());
          await follow(idx);
          if (idx.seq >= remote) behindSince.delete(name);
        }),
      );
      if (Date.now() - lastPrune >= PRUNE_MS) {
        lastPrune = Date.now();
        await db.prune();
      }
    } catch (err) {
      db.warn(err, 'polling the index sequence numbers failed (retried)');
    } finally {
      polling = false;
    }
  };
  const timer = setInterval(() => void poll(), POLL_MS);
  timer.unref();
  // a copy of each changed index's cache for joining nodes (one node at a time, store-pg.ts publish)
  let publishing: Promise<void> | undefined;
  const publish = async () => {
    for (const idx of [...indexes.values()]) {
      if (!idx.ready()) continue;
      try {
        const t0 = Date.now();
        const done = await idx.publish(ctx.config.vector.publishMs);
        if (done) ctx.logger.info({ index: idx.def.name, ...done, ms: Date.now() - t0 }, 'vector index snapshot published to PostgreSQL');
      } catch (err) {
        db.warn(err, `publishing the snapshot of index ${idx.def.name} failed (retried)`);
      }
    }
  };
  const publisher = ctx.config.vector.publishMs > 0 ? setInterval(() => void (publishing ??= publish().finally(() => (publishing = undefined))), ctx.config.vector.publishMs) : undefined;
  publisher?.unref();
  try {
    // what was committed while the indexes loaded
    await Promise.all([...indexes.values()].map((idx) => idx.catchUp()));
  } catch (err) {
    clearInterval(timer);
    clearInterval(publisher);
    unsubscribe();
    sync?.stop();
    await db.close();
    throw err;
  }
  return {
    db,
    ready: () => Date.now() - db.lastContact < CONTACT_MS && [...behindSince.values()].every((t) => Date.now() - t < LAG_GRACE_MS),
    stopFollowing: () => {
      clearInterval(timer);
      clearInterval(publisher);
      unsubscribe();
      sync?.stop();
    },
    close: () => db.close(),
  };
}

/**
 * Calls `malloc_trim` after each burst of writes: {@link MEMORY_TRIM_QUIET_MS} after its end, and
 * again after the next major GC. Returns the function that stops it.
 */
function memoryTrimmer(indexes: Map<string, VectorIndex>, ctx: AreaContext): () => void {
  let lastSeq = -1;
  let quietSince = 0;
  let trimmed = true;
  const trim = (when: string) => {
    const rss = process.memoryUsage.rss();
    void mallocTrim().then((released) => ctx.logger.debug({ when, released, rssBefore: rss, rssAfter: process.memoryUsage.rss() }, 'vector: free memory handed back after writes'));
  };
  // observes GCs only between a quiet-time trim and the next major GC (nothing during writes)
  const gc = new PerformanceObserver((list) => {
    if (!list.getEntries().some((e) => (e as { detail?: { kind?: number } }).detail?.kind === constants.NODE_PERFORMANCE_GC_MAJOR)) return;
    gc.disconnect();
    trim('major GC after writes');
  });
  const timer = setInterval(() => {
    let seq = 0;
    let busy = false;
    for (const i of indexes.values()) {
      seq += i.seq;
      busy ||= i.graphWorkLeft();
    }
    if (seq !== lastSeq || busy) {
      lastSeq = seq;
      quietSince = performance.now();
      trimmed = false;
      gc.disconnect();
    } else if (!trimmed && performance.now() - quietSince >= MEMORY_TRIM_QUIET_MS) {
      trimmed = true;
      trim('writes quiet');
      gc.observe({ entryTypes: ['gc'] });
    }
  }, TRIM_CHECK_MS);
  timer.unref();
  return () => {
    clearInterval(timer);
    gc.disconnect();
  };
}

function definitions(ctx: AreaContext): IndexDefinition[] {
  try {
    return loadIndexDefinitions(ctx.config);
  } catch {
    return loadIndexDefinitions({ ...ctx.config, vector: { ...ctx.config.vector, indexesFile: undefined } });
  }
}

/**
 * Every index for the `.env` block and the banner: `key` (path segment and credential name part),
 * `name` (what the env names are made of) and the definition; the configured ones first, then the
 * ones created through the management API (read from the catalogue without changing it).
 */
function listed(ctx: AreaContext): { key: string; name: string; def: IndexDefinition }[] {
  const created = listings.get(ctx)?.indexes ?? Catalogue.readReady(ctx.config.dataDir);
  return [...definitions(ctx).map((d) => ({ key: d.name, name: d.name, def: d })), ...created.map((e) => ({ key: e.id, name: e.name, def: e.definition }))];
}

/**
 * The indexes created through the management API (and the tokens) that the `.env` block and the
 * banner list when they are not in the data dir (the PostgreSQL store): read by `prepareEnv`
 * (`svc env`), or set by the running area once it has loaded them.
 */
const listings = new WeakMap<AreaContext, { indexes: { id: string; name: string; definition: IndexDefinition }[]; tokens?: Map<string, string> }>();

/** Credential `name` as listed: the database's value read by `prepareEnv`, else the local one (created when missing). */
function listedToken(ctx: AreaContext, name: string): string {
  return listings.get(ctx)?.tokens?.get(name) ?? ctx.credentials.get(name);
}

export const vectorArea: AreaModule = {
  name: 'vector',
  create,
  schemas: () => ({ vector: VECTOR_SCHEMA_VERSION }),
  storedSchemas(config) {
    const dir = path.join(config.dataDir, 'vector');
    const out: StoredSchema[] = [];
    let names: string[] = [];
    try {
      names = fs.readdirSync(dir).filter((n) => n.endsWith('.sqlite')).sort();
    } catch {
      return out;
    }
    for (const n of names) {
      const file = path.join(dir, n);
      const version = sqliteUserVersion(file);
      if (version !== undefined) out.push({ store: 'vector', file, version, supported: VECTOR_SCHEMA_VERSION });
    }
    return out;
  },
  async prepareEnv(ctx) {
    if (!ctx.config.vector.databaseUrl) return [];
    try {
      const { indexes, tokens } = await readListing(ctx.config.vector.databaseUrl, ctx.config.vector.databaseSchema);
      listings.set(ctx, { indexes, tokens });
      return [];
    } catch (err) {
      listings.set(ctx, { indexes: [] });
      return [`vector: the indexes created through the management API are not listed and the tokens are this data dir's: ${(err as Error).message}`];
    }
  },
  env(ctx, url) {
    const token = listedToken(ctx, tokenName('default'));
    const ro = listedToken(ctx, readonlyTokenName('default'));
    const vars: Record<string, string> = {
      UPSTASH_VECTOR_REST_URL: url,
      UPSTASH_VECTOR_REST_TOKEN: token,
      UPSTASH_VECTOR_REST_READONLY_TOKEN: ro,
      SVC_VECTOR_URL: url,
      SVC_VECTOR_TOKEN: token,
      SVC_VECTOR_READONLY_TOKEN: ro,
    };
    for (const { key, name } of listed(ctx)) {
      if (key === 'default') continue;
      const k = envKey(name);
      vars[`SVC_VECTOR_${k}_URL`] = indexUrl(url, key);
      vars[`SVC_VECTOR_${k}_TOKEN`] = listedToken(ctx, tokenName(key));
      vars[`SVC_VECTOR_${k}_READONLY_TOKEN`] = listedToken(ctx, readonlyTokenName(key));
    }
    return vars;
  },
  banner(ctx, url) {
    return listed(ctx).map(
      ({ key, name, def: d }) =>
        `index ${name}: ${indexUrl(url, key)} (${d.type}, ${d.metric}, dimension ${d.dimension ?? 'from first upsert'}) ` +
        `token ${listedToken(ctx, tokenName(key))} read-only ${listedToken(ctx, readonlyTokenName(key))}`,
    );
  },
};
