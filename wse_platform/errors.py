"""Errors a user can act on: the message names the file, says what is wrong and gives the fix.

The CLI prints these without a traceback and exits 2 (`wse_platform.cli.main`).
"""
from __future__ import annotations


class ActionableError(RuntimeError):
    """Base of errors whose message is complete for a user (file, cause, fix)."""
