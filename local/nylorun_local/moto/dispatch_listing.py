"""moto's server lists (and stats) its package folder for every request, to find the request's backend.

Written for moto 5.2.5 (pinned in pyproject.toml). Only makes the local stand-in faster: `host in
list_of_moto_modules()` stats each of ~170 entries per request, under the dispatcher's one lock, and every stat lets
go of the interpreter lock, so a request waits its turn ~170 times while other threads run (next to one thread that
only computes, a task with one push config took 10 s from send to delivery instead of 0.3 s). The folder does not
change while the process runs: it is listed once (bench/README.md, "The local stand-in's patches").
tests/integration/test_local_aws.py (every request to moto's server) fails if moto's dispatch changes under it.
"""

from __future__ import annotations

from nylorun_local.moto.patching import once, replace


@once
def install() -> None:
    from moto import backends

    modules = tuple(backends.list_of_moto_modules())
    replace(__name__, backends, "list_of_moto_modules", lambda: modules)  # werkzeug_app calls it by module
