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
 * Compiled once per filter into a token array matched by the classic two-pointer wildcard
 * algorithm (backtrack only to the last '*'): O(|value|·|pattern|) worst case, so no pattern can
 * blow up (unlike a backtracking RegExp translation). Patterns without '?' or sets get faster
 * specialisations: exact, prefix*, *suffix, *infix*, prefix*suffix.
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
      const set = parseSet(cps, i);
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

/** Parses `[...]` starting at `open`; null when there is no closing ']'. */
function parseSet(cps: number[], open: number): { token: GlobToken; next: number } | null {
  let i = open + 1;
  let negated = false;
  if (cps[i] === 0x5e /* ^ */) {
    negated = true;
    i++;
  }
  const singles = new Set<number>();
  const ranges: number[] = [];
  let first = true;
  while (i < cps.length) {
    let c = cps[i];
    if (c === 0x5d /* ] */ && !first) {
      return { token: { t: 'set', negated, singles, ranges }, next: i + 1 };
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

/** Matches one non-star token at offset `i` of `s`; the units consumed, or 0 on mismatch. */
function step(tok: GlobToken, s: string, i: number): number {
  if (i >= s.length) return 0;
  const w = width(s, i);
  if (tok.t === 'any') return w;
  const cp = w === 2 ? s.codePointAt(i)! : s.charCodeAt(i);
  if (tok.t === 'lit') return cp === tok.cp ? w : 0;
  return inSet(tok as Extract<GlobToken, { t: 'set' }>, cp) ? w : 0;
}

/** Generic matcher: two pointers, backtracking only to the most recent star. */
function matchTokens(toks: readonly GlobToken[], s: string): boolean {
  let p = 0;
  let i = 0;
  let starP = -1;
  let starI = 0;
  while (i < s.length) {
    if (p < toks.length && toks[p].t === 'star') {
      starP = p++;
      starI = i;
      continue;
    }
    const w = p < toks.length ? step(toks[p], s, i) : 0;
    if (w > 0) {
      p++;
      i += w;
    } else if (starP >= 0) {
      p = starP + 1;
      starI += width(s, starI);
      i = starI;
    } else {
      return false;
    }
  }
  while (p < toks.length && toks[p].t === 'star') p++;
  return p === toks.length;
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
  return (s) => matchTokens(toks, s);
}
