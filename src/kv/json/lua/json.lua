-- svcjson part 1/7: the JSON document model, parser and serializer.
--
-- cjson is NOT used for documents: it decodes [] and {} to the same empty table, loses key order
-- and turns every number into a double. Here every value is a typed node:
--   {t='null'} | {t='boolean', v=true|false} | {t='string', v=<utf-8 bytes>}
--   {t='integer', s=<number text>} | {t='number', s=<number text>}   (original text kept)
--   {t='array', v={node, ...}} | {t='object', k={key, ...}, v={[key]=node}}  (k keeps the order)
-- The type tags are the names JSON.TYPE replies with (RedisJSON `value_name`).
-- Errors are raised as {err='ERR ...'} tables, which Redis turns into the error reply.

local J = {}

local sbyte, ssub, sfind, smatch, schar, sformat, sgsub, srep =
  string.byte, string.sub, string.find, string.match, string.char, string.format, string.gsub,
  string.rep
local tconcat, floor = table.concat, math.floor

--- Raises an error reply (a table {err=msg}, passed through unchanged by Redis).
function J.fail(msg)
  error({ err = msg }, 0)
end
local fail = J.fail

-- Input documents nest at most this deep (RedisJSON/serde_json recursion limit 128).
J.MAX_DEPTH = 128

local function perr(msg, s, pos)
  local line, start = 1, 1
  while true do
    local nl = sfind(s, '\n', start, true)
    if not nl or nl >= pos then break end
    line = line + 1
    start = nl + 1
  end
  fail(sformat('ERR %s at line %d column %d', msg, line, pos - start + 1))
end

local function skip_ws(s, pos)
  local c = sbyte(s, pos)
  if c == nil or c > 32 then return pos end -- stored text is compact: the common case
  local _, e = sfind(s, '^[ \t\r\n]*', pos)
  return e + 1
end

-- While decoding stored text, containers remember their source span (node.src/i/j): encoding an
-- unchanged container is then one substring. Every write clears the span of the containers it
-- changes and of their ancestors (P.dirty), so a span is only present while it is exact.
local record_spans = false

local ESCAPES = { ['"'] = '"', ['\\'] = '\\', ['/'] = '/', b = '\b', f = '\f', n = '\n', r = '\r', t = '\t' }

local function utf8_char(cp)
  if cp < 0x80 then return schar(cp) end
  if cp < 0x800 then return schar(0xC0 + floor(cp / 64), 0x80 + cp % 64) end
  if cp < 0x10000 then
    return schar(0xE0 + floor(cp / 4096), 0x80 + floor(cp / 64) % 64, 0x80 + cp % 64)
  end
  return schar(0xF0 + floor(cp / 262144), 0x80 + floor(cp / 4096) % 64, 0x80 + floor(cp / 64) % 64,
    0x80 + cp % 64)
end

local STRING_STOP = '["\\%z\1-\31]' -- end of a string's plain run

-- Parses the JSON string starting at the quote at `pos`; returns the bytes and the next position.
local function parse_string(s, pos)
  local parts, n, i = nil, 0, pos + 1
  while true do
    local j = sfind(s, STRING_STOP, i)
    if not j then perr('EOF while parsing a string', s, #s + 1) end
    local c = sbyte(s, j)
    if c == 34 then
      local chunk = ssub(s, i, j - 1)
      if not parts then return chunk, j + 1 end
      parts[n + 1] = chunk
      return tconcat(parts), j + 1
    elseif c == 92 then
      parts = parts or {}
      n = n + 1
      parts[n] = ssub(s, i, j - 1)
      local e = ssub(s, j + 1, j + 1)
      if e == 'u' then
        local hex = smatch(s, '^%x%x%x%x', j + 2)
        if not hex then perr('invalid escape', s, j + 1) end
        local cp, nxt = tonumber(hex, 16), j + 6
        if cp >= 0xD800 and cp <= 0xDBFF then
          local lo = smatch(s, '^\\u(%x%x%x%x)', nxt)
          lo = lo and tonumber(lo, 16)
          if not lo or lo < 0xDC00 or lo > 0xDFFF then
            perr('lone leading surrogate in hex escape', s, j + 1)
          end
          cp = 0x10000 + (cp - 0xD800) * 1024 + (lo - 0xDC00)
          nxt = nxt + 6
        elseif cp >= 0xDC00 and cp <= 0xDFFF then
          perr('lone trailing surrogate in hex escape', s, j + 1)
        end
        n = n + 1
        parts[n] = utf8_char(cp)
        i = nxt
      else
        local r = ESCAPES[e]
        if not r then perr('invalid escape', s, j + 1) end
        n = n + 1
        parts[n] = r
        i = j + 2
      end
    else
      perr('control character (\\u0000-\\u001F) found while parsing a string', s, j)
    end
  end
end

-- Parses a JSON number at `pos` (strict RFC 8259 grammar); keeps the original text.
local function parse_number(s, pos)
  local _, e = sfind(s, '^-?%d+', pos)
  if e then -- fast path: a plain integer such as 0, -12, 345
    local c = sbyte(s, e + 1)
    if c ~= 46 and c ~= 101 and c ~= 69 then
      local d = sbyte(s, pos) == 45 and pos + 1 or pos
      if e == d or sbyte(s, d) ~= 48 then return { t = 'integer', s = ssub(s, pos, e) }, e + 1 end
    end
  end
  local i = pos
  if sbyte(s, i) == 45 then i = i + 1 end
  local int = smatch(s, '^%d+', i)
  if not int or (#int > 1 and sbyte(int, 1) == 48) then perr('invalid number', s, pos) end
  i = i + #int
  local float = false
  if sbyte(s, i) == 46 then
    local frac = smatch(s, '^%d+', i + 1)
    if not frac then perr('invalid number', s, i + 1) end
    i = i + 1 + #frac
    float = true
  end
  local c = sbyte(s, i)
  if c == 101 or c == 69 then
    local ex = smatch(s, '^[-+]?%d+', i + 1)
    if not ex then perr('invalid number', s, i + 1) end
    i = i + 1 + #ex
    float = true
  end
  local text = ssub(s, pos, i - 1)
  local x = tonumber(text)
  if float and (x == math.huge or x == -math.huge) then perr('number out of range', s, pos) end
  return { t = float and 'number' or 'integer', s = text }, i
end

local parse_value

local function parse_container(s, pos, depth, close)
  if depth >= J.MAX_DEPTH then fail('ERR recursion limit exceeded') end
  local start, node = pos
  if close == 93 then node = { t = 'array', v = {} } else node = { t = 'object', k = {}, v = {} } end
  pos = skip_ws(s, pos + 1)
  if sbyte(s, pos) == close then
    if record_spans then node.src, node.i, node.j = s, start, pos end
    return node, pos + 1
  end
  local v, n = node.v, 0
  while true do
    if close == 93 then
      local item
      item, pos = parse_value(s, pos, depth + 1)
      n = n + 1
      v[n] = item
    else
      local q = sbyte(s, pos)
      if q == nil then perr('EOF while parsing an object', s, pos) end
      if q ~= 34 then perr('key must be a string', s, pos) end
      local key, item
      local e = sfind(s, STRING_STOP, pos + 1)
      if e and sbyte(s, e) == 34 then -- no escapes: the common case, without a call
        key, pos = ssub(s, pos + 1, e - 1), e + 1
      else
        key, pos = parse_string(s, pos)
      end
      pos = skip_ws(s, pos)
      if sbyte(s, pos) ~= 58 then perr('expected `:`', s, pos) end
      item, pos = parse_value(s, pos + 1, depth + 1)
      if v[key] == nil then
        n = n + 1
        node.k[n] = key
      end
      v[key] = item
    end
    pos = skip_ws(s, pos)
    local c = sbyte(s, pos)
    if c == 44 then
      pos = skip_ws(s, pos + 1)
    elseif c == close then
      if record_spans then node.src, node.i, node.j = s, start, pos end
      return node, pos + 1
    elseif c == nil then
      perr(close == 93 and 'EOF while parsing a list' or 'EOF while parsing an object', s, pos)
    else
      perr(close == 93 and 'expected `,` or `]`' or 'expected `,` or `}`', s, pos)
    end
  end
end

parse_value = function(s, pos, depth)
  pos = skip_ws(s, pos)
  local c = sbyte(s, pos)
  if c == 123 then return parse_container(s, pos, depth, 125) end
  if c == 91 then return parse_container(s, pos, depth, 93) end
  if c == 34 then
    local str, nxt = parse_string(s, pos)
    return { t = 'string', v = str }, nxt
  end
  if c == 45 or (c and c >= 48 and c <= 57) then return parse_number(s, pos) end
  if c == 116 and ssub(s, pos, pos + 3) == 'true' then return { t = 'boolean', v = true }, pos + 4 end
  if c == 102 and ssub(s, pos, pos + 4) == 'false' then return { t = 'boolean', v = false }, pos + 5 end
  if c == 110 and ssub(s, pos, pos + 3) == 'null' then return { t = 'null' }, pos + 4 end
  if c == nil then perr('EOF while parsing a value', s, pos) end
  perr('expected value', s, pos)
end

--- Parses JSON text into a node. `stored` (text written by this library) lifts the depth limit
-- and records container spans.
function J.decode(s, stored)
  local saved = J.MAX_DEPTH
  if stored then J.MAX_DEPTH, record_spans = 1e9, true end
  local ok, node, pos = pcall(parse_value, s, 1, 0)
  J.MAX_DEPTH, record_spans = saved, false
  if not ok then error(node, 0) end
  pos = skip_ws(s, pos)
  if pos <= #s then perr('trailing characters', s, pos) end
  return node
end

-- Serializer ------------------------------------------------------------------------------

local QUOTE_ESC = { ['"'] = '\\"', ['\\'] = '\\\\', ['\b'] = '\\b', ['\f'] = '\\f', ['\n'] = '\\n',
  ['\r'] = '\\r', ['\t'] = '\\t' }
local function esc_char(c) return QUOTE_ESC[c] or sformat('\\u%04x', sbyte(c)) end

--- JSON string literal for raw bytes (serde_json escaping: only ", \ and control characters).
function J.quote(str)
  if not sfind(str, '[%z\1-\31"\\]') then return '"' .. str .. '"' end
  return '"' .. (sgsub(str, '[%z\1-\31"\\]', esc_char)) .. '"'
end
local quote = J.quote

-- Appends the JSON text of `node` to `buf` (pieces, joined once by table.concat); returns the new
-- piece count. Strings that need no escaping are pushed as they are, between quote pieces, so
-- encoding creates no intermediate strings. An unchanged container with a source span is one
-- substring (unless `use_spans` is off). With `marks` set, every container encoded piece by piece
-- gets its span in the new text recorded (elen: bytes so far; src is set by J.encode).
local ESCAPE_CLASS = '[%z\1-\31"\\]'
local use_spans, marks, nmarks, elen = true, nil, 0, 0

local function put(buf, n, piece)
  buf[n + 1] = piece
  elen = elen + #piece
  return n + 1
end

local function enc(node, buf, n)
  local t = node.t
  if t == 'string' then
    local v = node.v
    if sfind(v, ESCAPE_CLASS) then return put(buf, n, quote(v)) end
    n = put(buf, n, '"')
    n = put(buf, n, v)
    return put(buf, n, '"')
  elseif t == 'integer' or t == 'number' then
    return put(buf, n, node.s)
  elseif t == 'boolean' then
    return put(buf, n, node.v and 'true' or 'false')
  elseif t == 'null' then
    return put(buf, n, 'null')
  elseif node.i and use_spans then -- unchanged container decoded from / encoded to a text
    return put(buf, n, ssub(node.src, node.i, node.j))
  end
  local start = elen + 1
  if t == 'array' then
    local v = node.v
    local len = #v
    if len == 0 then
      n = put(buf, n, '[]')
    else
      n = put(buf, n, '[')
      n = enc(v[1], buf, n)
      for i = 2, len do
        n = put(buf, n, ',')
        n = enc(v[i], buf, n)
      end
      n = put(buf, n, ']')
    end
  else
    local k, v = node.k, node.v
    local len = #k
    if len == 0 then
      n = put(buf, n, '{}')
    else
      for i = 1, len do
        local key = k[i]
        n = put(buf, n, i == 1 and '{' or ',')
        if sfind(key, ESCAPE_CLASS) then
          n = put(buf, n, quote(key))
          n = put(buf, n, ':')
        else
          n = put(buf, n, '"')
          n = put(buf, n, key)
          n = put(buf, n, '":')
        end
        n = enc(v[key], buf, n)
      end
      n = put(buf, n, '}')
    end
  end
  if marks then
    node.i, node.j = start, elen
    nmarks = nmarks + 1
    marks[nmarks] = node
  end
  return n
end

-- Pretty form: RedisJSON's formatter (serde PrettyFormatter with caller-chosen strings).
local function enc_pretty(node, buf, n, fmt, level)
  local t = node.t
  if (t == 'array' and #node.v > 0) or (t == 'object' and #node.k > 0) then
    local pad = fmt.newline .. srep(fmt.indent, level + 1)
    n = n + 1
    buf[n] = t == 'array' and '[' or '{'
    if t == 'array' then
      for i, item in ipairs(node.v) do
        n = n + 1
        buf[n] = (i > 1 and ',' or '') .. pad
        n = enc_pretty(item, buf, n, fmt, level + 1)
      end
    else
      for i, key in ipairs(node.k) do
        n = n + 1
        buf[n] = (i > 1 and ',' or '') .. pad .. quote(key) .. ':' .. fmt.space
        n = enc_pretty(node.v[key], buf, n, fmt, level + 1)
      end
    end
    n = n + 1
    buf[n] = fmt.newline .. srep(fmt.indent, level) .. (t == 'array' and ']' or '}')
    return n
  end
  return enc(node, buf, n)
end

--- Serializes a node; `fmt` = {indent=, newline=, space=} or nil for the compact form.
-- `mode`: nil (reply text), 'save' (document text: containers re-encoded here get spans into
-- it), 'full' (document text, ignoring all old spans: every container then points into the new
-- text only, which releases the older texts the tree referenced).
function J.encode(node, fmt, mode)
  local buf = {}
  if fmt then
    enc_pretty(node, buf, 0, fmt, 0)
    return tconcat(buf)
  end
  if mode then marks, nmarks = {}, 0 end
  use_spans, elen = mode ~= 'full', 0
  local ok, err = pcall(enc, node, buf, 0)
  local recorded, count = marks, nmarks
  use_spans, marks, nmarks = true, nil, 0
  if not ok then error(err, 0) end
  local text = tconcat(buf)
  for i = 1, count do recorded[i].src = text end
  return text
end

--- Serializes a list of nodes as a JSON array (the JSONPath reply form).
function J.encode_list(nodes, fmt)
  return J.encode({ t = 'array', v = nodes }, fmt)
end

-- Values ----------------------------------------------------------------------------------

--- Deep copy of a node (a value set at several places must not be shared).
function J.copy(node)
  local t = node.t
  if t == 'array' then
    local v = {}
    for i, item in ipairs(node.v) do v[i] = J.copy(item) end
    return { t = 'array', v = v }
  elseif t == 'object' then
    local k, v = {}, {}
    for i, key in ipairs(node.k) do
      k[i] = key
      v[key] = J.copy(node.v[key])
    end
    return { t = 'object', k = k, v = v }
  end
  local c = {}
  for key, val in pairs(node) do c[key] = val end
  return c
end

local function same_number(a, b)
  if a.s == b.s then return true end
  -- long integer texts: compare exactly (doubles would round them together)
  if a.t == 'integer' and (#a.s > 15 or #b.s > 15) then
    return (sgsub(a.s, '^-0$', '0')) == (sgsub(b.s, '^-0$', '0'))
  end
  return tonumber(a.s) == tonumber(b.s)
end
J.same_number = same_number

--- RedisJSON `is_equal`: same type and deep-equal value (integer 1 and float 1.0 differ).
function J.equal(a, b)
  if a.t ~= b.t then return false end
  local t = a.t
  if t == 'null' then return true end
  if t == 'boolean' or t == 'string' then return a.v == b.v end
  if t == 'integer' or t == 'number' then return same_number(a, b) end
  if t == 'array' then
    if #a.v ~= #b.v then return false end
    for i, item in ipairs(a.v) do
      if not J.equal(item, b.v[i]) then return false end
    end
    return true
  end
  if #a.k ~= #b.k then return false end
  for _, key in ipairs(a.k) do
    local other = b.v[key]
    if other == nil or not J.equal(a.v[key], other) then return false end
  end
  return true
end

--- Removes `key` from an object node (keeps the order of the others); true if it was there.
function J.obj_remove(obj, key)
  if obj.v[key] == nil then return false end
  obj.v[key] = nil
  for i, k in ipairs(obj.k) do
    if k == key then
      table.remove(obj.k, i)
      break
    end
  end
  return true
end

--- Sets `key` in an object node (appends new keys at the end, keeps the position of old ones).
function J.obj_set(obj, key, node)
  if obj.v[key] == nil then obj.k[#obj.k + 1] = key end
  obj.v[key] = node
end

return J
