/**
 * Id -> label lookup of a namespace without a JavaScript `Map`: an open-addressing hash table of
 * labels (one `Int32Array`, linear probing) whose keys are read from the namespace's label -> id
 * array (`keyOf`). A `Map<string, number>` costs ~37 bytes per entry on V8's heap (key, value and
 * chain slots, buckets, capacity doubling); this table costs 4 bytes per slot at a load of at
 * most 0.7, about 6–11 bytes per entry (measured: docs/readme/vector.md "Memory"). Each lookup
 * hashes the id (FNV-1a over its UTF-16 code units, O(length)) instead of using V8's cached hash.
 *
 * Invariant the caller keeps (namespace.ts): `keyOf(label) === id` for every entry `(id, label)`
 * from its {@link set} until its {@link delete}. Iteration ({@link keys}, {@link values}) walks
 * labels in ascending order (`keyOf` over `0..span()`), not insertion order.
 */
const EMPTY = -1;
const DELETED = -2;
const MAX_LOAD = 0.7;

/** FNV-1a (32-bit) of the UTF-16 code units of `s`. */
function hashOf(s: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) h = Math.imul(h ^ s.charCodeAt(i), 0x01000193);
  return h >>> 0;
}

export class IdIndex {
  private table = new Int32Array(16).fill(EMPTY);
  private count = 0;
  /** Slots holding {@link DELETED} (probing goes on past them; a rehash drops them). */
  private deleted = 0;

  /** `keyOf(label)`: the id at `label`; `span()`: one more than the highest label that can hold one. */
  constructor(
    private readonly keyOf: (label: number) => string | undefined,
    private readonly span: () => number,
  ) {}

  get size(): number {
    return this.count;
  }

  /** The slot of `id`, or -1. */
  private find(id: string): number {
    const t = this.table;
    const mask = t.length - 1;
    for (let i = hashOf(id) & mask; ; i = (i + 1) & mask) {
      const l = t[i];
      if (l === EMPTY) return -1;
      if (l !== DELETED && this.keyOf(l) === id) return i;
    }
  }

  get(id: string): number | undefined {
    const i = this.find(id);
    return i < 0 ? undefined : this.table[i];
  }

  has(id: string): boolean {
    return this.find(id) >= 0;
  }

  /** Maps `id` to `label` (replacing its label if present); `keyOf(label)` must already be `id`. */
  set(id: string, label: number): this {
    const at = this.find(id);
    if (at >= 0) {
      this.table[at] = label;
      return this;
    }
    if ((this.count + this.deleted + 1) > this.table.length * MAX_LOAD) this.rehash();
    const t = this.table;
    const mask = t.length - 1;
    let i = hashOf(id) & mask;
    while (t[i] !== EMPTY && t[i] !== DELETED) i = (i + 1) & mask;
    if (t[i] === DELETED) this.deleted--;
    t[i] = label;
    this.count++;
    return this;
  }

  /** Removes `id` (call before `keyOf` stops answering it); returns whether it was present. */
  delete(id: string): boolean {
    const i = this.find(id);
    if (i < 0) return false;
    this.table[i] = DELETED;
    this.count--;
    this.deleted++;
    return true;
  }

  clear(): void {
    this.table = new Int32Array(16).fill(EMPTY);
    this.count = 0;
    this.deleted = 0;
  }

  /** Re-inserts every entry into a table sized for the live entries (drops deleted slots). */
  private rehash(): void {
    let size = 16;
    while ((this.count + 1) * 2 > size * MAX_LOAD) size *= 2;
    const old = this.table;
    const t = new Int32Array(size).fill(EMPTY);
    const mask = size - 1;
    for (const l of old) {
      if (l < 0) continue;
      let i = hashOf(this.keyOf(l)!) & mask;
      while (t[i] !== EMPTY) i = (i + 1) & mask;
      t[i] = l;
    }
    this.table = t;
    this.deleted = 0;
  }

  /** Labels of the entries, ascending. */
  *values(): Generator<number> {
    const n = this.span();
    for (let l = 0; l < n; l++) if (this.keyOf(l) !== undefined) yield l;
  }

  /** Ids of the entries, in ascending label order. */
  *keys(): Generator<string> {
    const n = this.span();
    for (let l = 0; l < n; l++) {
      const id = this.keyOf(l);
      if (id !== undefined) yield id;
    }
  }
}
