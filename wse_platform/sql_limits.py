"""The limits `wse sql` runs a statement under (defaults for its flags; no heavy imports, so the
command line can name them in its help without loading DuckDB)."""
from __future__ import annotations

import argparse
import re

DEFAULT_TIMEOUT_S = 120.0      # statement timeout in seconds (--timeout; 0 = none)
DEFAULT_MEMORY_LIMIT = "2GB"   # DuckDB memory_limit of the connection (--memory-limit)
_MEMORY = re.compile(r"^\s*\d+(\.\d+)?\s*(B|KB|MB|GB|TB|KiB|MiB|GiB|TiB)\s*$", re.IGNORECASE)


def memory_limit(value: str) -> str:
    """An argparse type: a DuckDB memory size such as 512MB or 2GB (checked here, so a typo is not
    reported by DuckDB as a broken warehouse file)."""
    if not _MEMORY.match(value):
        raise argparse.ArgumentTypeError(f"{value!r} is not a memory size such as 512MB, 2GB or 1.5GiB")
    return value.strip()
