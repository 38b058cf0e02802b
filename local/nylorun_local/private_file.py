"""Write a file only this user may read, replacing whatever was at its path and never writing through a symlink."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def write_private(path: Path, text: str) -> None:
    """`text` as a new file of mode 0600 at `path`. Whatever was there is replaced, not written into: a file keeps
    neither its mode (0644) nor its content, and a symlink is replaced itself, so the file it points to (another
    user's, planted in a shared folder) is never touched. Readers see the old file or the new one, never half."""
    # mkstemp opens with O_CREAT | O_EXCL | O_NOFOLLOW and mode 0600, in the same folder so the rename is atomic.
    fd, temp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(text)
        os.replace(temp, path)  # rename(2): replaces a symlink at `path`, never what it points to
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise
