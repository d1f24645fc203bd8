import multiprocessing as mp

import polars as pl
import pytest

from wse_platform.warehouse import Warehouse, WarehouseError


@pytest.fixture
def wh(tmp_path):
    sql = tmp_path / "sql"
    sql.mkdir()
    (sql / "t.sql").write_text(
        "CREATE TABLE IF NOT EXISTS cells (model VARCHAR, arch VARCHAR, i INTEGER, v DOUBLE);\n"
        "CREATE TABLE IF NOT EXISTS log (id VARCHAR, x INTEGER);\n")
    return Warehouse(tmp_path / "w.duckdb", sql_dir=sql)


def rows(model, arch, n):
    return pl.DataFrame({"model": [model] * n, "arch": [arch] * n, "i": list(range(n)), "v": [0.5] * n})


def test_replace_partition_is_idempotent(wh):
    wh.replace_partition("cells", rows("m", "B1", 5), {"model": "m", "arch": "B1"})
    wh.replace_partition("cells", rows("m", "B2", 3), {"model": "m", "arch": "B2"})
    wh.replace_partition("cells", rows("m", "B1", 5), {"model": "m", "arch": "B1"})  # rerun
    counts = dict(wh.query("SELECT arch, count(*) n FROM cells GROUP BY arch").iter_rows())
    assert counts == {"B1": 5, "B2": 3}


def test_rows_outside_the_partition_are_refused_and_nothing_is_lost(wh):
    wh.replace_partition("cells", rows("m", "B1", 2), {"model": "m", "arch": "B1"})
    with pytest.raises(WarehouseError, match="outside partition"):
        wh.replace_partition("cells", rows("m", "B2", 2), {"model": "m", "arch": "B1"})
    assert wh.query("SELECT count(*) n FROM cells")["n"][0] == 2


def test_failed_write_rolls_back(wh):
    wh.replace_partition("cells", rows("m", "B1", 2), {"model": "m", "arch": "B1"})
    bad = rows("m", "B1", 1).with_columns(pl.lit("not a number").alias("v"))
    with pytest.raises(WarehouseError):
        wh.replace_partition("cells", bad, {"model": "m", "arch": "B1"})
    assert wh.query("SELECT count(*) n FROM cells")["n"][0] == 2  # old rows intact


def test_insert_new_skips_known_ids(wh):
    df = pl.DataFrame({"id": ["a", "b"], "x": [1, 2]})
    assert wh.insert_new("log", df, "id") == 2
    assert wh.insert_new("log", pl.DataFrame({"id": ["b", "c"], "x": [2, 3]}), "id") == 1
    assert wh.query("SELECT count(*) n FROM log")["n"][0] == 3


def _writer(path, sql_dir, arch, repeats, q):
    try:
        w = Warehouse(path, sql_dir=sql_dir)
        for r in range(repeats):
            w.replace_partition("cells", rows("m", arch, 50 + r), {"model": "m", "arch": arch})
            w.query("SELECT count(*) FROM cells")
        q.put(("ok", arch))
    except Exception as err:  # report, the parent asserts
        q.put(("error", f"{arch}: {err!r}"))


def test_four_processes_write_partitions_concurrently(wh):
    wh.ensure_schema()
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    procs = [ctx.Process(target=_writer, args=(wh.path, wh.sql_dir, f"B{i}", 5, q)) for i in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    results = [q.get(timeout=5) for _ in procs]
    assert all(r[0] == "ok" for r in results), results
    counts = dict(wh.query("SELECT arch, count(*) n FROM cells GROUP BY arch").iter_rows())
    assert counts == {f"B{i}": 54 for i in range(4)}  # last write of each: 50 + 4 rows, no duplicates


def test_held_reuses_one_connection_and_other_threads_wait(wh, monkeypatch):
    """`held()` keeps one DuckDB connection (each open reads the whole catalog) for a burst of
    writes and queries of this thread; another thread waits for the lock until it ends; a
    connection with its own settings inside it is refused rather than deadlocking."""
    import threading

    import wse_platform.warehouse as mod

    wh.ensure_schema()
    opened = []
    real = mod.Warehouse._open
    monkeypatch.setattr(mod.Warehouse, "_open", lambda self, *a, **k: opened.append(a) or real(self, *a, **k))
    df = rows("m", "B1", 1)
    order = []
    with wh.held():
        other = threading.Thread(target=lambda: (wh.query("SELECT 1"), order.append("other")))
        other.start()
        for _ in range(5):
            wh.replace_partition("cells", df, {"model": "m"})
            assert wh.query("SELECT count(*) AS n FROM cells")["n"][0] == 1
        other.join(timeout=0.5)
        assert other.is_alive()          # blocked on the inter-process lock meanwhile
        order.append("held")
        with pytest.raises(WarehouseError, match="held"):
            with wh.connect(config={"access_mode": "READ_ONLY"}):
                pass
    other.join(timeout=30)
    assert order == ["held", "other"]
    assert len(opened) == 2              # one for the held burst, one for the other thread
