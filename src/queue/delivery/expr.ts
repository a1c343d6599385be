/**
 * A safe evaluator for retry delay expressions (`Upstash-Retry-Delay`):
 * a tiny recursive-descent parser, no `eval`, no property access, no user-defined names.
 *
 * Grammar:
 *   expr   := term (('+' | '-') term)*
 *   term   := unary (('*' | '/' | '%') unary)*
 *   unary  := ('-' | '+') unary | power
 *   power  := atom ('^' unary)?
 *   atom   := number | 'retried' | func '(' expr (',' expr)* ')' | '(' expr ')'
 * Functions: pow sqrt abs exp floor ceil round min max log.
 *
 * {@link compileExpression} throws `Error` with a readable message on bad input (the API turns it
 * into a 400); the compiled function returns a number (NaN/Infinity possible, callers clamp).
 */

const FUNCS: Record<string, { arity: [number, number]; fn: (...a: number[]) => number }> = {
  pow: { arity: [2, 2], fn: Math.pow },
  sqrt: { arity: [1, 1], fn: Math.sqrt },
  abs: { arity: [1, 1], fn: Math.abs },
  exp: { arity: [1, 1], fn: Math.exp },
  floor: { arity: [1, 1], fn: Math.floor },
  ceil: { arity: [1, 1], fn: Math.ceil },
  round: { arity: [1, 1], fn: Math.round },
  log: { arity: [1, 1], fn: Math.log },
  min: { arity: [1, 64], fn: Math.min },
  max: { arity: [1, 64], fn: Math.max },
};

type Node = (vars: { retried: number }) => number;

const MAX_LENGTH = 1000;

/** Parses `source` once; the result evaluates it for a given `retried` (0 for the first retry). */
export function compileExpression(source: string): (retried: number) => number {
  if (source.length > MAX_LENGTH) throw new Error(`expression longer than ${MAX_LENGTH} characters`);
  const tokens = tokenize(source);
  let i = 0;
  let depth = 0;
  const peek = () => tokens[i];
  const take = (v?: string) => {
    const t = tokens[i];
    if (t === undefined) throw new Error('unexpected end of expression');
    if (v !== undefined && t !== v) throw new Error(`expected ${JSON.stringify(v)} but found ${JSON.stringify(t)}`);
    i++;
    return t;
  };
  const guard = () => {
    if (++depth > 100) throw new Error('expression nested too deeply');
  };

  function expr(): Node {
    guard();
    let left = term();
    while (peek() === '+' || peek() === '-') {
      const op = take();
      const l = left;
      const r = term();
      left = op === '+' ? (v) => l(v) + r(v) : (v) => l(v) - r(v);
    }
    depth--;
    return left;
  }
  function term(): Node {
    let left = unary();
    while (peek() === '*' || peek() === '/' || peek() === '%') {
      const op = take();
      const l = left;
      const r = unary();
      left = op === '*' ? (v) => l(v) * r(v) : op === '/' ? (v) => l(v) / r(v) : (v) => l(v) % r(v);
    }
    return left;
  }
  function unary(): Node {
    guard();
    let out: Node;
    if (peek() === '-') {
      take();
      const u = unary();
      out = (v) => -u(v);
    } else if (peek() === '+') {
      take();
      out = unary();
    } else {
      out = power();
    }
    depth--;
    return out;
  }
  function power(): Node {
    const base = atom();
    if (peek() === '^') {
      take();
      const e = unary();
      return (v) => Math.pow(base(v), e(v));
    }
    return base;
  }
  function atom(): Node {
    const t = take();
    if (/^\d/.test(t) || /^\.\d/.test(t)) {
      const n = Number(t);
      if (!Number.isFinite(n)) throw new Error(`bad number ${JSON.stringify(t)}`);
      return () => n;
    }
    if (t === '(') {
      const e = expr();
      take(')');
      return e;
    }
    if (t === 'retried') return (v) => v.retried;
    const f = FUNCS[t];
    if (f) {
      take('(');
      const args: Node[] = [expr()];
      while (peek() === ',') {
        take();
        args.push(expr());
      }
      take(')');
      if (args.length < f.arity[0] || args.length > f.arity[1]) {
        throw new Error(`${t}() takes ${f.arity[0] === f.arity[1] ? f.arity[0] : `${f.arity[0]}-${f.arity[1]}`} argument(s), got ${args.length}`);
      }
      return (v) => f.fn(...args.map((a) => a(v)));
    }
    throw new Error(`unknown name ${JSON.stringify(t)} (allowed: retried, numbers, + - * / % ^, ${Object.keys(FUNCS).join(' ')})`);
  }

  if (tokens.length === 0) throw new Error('empty expression');
  const root = expr();
  if (i !== tokens.length) throw new Error(`unexpected ${JSON.stringify(tokens[i])}`);
  return (retried: number) => root({ retried });
}

function tokenize(s: string): string[] {
  const out: string[] = [];
  const re = /\s*(?:(\d+(?:\.\d*)?(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?)|([A-Za-z_][A-Za-z0-9_]*)|([-+*/%^(),]))/y;
  let pos = 0;
  while (pos < s.length) {
    if (/^\s*$/.test(s.slice(pos))) break;
    re.lastIndex = pos;
    const m = re.exec(s);
    if (!m) throw new Error(`unexpected character ${JSON.stringify(s.slice(pos).trim()[0])} at ${pos}`);
    out.push(m[1] ?? m[2] ?? m[3]);
    pos = re.lastIndex;
  }
  return out;
}
