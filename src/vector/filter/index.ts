/**
 * Metadata filter language of the vector area (user docs in
 * docs/readme/vector-filter.md). Public surface used by the vector engine:
 *
 *   const f = compileFilter("genre = 'drama' AND year >= 2000");   // throws FilterSyntaxError
 *   f.matches(record.metadata)                                      // → boolean
 *
 * Pipeline: lexer.ts (tokens with offsets) → parser.ts (recursive descent, grammar in its docs,
 * path.ts for field paths) → compile.ts (closures built once per filter; glob.ts for GLOB).
 * Compiled filters are immutable and pure, so they are cached by text (small LRU) and shared
 * across queries.
 */
import { FilterSyntaxError, type FieldPath, type FilterNode } from './ast.js';
import { compileNode, type Predicate } from './compile.js';
import { parseFilter, referencedFields } from './parser.js';

export { FilterSyntaxError, FILTER_LIMITS, printFilter, printScalar } from './ast.js';
export type { CompareOp, FieldPath, FilterNode, PathSegment, Scalar } from './ast.js';
export { parseFilter, referencedFields } from './parser.js';
export { compileGlob } from './glob.js';

/** A compiled filter (the engine's interface; anything with `matches` can stand in for one). */
export interface CompiledFilter {
  /** True when the record's metadata satisfies the filter (missing metadata = `{}`). */
  matches(metadata: Record<string, unknown> | null | undefined): boolean;
}

/** What `compileFilter` actually returns: a `CompiledFilter` plus facts for query planning. */
export interface FilterProgram extends CompiledFilter {
  /** The filter text as given. */
  readonly source: string;
  /** The syntax tree; `null` for a blank filter. */
  readonly ast: FilterNode | null;
  /** Distinct field paths the filter reads (`a.b[0]` as written), in order of appearance. */
  readonly fields: readonly string[];
  /** True when every record matches (blank filter, or a tautology such as `HAS FIELD x OR HAS NOT FIELD x`). */
  readonly matchesAll: boolean;
  /** True when no record can match (e.g. `HAS FIELD x AND HAS NOT FIELD x`). */
  readonly matchesNone: boolean;
}

const EMPTY: Record<string, unknown> = Object.freeze({}) as Record<string, unknown>;
const CACHE_SIZE = 256;
/** Longer filters are compiled but not cached, bounding the cache to ~2 MB of text. */
const CACHE_MAX_TEXT = 4096;
const cache = new Map<string, FilterProgram>();

/** Normalises what the engine stores as metadata: anything but a JSON object reads as `{}`. */
function root(metadata: unknown): Record<string, unknown> {
  return typeof metadata === 'object' && metadata !== null && !Array.isArray(metadata)
    ? (metadata as Record<string, unknown>)
    : EMPTY;
}

function build(text: string): FilterProgram {
  const ast = parseFilter(text);
  const compiled = ast === null ? true : compileNode(ast);
  const fields = referencedFields(ast).map((p: FieldPath) => p.text);
  const base = { source: text, ast, fields, matchesAll: compiled === true, matchesNone: compiled === false };
  if (typeof compiled === 'boolean') {
    return Object.freeze({ ...base, matches: () => compiled });
  }
  const pred: Predicate = compiled;
  return Object.freeze({ ...base, matches: (metadata: Record<string, unknown> | null | undefined) => pred(root(metadata)) });
}

/**
 * Parses and compiles a filter expression. An empty/blank string gives a filter that matches all.
 * Results are cached by exact text (LRU of 256 filters of at most 4096 characters), so repeated
 * queries do not re-parse.
 * @throws FilterSyntaxError with the position (0-based offset) of the first error; the message
 *         reads `Invalid filter: unexpected 'AND' at position 12 (expected …)` and is meant to be
 *         returned as-is in the HTTP 400 body.
 */
export function compileFilter(text: string): FilterProgram {
  if (typeof text !== 'string') throw new FilterSyntaxError('Invalid filter: the filter must be a string at position 0', 0);
  const hit = cache.get(text);
  if (hit) {
    cache.delete(text);
    cache.set(text, hit);
    return hit;
  }
  const f = build(text);
  if (text.length > CACHE_MAX_TEXT) return f;
  cache.set(text, f);
  if (cache.size > CACHE_SIZE) cache.delete(cache.keys().next().value as string);
  return f;
}

/**
 * Estimates the fraction of records a filter matches by evaluating it on a sample (e.g. a few
 * hundred random records of the namespace), for choosing between exact search over matches and
 * filtered ANN traversal.
 * @param sample   metadata objects (or null/undefined for records without metadata)
 * @returns matched / sample size in [0, 1]; for an empty sample, 0 when the filter can never match
 *          and 1 otherwise
 */
export function estimateSelectivity(
  filter: CompiledFilter,
  sample: Iterable<Record<string, unknown> | null | undefined>,
): number {
  const facts = filter as Partial<FilterProgram>;
  if (facts.matchesNone === true) return 0;
  if (facts.matchesAll === true) return 1;
  let seen = 0;
  let hit = 0;
  for (const m of sample) {
    seen++;
    if (filter.matches(m)) hit++;
  }
  return seen === 0 ? 1 : hit / seen;
}

/** Type guard for the engine's error handler (HTTP 400 with `err.message`). */
export function isFilterSyntaxError(err: unknown): err is FilterSyntaxError {
  return err instanceof FilterSyntaxError;
}
