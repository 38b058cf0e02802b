"""Lambda SnapStart's after-restore hook: runs a callable in each copy restored from a snapshot (a no-op elsewhere)."""

from __future__ import annotations

from collections.abc import Callable


def after_restore(hook: Callable[[], object]) -> None:
    """Run `hook` each time Lambda resumes this process from a SnapStart snapshot, before it serves a request.

    Every restored copy starts from the same memory, so whatever init made (random state, cached secrets, open
    connections) is shared by all of them until the hook makes it again
    (https://docs.aws.amazon.com/lambda/latest/dg/snapstart-uniqueness.html). `snapshot_restore_py` ships only
    in Lambda's managed Python runtimes, 3.12 and later
    (https://docs.aws.amazon.com/lambda/latest/dg/snapstart-runtime-hooks-python.html); without it (locally, in
    tests, under `nylorun serve`) there is never a restore, so nothing is registered.
    """
    try:
        from snapshot_restore_py import register_after_restore
    except ImportError:
        return
    register_after_restore(hook)
