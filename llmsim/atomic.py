"""Files written whole or not at all: every output llmsim writes goes through ``atomic_file``."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def atomic_file(path: str | Path) -> Iterator[str]:
    """Yields a temporary path beside ``path``; on success it is renamed over ``path`` with the mode a new
    file gets (mkstemp makes 0600), on any error it is removed: never a half-written file."""
    target = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=target.suffix, dir=str(target.parent))
    os.close(fd)
    try:
        yield tmp
        mask = os.umask(0)
        os.umask(mask)
        os.chmod(tmp, 0o666 & ~mask)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
