/**
 * Nesting depth of parsed JSON request data, measured without recursion. `JSON.parse` accepts any
 * depth, but `JSON.stringify`, `String(array)` and every recursive walk overflow the stack on
 * values nested a few thousand levels deep (a 500 instead of a 400); areas refuse such bodies
 * right after parsing with {@link jsonTooDeep}.
 */

/** Deepest nesting of arrays/objects accepted in a JSON request body (`[[1]]` is depth 2). */
export const MAX_JSON_DEPTH = 128;

/**
 * True when `value` (a `JSON.parse` result) nests arrays/objects deeper than `max` levels. Walks
 * with an explicit stack; stops at the first level past `max`.
 */
export function jsonTooDeep(value: unknown, max: number = MAX_JSON_DEPTH): boolean {
  if (value === null || typeof value !== 'object') return false;
  const stack: unknown[] = [value];
  const depths: number[] = [1];
  while (stack.length > 0) {
    const v = stack.pop() as object;
    const d = depths.pop()!;
    if (d > max) return true;
    if (Array.isArray(v)) {
      for (let i = 0; i < v.length; i++) {
        const x = v[i];
        if (x !== null && typeof x === 'object') {
          stack.push(x);
          depths.push(d + 1);
        }
      }
    } else {
      for (const k in v) {
        const x = (v as Record<string, unknown>)[k];
        if (x !== null && typeof x === 'object') {
          stack.push(x);
          depths.push(d + 1);
        }
      }
    }
  }
  return false;
}
