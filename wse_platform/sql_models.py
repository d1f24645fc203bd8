"""dbt-like SQL models: each ``dbt_like_models/<name>.sql`` is a SELECT that builds table ``<name>``.

Dependencies are written ``{{ ref('other') }}`` and rendered to the quoted table name.
Usable without Dagster: `run_models(warehouse)` builds every model in dependency order.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from graphlib import CycleError, TopologicalSorter
from pathlib import Path

import duckdb

from wse_platform.config import REPO_ROOT
from wse_platform.warehouse import Warehouse

MODELS_DIR = REPO_ROOT / "dbt_like_models"
_REF = re.compile(r"\{\{\s*ref\(\s*['\"]([A-Za-z_][A-Za-z0-9_]*)['\"]\s*\)\s*\}\}")
_JINJA_LEFTOVER = re.compile(r"\{\{|\}\}|\{%|%\}")


class SQLModelError(ValueError):
    pass


@dataclass(frozen=True)
class SQLModel:
    name: str
    path: Path
    sql: str

    @property
    def refs(self) -> list[str]:
        return list(dict.fromkeys(_REF.findall(self.sql)))

    def render(self) -> str:
        body = _REF.sub(lambda m: f'"{m.group(1)}"', self.sql).strip().rstrip(";")
        if _JINJA_LEFTOVER.search(body):
            raise SQLModelError(f"{self.path.name}: unsupported template syntax (only {{{{ ref('name') }}}} is allowed)")
        return body

    def build(self, warehouse: Warehouse) -> int:
        """Create or replace the table atomically; returns its row count."""
        body = self.render()
        try:
            with warehouse.transaction() as con:
                con.execute(f'CREATE OR REPLACE TABLE "{self.name}" AS {body}')
                n = con.execute(f'SELECT count(*) FROM "{self.name}"').fetchall()[0][0]
        except duckdb.Error as err:
            raise SQLModelError(f"{self.path.name}: {err}") from err
        return int(n)


def load_models(directory: Path = MODELS_DIR) -> list[SQLModel]:
    models = []
    for path in sorted(directory.glob("*.sql")):
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", path.stem):
            raise SQLModelError(f"{path.name}: model file names must be valid table names")
        models.append(SQLModel(path.stem, path, path.read_text(encoding="utf-8")))
    return models


def check_refs(models: list[SQLModel], known_tables: set[str]) -> None:
    """Every ref names another model or a known Python-asset table; no cycles."""
    names = {m.name for m in models}
    for m in models:
        for r in m.refs:
            if r not in names and r not in known_tables:
                raise SQLModelError(f"{m.path.name}: ref('{r}') names no model or asset")
    try:
        order(models)
    except CycleError as err:
        raise SQLModelError(f"dbt_like_models: dependency cycle {err.args[1]}") from None


def order(models: list[SQLModel]) -> list[SQLModel]:
    by_name = {m.name: m for m in models}
    ts = TopologicalSorter({m.name: [r for r in m.refs if r in by_name] for m in models})
    return [by_name[n] for n in ts.static_order()]


def run_models(warehouse: Warehouse, directory: Path = MODELS_DIR) -> dict[str, int]:
    warehouse.ensure_schema()
    return {m.name: m.build(warehouse) for m in order(load_models(directory))}
