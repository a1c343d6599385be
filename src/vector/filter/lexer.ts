/**
 * Lexer of the metadata filter language. Turns the filter text into tokens
 * with their 0-based start offsets; the parser gives words their meaning (keyword or field path),
 * so a field may be named like a keyword (`and = 1` compares the field `and`).
 *
 * Token rules (the grammar's terminals):
 *   word    = [A-Za-z_] [A-Za-z0-9_.\[\]#-]*      the docs' identifier regex; keywords are words too
 *   number  = '-'? digit+ ( '.' digit+ )? ( [eE] [+-]? digit+ )?   float64; must be finite and
 *             must not run into a letter, digit, '_' or '.' (`5abc`, `1.2.3`, `5.` are errors)
 *   string  = "'" … "'" | '"' … '"'   escapes: \\ → \, \' → ', \" → "; a doubled quote of the
 *             enclosing kind ('' inside '…') is one quote (SQL style); any other backslash is kept
 *             as written (so a GLOB pattern receives `\*` intact and can escape its own wildcards)
 *   punct   = '=' | '!=' | '<' | '<=' | '>' | '>=' | '(' | ')' | ','
 *   space   = ' ' | '\t' | '\n' | '\r' (skipped)
 *
 * @throws FilterSyntaxError on an unexpected character, an unterminated string or a bad number.
 */
import { syntaxError } from './ast.js';

/** Token kinds. `punct` covers operators, parentheses and the comma (`text` tells which). */
export type TokenKind = 'word' | 'string' | 'number' | 'punct' | 'eof';

/** One token. `text` is the raw source slice; `value` the decoded string or number literal. */
export interface Token {
  readonly kind: TokenKind;
  readonly text: string;
  readonly pos: number;
  readonly value?: string | number;
}

const WORD_START = /[A-Za-z_]/;
const WORD_BODY = /[A-Za-z0-9_.[\]#-]/y;
const NUMBER = /-?[0-9]+(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?/y;
const NUMBER_RUN_ON = /[A-Za-z0-9_.]/;

/** Describes a token for error messages: `'AND'`, `string 'abc'`, `end of filter`. */
export function describeToken(t: Token): string {
  if (t.kind === 'eof') return 'end of filter';
  const shown = t.text.length > 40 ? `${t.text.slice(0, 37)}...` : t.text;
  if (t.kind === 'string') return `string ${shown}`;
  if (t.kind === 'number') return `number ${shown}`;
  return `'${shown}'`;
}

/**
 * Splits `text` into tokens, ending with one `eof` token at `text.length`.
 * @throws FilterSyntaxError (see module docs)
 */
export function tokenize(text: string): Token[] {
  const tokens: Token[] = [];
  const n = text.length;
  let i = 0;
  while (i < n) {
    const c = text[i];
    if (c === ' ' || c === '\t' || c === '\n' || c === '\r') {
      i++;
      continue;
    }
    const start = i;
    if (WORD_START.test(c)) {
      i++;
      WORD_BODY.lastIndex = i;
      while (i < n && WORD_BODY.test(text)) i = WORD_BODY.lastIndex;
      tokens.push({ kind: 'word', text: text.slice(start, i), pos: start });
      continue;
    }
    if ((c >= '0' && c <= '9') || (c === '-' && i + 1 < n && text[i + 1] >= '0' && text[i + 1] <= '9')) {
      tokens.push(readNumber(text, start));
      i = start + tokens[tokens.length - 1].text.length;
      continue;
    }
    if (c === "'" || c === '"') {
      const tok = readString(text, start);
      tokens.push(tok);
      i = start + tok.text.length;
      continue;
    }
    if (c === '!' && text[i + 1] === '=') {
      tokens.push({ kind: 'punct', text: '!=', pos: start });
      i += 2;
      continue;
    }
    if ((c === '<' || c === '>') && text[i + 1] === '=') {
      tokens.push({ kind: 'punct', text: c + '=', pos: start });
      i += 2;
      continue;
    }
    if (c === '=' || c === '<' || c === '>' || c === '(' || c === ')' || c === ',') {
      tokens.push({ kind: 'punct', text: c, pos: start });
      i++;
      continue;
    }
    throw syntaxError(`unexpected character '${String.fromCodePoint(text.codePointAt(i)!)}'`, i, hintFor(c));
  }
  tokens.push({ kind: 'eof', text: '', pos: n });
  return tokens;
}

function hintFor(c: string): string | undefined {
  if (c === '.') return 'a field path starts with a letter or _';
  if (c === '!') return "use '!=' or NOT";
  if (c === '-') return "'-' must be followed by digits";
  return undefined;
}

function readNumber(text: string, start: number): Token {
  NUMBER.lastIndex = start;
  const m = NUMBER.exec(text)!;
  const raw = m[0];
  const end = start + raw.length;
  if (end < text.length && NUMBER_RUN_ON.test(text[end])) {
    let stop = end;
    while (stop < text.length && NUMBER_RUN_ON.test(text[stop])) stop++;
    throw syntaxError(`invalid number '${text.slice(start, stop)}'`, start, 'numbers look like 42, -7, 3.14 or 1e-10');
  }
  const value = Number(raw);
  if (!Number.isFinite(value)) throw syntaxError(`number '${raw}' is out of range`, start);
  return { kind: 'number', text: raw, pos: start, value };
}

function readString(text: string, start: number): Token {
  const quote = text[start];
  let out = '';
  let i = start + 1;
  for (;;) {
    if (i >= text.length) {
      throw syntaxError('unterminated string', start, `no closing ${quote === "'" ? 'single' : 'double'} quote`);
    }
    const c = text[i];
    if (c === quote) {
      if (text[i + 1] === quote) {
        out += quote;
        i += 2;
        continue;
      }
      return { kind: 'string', text: text.slice(start, i + 1), pos: start, value: out };
    }
    if (c === '\\' && i + 1 < text.length) {
      const e = text[i + 1];
      if (e === '\\' || e === "'" || e === '"') {
        out += e;
        i += 2;
        continue;
      }
    }
    out += c;
    i++;
  }
}
