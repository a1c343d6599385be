/**
 * Syntax tree, error type and limits of the metadata filter language.
 *
 * Every node carries `pos`, the 0-based offset (UTF-16 code units) of its first character in the
 * filter text, so later stages (and tools built on `parseFilter`) can point at the source.
 */

/** A syntax (or limit) error at `position`, a 0-based character offset in the filter text. HTTP 400. */
export class FilterSyntaxError extends Error {
  constructor(
    message: string,
    readonly position: number,
  ) {
    super(message);
    this.name = 'FilterSyntaxError';
  }
}

/**
 * Builds the uniform error message `Invalid filter: <what> at position <n>[ (<hint>)]`.
 * @param what  what was wrong, e.g. `unexpected 'AND'`
 * @param position 0-based offset in the filter text
 * @param hint  what was expected, e.g. `expected a string, number or boolean after '='`
 */
export function syntaxError(what: string, position: number, hint?: string): FilterSyntaxError {
  const message = `Invalid filter: ${what} at position ${position}${hint ? ` (${hint})` : ''}`;
  return new FilterSyntaxError(message, position);
}

/**
 * Limits. Upstash rejects `tags IN ('value0', …, 'value999')` (Mastra integration test, edge
 * table) but does not document the threshold; these are svc's choices and are documented for users
 * in docs/readme/vector-filter.md.
 */
export const FILTER_LIMITS = {
  /** Longest accepted filter text, in UTF-16 code units (64 KiB). */
  maxLength: 65_536,
  /** Most values in one `IN (…)` / `NOT IN (…)` list (the 1000-value Mastra list must fail). */
  maxInValues: 500,
  /** Deepest nesting of parentheses. */
  maxDepth: 100,
  /**
   * Longest GLOB pattern, in UTF-16 code units after unescaping the quotes: matching costs the
   * value's length times ⌈pattern tokens / 32⌉ word operations per record (`glob.ts`): against a
   * 60 kB value, 0.24 CPU-s per record for a 59,000-character pattern, 17 ms at this limit.
   */
  maxGlobLength: 4096,
} as const;

/** A literal on the right-hand side of an operator: string, number (float64) or boolean. */
export type Scalar = string | number | boolean;

/** One step of a field path: an object key, an array index `[i]`, or `[#-k]` counted from the end. */
export type PathSegment =
  | { readonly kind: 'key'; readonly key: string }
  | { readonly kind: 'index'; readonly index: number }
  | { readonly kind: 'fromEnd'; readonly offset: number };

/** A field path such as `a.b[0].c` or `tags[#-1]`, as written (`text`) and as steps (`segments`). */
export interface FieldPath {
  readonly text: string;
  readonly pos: number;
  readonly segments: readonly PathSegment[];
}

/** Comparison operators (`<` `<=` `>` `>=` take numbers only, by the grammar). */
export type CompareOp = '=' | '!=' | '<' | '<=' | '>' | '>=';

/** A node of the filter syntax tree. `and`/`or` are n-ary (flattened chains, at least 2 children). */
export type FilterNode =
  | { readonly kind: 'or'; readonly pos: number; readonly children: readonly FilterNode[] }
  | { readonly kind: 'and'; readonly pos: number; readonly children: readonly FilterNode[] }
  | { readonly kind: 'compare'; readonly pos: number; readonly op: CompareOp; readonly path: FieldPath; readonly value: Scalar }
  | { readonly kind: 'glob'; readonly pos: number; readonly negated: boolean; readonly path: FieldPath; readonly pattern: string }
  | { readonly kind: 'in'; readonly pos: number; readonly negated: boolean; readonly path: FieldPath; readonly values: readonly Scalar[] }
  | { readonly kind: 'contains'; readonly pos: number; readonly negated: boolean; readonly path: FieldPath; readonly value: Scalar }
  | { readonly kind: 'hasField'; readonly pos: number; readonly negated: boolean; readonly path: FieldPath };

/**
 * Prints a node back as canonical filter text (keywords upper-case, single quotes, numbers in JS
 * notation; a group inside an `and`, and an `or` inside an `or`, parenthesised — parentheses are
 * structure in the tree). `parseFilter(printFilter(n))` gives `n` back up to positions and path
 * texts' spelling. Used by tests and for log lines.
 */
export function printFilter(node: FilterNode): string {
  switch (node.kind) {
    case 'or':
      return node.children.map((c) => (c.kind === 'or' ? `(${printFilter(c)})` : printFilter(c))).join(' OR ');
    case 'and':
      return node.children.map((c) => (c.kind === 'or' || c.kind === 'and' ? `(${printFilter(c)})` : printFilter(c))).join(' AND ');
    case 'compare':
      return `${node.path.text} ${node.op} ${printScalar(node.value)}`;
    case 'glob':
      return `${node.path.text} ${node.negated ? 'NOT GLOB' : 'GLOB'} ${printScalar(node.pattern)}`;
    case 'in':
      return `${node.path.text} ${node.negated ? 'NOT IN' : 'IN'} (${node.values.map(printScalar).join(', ')})`;
    case 'contains':
      return `${node.path.text} ${node.negated ? 'NOT CONTAINS' : 'CONTAINS'} ${printScalar(node.value)}`;
    case 'hasField':
      return `HAS ${node.negated ? 'NOT ' : ''}FIELD ${node.path.text}`;
  }
}

/** Prints a literal: strings single-quoted with `\\` and `\'` escaped; numbers in JS notation. */
export function printScalar(value: Scalar): string {
  if (typeof value === 'string') return `'${value.replace(/\\/g, '\\\\').replace(/'/g, "\\'")}'`;
  return String(value);
}
