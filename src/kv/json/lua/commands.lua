-- svcjson part 5/7: the JSON.* commands on documents, strings, numbers and booleans, keyed by
-- lower-case name (arrays.lua has the ARR* commands; register.lua exposes each as the Redis
-- function `svcjson_<name>`).
--
-- Each callback takes (keys, args): the JSON.* arguments after the key(s); replies follow
-- RedisJSON 2.x in RESP2 (JSONPath: one entry per match, nil where the match has the wrong
-- type; legacy path: a single value or RedisJSON's error). See docs/readme/kv-json.md.

local fail, OK = J.fail, S.OK
local upper, lower = string.upper, string.lower

local function path_of(args, i) return P.compile(args[i] or '.') end

-- JSON.GET key [INDENT s] [NEWLINE s] [SPACE s] [NOESCAPE] [path ...]
local function get(keys, args)
  local fmt, paths, i = nil, {}, 1
  while i <= #args do
    local a = args[i]
    local u = #a <= 8 and upper(a) or ''
    if u == 'INDENT' or u == 'NEWLINE' or u == 'SPACE' then
      if args[i + 1] == nil then fail("ERR wrong number of arguments for 'json.get' command") end
      fmt = fmt or { indent = '', newline = '', space = '' }
      fmt[lower(u)] = args[i + 1]
      i = i + 2
    elseif u == 'NOESCAPE' then
      i = i + 1
    elseif u == 'FORMAT' then
      fail('ERR FORMAT argument is not supported on RESP2')
    else
      paths[#paths + 1] = a
      i = i + 1
    end
  end
  if #paths == 0 then paths[1] = '.' end
  local qs, legacy = {}, true
  for n, p in ipairs(paths) do
    qs[n] = P.compile(p)
    legacy = legacy and qs[n].legacy
  end
  local doc = S.load(keys[1])
  if not doc then return false end
  local function nodes(q)
    local out = {}
    for n, m in ipairs(P.query(doc, q)) do out[n] = m.node end
    return out
  end
  if #qs == 1 then
    if legacy then return J.encode(S.first(doc, qs[1]).node, fmt) end
    return J.encode_list(nodes(qs[1]), fmt)
  end
  local obj = { t = 'object', k = {}, v = {} }
  for _, q in ipairs(qs) do
    local value
    if legacy then
      local ms = P.query(doc, q)
      if #ms == 0 then fail(string.format("ERR Path '%s' does not exist", q.text)) end
      value = ms[1].node
    else
      value = { t = 'array', v = nodes(q) }
    end
    J.obj_set(obj, q.text, value)
  end
  return J.encode(obj, fmt)
end

-- JSON.MGET key [key ...] path  (keys that are missing or not JSON give nil)
local function mget(keys, args)
  local q = P.compile(args[1])
  local out = {}
  for n, key in ipairs(keys) do
    local doc = S.load(key, true)
    local reply = false
    if doc then
      local ms = P.query(doc, q)
      if not q.legacy then
        local list = {}
        for j, m in ipairs(ms) do list[j] = m.node end
        reply = J.encode_list(list)
      elseif #ms > 0 then
        reply = J.encode(ms[1].node)
      end
    end
    out[n] = reply
  end
  return out
end

-- Sets `val` at the non-root path `q` of an existing document (RedisJSON `find_paths` then
-- `find_add_paths`): replaces every match, else adds the last key to the parent object(s).
-- Returns (all targets written -> OK reply, anything written -> save); raises path errors.
local function set_at(doc, q, val, opt)
  if opt ~= 'NX' then
    local ms = P.query(doc, q)
    if #ms > 0 then
      for n, m in ipairs(ms) do P.replace(doc, m, n == 1 and val or J.copy(val)) end
      return true, true
    end
  end
  if opt == 'XX' then return false, false end
  if not P.is_static(q) then fail('ERR wrong static path') end
  local last = q.steps[#q.steps]
  if last.k == 'index' then
    if #P.query(doc, q) == 0 then fail('ERR array index out of range') end
    return false, false
  end
  local name = last.names[1]
  local parents = P.query(doc, { steps = { unpack(q.steps, 1, #q.steps - 1) } })
  if #parents == 0 then return false, false end
  local all, any = true, false
  for _, pm in ipairs(parents) do
    if pm.node.t == 'object' and pm.node.v[name] == nil then
      P.dirty(pm)
      J.obj_set(pm.node, name, any and J.copy(val) or val)
      any = true
    else
      all = false
    end
  end
  return all, any
end

-- JSON.SET key path value [NX|XX]
local function set(keys, args)
  local opt
  for i = 3, #args do
    local u = upper(args[i])
    if (u == 'NX' or u == 'XX') and opt == nil then opt = u else fail('ERR syntax error') end
  end
  local key = keys[1]
  local doc = S.load(key)
  local q = P.compile(args[1])
  local val = J.decode(args[2])
  if not doc then
    if opt == 'XX' then return false end
    if not P.is_root(q) then fail('ERR new objects must be created at the root') end
    S.save(key, { root = val })
    return OK
  end
  if P.is_root(q) then
    if opt == 'NX' then return false end
    S.save(key, { root = val })
    return OK
  end
  local all, any = set_at(doc, q, val, opt)
  if any then S.save(key, doc) end
  return all and OK or false
end

-- JSON.MSET key path value [key path value ...]: validated first, then applied in order.
local function mset(keys, args)
  local docs, triplets = {}, {}
  for n, key in ipairs(keys) do
    if docs[key] == nil then docs[key] = S.load(key) or false end
    local q = P.compile(args[2 * n - 1])
    local val = J.decode(args[2 * n])
    if not docs[key] and not P.is_root(q) then fail('ERR new objects must be created at the root') end
    triplets[n] = { key = key, q = q, val = val }
  end
  local all = true
  for _, t in ipairs(triplets) do
    local doc = docs[t.key]
    if P.is_root(t.q) then
      docs[t.key] = { root = t.val }
    elseif doc then
      all = set_at(doc, t.q, t.val, nil) and all
    else
      all = false
    end
  end
  for key, doc in pairs(docs) do
    if doc then S.save(key, doc) end
  end
  return all and OK or false
end

-- JSON.MERGE key path value (RFC 7386 merge patch; null deletes)
local function merge(keys, args)
  local key = keys[1]
  local doc = S.load(key)
  local q = P.compile(args[1])
  local val = J.decode(args[2])
  if not doc then
    if not P.is_root(q) then fail('ERR new objects must be created at the root') end
    S.save(key, { root = val }) -- nothing to merge into: stored as given (RedisJSON)
    return OK
  end
  local ms = P.query(doc, q)
  if #ms == 0 then
    if val.t == 'null' then return false end
    local all, any = set_at(doc, q, val, 'NX') -- a created leaf takes the value as given
    if any then S.save(key, doc) end
    return all and OK or false
  end
  for _, e in ipairs(S.mutation_order(ms)) do
    local m = e.m
    if val.t == 'null' and m.parent then
      P.dirty(m.up)
      if m.parent.t == 'array' then table.remove(m.parent.v, m.key) else J.obj_remove(m.parent, m.key) end
    else
      P.replace(doc, m, S.merge(m.node, val))
    end
  end
  S.save(key, doc)
  return OK
end

-- JSON.DEL / JSON.FORGET key [path] -> number of values deleted
local function del(keys, args)
  local key = keys[1]
  local doc = S.load(key)
  if not doc then return 0 end
  local q = path_of(args, 1)
  if P.is_root(q) then
    redis.call('DEL', key)
    return 1
  end
  local ms = P.query(doc, q)
  local matched, keep, seen = {}, {}, {}
  for _, m in ipairs(ms) do matched[m.node] = true end
  for _, m in ipairs(ms) do
    local nested, u = false, m.up
    while u do
      if matched[u.node] then
        nested = true
        break
      end
      u = u.up
    end
    if not nested and not seen[m.node] then
      seen[m.node] = true
      keep[#keep + 1] = m
    end
  end
  for _, m in ipairs(keep) do
    if not m.parent then
      redis.call('DEL', key)
      return 1
    end
  end
  -- Array elements go from the highest index down so earlier removals keep later indexes valid.
  table.sort(keep, function(a, b)
    local x = type(a.key) == 'number' and a.key or 0
    local y = type(b.key) == 'number' and b.key or 0
    return x > y
  end)
  for _, m in ipairs(keep) do
    P.dirty(m.up)
    if m.parent.t == 'array' then table.remove(m.parent.v, m.key) else J.obj_remove(m.parent, m.key) end
  end
  if #keep > 0 then S.save(key, doc) end
  return #keep
end

-- JSON.TYPE key [path]
local function jtype(keys, args)
  local q = path_of(args, 1)
  local doc = S.load(keys[1])
  if not doc then return false end
  local ms = P.query(doc, q)
  if q.legacy then return ms[1] and ms[1].node.t or false end
  local out = {}
  for n, m in ipairs(ms) do out[n] = m.node.t end
  return out
end

-- JSON.STRLEN key [path]
local function strlen(keys, args)
  local q = path_of(args, 1)
  local doc = S.load(keys[1])
  if q.legacy then
    if not doc then return false end
    local m = S.first(doc, q)
    if m.node.t ~= 'string' then fail(S.expected('string', m.node.t)) end
    return #m.node.v
  end
  if not doc then fail(S.NO_KEY) end
  return (S.each_typed(P.query(doc, q), 'string', function(m) return #m.node.v end))
end

-- JSON.STRAPPEND key [path] json-string
local function strappend(keys, args)
  local q, text
  if #args >= 2 then q, text = P.compile(args[1]), args[2] else q, text = P.compile('.'), args[1] end
  local doc = S.must(keys[1])
  local s = J.decode(text)
  if s.t ~= 'string' then fail(S.expected('string', text)) end
  local out, any, last = S.each_typed(P.query(doc, q), 'string', function(m)
    P.dirty(m)
    m.node.v = m.node.v .. s.v
    return #m.node.v
  end)
  if any then S.save(keys[1], doc) end
  if q.legacy then
    if not any then fail('ERR Path does not exist or not a string') end
    return last
  end
  return out
end

local function numop(op)
  return function(keys, args)
    local q = P.compile(args[1])
    local doc = S.must(keys[1])
    local num = J.decode(args[2])
    if num.t ~= 'integer' and num.t ~= 'number' then fail(S.expected('number', num.t)) end
    local results, any, last = S.each_typed(P.query(doc, q), 'num', function(m)
      local r = N.apply(op, m.node, num)
      P.replace(doc, m, r)
      return r
    end)
    if any then S.save(keys[1], doc) end
    if q.legacy then
      if not any then fail('ERR Path does not exist or does not contains a number') end
      return last.s
    end
    local list = {}
    for n, r in ipairs(results) do list[n] = r or { t = 'null' } end
    return J.encode_list(list)
  end
end

-- JSON.TOGGLE key path
local function toggle(keys, args)
  local q = path_of(args, 1)
  local doc = S.must(keys[1])
  local out, any, last = S.each_typed(P.query(doc, q), 'boolean', function(m)
    P.dirty(m)
    m.node.v = not m.node.v
    return m.node.v and 1 or 0
  end)
  if any then S.save(keys[1], doc) end
  if q.legacy then
    if not any then fail('ERR Path does not exist or not a bool') end
    return last == 1 and 'true' or 'false'
  end
  return out
end

-- JSON.CLEAR key [path] -> number of containers emptied and numbers set to 0
local function clear(keys, args)
  local q = path_of(args, 1)
  local doc = S.must(keys[1])
  local cleared, count = {}, 0
  for _, m in ipairs(P.query(doc, q)) do
    local inside, u = false, m.up
    while u do
      if cleared[u.node] then inside = true end
      u = u.up
    end
    local n, t = m.node, m.node.t
    local nonempty = (t == 'array' and #n.v > 0) or (t == 'object' and #n.k > 0)
    local nonzero = (t == 'integer' or t == 'number') and tonumber(n.s) ~= 0
    if not inside and (nonempty or nonzero) then
      cleared[n] = true
      P.replace(doc, m, nonzero and { t = 'integer', s = '0' } or S.empty_like(n))
      count = count + 1
    end
  end
  if count > 0 then S.save(keys[1], doc) end
  return count
end

local function keys_of(node)
  local out = {}
  for n, k in ipairs(node.k) do out[n] = k end
  return out
end

-- JSON.OBJKEYS key [path]
local function objkeys(keys, args)
  local q = path_of(args, 1)
  local doc = S.load(keys[1])
  if q.legacy then
    if not doc then return false end
    local ms = P.query(doc, q)
    if #ms == 0 then return false end
    if ms[1].node.t ~= 'object' then fail('ERR Path does not exist or not an object') end
    return keys_of(ms[1].node)
  end
  if not doc then fail(S.NO_KEY) end
  return (S.each_typed(P.query(doc, q), 'object', function(m) return keys_of(m.node) end))
end

-- JSON.OBJLEN key [path]
local function objlen(keys, args)
  local q = path_of(args, 1)
  local doc = S.load(keys[1])
  if q.legacy then
    if not doc then return false end
    local ms = P.query(doc, q)
    if #ms == 0 then return false end
    if ms[1].node.t ~= 'object' then fail(S.expected('object', ms[1].node.t)) end
    return #ms[1].node.k
  end
  if not doc then fail('ERR Path does not exist or not an object') end
  return (S.each_typed(P.query(doc, q), 'object', function(m) return #m.node.k end))
end

-- JSON.RESP key [path]
local function resp(keys, args)
  local q = path_of(args, 1)
  local doc = S.load(keys[1])
  if not doc then return false end
  if q.legacy then return S.resp(S.first(doc, q).node) end
  local out = {}
  for n, m in ipairs(P.query(doc, q)) do out[n] = S.resp(m.node) end
  return out
end

return {
  get = get, mget = mget, type = jtype, strlen = strlen, objkeys = objkeys, objlen = objlen,
  resp = resp, set = set, mset = mset, merge = merge, del = del, forget = del,
  strappend = strappend, numincrby = numop('incr'), nummultby = numop('mult'), toggle = toggle,
  clear = clear,
}
