"""Load against one server on loopback, and the server processes themselves.

The load generator is Debian's `wrk` when it is installed (`make bench` installs it), else a bounded Python
httpx asyncio generator; every server in one run gets the same generator, connections and durations.
Targets are 127.0.0.1 only.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Self
from urllib.parse import urlsplit

import httpx

REPO = Path(__file__).resolve().parents[1]
LOOPBACK = "127.0.0.1"
WRK_SCRIPT = Path(__file__).with_name("wrk.lua")
# The server processes log only warnings, like the local Runtime; tracing and metrics output are off.
SERVER_ENV = {
    "POWERTOOLS_LOG_LEVEL": "WARNING",
    "POWERTOOLS_TRACE_DISABLED": "true",
    "POWERTOOLS_METRICS_DISABLED": "true",
}


@dataclass(frozen=True)
class LoadSettings:
    generator: str  # "wrk" or "python"
    seconds: int = 10
    warmup: int = 2
    connections: int = 16


def choose_generator() -> str:
    """wrk if installed; BENCH_LOADGEN=python forces the Python generator."""
    wanted = os.environ.get("BENCH_LOADGEN", "")
    if wanted in ("wrk", "python"):
        return wanted
    return "wrk" if shutil.which("wrk") else "python"


@dataclass(frozen=True)
class Target:
    url: str
    body: str  # a JSON-RPC request; every "{{n}}" becomes a number unique to the run
    headers: dict[str, str]


@dataclass(frozen=True)
class LoadResult:
    requests_per_second: float
    p50_ms: float
    p99_ms: float
    requests: int
    errors: int  # transport errors, non-200 answers and JSON-RPC errors

    def as_dict(self) -> dict[str, float | int]:
        return {
            "requests_per_second": round(self.requests_per_second, 1),
            "p50_ms": round(self.p50_ms, 2),
            "p99_ms": round(self.p99_ms, 2),
            "requests": self.requests,
            "errors": self.errors,
        }


def measure(target: Target, settings: LoadSettings) -> LoadResult:
    """A warm-up run (discarded), then the measured run."""
    if urlsplit(target.url).hostname != LOOPBACK:
        raise ValueError(f"load only goes to {LOOPBACK}, not {target.url}")
    run = _wrk if settings.generator == "wrk" else _python
    run(target, settings.warmup, settings.connections)
    return run(target, settings.seconds, settings.connections)


def _wrk(target: Target, seconds: int, connections: int) -> LoadResult:
    env = {
        **os.environ,
        "BENCH_BODY": target.body,
        "BENCH_RUN": uuid.uuid4().hex[:8],
        "BENCH_HEADERS": "\n".join(f"{name}: {value}" for name, value in target.headers.items()),
    }
    command = ["wrk", "-t1", f"-c{connections}", f"-d{seconds}s", "--timeout", "10s", "-s", str(WRK_SCRIPT)]
    out = subprocess.run(
        [*command, target.url], env=env, capture_output=True, text=True, timeout=seconds + 30, check=True
    ).stdout
    line = next((ln for ln in out.splitlines() if ln.startswith("BENCH_RESULT ")), None)
    if line is None:
        raise RuntimeError(f"wrk printed no result:\n{out}")
    found = json.loads(line.removeprefix("BENCH_RESULT "))
    return LoadResult(
        requests_per_second=found["requests"] / (found["duration_us"] / 1e6),
        p50_ms=found["p50_us"] / 1000,
        p99_ms=found["p99_us"] / 1000,
        requests=found["requests"],
        errors=found["socket_errors"] + found["rpc_errors"],
    )


def _python(target: Target, seconds: int, connections: int) -> LoadResult:
    return asyncio.run(_python_load(target, seconds, connections))


async def _python_load(target: Target, seconds: int, connections: int) -> LoadResult:
    """`connections` workers, each sending its next request when the last is answered, until the deadline."""
    run_id, counter = uuid.uuid4().hex[:8], itertools.count(1)
    latencies: list[float] = []
    errors = 0
    limits = httpx.Limits(max_connections=connections, max_keepalive_connections=connections)
    async with httpx.AsyncClient(limits=limits, timeout=10.0, headers=target.headers) as client:
        started = time.perf_counter()
        deadline = started + seconds

        async def worker() -> None:
            nonlocal errors
            while time.perf_counter() < deadline:
                body = target.body.replace("{{n}}", f"{run_id}-{next(counter)}")
                began = time.perf_counter()
                try:
                    response = await client.post(target.url, content=body)
                    ok = response.status_code == 200 and b'"error"' not in response.content
                except httpx.HTTPError:
                    ok = False
                latencies.append(time.perf_counter() - began)
                errors += 0 if ok else 1

        await asyncio.gather(*(worker() for _ in range(connections)))
        elapsed = time.perf_counter() - started
    latencies.sort()
    return LoadResult(
        requests_per_second=len(latencies) / elapsed,
        p50_ms=_percentile(latencies, 50) * 1000,
        p99_ms=_percentile(latencies, 99) * 1000,
        requests=len(latencies),
        errors=errors,
    )


def _percentile(ordered: list[float], pct: float) -> float:
    if not ordered:
        return 0.0
    return ordered[min(len(ordered) - 1, int(len(ordered) * pct / 100))]


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((LOOPBACK, 0))
        return int(sock.getsockname()[1])


class ServerProcess:
    """`uvicorn <factory> --factory` in its own process on a free loopback port: one worker, uvloop and
    httptools, warnings only, no access log. Stopped (SIGTERM, then SIGKILL) when the block ends."""

    def __init__(self, factory: str, log_file: Path) -> None:
        self.factory = factory
        self.port = free_port()
        self._log_file = log_file
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def base_url(self) -> str:
        return f"http://{LOOPBACK}:{self.port}"

    def __enter__(self) -> Self:
        command = [
            sys.executable, "-m", "uvicorn", self.factory, "--factory",
            "--host", LOOPBACK, "--port", str(self.port), "--workers", "1",
            "--loop", "uvloop", "--http", "httptools", "--log-level", "warning", "--no-access-log",
        ]  # fmt: skip
        env = {
            **os.environ,
            **SERVER_ENV,
            "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
        }
        with self._log_file.open("wb") as log:
            self._process = subprocess.Popen(command, cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT)
        try:
            self._wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.stop()

    def _wait_ready(self, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self._process is not None
            if self._process.poll() is not None:
                raise RuntimeError(f"{self.factory} exited:\n{self._log_file.read_text()[-2000:]}")
            try:
                socket.create_connection((LOOPBACK, self.port), timeout=0.5).close()
                return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError(f"{self.factory} did not start within {timeout:.0f} s")

    def stop(self) -> None:
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)
