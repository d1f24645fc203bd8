import polars as pl
import pytest

from wse_platform.sql_models import SQLModelError, check_refs, load_models, order, run_models
from wse_platform.warehouse import Warehouse


def make_models(tmp_path, files):
    d = tmp_path / "models"
    d.mkdir()
    for name, sql in files.items():
        (d / f"{name}.sql").write_text(sql)
    return d


def test_models_build_in_dependency_order(tmp_path):
    sql = tmp_path / "sql"; sql.mkdir()
    (sql / "a.sql").write_text("CREATE TABLE IF NOT EXISTS base (x INTEGER);")
    wh = Warehouse(tmp_path / "w.duckdb", sql_dir=sql)
    wh.ensure_schema()
    wh.replace_table("base", pl.DataFrame({"x": [1, 2, 3]}, schema={"x": pl.Int32}))
    d = make_models(tmp_path, {
        "z_total": "SELECT sum(x) AS total FROM {{ ref('a_doubled') }}",
        "a_doubled": "SELECT x * 2 AS x FROM {{ ref('base') }}",
    })
    models = load_models(d)
    check_refs(models, {"base"})
    assert [m.name for m in order(models)] == ["a_doubled", "z_total"]
    assert run_models(wh, d) == {"a_doubled": 3, "z_total": 1}
    assert wh.query("SELECT total FROM z_total")["total"][0] == 12


def test_bad_ref_names_the_file(tmp_path):
    d = make_models(tmp_path, {"m1": "SELECT * FROM {{ ref('missing_table') }}"})
    with pytest.raises(SQLModelError, match=r"m1\.sql: ref\('missing_table'\)"):
        check_refs(load_models(d), set())


def test_sql_error_names_the_file_and_duckdb_message(tmp_path):
    sql = tmp_path / "sql"; sql.mkdir()
    wh = Warehouse(tmp_path / "w.duckdb", sql_dir=sql)
    d = make_models(tmp_path, {"broken": "SELEC 1"})
    with pytest.raises(SQLModelError, match=r"broken\.sql: .*syntax error"):
        run_models(wh, d)


def test_cycle_detected(tmp_path):
    d = make_models(tmp_path, {"a": "SELECT * FROM {{ ref('b') }}", "b": "SELECT * FROM {{ ref('a') }}"})
    with pytest.raises(SQLModelError, match="cycle"):
        check_refs(load_models(d), set())
