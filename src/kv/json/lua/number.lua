-- svcjson part 2/7: number arithmetic for NUMINCRBY / NUMMULTBY.
--
-- Lua 5.1 numbers are doubles, so integer operands are computed exactly on their decimal text
-- (arbitrary length), then kept as an integer when the result fits in a signed 64-bit integer
-- (RedisJSON's i64), else done in floating point (RedisJSON falls back to f64 on overflow).
-- Floats are printed the way serde_json/ryu prints an f64: shortest text that round-trips,
-- "2.0" for integral values, exponent form "1e16" / "1.5e-7" outside 1e-5 <= |x| < 1e16.

local N = {}
local sbyte, ssub, sformat, smatch, srep, sgsub = string.byte, string.sub, string.format,
  string.match, string.rep, string.gsub
local floor, tconcat = math.floor, table.concat

local I64_MAX = '9223372036854775807'
local I64_MIN_ABS = '9223372036854775808'

local function split(s)
  local neg = ssub(s, 1, 1) == '-'
  if neg then s = ssub(s, 2) end
  s = sgsub(s, '^0+', '')
  if s == '' then return false, '0' end
  return neg, s
end

local function cmp_abs(a, b)
  if #a ~= #b then return #a < #b and -1 or 1 end
  if a == b then return 0 end
  return a < b and -1 or 1
end

local function digits_to_string(d, n)
  local out = {}
  local j = 0
  local started = false
  for i = n, 1, -1 do
    if d[i] ~= 0 or started then
      started = true
      j = j + 1
      out[j] = d[i]
    end
  end
  if j == 0 then return '0' end
  return tconcat(out)
end

local function add_abs(a, b)
  local d, carry, i, j, n = {}, 0, #a, #b, 0
  while i > 0 or j > 0 or carry > 0 do
    local s = carry + (i > 0 and sbyte(a, i) - 48 or 0) + (j > 0 and sbyte(b, j) - 48 or 0)
    n = n + 1
    d[n] = s % 10
    carry = floor(s / 10)
    i, j = i - 1, j - 1
  end
  return digits_to_string(d, n)
end

local function sub_abs(a, b) -- requires |a| >= |b|
  local d, borrow, i, j, n = {}, 0, #a, #b, 0
  while i > 0 do
    local s = sbyte(a, i) - 48 - borrow - (j > 0 and sbyte(b, j) - 48 or 0)
    if s < 0 then
      s = s + 10
      borrow = 1
    else
      borrow = 0
    end
    n = n + 1
    d[n] = s
    i, j = i - 1, j - 1
  end
  return digits_to_string(d, n)
end

local function mul_abs(a, b)
  local la, lb = #a, #b
  local d = {}
  for k = 1, la + lb do d[k] = 0 end
  for i = la, 1, -1 do
    local x = sbyte(a, i) - 48
    if x ~= 0 then
      for j = lb, 1, -1 do
        local k = (la - i) + (lb - j) + 1
        d[k] = d[k] + x * (sbyte(b, j) - 48)
      end
    end
  end
  local carry = 0
  for k = 1, la + lb do
    local s = d[k] + carry
    d[k] = s % 10
    carry = floor(s / 10)
  end
  return digits_to_string(d, la + lb)
end

local function join(neg, abs)
  if abs == '0' then return '0' end
  return (neg and '-' or '') .. abs
end

--- Exact sum of two integer texts.
function N.int_add(x, y)
  local nx, ax = split(x)
  local ny, ay = split(y)
  if nx == ny then return join(nx, add_abs(ax, ay)) end
  local c = cmp_abs(ax, ay)
  if c == 0 then return '0' end
  if c > 0 then return join(nx, sub_abs(ax, ay)) end
  return join(ny, sub_abs(ay, ax))
end

--- Exact product of two integer texts.
function N.int_mul(x, y)
  local nx, ax = split(x)
  local ny, ay = split(y)
  return join(nx ~= ny, mul_abs(ax, ay))
end

--- True if the integer text fits in a signed 64-bit integer.
function N.fits_i64(s)
  local neg, a = split(s)
  return cmp_abs(a, neg and I64_MIN_ABS or I64_MAX) <= 0
end

--- Shortest round-trip text of a finite double, in serde_json's f64 style.
function N.format_float(x)
  if x ~= x or x == math.huge or x == -math.huge then
    error({ err = 'ERR result is not a number' }, 0)
  end
  if x == 0 then return (1 / x < 0) and '-0.0' or '0.0' end
  local s
  for prec = 0, 16 do
    s = sformat('%.' .. prec .. 'e', x)
    if tonumber(s) == x then break end
  end
  local sign, int, frac, exp = smatch(s, '^(-?)(%d)%.?(%d*)e([-+]%d+)$')
  local digits = sgsub(int .. frac, '0+$', '')
  if digits == '' then digits = '0' end
  local e = tonumber(exp)
  if e >= -5 and e <= 15 then
    if e >= 0 then
      if #digits <= e + 1 then return sign .. digits .. srep('0', e + 1 - #digits) .. '.0' end
      return sign .. ssub(digits, 1, e + 1) .. '.' .. ssub(digits, e + 2)
    end
    return sign .. '0.' .. srep('0', -e - 1) .. digits
  end
  local mant = ssub(digits, 1, 1)
  if #digits > 1 then mant = mant .. '.' .. ssub(digits, 2) end
  return sign .. mant .. 'e' .. tostring(e)
end

--- Applies NUMINCRBY ('incr') or NUMMULTBY ('mult') to number nodes; returns the new node.
function N.apply(op, node, arg)
  if node.t == 'integer' and arg.t == 'integer' then
    local r = op == 'incr' and N.int_add(node.s, arg.s) or N.int_mul(node.s, arg.s)
    if N.fits_i64(r) then return { t = 'integer', s = r } end
  end
  local a, b = tonumber(node.s), tonumber(arg.s)
  local x = op == 'incr' and a + b or a * b
  return { t = 'number', s = N.format_float(x) }
end

return N
