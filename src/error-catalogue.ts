/**
 * The machinery every area's error catalogue (`src/<area>/errors.ts`) is built with. A catalogue
 * is an object of named entries, each an HTTP status and an error text or a builder of it:
 *
 *     const KV_ERRORS = { emptyCommand: { status: 400, message: 'ERR empty command' },
 *                         methodNotAllowed: { status: 405, message: (m: string) => `ERR method ${m} not allowed` } };
 *
 * {@link catalogue} gives the area its `message(code, ...args)` (the text) and `error(code, ...args)`
 * (a {@link CatalogueError} to throw); the arguments are typed by the entry's builder. The entry's
 * name is its code: the area doc's "Errors" table lists every code (`test/errors-docs.test.ts`).
 */

/** One catalogue entry: HTTP status and the error text (or a builder of it). */
export interface CatalogueEntry {
  status: number;
  message: string | ((...args: never[]) => string);
}

/** The arguments of an entry's message builder (none for a fixed text). */
export type MessageArgs<E extends CatalogueEntry> = E['message'] extends (...args: infer A) => string ? A : [];

/** A catalogued failure: its `code` (the entry's name), HTTP `status` and text. */
export class CatalogueError<C extends string = string> extends Error {
  constructor(
    readonly code: C,
    readonly status: number,
    message: string,
  ) {
    super(message);
    this.name = new.target.name;
  }
}

/** The text and error builders of one catalogue. */
export interface Catalogue<T extends Record<string, CatalogueEntry>, E> {
  /** The text of entry `code`. */
  message<C extends keyof T & string>(code: C, ...args: MessageArgs<T[C]>): string;
  /** Entry `code` as an error to throw. */
  error<C extends keyof T & string>(code: C, ...args: MessageArgs<T[C]>): E;
}

/** The builders of catalogue `entries`; `make` constructs the area's error class. */
export function catalogue<T extends Record<string, CatalogueEntry>, E>(
  entries: T,
  make: (code: keyof T & string, status: number, message: string) => E,
): Catalogue<T, E> {
  const message = <C extends keyof T & string>(code: C, ...args: MessageArgs<T[C]>): string => {
    const m: CatalogueEntry['message'] = entries[code].message;
    return typeof m === 'string' ? m : (m as (...a: MessageArgs<T[C]>) => string)(...args);
  };
  return {
    message,
    error: (code, ...args) => make(code, entries[code].status, message(code, ...args)),
  };
}
