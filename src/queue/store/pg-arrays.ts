/**
 * PostgreSQL array literals (`{"a","b",NULL}`, the text form `array_in` reads) built by the
 * queue's PostgreSQL store for its column-array parameters, instead of node-postgres's generic
 * conversion of a JS array (which runs its value conversion and two regular-expression replaces
 * on every element; the insert of a batch sends 31 such arrays).
 *
 * Element forms (PostgreSQL manual, "Arrays: Array Value Input"): `null`/`undefined` -> `NULL`;
 * a number -> its decimal text, unquoted (the store's numbers are integers below 2^53); a string
 * -> double-quoted, `\` and `"` escaped with a backslash (quoted always, so an empty string, the
 * text `NULL`, braces, commas and blanks stay one element); a Buffer -> the `bytea` hex form
 * `"\\x..."` (the backslash escaped inside the quotes). Any other value throws TypeError: the
 * columns hold only these.
 */

const NEEDS_ESCAPE = /["\\]/;
const ESCAPE = /["\\]/g;

/** The array literal of `values` (element forms in the module doc). @throws TypeError on an unsupported element. */
export function arrayLiteral(values: readonly unknown[]): string {
  let out = '{';
  for (let i = 0; i < values.length; i++) {
    if (i > 0) out += ',';
    out += element(values[i]);
  }
  return out + '}';
}

/** One element of {@link arrayLiteral}. */
function element(v: unknown): string {
  if (v === null || v === undefined) return 'NULL';
  if (typeof v === 'string') return NEEDS_ESCAPE.test(v) ? `"${v.replace(ESCAPE, '\\$&')}"` : `"${v}"`;
  if (typeof v === 'number') return String(v);
  if (Buffer.isBuffer(v)) return `"\\\\x${v.toString('hex')}"`;
  throw new TypeError(`no PostgreSQL array element form for a ${typeof v}`);
}

/**
 * The column arrays of `rows` (each row: one value per column, `width` columns) as array
 * literals, one per column, in column order.
 */
export function columnLiterals(rows: readonly (readonly unknown[])[], width: number): string[] {
  const out = new Array<string>(width);
  for (let k = 0; k < width; k++) {
    let s = '{';
    for (let r = 0; r < rows.length; r++) {
      if (r > 0) s += ',';
      s += element(rows[r][k]);
    }
    out[k] = s + '}';
  }
  return out;
}
