"""Full and read-only disks, named as what they are (never as a corrupt file).

SQLite and DuckDB report a full disk as "database or disk is full" or "disk I/O error", and a
read-only file as "attempt to write a readonly database" or "unable to open database file";
taken at their word these read like a broken file, and the advice to move it aside throws away
healthy data. `diagnose(path, err, ...)` looks at the error chain (errno and wording) and at the
disk itself (free space, read-only mount, file and folder permissions, immutable files) and
returns the real cause with a fix that keeps the data, or None when the disk is not the problem.
`storage_problem` is the same check without an error, for `wse doctor`.
"""
from __future__ import annotations

import errno
import os
import shutil
from pathlib import Path

LOW_SPACE = 16 * 1024 * 1024   # below this much free space an I/O error is taken to be the full disk
NO_SPACE_ERRNOS = {errno.ENOSPC, errno.EDQUOT}
READ_ONLY_ERRNOS = {errno.EROFS, errno.EACCES, errno.EPERM}
_NO_SPACE_TEXT = ("no space left on device", "database or disk is full", "disk quota exceeded", "disk is full")
_READ_ONLY_TEXT = ("read-only file system", "readonly database", "permission denied", "operation not permitted")
_IO_TEXT = ("disk i/o error", "input/output error", "unable to open database file", "could not write",
            "io error", "could not open file", "cannot open file", "failed to create")


def _chain(err: BaseException | None) -> list[BaseException]:
    out: list[BaseException] = []
    while err is not None and err not in out:
        out.append(err)
        err = err.__cause__ or err.__context__
    return out


def _existing(path: Path) -> Path:
    p = Path(path)
    while not p.exists() and p != p.parent:
        p = p.parent
    return p


def free_bytes(path: Path) -> int | None:
    try:
        return shutil.disk_usage(_existing(path)).free
    except OSError:
        return None


def _size(n: int | None) -> str:
    if n is None:
        return "unknown space"
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TB"


def read_only_reason(path: Path, is_dir: bool = False) -> tuple[str, str] | None:
    """(what is read-only, how to make it writable), or None when `path` can be written.

    `os.access` goes through the kernel's permission check, so it also refuses an immutable
    (`chattr +i`) file or folder and a read-only mount, for root too."""
    path = Path(path)
    anchor = _existing(path)
    try:
        if os.statvfs(anchor).f_flag & os.ST_RDONLY:
            return (f"the file system holding {anchor} is mounted read-only",
                    f"remount it read-write (mount -o remount,rw <mount point of {anchor}>)")
    except OSError:
        pass
    if path.exists() and not is_dir and not os.access(path, os.W_OK):
        return (f"the file {path} is read-only (no write permission, or immutable)",
                f"chmod u+w {path} (if it is immutable: chattr -i {path})")
    folder = path if is_dir and path.exists() else _existing(path if is_dir else path.parent)
    if not os.access(folder, os.W_OK | os.X_OK):
        return (f"the folder {folder} is read-only (no write permission, or immutable)",
                f"chmod u+w {folder} (if it is immutable: chattr -i {folder})")
    return None


def diagnose(path: Path, err: BaseException | None, what: str, setting: str, is_dir: bool = False) -> str | None:
    """The real cause when `err` comes from a full or read-only disk under `path`, with a fix that
    keeps the data; None when neither the error nor the disk points there (then the file itself
    may be the problem). `what` names the thing ("the warehouse"), `setting` the config key or
    variable that moves it elsewhere."""
    chain = _chain(err)
    codes = {getattr(e, "errno", None) for e in chain}
    text = " ".join(str(e) for e in chain).lower()
    no_space = bool(codes & NO_SPACE_ERRNOS) or any(s in text for s in _NO_SPACE_TEXT)
    read_only = bool(codes & READ_ONLY_ERRNOS) or any(s in text for s in _READ_ONLY_TEXT)
    io_error = any(s in text for s in _IO_TEXT) or err is None
    if no_space:
        return no_space_message(path, what, setting)
    reason = read_only_reason(path, is_dir) if (read_only or io_error) else None
    if reason is not None:
        return read_only_message(path, what, setting, reason)
    free = free_bytes(path)
    if (io_error or read_only) and free is not None and free < LOW_SPACE:
        return no_space_message(path, what, setting, free)
    return None


def no_space_message(path: Path, what: str, setting: str, free: int | None = None) -> str:
    free = free_bytes(path) if free is None else free
    return (f"no space left on device: {what} {path} cannot be written ({_size(free)} free on the disk holding "
            f"{_existing(Path(path).parent)}); nothing in it is damaged, do not move or delete it.\n"
            f"  fix: free space on that disk (or set {setting} to a folder on a disk with room), then rerun")


def read_only_message(path: Path, what: str, setting: str, reason: tuple[str, str]) -> str:
    cause, how = reason
    return (f"{what} {path} cannot be written: {cause}; its contents are intact, do not move it aside.\n"
            f"  fix: make it writable: {how}; or set {setting} to a writable location; then rerun")


def storage_problem(path: Path, what: str, setting: str, is_dir: bool = False) -> str | None:
    """For `wse doctor`: why `path` (a file, or a folder with `is_dir`) cannot be written, or is on
    a disk with less than LOW_SPACE free; None when it is fine."""
    reason = read_only_reason(path, is_dir)
    if reason is not None:
        return read_only_message(path, what, setting, reason)
    free = free_bytes(path)
    if free is not None and free < LOW_SPACE:
        return no_space_message(path, what, setting, free)
    return None


def one_line(message: str) -> str:
    """A multi-line message ("cause\\n  fix: ...") as one line, for the closing line of a command."""
    return " — ".join(part.strip() for part in str(message).strip().splitlines() if part.strip())
