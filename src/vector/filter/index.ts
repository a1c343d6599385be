/**
 * Metadata filter language (vector-wire.md §B.1). INTERFACE ONLY for now: the vector engine codes
 * against these exports; the parser and compiled evaluator replace the bodies.
 */

/** A syntax error at `position` (0-based character offset in the filter text). HTTP 400. */
export class FilterSyntaxError extends Error {
  constructor(message: string, readonly position: number) {
    super(message);
    this.name = 'FilterSyntaxError';
  }
}

/** A compiled filter. */
export interface CompiledFilter {
  /** True when the record's metadata satisfies the filter (missing metadata = `{}`). */
  matches(metadata: Record<string, unknown> | null | undefined): boolean;
}

/**
 * Parses and compiles a filter expression. An empty/blank string gives a filter that matches all.
 * @throws FilterSyntaxError with the position of the first error.
 */
export function compileFilter(text: string): CompiledFilter {
  if (text.trim() !== '') throw new FilterSyntaxError('filters are not implemented yet', 0);
  return { matches: () => true };
}
