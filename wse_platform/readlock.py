"""A reader's lock on the warehouse: shared among readers, exclusive against writers.

Writers take `<db>.lock` with filelock's `FileLock`, an exclusive `flock` on that file. A reader
takes a *shared* `flock` on the same file, so any number of readers (`wse sql`, `wse status`, the
UI's metadata queries) hold it at once, and a writer waits until they are done (and they for the
writer). Same interface as the `FileLock` calls `Warehouse` makes (`acquire(timeout)` raising
`filelock.Timeout`, `release()`). Without `fcntl` (Windows) `AVAILABLE` is False and readers take
the exclusive lock as before.
"""
from __future__ import annotations

import errno
import os
import time

from filelock import Timeout

try:
    import fcntl
    AVAILABLE = True
except ImportError:  # pragma: no cover - Windows
    fcntl = None
    AVAILABLE = False

_BUSY = {errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK}


class SharedFileLock:
    def __init__(self, lock_file: str, poll_s: float = 0.05):
        self.lock_file, self.poll_s = lock_file, poll_s
        self._fd: int | None = None

    def acquire(self, timeout: float) -> None:
        try:
            fd = os.open(self.lock_file, os.O_RDWR | os.O_CREAT, 0o644)
        except PermissionError:  # a lock file we may not write: a shared flock needs reading only
            fd = os.open(self.lock_file, os.O_RDONLY)
        end = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
                self._fd = fd
                return
            except OSError as err:
                if err.errno not in _BUSY:
                    os.close(fd)
                    raise
            if time.monotonic() >= end:
                os.close(fd)
                raise Timeout(self.lock_file)
            time.sleep(self.poll_s)

    def release(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            try:
                fcntl.flock(fd, fcntl.LOCK_UN)
            finally:
                os.close(fd)
