"""The tiny WSE grid (see _tiny.py), materialized once per session and copied into each test."""
from __future__ import annotations

import pytest

from tests.orchestration._tiny import copy_baseline, materialize_baseline


@pytest.fixture(scope="session")
def tiny_baseline(tmp_path_factory):
    folder = tmp_path_factory.mktemp("tiny_baseline")
    materialize_baseline(folder)
    return folder


@pytest.fixture
def tiny(tiny_baseline, tmp_path, monkeypatch):
    return copy_baseline(tiny_baseline, tmp_path / "w", monkeypatch)
