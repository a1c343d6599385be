/**
 * Data embedders:
 * - {@link HttpDenseEmbedder}: an OpenAI-compatible `POST /v1/embeddings` endpoint (OpenAI, Ollama,
 *   vLLM, TEI): request `{model, input: string[]}`, response `{data: [{index, embedding}]}`.
 * - {@link Bm25Embedder}: built-in BM25 sparse embedder: lower-cased word
 *   tokens, English stop words removed, light suffix stemming, token -> dimension by FNV-1a (31
 *   bits); documents carry the TF part `f·(k1+1)/(f + k1·(1 − b + b·|D|/avgdl))` with k1 = 1.2,
 *   b = 0.75, avgdl = 32 (fixed, as Upstash); queries carry 1 per distinct token and get IDF at
 *   query time.
 */
import dns from 'node:dns';
import { Agent, fetch } from 'undici';
import { blockedHost, publicOnlyLookup } from '../../private-address.js';
import { vectorError } from '../errors.js';
import type { DenseEmbedderConfig } from '../definitions.js';
import type { SparseVector } from './store.js';

/** Embedding call timeout in ms. */
export const EMBED_TIMEOUT_MS = 30_000;

/** Connections of embedders that may reach only public addresses (every DNS answer checked at connect). */
let publicOnlyAgent: Agent | undefined;

export class HttpDenseEmbedder {
  constructor(readonly config: DenseEmbedderConfig) {}

  /**
   * Embeds `texts` in one request. A redirect is not followed (it answers `embeddingStatus` with
   * the 3xx status): the embedder URL is the endpoint itself. With `config.publicOnly` a loopback
   * or private address (literal, or any DNS answer at connect time) is refused.
   * @throws VectorError 422 when the endpoint fails, is refused, or answers badly.
   */
  async embed(texts: string[]): Promise<number[][]> {
    let res: Awaited<ReturnType<typeof fetch>>;
    if (this.config.publicOnly) {
      const why = blockedHost(new URL(this.config.url).hostname);
      if (why) throw vectorError('embeddingRequestFailed', `embedder address refused: ${why}`);
      publicOnlyAgent ??= new Agent({ connect: { lookup: publicOnlyLookup(dns.lookup) } });
    }
    try {
      res = await fetch(this.config.url, {
        redirect: 'manual',
        ...(this.config.publicOnly ? { dispatcher: publicOnlyAgent } : {}),
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          ...(this.config.apiKey ? { authorization: `Bearer ${this.config.apiKey}` } : {}),
        },
        body: JSON.stringify({ model: this.config.model, input: texts }),
        signal: AbortSignal.timeout(EMBED_TIMEOUT_MS),
      });
    } catch (err) {
      const e = err as Error & { cause?: Error };
      throw vectorError('embeddingRequestFailed', e.cause?.message ? `${e.message}: ${e.cause.message}` : e.message);
    }
    const text = await res.text();
    if (!res.ok) throw vectorError('embeddingStatus', res.status, text.slice(0, 200));
    let body: unknown;
    try {
      body = JSON.parse(text);
    } catch {
      throw vectorError('embeddingInvalidJson');
    }
    const data = (body as { data?: { index?: number; embedding?: unknown }[] })?.data;
    if (!Array.isArray(data) || data.length !== texts.length) throw vectorError('embeddingCount');
    const out: number[][] = new Array(texts.length);
    data.forEach((d, i) => {
      const e = d?.embedding;
      if (!Array.isArray(e) || e.some((x) => typeof x !== 'number')) throw vectorError('embeddingNotNumeric');
      out[typeof d.index === 'number' ? d.index : i] = e as number[];
    });
    return out;
  }
}

const STOP = new Set(
  'a an and are as at be but by for if in into is it no not of on or such that the their then there these they this to was will with i me my we our you your he she him her his its them what which who whom am were been being have has had do does did so than too very can just should now'.split(' '),
);

function stem(w: string): string {
  if (w.length > 5 && w.endsWith('ing')) return w.slice(0, -3);
  if (w.length > 4 && w.endsWith('ed')) return w.slice(0, -2);
  if (w.length > 4 && w.endsWith('ies')) return w.slice(0, -3) + 'y';
  if (w.length > 3 && w.endsWith('s') && !w.endsWith('ss')) return w.slice(0, -1);
  return w;
}

/** Tokens of `text` after lower-casing, stop-word removal and stemming. */
export function tokenize(text: string): string[] {
  return text
    .toLowerCase()
    .split(/[^\p{L}\p{N}]+/u)
    .filter((t) => t && !STOP.has(t))
    .map(stem);
}

/** FNV-1a 32-bit hash of a token, masked to 31 bits (a non-negative int32 dimension). */
export function tokenDimension(token: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < token.length; i++) {
    h ^= token.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return (h >>> 0) & 0x7fffffff;
}

export class Bm25Embedder {
  static readonly K1 = 1.2;
  static readonly B = 0.75;
  static readonly AVG_DOC_LEN = 32;

  private counts(text: string): { tf: Map<number, number>; len: number } {
    const toks = tokenize(text);
    const tf = new Map<number, number>();
    for (const t of toks) {
      const d = tokenDimension(t);
      tf.set(d, (tf.get(d) ?? 0) + 1);
    }
    return { tf, len: toks.length };
  }

  private toSparse(m: Map<number, number>): SparseVector {
    const entries = [...m].sort((a, b) => a[0] - b[0]).slice(0, 1000);
    return { indices: Int32Array.from(entries.map((e) => e[0])), values: Float32Array.from(entries.map((e) => e[1])) };
  }

  /** Document vector: BM25 TF part per token. */
  document(text: string): SparseVector {
    const { tf, len } = this.counts(text);
    const { K1, B, AVG_DOC_LEN } = Bm25Embedder;
    const out = new Map<number, number>();
    for (const [d, f] of tf) out.set(d, (f * (K1 + 1)) / (f + K1 * (1 - B + (B * len) / AVG_DOC_LEN)));
    return this.toSparse(out);
  }

  /** Query vector: 1 per distinct token. */
  query(text: string): SparseVector {
    const { tf } = this.counts(text);
    for (const d of tf.keys()) tf.set(d, 1);
    return this.toSparse(tf);
  }
}
