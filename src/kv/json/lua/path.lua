-- svcjson part 3/7: paths (RedisJSON legacy paths and JSONPath), compiled then evaluated.
--
-- A path starting with '$' is JSONPath; anything else is a legacy path, rewritten the way
-- RedisJSON's `Path::new` does ('.' -> '$', '.a' -> '$.a', 'a' -> '$.a') and evaluated with the
-- same engine; only the reply shape differs (commands decide).
-- Supported: .name  ['name']  ["a","b"]  .*  [*]  ..name  ..*  ..[...]  [0]  [-1]  [0,2]
-- [start:end]  [start:end:step] (step > 0)  [?(expr)] with @/$ sub-paths, literals (number,
-- 'string', "string", true, false, null), == != < <= > >= =~ (regex subset), && || ! and ( ).
-- A match is {node=, parent=, key=, up=} (key: object key or 1-based array index; up: the
-- parent match), so writes can replace or remove the matched value in its parent.

local P = {}
local fail = J.fail
local ssub, sfind, smatch, sgsub, sformat, sbyte = string.sub, string.find, string.match,
  string.gsub, string.format, string.byte

local NAME = '^[^%.%[%]%s%(%)=!<>&|,\'"~%*%?]+'

local function perr(path, pos)
  fail(sformat("ERR JSON Path error: syntax error in path '%s' at position %d", path, pos))
end

local function skipsp(p, i)
  local _, e = sfind(p, '^%s*', i)
  return e + 1
end

-- Quoted string at p[i] (' or "), with \ escapes; returns text, next position.
local function parse_quoted(p, i, path)
  local q = ssub(p, i, i)
  local out, j = {}, i + 1
  while true do
    local c = ssub(p, j, j)
    if c == '' then perr(path, j) end
    if c == q then return table.concat(out), j + 1 end
    if c == '\\' then
      -- \' \" \\ are unescaped; any other escape is kept (regexes such as '\d+')
      local d = ssub(p, j + 1, j + 1)
      out[#out + 1] = (d == q or d == '\\') and d or (c .. d)
      j = j + 2
    else
      out[#out + 1] = c
      j = j + 1
    end
  end
end

local parse_steps, parse_or

-- Filter operands ------------------------------------------------------------------------

local function parse_operand(p, i, path)
  i = skipsp(p, i)
  local c = ssub(p, i, i)
  if c == '@' or c == '$' then
    local steps
    steps, i = parse_steps(p, i + 1, path, true)
    return { kind = c == '@' and 'rel' or 'abs', steps = steps }, i
  end
  if c == "'" or c == '"' then
    local s
    s, i = parse_quoted(p, i, path)
    return { kind = 'lit', node = { t = 'string', v = s } }, i
  end
  local num = smatch(p, '^-?%d+%.?%d*[eE]?[-+]?%d*', i)
  if num then
    local ok, node = pcall(J.decode, num)
    if not ok then perr(path, i) end
    return { kind = 'lit', node = node }, i + #num
  end
  for word, node in pairs({ ['true'] = { t = 'boolean', v = true }, ['false'] = { t = 'boolean', v = false },
    ['null'] = { t = 'null' } }) do
    if ssub(p, i, i + #word - 1) == word then return { kind = 'lit', node = node }, i + #word end
  end
  perr(path, i)
end

local OPS = { '==', '!=', '<=', '>=', '=~', '<', '>' }

local function parse_primary(p, i, path)
  i = skipsp(p, i)
  local c = ssub(p, i, i)
  if c == '(' then
    local e
    e, i = parse_or(p, i + 1, path)
    i = skipsp(p, i)
    if ssub(p, i, i) ~= ')' then perr(path, i) end
    return e, i + 1
  end
  if c == '!' and ssub(p, i + 1, i + 1) ~= '=' then
    local e
    e, i = parse_primary(p, i + 1, path)
    return { op = 'not', l = e }, i
  end
  local left
  left, i = parse_operand(p, i, path)
  i = skipsp(p, i)
  for _, op in ipairs(OPS) do
    if ssub(p, i, i + #op - 1) == op then
      local right
      right, i = parse_operand(p, i + #op, path)
      return { op = op, l = left, r = right }, i
    end
  end
  return { op = 'exists', l = left }, i
end

local function parse_and(p, i, path)
  local e
  e, i = parse_primary(p, i, path)
  while true do
    local j = skipsp(p, i)
    if ssub(p, j, j + 1) ~= '&&' then return e, i end
    local r
    r, i = parse_primary(p, j + 2, path)
    e = { op = 'and', l = e, r = r }
  end
end

parse_or = function(p, i, path)
  local e
  e, i = parse_and(p, i, path)
  while true do
    local j = skipsp(p, i)
    if ssub(p, j, j + 1) ~= '||' then return e, i end
    local r
    r, i = parse_and(p, j + 2, path)
    e = { op = 'or', l = e, r = r }
  end
end

-- Steps -------------------------------------------------------------------------------------

local function parse_bracket(p, i, path)
  i = skipsp(p, i + 1)
  local c = ssub(p, i, i)
  local step
  if c == '*' then
    step, i = { k = 'wild' }, i + 1
  elseif c == '?' then
    local e
    e, i = parse_or(p, i + 1, path)
    step = { k = 'filter', expr = e }
  elseif c == "'" or c == '"' then
    local names = {}
    while true do
      local s
      s, i = parse_quoted(p, skipsp(p, i), path)
      names[#names + 1] = s
      i = skipsp(p, i)
      if ssub(p, i, i) ~= ',' then break end
      i = skipsp(p, i + 1)
    end
    step = { k = 'name', names = names }
  else
    local function int_at(j)
      local s = smatch(p, '^%s*(-?%d+)%s*', j)
      if not s then return nil, j end
      local _, e = sfind(p, '^%s*-?%d+%s*', j)
      return tonumber(s), e + 1
    end
    local a
    a, i = int_at(i)
    if ssub(p, i, i) == ':' then
      local b, st
      b, i = int_at(i + 1)
      if ssub(p, i, i) == ':' then st, i = int_at(i + 1) end
      if st ~= nil and st <= 0 then perr(path, i) end
      step = { k = 'slice', from = a, to = b, step = st or 1 }
    else
      if a == nil then perr(path, i) end
      local idx = { a }
      while ssub(p, i, i) == ',' do
        local b
        b, i = int_at(i + 1)
        if b == nil then perr(path, i) end
        idx[#idx + 1] = b
      end
      step = { k = 'index', idx = idx }
    end
  end
  i = skipsp(p, i)
  if ssub(p, i, i) ~= ']' then perr(path, i) end
  return step, i + 1
end

-- One step after '.' (or after '..' when desc): a name, '*' or a bracket.
local function parse_dotted(p, i, path)
  local c = ssub(p, i, i)
  if c == '*' then return { k = 'wild' }, i + 1 end
  if c == '[' then return parse_bracket(p, i, path) end
  local name = smatch(p, NAME, i)
  if not name then perr(path, i) end
  return { k = 'name', names = { name } }, i + #name
end

-- Steps from p[i]; `embedded` (filter sub-path) stops at the first character that is not a step.
parse_steps = function(p, i, path, embedded)
  local steps = {}
  local n = #p
  while i <= n do
    local c = ssub(p, i, i)
    local step
    if c == '.' then
      if ssub(p, i + 1, i + 1) == '.' then
        step, i = parse_dotted(p, i + 2, path)
        step = { k = 'desc', inner = step }
      else
        step, i = parse_dotted(p, i + 1, path)
      end
    elseif c == '[' then
      step, i = parse_bracket(p, i, path)
    elseif embedded then
      break
    else
      perr(path, i)
    end
    steps[#steps + 1] = step
  end
  return steps, i
end

--- Compiles a path. Returns {legacy=, steps=, text=<as given>, norm=<JSONPath form>}.
function P.compile(path)
  local legacy = ssub(path, 1, 1) ~= '$'
  local norm = path
  if legacy then
    if path == '.' then
      norm = '$'
    elseif ssub(path, 1, 1) == '.' then
      norm = '$' .. path
    elseif ssub(path, 1, 1) == '[' then
      norm = '$' .. path
    else
      norm = '$.' .. path
    end
  end
  local steps = parse_steps(norm, 2, path, false)
  return { legacy = legacy, steps = steps, text = path, norm = norm }
end

--- True for a path of single names / single indexes only (RedisJSON `is_static`).
function P.is_static(q)
  for _, s in ipairs(q.steps) do
    if not ((s.k == 'name' and #s.names == 1) or (s.k == 'index' and #s.idx == 1)) then
      return false
    end
  end
  return true
end

--- True if the path addresses the document root ('$' or '.').
function P.is_root(q)
  return #q.steps == 0
end

-- Evaluation ------------------------------------------------------------------------------

local function children(m, out)
  local node = m.node
  if node.t == 'array' then
    for i, c in ipairs(node.v) do out[#out + 1] = { node = c, parent = node, key = i, up = m } end
  elseif node.t == 'object' then
    for _, k in ipairs(node.k) do out[#out + 1] = { node = node.v[k], parent = node, key = k, up = m } end
  end
end

local run, eval_expr

local REGEX_CLASS = { d = '%d', D = '%D', w = '[%w_]', W = '[^%w_]', s = '%s', S = '%S' }
local REGEX_IN_CLASS = { d = '%d', w = '%w_', s = '%s' }
local regex_cache = {}

-- Translates the regular-expression subset JSONPath filters use into a Lua pattern:
-- literals, . [] [^] \d \w \s \D \W \S escapes, * + ? *? and ^ $ anchors. Alternation,
-- groups and {n,m} counts have no Lua-pattern equivalent and give an error.
local function regex_to_lua(re)
  if regex_cache[re] then return regex_cache[re] end
  local out, i, n = {}, 1, #re
  while i <= n do
    local c = ssub(re, i, i)
    if c == '\\' then
      local d = ssub(re, i + 1, i + 1)
      if REGEX_CLASS[d] then
        out[#out + 1] = REGEX_CLASS[d]
      elseif d == 'n' then
        out[#out + 1] = '\n'
      elseif d == 't' then
        out[#out + 1] = '\t'
      elseif smatch(d, '%p') then
        out[#out + 1] = '%' .. d
      else
        fail('ERR unsupported regular expression: ' .. re)
      end
      i = i + 2
    elseif c == '[' then
      local j = i + 1
      if ssub(re, j, j) == '^' then j = j + 1 end
      if ssub(re, j, j) == ']' then j = j + 1 end
      local close = sfind(re, ']', j, true)
      if not close then fail('ERR unsupported regular expression: ' .. re) end
      local body = sgsub(ssub(re, i + 1, close - 1), '%%', '%%%%')
      body = sgsub(body, '\\(.)', function(x) return REGEX_IN_CLASS[x] or ('%' .. x) end)
      out[#out + 1] = '[' .. body .. ']'
      i = close + 1
    elseif c == '(' or c == ')' or c == '|' or c == '{' or c == '}' then
      fail('ERR unsupported regular expression: ' .. re)
    elseif c == '*' and ssub(re, i + 1, i + 1) == '?' then
      out[#out + 1] = '-'
      i = i + 2
    elseif c == '-' or c == '%' then
      out[#out + 1] = '%' .. c
      i = i + 1
    else
      out[#out + 1] = c
      i = i + 1
    end
  end
  local pat = table.concat(out)
  regex_cache[re] = pat
  return pat
end
P.regex_to_lua = regex_to_lua

local function isnum(n) return n.t == 'integer' or n.t == 'number' end

local function compare(a, op, b)
  if op == '=~' then
    if a.t ~= 'string' or b.t ~= 'string' then return false end
    local pat = regex_to_lua(b.v)
    local ok, found = pcall(sfind, a.v, pat)
    return ok and found ~= nil
  end
  local x, y
  if isnum(a) and isnum(b) then
    if op == '==' then return J.same_number(a, b) end
    if op == '!=' then return not J.same_number(a, b) end
    x, y = tonumber(a.s), tonumber(b.s)
  elseif a.t == 'string' and b.t == 'string' then
    x, y = a.v, b.v
  else
    if op == '==' then return J.equal(a, b) end
    if op == '!=' then return not J.equal(a, b) end
    return false
  end
  if op == '==' then return x == y end
  if op == '!=' then return x ~= y end
  if op == '<' then return x < y end
  if op == '<=' then return x <= y end
  if op == '>' then return x > y end
  return x >= y
end

local EMPTY = {}

local function operand_values(o, cur, root)
  if o.kind == 'lit' then return { o.node } end
  local start = o.kind == 'rel' and cur or root
  if o.simple == nil then
    o.simple = true
    for _, st in ipairs(o.steps) do
      if st.k ~= 'name' or #st.names ~= 1 then o.simple = false end
    end
  end
  if o.simple then -- fast path for @.a.b: walk without building matches
    local node = start
    for _, st in ipairs(o.steps) do
      if node.t ~= 'object' then return EMPTY end
      node = node.v[st.names[1]]
      if node == nil then return EMPTY end
    end
    return { node }
  end
  local vals = {}
  for i, m in ipairs(run(o.steps, { node = start }, root)) do vals[i] = m.node end
  return vals
end

eval_expr = function(e, cur, root)
  local op = e.op
  if op == 'or' then return eval_expr(e.l, cur, root) or eval_expr(e.r, cur, root) end
  if op == 'and' then return eval_expr(e.l, cur, root) and eval_expr(e.r, cur, root) end
  if op == 'not' then return not eval_expr(e.l, cur, root) end
  local ls = operand_values(e.l, cur, root)
  if op == 'exists' then
    if e.l.kind == 'lit' then
      local n = e.l.node
      return not (n.t == 'null' or (n.t == 'boolean' and not n.v))
    end
    return #ls > 0
  end
  local rs = operand_values(e.r, cur, root)
  for _, a in ipairs(ls) do
    for _, b in ipairs(rs) do
      if compare(a, op, b) then return true end
    end
  end
  return false
end

local function apply_step(step, m, out, root)
  local node, k = m.node, step.k
  if k == 'name' then
    if node.t == 'object' then
      for _, name in ipairs(step.names) do
        local c = node.v[name]
        if c ~= nil then out[#out + 1] = { node = c, parent = node, key = name, up = m } end
      end
    end
  elseif k == 'wild' then
    children(m, out)
  elseif k == 'index' then
    if node.t == 'array' then
      local len = #node.v
      for _, ix in ipairs(step.idx) do
        local j = ix < 0 and len + ix or ix
        if j >= 0 and j < len then
          out[#out + 1] = { node = node.v[j + 1], parent = node, key = j + 1, up = m }
        end
      end
    end
  elseif k == 'slice' then
    if node.t == 'array' then
      local len = #node.v
      local from, to = step.from or 0, step.to or len
      if from < 0 then from = math.max(0, len + from) end
      if to < 0 then to = math.max(0, len + to) end
      if to > len then to = len end
      for j = from, to - 1, step.step do
        out[#out + 1] = { node = node.v[j + 1], parent = node, key = j + 1, up = m }
      end
    end
  elseif k == 'filter' then
    local kids = {}
    children(m, kids)
    for _, c in ipairs(kids) do
      if eval_expr(step.expr, c.node, root) then out[#out + 1] = c end
    end
  else -- desc: apply the inner step here, then at every descendant (pre-order)
    apply_step(step.inner, m, out, root)
    local kids = {}
    children(m, kids)
    for _, c in ipairs(kids) do apply_step(step, c, out, root) end
  end
end

run = function(steps, start, root)
  local cur = { start }
  for _, step in ipairs(steps) do
    local out = {}
    for _, m in ipairs(cur) do apply_step(step, m, out, root) end
    cur = out
    if #cur == 0 then break end
  end
  return cur
end

--- All matches of compiled path `q` in the document holder `doc` ({root=node}).
function P.query(doc, q)
  return run(q.steps, { node = doc.root, holder = doc }, doc.root)
end

--- Depth of a match (root = 0): writes that change arrays run deepest first.
function P.depth(m)
  local d = 0
  while m.up do
    d = d + 1
    m = m.up
  end
  return d
end

--- Marks the matched node and its ancestors as changed (drops their source spans, see json.lua).
function P.dirty(m)
  while m do
    m.node.i = nil
    m = m.up
  end
end

--- Replaces the matched value in its parent (or the document root).
function P.replace(doc, m, node)
  P.dirty(m.up)
  if m.parent == nil then
    doc.root = node
  else
    m.parent.v[m.key] = node
  end
  m.node = node
end

return P
