/**
 * Hand-written recursive-descent parser of the metadata filter language.
 *
 * Grammar (EBNF; terminals as in lexer.ts; keywords case-insensitive; `AND` binds tighter than `OR`):
 *
 *   filter     = [ or_expr ] EOF                              (* blank text = no filter *)
 *   or_expr    = and_expr { "OR" and_expr }
 *   and_expr   = primary { "AND" primary }
 *   primary    = "(" or_expr ")" | predicate                  (* at most 100 nested "(" *)
 *   predicate  = "HAS" [ "NOT" ] "FIELD" path
 *              | path ( "=" | "!=" ) scalar
 *              | path ( "<" | "<=" | ">" | ">=" ) number
 *              | path [ "NOT" ] "GLOB" string                   (* at most 4,096 characters *)
 *              | path [ "NOT" ] "IN" "(" scalar { "," scalar } ")"   (* at most 500 values *)
 *              | path [ "NOT" ] "CONTAINS" scalar
 *   scalar     = string | number | boolean
 *   boolean    = "TRUE" | "FALSE"                             (* 1 and 0 are numbers that also
 *                                                                 compare equal to true/false *)
 *   path       = word, structured as in path.ts               (* a.b[0].c, tags[#-1] *)
 *
 * There is no unary NOT (as on Upstash): `NOT x = 1` is an error whose message names the negated
 * operators instead. A word is a keyword only where the grammar expects one, so fields may be
 * called `and`, `not`, `has`, `true` …; `HAS` starts an existence test only when followed by
 * `FIELD` or `NOT FIELD`. `null` is not a literal (the error says to use HAS FIELD).
 *
 * @throws FilterSyntaxError with the offset of the first offending token and what was expected.
 */
import { FILTER_LIMITS, syntaxError, type CompareOp, type FieldPath, type FilterNode, type Scalar } from './ast.js';
import { describeToken, tokenize, type Token } from './lexer.js';
import { parsePath } from './path.js';

const COMPARE_OPS = new Set<string>(['=', '!=', '<', '<=', '>', '>=']);
const KEYWORDS = new Set(['AND', 'OR', 'NOT', 'GLOB', 'IN', 'CONTAINS', 'HAS', 'FIELD', 'TRUE', 'FALSE']);
const OPERATOR_HINT = 'expected an operator: =, !=, <, <=, >, >=, GLOB, IN, CONTAINS or NOT GLOB/IN/CONTAINS';

/**
 * Parses filter text into a syntax tree; `null` for a blank filter.
 * @throws FilterSyntaxError
 */
export function parseFilter(text: string): FilterNode | null {
  if (text.length > FILTER_LIMITS.maxLength) {
    throw syntaxError(`filter is ${text.length} characters long`, FILTER_LIMITS.maxLength, `at most ${FILTER_LIMITS.maxLength} are allowed`);
  }
  return new Parser(tokenize(text)).parseAll();
}

class Parser {
  private i = 0;

  constructor(private readonly toks: Token[]) {}

  parseAll(): FilterNode | null {
    if (this.peek().kind === 'eof') return null;
    const node = this.orExpr(0);
    const t = this.peek();
    if (t.kind !== 'eof') {
      const hint = t.kind === 'punct' && t.text === ')' ? "no matching '('" : 'expected AND, OR or the end of the filter';
      throw syntaxError(`unexpected ${describeToken(t)}`, t.pos, hint);
    }
    return node;
  }

  private peek(k = 0): Token {
    return this.toks[Math.min(this.i + k, this.toks.length - 1)];
  }

  private next(): Token {
    const t = this.peek();
    if (t.kind !== 'eof') this.i++;
    return t;
  }

  private isKeyword(t: Token, kw: string): boolean {
    return t.kind === 'word' && t.text.length === kw.length && t.text.toUpperCase() === kw;
  }

  private isPunct(t: Token, p: string): boolean {
    return t.kind === 'punct' && t.text === p;
  }

  private fail(t: Token, hint: string): never {
    throw syntaxError(`unexpected ${describeToken(t)}`, t.pos, hint);
  }

  private orExpr(depth: number): FilterNode {
    const first = this.andExpr(depth);
    if (!this.isKeyword(this.peek(), 'OR')) return first;
    const children = [first];
    while (this.isKeyword(this.peek(), 'OR')) {
      this.next();
      children.push(this.andExpr(depth));
    }
    return { kind: 'or', pos: first.pos, children };
  }

  private andExpr(depth: number): FilterNode {
    const first = this.primary(depth);
    if (!this.isKeyword(this.peek(), 'AND')) return first;
    const children = [first];
    while (this.isKeyword(this.peek(), 'AND')) {
      this.next();
      children.push(this.primary(depth));
    }
    return { kind: 'and', pos: first.pos, children };
  }

  private primary(depth: number): FilterNode {
    const t = this.peek();
    if (this.isPunct(t, '(')) {
      if (depth >= FILTER_LIMITS.maxDepth) {
        throw syntaxError('parentheses nested too deeply', t.pos, `at most ${FILTER_LIMITS.maxDepth} levels`);
      }
      this.next();
      const inner = this.orExpr(depth + 1);
      const close = this.peek();
      if (!this.isPunct(close, ')')) {
        this.fail(close, `expected AND, OR or ')' to close the '(' at position ${t.pos}`);
      }
      this.next();
      return inner;
    }
    if (t.kind !== 'word') this.fail(t, "expected a condition: a field path, HAS FIELD, HAS NOT FIELD or '('");
    if (this.isKeyword(t, 'HAS')) {
      const a = this.peek(1);
      if (this.isKeyword(a, 'FIELD') || (this.isKeyword(a, 'NOT') && this.isKeyword(this.peek(2), 'FIELD'))) {
        return this.hasField();
      }
    }
    if (this.isKeyword(t, 'NOT')) {
      const a = this.peek(1);
      const negatedOp = (x: Token): boolean => this.isKeyword(x, 'GLOB') || this.isKeyword(x, 'IN') || this.isKeyword(x, 'CONTAINS');
      const fieldNamedNot = negatedOp(a) || (this.isKeyword(a, 'NOT') && negatedOp(this.peek(2)));
      if (this.isPunct(a, '(') || (a.kind === 'word' && !fieldNamedNot)) {
        throw syntaxError(`unexpected 'NOT'`, t.pos, 'there is no unary NOT; use !=, NOT IN, NOT GLOB, NOT CONTAINS or HAS NOT FIELD');
      }
    }
    return this.predicate();
  }

  private hasField(): FilterNode {
    const has = this.next();
    let negated = false;
    if (this.isKeyword(this.peek(), 'NOT')) {
      this.next();
      negated = true;
    }
    this.next(); // FIELD
    const p = this.peek();
    if (p.kind !== 'word') this.fail(p, 'expected a field path after FIELD');
    this.next();
    return { kind: 'hasField', pos: has.pos, negated, path: parsePath(p.text, p.pos) };
  }

  private predicate(): FilterNode {
    const field = this.next();
    const path = parsePath(field.text, field.pos);
    const op = this.peek();
    if (op.kind === 'punct' && COMPARE_OPS.has(op.text)) {
      this.next();
      const cmp = op.text as CompareOp;
      const value = cmp === '=' || cmp === '!=' ? this.scalar(`after '${cmp}'`) : this.number(cmp);
      return { kind: 'compare', pos: field.pos, op: cmp, path, value };
    }
    let negated = false;
    let kw = op;
    if (this.isKeyword(op, 'NOT')) {
      negated = true;
      this.next();
      kw = this.peek();
      if (!this.isKeyword(kw, 'GLOB') && !this.isKeyword(kw, 'IN') && !this.isKeyword(kw, 'CONTAINS')) {
        this.fail(kw, 'expected GLOB, IN or CONTAINS after NOT');
      }
    }
    if (this.isKeyword(kw, 'GLOB')) {
      this.next();
      const s = this.peek();
      if (s.kind !== 'string') this.fail(s, 'expected a quoted pattern after GLOB');
      const pattern = s.value as string;
      if (pattern.length > FILTER_LIMITS.maxGlobLength) {
        throw syntaxError(`GLOB pattern is ${pattern.length} characters long`, s.pos, `at most ${FILTER_LIMITS.maxGlobLength} are allowed`);
      }
      this.next();
      return { kind: 'glob', pos: field.pos, negated, path, pattern };
    }
    if (this.isKeyword(kw, 'IN')) {
      this.next();
      return { kind: 'in', pos: field.pos, negated, path, values: this.list() };
    }
    if (this.isKeyword(kw, 'CONTAINS')) {
      this.next();
      return { kind: 'contains', pos: field.pos, negated, path, value: this.scalar('after CONTAINS') };
    }
    if (KEYWORDS.has(field.text.toUpperCase())) {
      // `a = 1 AND AND …`, `x = 1 OR IN …`: a keyword where a condition should start reads better
      // as that than as a field named AND lacking its operator.
      this.fail(field, "expected a condition: a field path, HAS FIELD, HAS NOT FIELD or '('");
    }
    return this.fail(op, `${OPERATOR_HINT} after '${field.text}'`);
  }

  private list(): Scalar[] {
    const open = this.peek();
    if (!this.isPunct(open, '(')) this.fail(open, "expected '(' after IN");
    this.next();
    const values: Scalar[] = [this.scalar('in the IN list')];
    for (;;) {
      const t = this.peek();
      if (this.isPunct(t, ')')) {
        this.next();
        return values;
      }
      if (!this.isPunct(t, ',')) this.fail(t, "expected ',' or ')' in the IN list");
      this.next();
      if (values.length >= FILTER_LIMITS.maxInValues) {
        throw syntaxError('IN list too long', open.pos, `at most ${FILTER_LIMITS.maxInValues} values are allowed`);
      }
      values.push(this.scalar('in the IN list'));
    }
  }

  private scalar(where: string): Scalar {
    const t = this.peek();
    if (t.kind === 'string' || t.kind === 'number') {
      this.next();
      return t.value as Scalar;
    }
    if (this.isKeyword(t, 'TRUE') || this.isKeyword(t, 'FALSE')) {
      this.next();
      return t.text.toUpperCase() === 'TRUE';
    }
    if (this.isKeyword(t, 'NULL')) {
      this.fail(t, `null is not a value; test presence with HAS FIELD / HAS NOT FIELD`);
    }
    return this.fail(t, `expected a string, number or boolean ${where}`);
  }

  private number(op: string): number {
    const t = this.peek();
    if (t.kind !== 'number') this.fail(t, `expected a number after '${op}'`);
    this.next();
    return t.value as number;
  }
}

/** The distinct field paths a filter reads, in order of first appearance (for index planning). */
export function referencedFields(node: FilterNode | null): FieldPath[] {
  const seen = new Map<string, FieldPath>();
  const walk = (n: FilterNode): void => {
    if (n.kind === 'and' || n.kind === 'or') n.children.forEach(walk);
    else if (!seen.has(n.path.text)) seen.set(n.path.text, n.path);
  };
  if (node) walk(node);
  return [...seen.values()];
}
