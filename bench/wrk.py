"""HTTP load from wrk, the C load generator, not a Python thread pool (issue 17: the generator
must not be what limits the figure on two shared cores).

`run()` drives wrk with the Lua script below and returns its figures, parsed from one JSON line
the script's `done()` prints. Each wrk thread holds one connection (threads = connections), so a
request count can bound the run exactly: a thread stops after its share of the responses
(`wrk.thread:stop()`). wrk itself sleeps for its whole `--duration` before it collects the
threads, so the script prints a line when a thread is done and `run()` interrupts wrk (SIGINT:
wrk then reports as usual) once every thread has; the duration stays the upper bound. The
seconds are measured by the script (first request sent -> last response read, CLOCK_MONOTONIC
through LuaJIT's ffi), not wrk's wall time.

Two kinds of load:
- `requests_file`: prepared raw HTTP/1.1 requests (e.g. signed callbacks), written by
  `write_requests`; thread t of T sends the requests t, t+T, t+2T... in order, each once.
- `submissions`: POST /api/v1/reviews/ with external ids unique in the run (tag, thread, count).

wrk comes from the distribution's packages: `ensure()` installs it (apt-get) when missing.
"""

from __future__ import annotations

import json
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

LUA = r"""
local ffi = require("ffi")
ffi.cdef[[
typedef struct { long tv_sec; long tv_nsec; } bench_timespec;
int clock_gettime(int clk_id, bench_timespec *tp);
]]
local ts = ffi.new("bench_timespec")
local function now_us()
  ffi.C.clock_gettime(1, ts)  -- CLOCK_MONOTONIC
  return tonumber(ts.tv_sec) * 1000000 + tonumber(ts.tv_nsec) / 1000
end

threads = {}
local count = 0
function setup(thread)
  count = count + 1
  thread:set("tid", count)
  table.insert(threads, thread)
end

local mode, limit, requests, path, headers, tag, texts, sink, per_author
sent, answered, first_us, last_us, statuses = 0, 0, 0, 0, {}

-- A thread that has its responses stops; but wrk reconnects after a `Connection: close`
-- response before the stop takes effect, and an idle connection would hold a gunicorn sync
-- worker until its timeout. So the reconnect goes to the driver's sink socket instead.
local function finish()
  wrk.thread.addr = sink
  io.write("WRKTHREADDONE\n")
  io.flush()
  wrk.thread:stop()
end

function init(args)
  mode = args[1]
  local nthreads = tonumber(args[2])
  limit = tonumber(args[3])  -- responses this thread waits for (0: until the duration ends)
  sink = wrk.lookup("127.0.0.1", args[4])[1]
  table.remove(args, 4)
  if mode == "file" then
    local f = assert(io.open(args[4], "rb"))
    local data = f:read("*a")
    f:close()
    requests = {}
    local pos, index = 1, 0
    while pos <= #data do
      local eol = data:find("\n", pos, true)
      local size = tonumber(data:sub(pos, eol - 1))
      if index % nthreads == tid - 1 then
        table.insert(requests, data:sub(eol + 1, eol + size))
      end
      index = index + 1
      pos = eol + size + 1
    end
    if limit == 0 or limit > #requests then limit = #requests end
  else  -- submissions
    path, tag, per_author = args[4], args[6], tonumber(args[7])
    headers = {["Authorization"] = "Bearer " .. args[5], ["Content-Type"] = "application/json"}
    texts = {}
    for i = 8, #args do table.insert(texts, args[i]) end
  end
  if limit == 0 and mode == "file" then finish() end
end

function request()
  sent = sent + 1
  if first_us == 0 then first_us = now_us() end
  if mode == "file" then
    return requests[(sent - 1) % #requests + 1]
  end
  local text = texts[(sent - 1) % #texts + 1]
  local body
  if per_author > 0 then  -- each connection's authors, per_author reviews each
    body = string.format('{"external_id":"%s-%d-%d","content_type":"text","text":"%s","author_id":"%s-a%d-%d"}',
                         tag, tid, sent, text, tag, tid, math.floor((sent - 1) / per_author))
  else
    body = string.format('{"external_id":"%s-%d-%d","content_type":"text","text":"%s"}', tag, tid, sent, text)
  end
  return wrk.format("POST", path, headers, body)
end

function response(status, hdrs, body)
  answered = answered + 1
  last_us = now_us()
  statuses[status] = (statuses[status] or 0) + 1
  if limit > 0 and answered >= limit then finish() end
end

function done(summary, latency, reqs)
  local first, last, total = nil, 0, {}
  for _, t in ipairs(threads) do
    local f, l = t:get("first_us"), t:get("last_us")
    if f > 0 and (first == nil or f < first) then first = f end
    if l > last then last = l end
    for status, n in pairs(t:get("statuses")) do total[status] = (total[status] or 0) + n end
  end
  local parts = {}
  for status, n in pairs(total) do table.insert(parts, string.format('"%d": %d', status, n)) end
  local e = summary.errors
  io.write(string.format(
    'WRKJSON {"requests": %d, "seconds": %.6f, "statuses": {%s}, "errors": {"connect": %d, "read": %d, ' ..
    '"write": %d, "status": %d, "timeout": %d}, "p50_ms": %.3f, "p99_ms": %.3f, "max_ms": %.3f, ' ..
    '"wrk_seconds": %.6f}\n',
    summary.requests, first and (last - first) / 1e6 or 0, table.concat(parts, ", "),
    e.connect, e.read, e.write, e.status, e.timeout,
    latency:percentile(50) / 1000, latency:percentile(99) / 1000, latency.max / 1000, summary.duration / 1e6))
end
"""


class WrkUnavailable(RuntimeError):
    pass


@dataclass
class WrkResult:
    requests: int  # responses read
    seconds: float  # first request sent -> last response read
    statuses: Counter = field(default_factory=Counter)  # HTTP status -> responses
    socket_errors: dict = field(default_factory=dict)  # connect, read, write, timeout
    p50_ms: float = 0.0
    p99_ms: float = 0.0
    max_ms: float = 0.0

    @property
    def ok(self) -> int:
        return sum(n for status, n in self.statuses.items() if 200 <= status < 300)

    @property
    def non_2xx(self) -> int:
        return self.requests - self.ok

    @property
    def rate(self) -> float:
        """2xx responses a second (other statuses and errors are counted, not rated)."""
        return self.ok / self.seconds if self.seconds else 0.0

    def describe_errors(self) -> str:
        bad = {str(s): n for s, n in self.statuses.items() if not 200 <= s < 300}
        bad.update({k: n for k, n in self.socket_errors.items() if n})
        return ", ".join(f"{n}x{what}" for what, n in sorted(bad.items())) or "0"


def ensure() -> str:
    """The wrk binary; installed from the distribution's packages (apt-get) when missing."""
    found = shutil.which("wrk")
    if found:
        return found
    if not shutil.which("apt-get"):
        raise WrkUnavailable("wrk is not installed and apt-get is not available: install wrk (https://github.com/wg/wrk)")
    for command in (["apt-get", "update", "-q"], ["apt-get", "install", "-y", "-q", "wrk"]):
        run = subprocess.run(command, capture_output=True, text=True)
        if run.returncode:
            raise WrkUnavailable(f"could not install wrk ({' '.join(command)} exited {run.returncode}):\n"
                                 f"{run.stderr.strip()[-2000:]}\nInstall it yourself: apt-get install wrk")
    found = shutil.which("wrk")
    if not found:
        raise WrkUnavailable("apt-get installed wrk but it is not on PATH")
    return found


def write_requests(requests: list[bytes], path: Path) -> None:
    """Prepared raw requests for `requests_file`, each as `<length>\\n<bytes>`."""
    with open(path, "wb") as f:
        for raw in requests:
            f.write(b"%d\n" % len(raw))
            f.write(raw)


def requests_file(port: int, path: Path, *, connections: int = 8, limit: int = 0,
                  max_seconds: float = 60) -> WrkResult:
    """Send the prepared requests in `path` (each once; `limit`: at most that many per connection)."""
    return _run(port, ["file", str(connections), str(limit), str(path)], connections, max_seconds)


def submissions(port: int, token: str, *, tag: str, count: int, texts: list[str], connections: int = 8,
                path: str = "/api/v1/reviews/", max_seconds: float = 120, per_author: int = 0) -> WrkResult:
    """POST `count` submissions (rounded up to a multiple of `connections`) with unique external ids;
    `per_author` > 0: each names an author, a new one every `per_author` submissions of a connection
    (a connection's first may get one fewer: wrk may build a request it never sends)."""
    per_thread = -(-count // connections)
    for text in texts:
        if '"' in text or "\\" in text:
            raise ValueError(f"texts are put into JSON by the Lua script: no quotes or backslashes ({text!r})")
    return _run(port, ["submit", str(connections), str(per_thread), path, token, tag, str(per_author), *texts],
                connections, max_seconds,
                url_path=path)


def _run(port: int, args: list[str], connections: int, max_seconds: float, url_path: str = "/") -> WrkResult:
    binary = ensure()
    with tempfile.NamedTemporaryFile("w", suffix=".lua") as script, socket.socket() as sink:
        sink.bind(("127.0.0.1", 0))
        sink.listen(256)  # never accepted: the finished threads' reconnects land here
        args = [*args[:3], str(sink.getsockname()[1]), *args[3:]]
        script.write(LUA)
        script.flush()
        command = [binary, "-t", str(connections), "-c", str(connections), "-d", f"{max(1, int(max_seconds))}s",
                   "--timeout", "30s", "-s", script.name, f"http://127.0.0.1:{port}{url_path}", "--", *args]
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        done_threads, figures, lines = 0, None, []
        for line in process.stdout:
            lines.append(line)
            if line.startswith("WRKTHREADDONE"):
                done_threads += 1
                if done_threads == connections:
                    time.sleep(0.05)
                    process.send_signal(signal.SIGINT)  # wrk reports at once instead of sleeping out -d
            elif line.startswith("WRKJSON "):
                figures = json.loads(line[len("WRKJSON "):])
        process.wait()
        if figures is None:
            raise RuntimeError(f"wrk exited {process.returncode} without figures:\n{''.join(lines)}{process.stderr.read()}")
    errors = figures["errors"]
    return WrkResult(
        requests=figures["requests"], seconds=figures["seconds"],
        statuses=Counter({int(k): v for k, v in figures["statuses"].items()}),
        socket_errors={k: errors[k] for k in ("connect", "read", "write", "timeout")},
        p50_ms=figures["p50_ms"], p99_ms=figures["p99_ms"], max_ms=figures["max_ms"],
    )
