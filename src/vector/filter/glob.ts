/**
 * GLOB matching for the filter language ("case-sensitive UNIX glob `*`, `?`,
 * `[abc]`, `[a-z]`, `[^abc]`, `[^a-z]`"). The whole value must match the pattern.
 *
 *   *        any sequence of characters, including none and including '/'
 *   ?        exactly one character (one Unicode code point)
 *   [set]    one character in the set: single characters and ranges `a-z` (by code point); a ']'
 *            right after '[' or '[^' is a member; '-' first or last is a member; a reversed range
 *            such as `z-a` is empty
 *   [^set]   one character NOT in the set (only '^' negates, as in SQLite; '!' is an ordinary member)
 *   \c       the character c itself (outside and inside sets), so `\*`, `\?`, `\[` are literals;
 *            a trailing lone '\' is a literal backslash
 *   a '[' with no closing ']' is a literal '[' (POSIX fnmatch rule)
 *
 * Compiled once per filter into a token array matched by a bit-parallel automaton ({@link GlobNfa}):
 * O(|value|·⌈|pattern|/32⌉) word operations worst case, so no pattern can blow up (unlike a
 * backtracking RegExp translation). Patterns without '?' or sets get faster specialisations:
 * exact, prefix*, *suffix, *infix*, prefix*suffix.
 */

type GlobToken =
  | { readonly t: 'lit'; readonly cp: number }
  | { readonly t: 'any' }
  | { readonly t: 'star' }
  | { readonly t: 'set'; readonly negated: boolean; readonly singles: ReadonlySet<number>; readonly ranges: readonly number[] };

/** Parses a pattern into tokens (consecutive stars collapse to one). */
export function parseGlob(pattern: string): GlobToken[] {
  const cps = Array.from(pattern, (ch) => ch.codePointAt(0)!);
  const out: GlobToken[] = [];
  const BS = 0x5c;
  /** Member positions from which a set's scan is known to reach the end unclosed (see {@link parseSet}). */
  let dead: Uint8Array | undefined;
  let i = 0;
  while (i < cps.length) {
    const c = cps[i];
    if (c === 0x2a /* * */) {
      if (out.length === 0 || out[out.length - 1].t !== 'star') out.push({ t: 'star' });
      i++;
    } else if (c === 0x3f /* ? */) {
      out.push({ t: 'any' });
      i++;
    } else if (c === BS) {
      out.push({ t: 'lit', cp: i + 1 < cps.length ? cps[i + 1] : BS });
      i += 2;
    } else if (c === 0x5b /* [ */) {
      const set = parseSet(cps, i, (dead ??= new Uint8Array(cps.length)));
      if (set === null) {
        out.push({ t: 'lit', cp: c });
        i++;
      } else {
        out.push(set.token);
        i = set.next;
      }
    } else {
      out.push({ t: 'lit', cp: c });
      i++;
    }
  }
  return out;
}

/**
 * Parses `[...]` starting at `open`; null when there is no closing ']'.
 *
 * After its first member, where the scan goes depends only on the position it is at, so a position
 * once scanned by a set that found no ']' leads every later scan through it to the end as well:
 * such positions are marked in `dead` and a later scan that reaches one stops there. Without this,
 * a pattern of n unclosed `[a-z` took n scans to the end (quadratic: a 64 KiB filter of them held
 * the event loop for seconds); with it every position is scanned at most once as a member of an
 * unclosed set.
 */
function parseSet(cps: number[], open: number, dead: Uint8Array): { token: GlobToken; next: number } | null {
  let i = open + 1;
  let negated = false;
  if (cps[i] === 0x5e /* ^ */) {
    negated = true;
    i++;
  }
  const singles = new Set<number>();
  const ranges: number[] = [];
  const visited: number[] = [];
  let first = true;
  while (i < cps.length) {
    let c = cps[i];
    if (!first) {
      if (c === 0x5d /* ] */) return { token: { t: 'set', negated, singles, ranges }, next: i + 1 };
      if (dead[i] === 1) break;
      visited.push(i);
    }
    first = false;
    if (c === 0x5c && i + 1 < cps.length) c = cps[++i];
    i++;
    // range "c-d" unless '-' is the last member before ']'
    if (cps[i] === 0x2d /* - */ && i + 1 < cps.length && cps[i + 1] !== 0x5d) {
      let d = cps[i + 1];
      i += 2;
      if (d === 0x5c && i < cps.length) d = cps[i++];
      if (c <= d) ranges.push(c, d);
    } else {
      singles.add(c);
    }
  }
  for (const v of visited) dead[v] = 1;
  return null;
}

function inSet(tok: Extract<GlobToken, { t: 'set' }>, cp: number): boolean {
  let hit = tok.singles.has(cp);
  for (let r = 0; !hit && r < tok.ranges.length; r += 2) hit = cp >= tok.ranges[r] && cp <= tok.ranges[r + 1];
  return hit !== tok.negated;
}

/** Width in UTF-16 units of the code point at `i`. */
function width(s: string, i: number): number {
  const c = s.charCodeAt(i);
  if (c >= 0xd800 && c <= 0xdbff && i + 1 < s.length) {
    const d = s.charCodeAt(i + 1);
    if (d >= 0xdc00 && d <= 0xdfff) return 2;
  }
  return 1;
}

/** Most code points whose transition masks a {@link GlobNfa} keeps, times its words (4 MiB of masks). */
const MASK_CACHE_WORDS = 1 << 20;

/**
 * The generic matcher: the pattern as a nondeterministic automaton whose states (k = the first k
 * non-star tokens matched) are the bits of a bitset, all advanced at once per code point of the
 * value (bit-parallel simulation): state k goes to k + 1 when token k matches the code point, and
 * stays when a star stands before token k. The work is O(|value| · ⌈tokens / 32⌉) word
 * operations whatever the pattern: the two-pointer matcher this replaced re-ran the tokens after
 * the last star from every position, O(|value| · |pattern|), so `*` followed by 16,000 `?` against
 * one 60 kB value held the event loop for seconds. Which tokens match a code point is computed
 * once per distinct code point (kept for up to {@link MASK_CACHE_WORDS} words).
 */
class GlobNfa {
  private readonly steps: Exclude<GlobToken, { t: 'star' }>[] = [];
  private readonly words: number;
  /** Bit k: state k loops (a star before token k; bit m: a trailing star). */
  private readonly loop: Uint32Array;
  private readonly masks = new Map<number, Uint32Array>();
  /** Patterns of at most 31 tokens (one word, the common case): the masks as numbers. */
  private readonly masks1 = new Map<number, number>();
  private readonly maxMasks: number;
  private readonly acceptWord: number;
  private readonly acceptBit: number;
  /** The state bitsets of {@link matches} (reused: a match runs to its end synchronously). */
  private cur: Uint32Array;
  private next: Uint32Array;

  constructor(toks: readonly GlobToken[]) {
    const loops: number[] = [];
    for (const t of toks) {
      if (t.t === 'star') loops.push(this.steps.length);
      else this.steps.push(t);
    }
    const m = this.steps.length;
    this.words = (m >>> 5) + 1;
    this.loop = new Uint32Array(this.words);
    for (const k of loops) this.loop[k >>> 5] |= 1 << (k & 31);
    this.acceptWord = m >>> 5;
    this.acceptBit = 1 << (m & 31);
    this.maxMasks = Math.max(64, Math.floor(MASK_CACHE_WORDS / this.words));
    this.cur = new Uint32Array(this.words);
    this.next = new Uint32Array(this.words);
  }

  /** {@link mask} of a one-word pattern, as a number. */
  private mask1(cp: number): number {
    let mk = this.masks1.get(cp);
    if (mk !== undefined) return mk;
    mk = this.mask(cp)[0];
    this.masks.delete(cp);
    if (this.masks1.size >= this.maxMasks) this.masks1.clear();
    this.masks1.set(cp, mk);
    return mk;
  }

  /** Bit k set when token k matches `cp`. */
  private mask(cp: number): Uint32Array {
    let mk = this.masks.get(cp);
    if (mk !== undefined) return mk;
    mk = new Uint32Array(this.words);
    const steps = this.steps;
    for (let k = 0; k < steps.length; k++) {
      const t = steps[k];
      if (t.t === 'any' || (t.t === 'lit' ? t.cp === cp : inSet(t, cp))) mk[k >>> 5] |= 1 << (k & 31);
    }
    if (this.masks.size >= this.maxMasks) this.masks.clear();
    this.masks.set(cp, mk);
    return mk;
  }

  /** True when the whole of `s` matches. */
  matches(s: string): boolean {
    // every token but a star takes one code point: at least one UTF-16 unit
    if (s.length < this.steps.length) return false;
    const words = this.words;
    const loop = this.loop;
    if (words === 1) {
      const loop1 = loop[0];
      let st = 1;
      for (let i = 0; i < s.length; ) {
        const w = width(s, i);
        const adv = st & this.mask1(w === 2 ? s.codePointAt(i)! : s.charCodeAt(i));
        i += w;
        st = (adv << 1) | (st & loop1);
        if (st === 0) return false;
      }
      return (st & this.acceptBit) !== 0;
    }
    let cur = this.cur;
    let next = this.next;
    cur.fill(0);
    cur[0] = 1;
    for (let i = 0; i < s.length; ) {
      const w = width(s, i);
      const mk = this.mask(w === 2 ? s.codePointAt(i)! : s.charCodeAt(i));
      i += w;
      let carry = 0;
      let alive = 0;
      for (let j = 0; j < words; j++) {
        const c = cur[j];
        const adv = c & mk[j];
        const nx = (adv << 1) | carry | (c & loop[j]);
        carry = adv >>> 31;
        next[j] = nx;
        alive |= nx;
      }
      if (alive === 0) return false;
      const t = cur;
      cur = next;
      next = t;
    }
    this.cur = cur;
    this.next = next;
    return (cur[this.acceptWord] & this.acceptBit) !== 0;
  }
}

/**
 * Compiles a glob pattern into a predicate over strings, once per filter.
 * @returns `(value) => boolean`, true when the whole value matches
 */
export function compileGlob(pattern: string): (value: string) => boolean {
  const toks = parseGlob(pattern);
  if (toks.every((t) => t.t === 'lit' || t.t === 'star')) {
    // Split into literal runs between stars.
    const parts: string[] = [];
    let cur = '';
    for (const t of toks) {
      if (t.t === 'star') {
        parts.push(cur);
        cur = '';
      } else cur += String.fromCodePoint((t as { cp: number }).cp);
    }
    parts.push(cur);
    if (parts.length === 1) {
      const lit = parts[0];
      return (s) => s === lit;
    }
    if (parts.length === 2) {
      const [pre, suf] = parts;
      const min = pre.length + suf.length;
      if (suf === '') return (s) => s.startsWith(pre);
      if (pre === '') return (s) => s.endsWith(suf);
      return (s) => s.length >= min && s.startsWith(pre) && s.endsWith(suf);
    }
    if (parts.length === 3 && parts[0] === '' && parts[2] === '') {
      const mid = parts[1];
      return (s) => s.includes(mid);
    }
  }
  const nfa = new GlobNfa(toks);
  return (s) => nfa.matches(s);
}
