"""`nylorun serve` from an installed wheel, outside the repository: the template and the functions travel as
package data, the example Agents are served by default, and SIGINT or SIGTERM stops it cleanly (exit 0, no
traceback, within seconds).

Quick and offline apart from the build backend: `pip wheel --no-deps` builds the wheel, which goes into a new venv
without pip and without dependencies (`--no-deps`); a .pth file in that venv puts this environment's
site-packages after its own, so the dependencies (moto, uvicorn, fastapi…) are the ones already installed, while
`nylorun*` come from the wheel (the editable install's finder is not loaded from a .pth path entry).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import sysconfig
import time
import venv
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from nylorun_local.aws import free_port

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The bin/ folder of a fresh venv holding the wheel of this repository."""
    work = tmp_path_factory.mktemp("installed")
    wheels = work / "wheels"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", str(wheels), str(ROOT)],
        check=True, cwd=work, timeout=120, capture_output=True,
    )  # fmt: skip
    (wheel,) = wheels.glob("nylorun_runtime_aws-*.whl")
    env_dir = work / "venv"
    venv.EnvBuilder(with_pip=False).create(env_dir)
    python = env_dir / "bin" / "python"
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet", "--no-deps", "--no-index",
         str(wheel)],
        check=True, cwd=work, timeout=120, capture_output=True,
    )  # fmt: skip
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True, capture_output=True, text=True,
    ).stdout.strip()
    (Path(site) / "_nylorun_test_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    yield env_dir / "bin"


def clean_env() -> dict[str, str]:
    return {
        k: v
        for k, v in os.environ.items()
        if k not in ("PYTHONPATH", "NYLORUN_AGENTS", "VIRTUAL_ENV") and not k.startswith(("AWS_", "NYLORUN_"))
    }


def test_the_packages_come_from_the_wheel(installed: Path, tmp_path: Path) -> None:
    # When: the installed venv's python imports the four packages, from a folder outside the repository
    script = (
        "import nylorun, nylorun_local.template as t, nylorun_client, nylorun_examples;"
        "print(nylorun.__file__); print(t.TEMPLATE, t.TEMPLATE.is_file(), t.TEMPLATE.is_symlink())"
    )
    out = subprocess.run(
        [str(installed / "python"), "-c", script],
        check=True, capture_output=True, text=True, cwd=tmp_path, env=clean_env(), timeout=60,
    ).stdout.splitlines()  # fmt: skip
    # Then: they are the venv's copies, and the template is a file in the package, not a link into the repo
    assert str(ROOT) not in out[0] and "site-packages" in out[0], out
    assert out[1].endswith(" True False") and str(ROOT) not in out[1], out


@pytest.mark.parametrize(("stop", "name"), [(signal.SIGINT, "SIGINT"), (signal.SIGTERM, "SIGTERM")])
def test_serve_from_the_wheel_serves_the_examples_and_stops_cleanly(
    installed: Path, tmp_path: Path, stop: signal.Signals, name: str
) -> None:
    port = free_port()
    # Given: `nylorun serve` started from the installed console script, outside the repository
    process = subprocess.Popen(
        [str(installed / "nylorun"), "serve", "--auth", "none", "--port", str(port)],
        cwd=tmp_path, env=clean_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    card_url = f"http://127.0.0.1:{port}/v1/a2a/agents/echo/.well-known/agent-card.json"
    deadline = time.monotonic() + 60
    try:
        while True:
            try:
                card = httpx.get(card_url, timeout=2)
                if card.status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if process.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"nylorun serve did not start: {process.communicate(timeout=5)[0][-3000:]}")
            time.sleep(0.2)
        # Then: the example Agents are served
        assert card.json()["name"] == "echo"
        for agent in ("tck", "support"):
            assert httpx.get(card_url.replace("/echo/", f"/{agent}/"), timeout=5).status_code == 200
        # When: it gets SIGINT or SIGTERM
        stopped_at = time.monotonic()
        process.send_signal(stop)
        output = process.communicate(timeout=15)[0]
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    # Then: it stops within seconds, exit code 0, no traceback, and says so
    assert time.monotonic() - stopped_at < 10
    assert process.returncode == 0, output[-3000:]
    assert "Traceback" not in output, output[-3000:]
    assert f"Nylorun Runtime stopped ({name})" in output, output[-3000:]
    assert "the examples (nylorun_examples:AGENTS" in output
