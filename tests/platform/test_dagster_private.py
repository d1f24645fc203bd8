"""Every private Dagster name we use comes through `wse_platform.dagster_private`, and each still exists.

A Dagster upgrade that moves or removes one fails here, naming it, rather than inside a run."""
from __future__ import annotations

import pathlib
import re

REPO = pathlib.Path(__file__).resolve().parents[2]


def test_every_private_name_resolves_to_a_real_object():
    import wse_platform.dagster_private as adapter

    missing = [name for name in adapter.__all__ if getattr(adapter, name, None) is None]
    assert not missing, f"Dagster no longer provides: {missing}"
    assert isinstance(adapter.PARTITION_THRESHOLD, int) and adapter.PARTITION_THRESHOLD > 0
    assert adapter.IMPLICIT_ASSET_JOB_NAME == "__ASSET_JOB"
    assert callable(adapter.observe) and callable(adapter.extract_data_provenance_from_entry)


def test_no_other_module_imports_dagster_private_modules():
    offenders = []
    for folder in ("wse_platform", "assets", "resources"):
        for path in (REPO / folder).rglob("*.py"):
            if path.name == "dagster_private.py":
                continue
            if re.search(r"^\s*(from|import)\s+dagster\._", path.read_text(encoding="utf-8"), flags=re.MULTILINE):
                offenders.append(str(path.relative_to(REPO)))
    assert not offenders, f"private Dagster imports outside the adapter: {offenders}"
