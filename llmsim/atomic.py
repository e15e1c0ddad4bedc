"""Files written whole or not at all: every output llmsim writes goes through ``atomic_file``."""

from __future__ import annotations

import os
import stat
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


class WriteError(OSError):
    """An output that could not be written (full disk, no permission): the CLI prints it on one line and
    exits with status 2."""

    def __str__(self) -> str:
        return f"{self.filename}: cannot write: {self.strerror or self.args[0]}"


@contextmanager
def atomic_file(path: str | Path) -> Iterator[str]:
    """Yields a temporary path beside ``path``; on success it is renamed over ``path``, on any error it is
    removed: never a half-written file. A ``path`` that is a symlink is written through (its target is
    replaced); an existing file keeps its mode, a new one gets the mode a new file gets (mkstemp makes 0600).
    An ``OSError`` on the way becomes a ``WriteError`` naming ``path``."""
    target = Path(os.path.realpath(path))
    try:
        mode = stat.S_IMODE(os.stat(target).st_mode)
    except OSError:
        mask = os.umask(0)
        os.umask(mask)
        mode = 0o666 & ~mask
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=target.suffix, dir=str(target.parent))
    except OSError as err:
        raise WriteError(err.errno, err.strerror, str(path)) from None
    os.close(fd)
    try:
        yield tmp
        os.chmod(tmp, mode)
        os.replace(tmp, target)
    except OSError as err:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(err, WriteError):
            raise
        raise WriteError(err.errno, err.strerror, str(path)) from None
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
