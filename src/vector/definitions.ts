/**
 * Index definitions: the default index from the env (`SVC_VECTOR_DIMENSION`,
 * `SVC_VECTOR_METRIC`, `SVC_VECTOR_TYPE`) and more indexes from the JSON file named by
 * `SVC_VECTOR_INDEXES`.
 *
 * File shape: an array of index objects, or `{"indexes": [...]}`. Each object:
 * `{ "name": "docs", "type": "DENSE"|"SPARSE"|"HYBRID", "dimension"?: 384,
 *    "metric"?: "COSINE"|"EUCLIDEAN"|"DOT_PRODUCT",
 *    "embedder"?: { "dense"?: { "url": "http://host/v1/embeddings", "model": "name", "apiKey"?: "...",
 *                                "name"?: "shown as embeddingModel" },
 *                   "sparse"?: "BM25" },
 *    "hnsw"?: { "m"?: 16, "efConstruction"?: 100, "efSearch"?: 64 },
 *    "quantization"?: "none"|"int8" }`.
 * `quantization: "int8"` keeps only 8-bit scalar-quantized codes of the dense vectors in memory and
 * no HNSW graph (so no `hnsw` settings): every dense query scans the codes and re-ranks the best on
 * the original vectors (`engine/dense.ts` `QuantizedDense`).
 * An entry named `default` overrides the default index's settings (e.g. to give it an embedder).
 * Names: `[A-Za-z0-9_-]{1,64}`, not an endpoint name (the index is served at `/<name>`).
 */
import fs from 'node:fs';
import type { Config } from '../config.js';

export type IndexType = 'DENSE' | 'SPARSE' | 'HYBRID';
export type Metric = 'COSINE' | 'EUCLIDEAN' | 'DOT_PRODUCT';
/**
 * How a namespace keeps its dense vectors in memory: `none` = HNSW graph (float32 vectors and
 * links) plus 8-bit codes for filtered scans; `int8` = the 8-bit codes only (a quarter of float32),
 * searched by a full scan.
 */
export type Quantization = 'none' | 'int8';

export interface DenseEmbedderConfig {
  /** Full URL of an OpenAI-compatible embeddings endpoint, e.g. `http://127.0.0.1:11434/v1/embeddings`. */
  url: string;
  model: string;
  apiKey?: string;
  /** Name reported as `denseIndex.embeddingModel` in `info` (default: `model`). */
  name?: string;
  /**
   * Connect only to public addresses (the host's every DNS answer is checked at connect time):
   * set on indexes created through the management API while `SVC_VECTOR_BLOCK_PRIVATE_EMBEDDERS`
   * is on, and kept with the definition.
   */
  publicOnly?: boolean;
}

export interface IndexDefinition {
  name: string;
  type: IndexType;
  /** Dense dimension; undefined = fixed by the first dense upsert (persisted). */
  dimension?: number;
  metric: Metric;
  embedder: { dense?: DenseEmbedderConfig; sparse?: 'BM25' };
  hnsw: { m: number; efConstruction: number; efSearch: number };
  /** Undefined = `none`. */
  quantization?: Quantization;
}

/** Endpoint names; an index may not be named like one (its URL would be ambiguous). */
export const ENDPOINTS = [
  'upsert', 'upsert-data', 'query', 'query-data', 'fetch', 'delete', 'range', 'update', 'reset', 'info',
  'list-namespaces', 'delete-namespace', 'rename-namespace', 'random', 'resumable-query',
  'resumable-query-data', 'resumable-query-next', 'resumable-query-end',
] as const;

/**
 * HNSW defaults. M 16 / efConstruction 100: ef 64 gives recall@10 0.994 on 100k clustered 128-d
 * but only 0.933 on 20k uniform-random 32-d; ef 100 gives 0.982 there at
 * 0.09 ms/query in-process (measured 2026-11-22, this machine), so ef 100 is the default.
 */
export const DEFAULT_HNSW = { m: 16, efConstruction: 100, efSearch: 100 };

const NAME_RE = /^[A-Za-z0-9_-]{1,64}$/;

/**
 * All index definitions: `default` first, then the file's. Throws Error listing every problem of
 * the file (unreadable, not JSON, bad field), prefixed with the file name.
 */
export function loadIndexDefinitions(config: Config): IndexDefinition[] {
  const def: IndexDefinition = {
    name: 'default',
    type: config.vector.type,
    dimension: config.vector.dimension,
    metric: config.vector.metric,
    embedder: {},
    hnsw: { ...DEFAULT_HNSW },
    quantization: 'none',
  };
  const out: IndexDefinition[] = [def];
  const file = config.vector.indexesFile;
  if (!file) return out;
  let raw: unknown;
  try {
    raw = JSON.parse(fs.readFileSync(file, 'utf8'));
  } catch (err) {
    throw new Error(`SVC_VECTOR_INDEXES=${file}: ${(err as Error).message}`);
  }
  const list = Array.isArray(raw) ? raw : (raw as { indexes?: unknown })?.indexes;
  if (!Array.isArray(list)) throw new Error(`SVC_VECTOR_INDEXES=${file}: expected an array of indexes or {"indexes": [...]}`);
  const problems: string[] = [];
  const seen = new Set<string>();
  list.forEach((item, i) => {
    const where = `indexes[${i}]`;
    const p = parseDefinition(item, where, problems);
    if (!p) return;
    if (seen.has(p.name)) problems.push(`${where}: duplicate name ${p.name}`);
    seen.add(p.name);
    if (p.name === 'default') out[0] = p;
    else out.push(p);
  });
  if (problems.length) throw new Error(`SVC_VECTOR_INDEXES=${file}:\n  - ${problems.join('\n  - ')}`);
  return out;
}

function parseDefinition(item: unknown, where: string, problems: string[]): IndexDefinition | undefined {
  if (!item || typeof item !== 'object' || Array.isArray(item)) {
    problems.push(`${where}: expected an object`);
    return undefined;
  }
  const o = item as Record<string, unknown>;
  const before = problems.length;
  const name = o.name;
  if (typeof name !== 'string' || !NAME_RE.test(name) || (ENDPOINTS as readonly string[]).includes(name)) {
    problems.push(`${where}.name: expected [A-Za-z0-9_-]{1,64}, not an endpoint name`);
  }
  const type = (typeof o.type === 'string' ? o.type.toUpperCase() : 'DENSE') as IndexType;
  if (!['DENSE', 'SPARSE', 'HYBRID'].includes(type)) problems.push(`${where}.type: expected DENSE, SPARSE or HYBRID`);
  const metric = (typeof o.metric === 'string' ? o.metric.toUpperCase() : 'COSINE') as Metric;
  if (!['COSINE', 'EUCLIDEAN', 'DOT_PRODUCT'].includes(metric)) problems.push(`${where}.metric: expected COSINE, EUCLIDEAN or DOT_PRODUCT`);
  let dimension: number | undefined;
  if (o.dimension !== undefined) {
    if (!Number.isInteger(o.dimension) || (o.dimension as number) < 1 || (o.dimension as number) > 65536) {
      problems.push(`${where}.dimension: expected an integer from 1 to 65536`);
    } else dimension = o.dimension as number;
  }
  const embedder: IndexDefinition['embedder'] = {};
  if (o.embedder !== undefined) {
    const e = o.embedder as Record<string, unknown>;
    if (!e || typeof e !== 'object') problems.push(`${where}.embedder: expected an object`);
    else {
      if (e.dense !== undefined) {
        const d = e.dense as Record<string, unknown>;
        if (!d || typeof d.url !== 'string' || !/^https?:\/\//.test(d.url) || typeof d.model !== 'string') {
          problems.push(`${where}.embedder.dense: expected {url: "http(s)://…/v1/embeddings", model: string, apiKey?: string}`);
        } else {
          embedder.dense = {
            url: d.url,
            model: d.model,
            apiKey: typeof d.apiKey === 'string' ? d.apiKey : undefined,
            name: typeof d.name === 'string' ? d.name : undefined,
          };
        }
        if (type === 'SPARSE') problems.push(`${where}.embedder.dense: a SPARSE index has no dense part`);
      }
      if (e.sparse !== undefined) {
        if (e.sparse !== 'BM25') problems.push(`${where}.embedder.sparse: only "BM25" is built in`);
        else embedder.sparse = 'BM25';
        if (type === 'DENSE') problems.push(`${where}.embedder.sparse: a DENSE index has no sparse part`);
      }
    }
  }
  const hnsw = { ...DEFAULT_HNSW };
  if (o.hnsw !== undefined) {
    const h = o.hnsw as Record<string, unknown>;
    for (const k of ['m', 'efConstruction', 'efSearch'] as const) {
      if (h?.[k] === undefined) continue;
      if (!Number.isInteger(h[k]) || (h[k] as number) < 2 || (h[k] as number) > 4096) problems.push(`${where}.hnsw.${k}: expected an integer from 2 to 4096`);
      else hnsw[k] = h[k] as number;
    }
  }
  let quantization: Quantization = 'none';
  if (o.quantization !== undefined) {
    if (o.quantization !== 'none' && o.quantization !== 'int8') problems.push(`${where}.quantization: expected "none" or "int8"`);
    else quantization = o.quantization;
    if (quantization === 'int8' && type === 'SPARSE') problems.push(`${where}.quantization: a SPARSE index has no dense vectors to quantize`);
    if (quantization === 'int8' && o.hnsw !== undefined) problems.push(`${where}.hnsw: an int8 index has no HNSW graph (drop "hnsw" or "quantization")`);
  }
  if (problems.length > before) return undefined;
  return { name: name as string, type, dimension, metric, embedder, hnsw, quantization };
}
