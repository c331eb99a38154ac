-- wrk script: a deposit of 1 into one of 1,000 accounts, a fresh request id per request.
-- Usage: wrk -t2 -c64 -d10s -s docs/bench/deposit.lua http://127.0.0.1:8080
-- WAIT (env) chooses the stage: SENT, PROCESSED, PROJECTED, EVENT_HANDLED, ...
local counter = 0
local stage = os.getenv("WAIT") or "PROCESSED"
local accounts = tonumber(os.getenv("ACCOUNTS") or "1000")
local prefix = os.getenv("PREFIX") or tostring(os.time())
function setup(thread)
  thread:set("tid", tostring(math.random(1, 1e9)))
end
request = function()
  counter = counter + 1
  local account = "wrk-" .. prefix .. "-" .. (counter % accounts)
  local headers = {
    ["Content-Type"] = "application/json",
    ["Command-Request-Id"] = "r-" .. tid .. "-" .. counter,
    ["Command-Wait-Stage"] = stage,
  }
  return wrk.format("POST", "/account/" .. account .. "/deposit", headers, '{"amount":1}')
end
