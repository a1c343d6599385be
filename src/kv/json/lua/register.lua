-- svcjson part 7/7: registration of the Redis functions.
--
-- Library code runs at FUNCTION LOAD without access to Lua's standard globals (string, table,
-- ipairs, ... are only reachable while a function is being called), so `build` (modules 1-6)
-- runs on the first call and the lists below use no globals. Reads are registered with
-- flags={'no-writes'} so the read-only ACL user can call them with FCALL_RO.

-- Errors are raised inside the library as {err='...'} tables; they are caught here and returned
-- as the reply (a raised error would get " script: ..., on @user_function:N." appended).
local impl, store
local function callback(name, write)
  return function(keys, args)
    if not impl then impl, store = build() end
    store.begin()
    local ok, res = pcall(impl[name], keys, args)
    store.done(ok, write)
    if ok then return res end
    if type(res) == 'table' and res.err then return { err = res.err } end
    res = tostring(res) -- Redis hands error tables to pcall as their message string
    if string.match(res, '^[A-Z]+ ') then return { err = res } end
    return { err = 'ERR svcjson internal error: ' .. res }
  end
end

local READ = { 'get', 'mget', 'type', 'strlen', 'arrindex', 'arrlen', 'objkeys', 'objlen', 'resp' }
-- Writes that can grow a document are refused under maxmemory pressure (RedisJSON: DenyOOM);
-- the others (which delete, shrink or change values in place) are flagged allow-oom, as RedisJSON.
local GROW = { 'set', 'mset', 'merge', 'strappend', 'arrappend', 'arrinsert' }
local OTHER = { 'del', 'forget', 'numincrby', 'nummultby', 'toggle', 'clear', 'arrpop', 'arrtrim' }

for i = 1, #READ do
  redis.register_function({ function_name = 'svcjson_' .. READ[i], callback = callback(READ[i], false),
    flags = { 'no-writes' } })
end
for i = 1, #GROW do
  redis.register_function({ function_name = 'svcjson_' .. GROW[i], callback = callback(GROW[i], true) })
end
for i = 1, #OTHER do
  redis.register_function({ function_name = 'svcjson_' .. OTHER[i], callback = callback(OTHER[i], true),
    flags = { 'allow-oom' } })
end
