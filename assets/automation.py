"""Sensors, schedules and jobs (kept apart from the assets). Filled in by the orchestration work."""
from __future__ import annotations

from assets.partitions import BenchmarkPartitions
from wse_platform.config import Settings


def build_automation(settings: Settings, parts: BenchmarkPartitions, objs: list) -> tuple[list, list, list]:
    return [], [], []
