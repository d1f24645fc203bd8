"""Errors a user can act on: the message names the file, says what is wrong and gives the fix.

The CLI prints these without a traceback and exits 2 (`wse_platform.cli.main`).
`InfrastructureError` marks the environment failing (a full or read-only disk, an unusable
warehouse or Dagster home): after one, a command starts no further run (`wse_platform.run_guard`).
"""
from __future__ import annotations


class ActionableError(RuntimeError):
    """Base of errors whose message is complete for a user (file, cause, fix)."""


class InfrastructureError(ActionableError):
    """The environment failed, not the data or the model: a command stops at the first one."""


class DiskProblem(InfrastructureError):
    """No space left on the device holding a file, or the file / its folder is read-only."""
