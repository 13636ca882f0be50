/**
 * The Lua scripts of the counter store (`counters.ts`): decide-and-count a batch, withdraw a call
 * whose answer was lost, raise a counter to an exact count.
 */

/**
 * The batch script. KEYS[i] = counter (i <= n); with a result key, KEYS[n+1] = it. ARGV[1] = the batch's count-by time
 * (Unix ms, 0 = none); ARGV[2] = how long the result key keeps this call's answer (ms, 0 = no
 * result key); ARGV[2+2i-1] = daily limit, ARGV[2+2i] = flags: 1 = hard limit, + 2 = peek (decide
 * without counting: a conditional GET that is counted later unless it ends in 304).
 * With a result key, a call made again with the same key (a retry after a lost answer or a
 * failover) returns the first answer instead of counting twice.
 * Past the count-by time, on Redis's own clock (so a script that waited behind a stalled Redis or a
 * slow network counts nothing), every item is status 3 and nothing changes.
 * Returns status, count per item: 0 = counter missing (seed it), 1 = counted, 2 = refused, 3 = too late,
 * 4 = peeked (allowed, not counted; the count is the current one).
 */
export const AUTHORIZE_BATCH_LUA = `
local keepMs = tonumber(ARGV[2]) or 0
local n = #KEYS
if keepMs > 0 then
  n = n - 1
  local earlier = redis.call('GET', KEYS[n + 1])
  if earlier == 'withdrawn' then
    local late = {}
    for i = 1, n do late[2 * i - 1] = 3; late[2 * i] = 0 end
    return late
  end
  if earlier then return cjson.decode(earlier) end
end
local out = {}
local countBy = tonumber(ARGV[1]) or 0
if countBy > 0 then
  local t = redis.call('TIME')
  if tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) > countBy then
    for i = 1, n do out[2 * i - 1] = 3; out[2 * i] = 0 end
    return out
  end
end
local counted = false
for i = 1, n do
  local c = redis.call('GET', KEYS[i])
  if not c then
    out[2 * i - 1] = 0; out[2 * i] = 0
  else
    c = tonumber(c)
    local flags = tonumber(ARGV[2 + 2 * i])
    if flags % 2 == 1 and c >= tonumber(ARGV[2 + 2 * i - 1]) then
      out[2 * i - 1] = 2; out[2 * i] = c
    elseif flags >= 2 then
      out[2 * i - 1] = 4; out[2 * i] = c
    else
      out[2 * i - 1] = 1; out[2 * i] = redis.call('INCR', KEYS[i])
      counted = true
    end
  end
end
if keepMs > 0 and counted then redis.call('SET', KEYS[n + 1], cjson.encode(out), 'PX', keepMs) end
return out
`;

/**
 * Withdraws a call whose answer was never received (Redis Cluster; the gateway answered 503): if
 * it counted, its counts are taken back (DECR, only on the counters it raised); if it never ran,
 * a marker makes it count nothing should it run late. Either way its result key then says
 * "withdrawn". KEYS = the call's counters then its result key; ARGV[1] = how long the marker stays (ms).
 * Returns the number of counts taken back.
 */
export const WITHDRAW_LUA = `
local n = #KEYS - 1
local earlier = redis.call('GET', KEYS[n + 1])
local back = 0
if earlier and earlier ~= 'withdrawn' then
  local out = cjson.decode(earlier)
  for i = 1, n do
    if out[2 * i - 1] == 1 and (tonumber(redis.call('GET', KEYS[i]) or '0') > 0) then
      redis.call('DECR', KEYS[i]); back = back + 1
    end
  end
end
redis.call('SET', KEYS[n + 1], 'withdrawn', 'PX', ARGV[1])
return back
`;

/** Raises an existing counter to at least ARGV[1] (never lowers it, never creates it). */
export const RAISE_LUA = `
local c = redis.call('GET', KEYS[1])
if c and tonumber(c) < tonumber(ARGV[1]) then redis.call('SET', KEYS[1], ARGV[1], 'KEEPTTL') end
return 1
`;
