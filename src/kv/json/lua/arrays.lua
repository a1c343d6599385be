-- svcjson part 6/7: the JSON.ARR* commands, keyed by lower-case name (see commands.lua for the
-- reply conventions). Writes on nested arrays run deepest first (S.each_typed `ordered`), as
-- RedisJSON's `sort_paths_for_mutation`, while replies stay in match order.

local fail = J.fail

local function path_of(args, i) return P.compile(args[i] or '.') end

local function values_from(args, first)
  local vals = {}
  for i = first, #args do vals[#vals + 1] = J.decode(args[i]) end
  return vals
end

-- JSON.ARRAPPEND key path json [json ...]
local function arrappend(keys, args)
  local q = P.compile(args[1])
  local vals = values_from(args, 2)
  local doc = S.must(keys[1])
  local out, any, last = S.each_typed(P.query(doc, q), 'array', function(m)
    P.dirty(m)
    for _, v in ipairs(vals) do m.node.v[#m.node.v + 1] = J.copy(v) end
    return #m.node.v
  end, true)
  if any then S.save(keys[1], doc) end
  if q.legacy then
    if not any then fail('ERR Path does not exist or not an array') end
    return last
  end
  return out
end

-- First index of `v` in array node `arr` within [start, stop) (RedisJSON `arr_first_index_single`).
local function arr_index(arr, v, start, stop)
  local len = #arr.v
  if len == 0 then return -1 end
  if start < 0 then start = math.max(0, len + start) else start = math.min(start, len - 1) end
  if stop == 0 then
    stop = len
  elseif stop < 0 then
    stop = math.max(0, len + stop)
  else
    stop = math.min(stop, len)
  end
  for i = start, stop - 1 do
    if J.equal(arr.v[i + 1], v) then return i end
  end
  return -1
end

-- JSON.ARRINDEX key path value [start [stop]]
local function arrindex(keys, args)
  local q = P.compile(args[1])
  local v = J.decode(args[2])
  local start, stop = S.int_arg(args[3] or '0'), S.int_arg(args[4] or '0')
  local doc = S.load(keys[1])
  if not doc then fail('ERR Path does not exist') end
  if q.legacy then
    local m = S.first(doc, q)
    if m.node.t ~= 'array' then fail(S.expected('array', m.node.t)) end
    return arr_index(m.node, v, start, stop)
  end
  return (S.each_typed(P.query(doc, q), 'array', function(m) return arr_index(m.node, v, start, stop) end))
end

-- JSON.ARRINSERT key path index json [json ...]
local function arrinsert(keys, args)
  local q = P.compile(args[1])
  local index = S.int_arg(args[2])
  local vals = values_from(args, 3)
  local doc = S.must(keys[1])
  local out, any, last = S.each_typed(P.query(doc, q), 'array', function(m)
    local arr = m.node.v
    local len = #arr
    if index < -len or index > len then fail('ERR index out of bounds') end
    local at = index < 0 and len + index or index
    P.dirty(m)
    for n, v in ipairs(vals) do table.insert(arr, at + n, J.copy(v)) end
    return #arr
  end, true)
  if any then S.save(keys[1], doc) end
  if q.legacy then
    if not any then fail('ERR Path does not exist or not an array') end
    return last
  end
  return out
end

-- JSON.ARRLEN key [path]
local function arrlen(keys, args)
  local q = path_of(args, 1)
  local doc = S.load(keys[1])
  if q.legacy then
    if not doc then return false end
    local ms = P.query(doc, q)
    if #ms == 0 then fail('ERR Path does not exist') end
    if ms[1].node.t ~= 'array' then fail('ERR Path does not exist or not an array') end
    return #ms[1].node.v
  end
  if not doc then fail(S.NO_KEY) end
  return (S.each_typed(P.query(doc, q), 'array', function(m) return #m.node.v end))
end

-- JSON.ARRPOP key [path [index]] -> the popped value as JSON text
local function arrpop(keys, args)
  local q = path_of(args, 1)
  local index = 9007199254740992
  if args[1] ~= nil then
    index = -1
    if args[2] ~= nil and string.match(args[2], '^-?%d+$') then index = tonumber(args[2]) end
  end
  local doc = S.must(keys[1])
  local changed = false
  local out, any, last = S.each_typed(P.query(doc, q), 'array', function(m)
    local arr = m.node.v
    local len = #arr
    if len == 0 then return false end
    local at = index < 0 and math.max(0, len + index) or math.min(index, len - 1)
    changed = true
    P.dirty(m)
    return J.encode(table.remove(arr, at + 1))
  end, true)
  if changed then S.save(keys[1], doc) end
  if q.legacy then
    if not any then fail('ERR Path does not exist or not an array') end
    return last
  end
  return out
end

-- JSON.ARRTRIM key path start stop (RedisJSON `arr_trim` index rules)
local function arrtrim(keys, args)
  local q = P.compile(args[1])
  local start, stop = S.int_arg(args[2]), S.int_arg(args[3])
  local doc = S.must(keys[1])
  local out, any, last = S.each_typed(P.query(doc, q), 'array', function(m)
    local arr = m.node.v
    local len = #arr
    local function norm(x)
      if x < 0 then return math.max(0, len + x) end
      return math.min(x, len - 1)
    end
    local e = norm(stop)
    local s = (start < 0 or start < len) and norm(start) or e + 1
    local kept = {}
    if len > 0 and s <= e then
      for i = s, e do kept[#kept + 1] = arr[i + 1] end
    end
    P.dirty(m)
    m.node.v = kept
    return #kept
  end, true)
  if any then S.save(keys[1], doc) end
  if q.legacy then
    if not any then fail('ERR Path does not exist or not an array') end
    return last
  end
  return out
end

return {
  arrappend = arrappend, arrindex = arrindex, arrinsert = arrinsert, arrlen = arrlen,
  arrpop = arrpop, arrtrim = arrtrim,
}
