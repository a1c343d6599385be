-- svcjson part 4/7: document storage and shared command helpers.
--
-- The functions run HGET / EXISTS / HSET / DEL on the caller's behalf, so a restricted ACL
-- user needs those (the read-only user: +@read +fcall_ro).
--
-- Storage: a JSON document is a Redis HASH with exactly one field, MARK (a NUL byte followed by
-- "svcjson:1", the format version), whose value is the compact JSON text. A user's SET/HSET never
-- produces that field name in practice, so "hash holding MARK" identifies a document; any other
-- key type, or a hash without MARK, is not JSON (WRONGTYPE). User commands on a document: GET ->
-- WRONGTYPE (as with RedisJSON), TYPE -> hash, SET/DEL/EXPIRE/RENAME/COPY behave as on any key.

local S = {}
local fail = J.fail
local sformat = string.format

S.MARK = '\0svcjson:1'
S.WRONGTYPE = 'WRONGTYPE Operation against a key holding the wrong kind of value'
S.NO_KEY = "ERR could not perform this operation on a key that doesn't exist"
S.OK = { ok = 'OK' }

-- Parsed-document cache. Parsing dominates the cost of a command (~3 us per JSON value), so the
-- trees of recently used documents are kept in the library's Lua state, keyed by key name and
-- valid only while the stored text is byte-identical (Lua interns strings: one memcmp). A write
-- stores the new text with the mutated tree. A failed call flushes the cache (its tree may be
-- half-mutated); a write call drops documents it loaded but did not save. Bounded by
-- CACHE_MAX_BYTES of JSON text in total (then flushed) and never holds one larger document.
local CACHE_MAX_BYTES = 2 * 1024 * 1024
local cache, cache_bytes = {}, 0
local touched = {}

local function cache_put(key, text, root, gen)
  local old = cache[key]
  if old then cache_bytes = cache_bytes - #old.text end
  cache[key] = nil
  if #text > CACHE_MAX_BYTES then return end
  if cache_bytes + #text > CACHE_MAX_BYTES then
    cache, cache_bytes = {}, 0
  end
  cache[key] = { text = text, root = root, gen = gen or 0 }
  cache_bytes = cache_bytes + #text
end

--- Called by register.lua around every command: `done(ok, write)` after it.
function S.begin()
  touched = {}
end
function S.done(ok, write)
  if not ok then
    cache, cache_bytes = {}, 0
  elseif write then
    for key, saved in pairs(touched) do
      if not saved and cache[key] then
        cache_bytes = cache_bytes - #cache[key].text
        cache[key] = nil
      end
    end
  end
  touched = {}
end

--- Loads the document at `key`: {root=node}, nil when the key does not exist.
-- Raises WRONGTYPE for a key that is not a document (`soft`: returns false instead).
function S.load(key, soft)
  local text = redis.pcall('HGET', key, S.MARK)
  if type(text) == 'table' then
    local msg = tostring(text.err)
    if string.sub(msg, 1, 9) ~= 'WRONGTYPE' then fail(msg) end -- e.g. NOPERM from ACL
    if soft then return false end
    fail(S.WRONGTYPE)
  end
  if not text then
    if redis.call('EXISTS', key) == 1 then
      if soft then return false end
      fail(S.WRONGTYPE)
    end
    return nil
  end
  if touched[key] == nil then touched[key] = false end
  local hit = cache[key]
  if hit and hit.text == text then return { root = hit.root } end
  local root = J.decode(text, true)
  cache_put(key, text, root)
  return { root = root }
end

--- Loads a document that must exist (RedisJSON `nonexistent_key` error otherwise).
function S.must(key)
  local doc = S.load(key)
  if not doc then fail(S.NO_KEY) end
  return doc
end

--- Writes the document (keeps the key's TTL, like RedisJSON's in-place update).
-- Every FULL_EVERY saves of a cached tree, it is encoded in full, so its spans refer to one text
-- again: the tree keeps at most that many older texts alive.
local FULL_EVERY = 8

function S.save(key, doc)
  local hit = cache[key]
  local gen = (hit and hit.root == doc.root) and hit.gen + 1 or 0
  local mode = 'save'
  if gen >= FULL_EVERY then mode, gen = 'full', 0 end
  local text = J.encode(doc.root, nil, mode)
  redis.call('HSET', key, S.MARK, text)
  touched[key] = true
  cache_put(key, text, doc.root, gen)
end

--- First match of a legacy path, or RedisJSON's "Path ... does not exist" error.
function S.first(doc, q)
  local ms = P.query(doc, q)
  if #ms == 0 then fail(sformat("ERR Path '%s' does not exist", q.norm)) end
  return ms[1]
end

--- RedisJSON `err_msg_json_expected`.
function S.expected(want, found)
  return sformat('WRONGTYPE wrong type of path value - expected %s but found %s', want, found)
end

--- Parses an integer argument (Redis's integer parsing error text otherwise).
function S.int_arg(s)
  if s == nil or not string.match(s, '^-?%d+$') then
    fail('ERR value is not an integer or out of range')
  end
  return tonumber(s)
end

--- Matches ordered for mutation: deepest first (a parent array changes after its children),
-- keeping the original position in `pos` so replies stay in match order.
function S.mutation_order(ms)
  local order = {}
  for i, m in ipairs(ms) do order[i] = { m = m, pos = i, depth = P.depth(m) } end
  table.sort(order, function(a, b)
    if a.depth ~= b.depth then return a.depth > b.depth end
    return a.pos < b.pos
  end)
  return order
end

--- Runs `fn(match) -> reply | nil` over the matches whose node has type `want` (nil = any);
-- returns replies in match order with false for a skipped match, whether any ran, and the
-- reply of the last one run (legacy writes reply with the last path's result, as RedisJSON).
function S.each_typed(ms, want, fn, ordered)
  local out, any, last = {}, false, nil
  for i = 1, #ms do out[i] = false end
  local list = ordered and S.mutation_order(ms) or nil
  if not list then
    list = {}
    for i, m in ipairs(ms) do list[i] = { m = m, pos = i } end
  end
  for _, e in ipairs(list) do
    local t = e.m.node.t
    if want == nil or t == want or (want == 'num' and (t == 'integer' or t == 'number')) then
      any = true
      local r = fn(e.m)
      if r == nil then r = false end
      out[e.pos] = r
      last = r
    end
  end
  return out, any, last
end

--- Empty container of the same type (JSON.CLEAR).
function S.empty_like(node)
  if node.t == 'array' then return { t = 'array', v = {} } end
  return { t = 'object', k = {}, v = {} }
end

--- RFC 7386 JSON merge patch of `patch` into `target` (returns the merged node).
function S.merge(target, patch)
  if patch.t ~= 'object' then return J.copy(patch) end
  if target == nil or target.t ~= 'object' then target = { t = 'object', k = {}, v = {} } end
  target.i = nil -- changed below: its source span is stale
  for _, k in ipairs(patch.k) do
    local pv = patch.v[k]
    if pv.t == 'null' then
      J.obj_remove(target, k)
    else
      J.obj_set(target, k, S.merge(target.v[k], pv))
    end
  end
  return target
end

--- JSON.RESP form of a node (RESP2 via Lua: null -> nil, booleans/markers -> status replies).
function S.resp(node)
  local t = node.t
  if t == 'null' then return false end
  if t == 'boolean' then return { ok = node.v and 'true' or 'false' } end
  if t == 'integer' then
    local x = tonumber(node.s)
    if math.abs(x) < 9007199254740992 then return x end
    return node.s
  end
  if t == 'number' or t == 'string' then return node.s or node.v end
  local out = { { ok = t == 'array' and '[' or '{' } }
  if t == 'array' then
    for _, item in ipairs(node.v) do out[#out + 1] = S.resp(item) end
  else
    for _, k in ipairs(node.k) do
      out[#out + 1] = k
      out[#out + 1] = S.resp(node.v[k])
    end
  end
  return out
end

return S
