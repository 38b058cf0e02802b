-- One JSON-RPC POST per request, for `make bench` (bench/load.py sets the environment):
--   BENCH_BODY     the request body; every "{{n}}" becomes a number unique to this run
--   BENCH_RUN      a run id (makes messageIds unique across runs and threads)
--   BENCH_HEADERS  "Name: value" lines
-- An answer that is not HTTP 200, or that carries a JSON-RPC "error", counts as an error.
-- At the end one line: BENCH_RESULT {json}.

local threads = {}

function setup(thread)
  thread:set("thread_id", #threads + 1)
  table.insert(threads, thread)
end

function init(args)
  body_template = os.getenv("BENCH_BODY")
  prefix = os.getenv("BENCH_RUN") .. "-" .. thread_id
  counter = 0
  rpc_errors = 0
  wrk.method = "POST"
  for name, value in string.gmatch(os.getenv("BENCH_HEADERS") or "", "([^:\n]+): ([^\n]*)") do
    wrk.headers[name] = value
  end
end

function request()
  counter = counter + 1
  local body = string.gsub(body_template, "{{n}}", prefix .. "-" .. counter)
  return wrk.format(nil, nil, nil, body)
end

function response(status, headers, body)
  if status ~= 200 or string.find(body, '"error"', 1, true) then
    rpc_errors = rpc_errors + 1
  end
end

function done(summary, latency, requests)
  local rpc = 0
  for _, thread in ipairs(threads) do
    rpc = rpc + thread:get("rpc_errors")
  end
  local e = summary.errors
  io.write(string.format(
    'BENCH_RESULT {"requests":%d,"duration_us":%d,"p50_us":%d,"p99_us":%d,"socket_errors":%d,"rpc_errors":%d}\n',
    summary.requests, summary.duration, latency:percentile(50), latency:percentile(99),
    e.connect + e.read + e.write + e.timeout, rpc))
end
