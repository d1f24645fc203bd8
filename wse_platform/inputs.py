"""Reading the files a config names, safely: one helper for every reader of user input.

- Only regular files are read: a FIFO, socket or device is refused before it is opened for
  reading (a FIFO would block the command forever).
- A file inside a configured folder (a stories folder, the prompts folder, a spec folder, the
  folder of an ideas file for its ``reference.file``) must stay inside it once symlinks and
  ``..`` are resolved; an absolute path or a link pointing elsewhere is refused, naming both.
- A file larger than the limit is refused from its size, before any byte is read
  (`MAX_INPUT_BYTES`, 64 MiB; corpus tables `MAX_CORPUS_BYTES`, 1 GiB, are streamed
  record by record instead of read whole).
- YAML is parsed with a bound on what aliases expand to (`MAX_YAML_NODES` nodes after expansion;
  a "billion laughs" alias bomb is refused in milliseconds instead of eating the memory).
"""
from __future__ import annotations

import io
import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

import yaml

MAX_INPUT_BYTES = 64 * 1024 * 1024          # an ideas file, a prompt, a story, a spec, corpus.yaml
MAX_CORPUS_BYTES = 1024 * 1024 * 1024       # a JSONL / CSV corpus file (streamed, never read whole)
MAX_YAML_NODES = 100_000                     # YAML nodes after alias expansion (wse.yaml has ~400)


class InputFileError(ValueError):
    """A configured input file that may not be read; the message names the file and the reason."""


def _mb(n: int) -> str:
    return f"{n / 1024 / 1024:,.0f} MiB"


def check_input(path: str | os.PathLike[str], *, what: str = "input file", root: str | os.PathLike[str] | None = None,
                max_bytes: int = MAX_INPUT_BYTES) -> Path:
    """The resolved path of `path` if it may be read: a regular file, inside the folder `root` (when
    given, after resolving symlinks and ``..`` of both), at most `max_bytes`. Otherwise `InputFileError`."""
    given = Path(path)
    if root is not None:   # `path` is read as given (relative: to the working directory), bounded by `root`
        base = Path(root).resolve()
        real = given.resolve()
        if real != base and base not in real.parents:
            how = "is a symlink to" if given.is_symlink() else "resolves to"
            raise InputFileError(f"{what} {given}: {how} {real}, outside {base}; inputs must stay inside the "
                                 "configured folder (copy the file into it)")
    else:
        real = given.resolve()
    try:
        st = os.stat(real)
    except FileNotFoundError:
        raise InputFileError(f"{what} {given}: does not exist") from None
    except OSError as err:
        raise InputFileError(f"{what} {given}: cannot be read ({err.strerror})") from None
    if not stat.S_ISREG(st.st_mode):
        kind = ("a directory" if stat.S_ISDIR(st.st_mode) else "a FIFO (named pipe)" if stat.S_ISFIFO(st.st_mode)
                else "a socket" if stat.S_ISSOCK(st.st_mode) else "a device" if stat.S_ISCHR(st.st_mode)
                or stat.S_ISBLK(st.st_mode) else "not a regular file")
        raise InputFileError(f"{what} {given}: is {kind}; only regular files are read")
    if st.st_size > max_bytes:
        raise InputFileError(f"{what} {given}: {_mb(st.st_size)} is larger than the limit of {_mb(max_bytes)} "
                             "for this kind of input; split it or select what you need")
    return real


@contextmanager
def open_input(path: str | os.PathLike[str], *, what: str = "input file", root: str | os.PathLike[str] | None = None,
               max_bytes: int = MAX_INPUT_BYTES) -> Iterator[IO[bytes]]:
    """Open a configured input file for reading (binary), after `check_input`. The file is opened
    non-blocking and checked again on the open descriptor, so a file swapped for a FIFO between
    the check and the open cannot hang the command either."""
    real = check_input(path, what=what, root=root, max_bytes=max_bytes)
    fd = os.open(real, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > max_bytes:
            raise InputFileError(f"{what} {path}: changed while being opened; only regular files up to "
                                 f"{_mb(max_bytes)} are read")
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        fh = os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise
    with fh:
        yield fh


def input_chunks(path: str | os.PathLike[str], *, what: str = "input file", root: str | os.PathLike[str] | None = None,
                 max_bytes: int = MAX_CORPUS_BYTES, size: int = 1 << 20) -> Iterator[bytes]:
    """The bytes of a configured input file in chunks (for hashing a large file without holding it)."""
    with open_input(path, what=what, root=root, max_bytes=max_bytes) as fh:
        yield from iter(lambda: fh.read(size), b"")


def read_input_bytes(path: str | os.PathLike[str], *, what: str = "input file",
                     root: str | os.PathLike[str] | None = None, max_bytes: int = MAX_INPUT_BYTES) -> bytes:
    """The bytes of a configured input file (see `open_input`); never more than `max_bytes`."""
    with open_input(path, what=what, root=root, max_bytes=max_bytes) as fh:
        data = fh.read(max_bytes + 1)
    if len(data) > max_bytes:   # grew after the size check
        raise InputFileError(f"{what} {path}: larger than the limit of {_mb(max_bytes)}")
    return data


def read_input_text(path: str | os.PathLike[str], *, what: str = "input file",
                    root: str | os.PathLike[str] | None = None, max_bytes: int = MAX_INPUT_BYTES) -> str:
    """The UTF-8 text of a configured input file (see `open_input`); `UnicodeDecodeError` as usual."""
    return read_input_bytes(path, what=what, root=root, max_bytes=max_bytes).decode("utf-8")


def open_input_text(path: str | os.PathLike[str], *, what: str = "input file",
                    root: str | os.PathLike[str] | None = None, max_bytes: int = MAX_CORPUS_BYTES) -> Any:
    """A context manager giving a text stream (UTF-8, universal newlines) over a large input
    read record by record (corpus tables)."""
    @contextmanager
    def _cm() -> Iterator[IO[str]]:
        with open_input(path, what=what, root=root, max_bytes=max_bytes) as fh:
            yield io.TextIOWrapper(fh, encoding="utf-8", newline="")
    return _cm()


def files_stamp(paths) -> tuple:
    """(path, size, mtime in ns, inode) of each of `paths` that exists, in order: equal while none of
    them was written, replaced, created or removed (a key for what was read from them)."""
    out = []
    for p in paths:
        try:
            st = os.stat(p)
        except OSError:
            continue
        out.append((str(p), st.st_size, st.st_mtime_ns, st.st_ino))
    return tuple(out)


class YAMLTooLarge(yaml.YAMLError):
    """Aliases expand the document beyond `MAX_YAML_NODES`, or an alias refers to itself."""


def _tree_size(root: yaml.Node, limit: int) -> int:
    """Nodes of a document without aliases (a tree: no node is reached twice), stopping above `limit`.
    Only collections are walked; a collection's children are counted when it is expanded."""
    mapping, sequence = yaml.MappingNode, yaml.SequenceNode
    count = 1
    stack = [root] if isinstance(root, (mapping, sequence)) else []
    while stack:
        node = stack.pop()
        if isinstance(node, mapping):
            count += 2 * len(node.value)
            stack.extend(n for pair in node.value for n in pair if isinstance(n, (mapping, sequence)))
        else:
            count += len(node.value)
            stack.extend(n for n in node.value if isinstance(n, (mapping, sequence)))
        if count > limit:
            return count
    return count


def _expanded_size(root: yaml.Node, limit: int) -> int:
    """Nodes of the document with every alias expanded, counted without expanding (memoised per
    node), stopping above `limit`. A node that contains itself is refused."""
    sizes: dict[int, int] = {}
    on_path: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        key = id(node)
        if done:
            on_path.discard(key)
            children = _children(node)
            total = 1 + sum(sizes[id(c)] for c in children)
            sizes[key] = total
            if total > limit:
                return total
            continue
        if key in sizes:
            continue
        if key in on_path:
            raise YAMLTooLarge("an alias refers to a node that contains it (a recursive structure)")
        on_path.add(key)
        stack.append((node, True))
        for child in _children(node):
            if id(child) in on_path:
                raise YAMLTooLarge("an alias refers to a node that contains it (a recursive structure)")
            if id(child) not in sizes:
                stack.append((child, False))
    return sizes[id(root)]


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.MappingNode):
        return [n for pair in node.value for n in pair]
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    return []


def load_yaml(text: str, *, loader: type = yaml.SafeLoader, max_nodes: int = MAX_YAML_NODES) -> Any:
    """`yaml.safe_load` (or `loader`) with aliases bounded: a document that expands to more than
    `max_nodes` nodes raises `YAMLTooLarge` (a `yaml.YAMLError`) before anything is built."""
    ld = loader(text)
    try:
        try:
            node = ld.get_single_node()
        except RecursionError:
            raise YAMLTooLarge("nested too deeply") from None
        if node is None:
            return None
        # An alias needs an anchor (`&a`) and a reference to it (`*a`): text without one of the two
        # characters composes to a tree, counted without the memo (~5x less CPU on the NCP specs).
        size = (_tree_size(node, max_nodes) if isinstance(text, str) and ("*" not in text or "&" not in text)
                else _expanded_size(node, max_nodes))
        if size > max_nodes:
            raise YAMLTooLarge(f"aliases expand the document to more than {max_nodes:,} nodes (limit "
                               f"MAX_YAML_NODES); write the values out or use fewer nested aliases")
        return ld.construct_document(node)
    finally:
        ld.dispose()
