"""Landing the client's per-attempt call records in the warehouse table `llm_calls`.

`call_id` hashes (run_id, request_key, attempt), so writing the same run's records
twice (a retried asset, a resumed run, a batch flushed before a crash and again at the end)
inserts nothing new: records are written in batches as calls complete and the rest when the
step ends (a killed process's, journaled first, by the next run); every call is counted exactly once.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import polars as pl

if TYPE_CHECKING:
    from wse_platform.warehouse import Warehouse

CALL_SCHEMA: dict[str, Any] = {
    "call_id": pl.Utf8, "run_id": pl.Utf8, "partition_key": pl.Utf8, "role": pl.Utf8, "model": pl.Utf8,
    "backend": pl.Utf8, "backend_model": pl.Utf8, "prompt_version": pl.Utf8, "request_key": pl.Utf8,
    "attempt": pl.Int32, "n_samples": pl.Int32, "tokens_in": pl.Int64, "tokens_out": pl.Int64,
    "latency_s": pl.Float64, "cost_usd": pl.Float64, "cache_hit": pl.Boolean, "valid": pl.Boolean,
    "error_kind": pl.Utf8, "created_at": pl.Datetime("us"),
    "finish_reason": pl.Utf8, "prompt_truncated_tokens": pl.Int64, "reasoning": pl.Utf8,
    "reasoning_tokens": pl.Int64, "endpoint": pl.Utf8,
}


def call_records_frame(records: list[dict[str, Any]]) -> pl.DataFrame:
    """The records as a typed frame with exactly the `llm_calls` columns."""
    return pl.DataFrame([{k: r.get(k) for k in CALL_SCHEMA} for r in records], schema=CALL_SCHEMA, orient="row") \
        if records else pl.DataFrame(schema=CALL_SCHEMA)


NO_RESULT = ("transport", "infrastructure")  # calls that failed the run: superseded by the call that answers


def write_call_records(warehouse: "Warehouse", records: list[dict[str, Any]]) -> int:
    """Append the records not yet in `llm_calls`; returns the number of new rows.

    Each call is counted once with its final outcome: a call that failed the run (error_kind
    transport/infrastructure) is replaced by the row of the same request (request_key, attempt,
    partition) that later got an answer, and is not inserted once such a row exists.

    A record already there is never inserted twice: the table's primary key (`call_id`) rejects it.
    The batch goes in with a plain INSERT first, and only when the key rejects one of its records (a
    batch written again: a journal replayed after a kill, a retried step of the same run) is it
    inserted again, in a new transaction (the first was rolled back, whether the key rejected it at the
    INSERT or at the COMMIT), with `INSERT OR IGNORE`, which skips the known ones. Issue 24: `OR IGNORE`
    (DuckDB's ON CONFLICT path) cost ~9 ms of CPU per batch whatever its size and the table's (~13 vs
    ~4 ms for the INSERT of 30 to 1,000 rows at 2,000 to 60,000 rows; `bench/record_writes_cpu.py`),
    though almost every batch holds only new records; the earlier
    `NOT EXISTS` anti-join and two `count(*)` read the whole table at every batch. The number of new
    rows is what the INSERT reports. The look-up of an answered row of the same request is made only
    for a batch holding failed calls."""
    import duckdb

    from wse_platform.warehouse import WarehouseError

    frame = call_records_frame(records).unique(subset="call_id", keep="first", maintain_order=True)
    if not frame.height:
        return 0
    failed = frame.get_column("error_kind").is_in(list(NO_RESULT)).fill_null(False)
    n_failed = int(failed.sum())
    warehouse.ensure_schema()
    same = ("t.request_key = r.request_key AND t.attempt = r.attempt "
            "AND t.partition_key IS NOT DISTINCT FROM r.partition_key")
    bad = "('transport', 'infrastructure')"
    sql = " INTO llm_calls BY NAME SELECT * FROM _wse_calls r"
    if n_failed:
        sql += (f" WHERE NOT (coalesce(r.error_kind, '') IN {bad} AND EXISTS (SELECT 1 FROM llm_calls t "
                f"WHERE {same} AND coalesce(t.error_kind, '') NOT IN {bad}))")
    rows = frame.to_arrow()

    def insert(verb: str) -> int:
        with warehouse.transaction() as con:
            con.register("_wse_calls", rows)
            added = con.execute(verb + sql).fetchall()[0][0]
            if n_failed < frame.height:   # answered calls replace the failed rows of their requests
                # `t.error_kind IN` (NULL: not in it), not `coalesce(t.error_kind, '') IN`: the same rows, but
                # the filter goes into the scan of llm_calls (~2 vs ~4 ms of CPU per batch at 15,000 rows)
                con.execute(
                    f"DELETE FROM llm_calls t WHERE t.error_kind IN {bad} AND EXISTS "
                    f"(SELECT 1 FROM _wse_calls r WHERE {same} AND coalesce(r.error_kind, '') NOT IN {bad})")
            con.unregister("_wse_calls")
        return added

    try:
        try:
            added = insert("INSERT")
        except duckdb.ConstraintException:   # a record already there (rolled back): again, skipping known ids
            added = insert("INSERT OR IGNORE")
    except Exception as err:
        raise WarehouseError(f"appending to llm_calls failed: {err}") from err
    return added


def usage_summary(records: list[dict[str, Any]]) -> dict[str, Any]:
    """LLM metadata every LLM asset shows: calls, failures by kind and the truncated share.

    The share of truncated answers (cut by max_tokens) and of cut prompts is shown so a token
    budget or context window set too low is seen at once in the UI and in `wse status`."""
    n = len(records)
    kinds: dict[str, int] = {}
    for r in records:
        if r.get("error_kind"):
            kinds[r["error_kind"]] = kinds.get(r["error_kind"], 0) + 1
    return {
        "llm_calls": n,
        "llm_backend_calls": sum(1 for r in records if not r.get("cache_hit")),
        "llm_failed_attempts": sum(kinds.values()),
        "llm_failures_by_kind": ", ".join(f"{k}={v}" for k, v in sorted(kinds.items())) or "none",
        "llm_truncated_share": round(kinds.get("truncated", 0) / n, 4) if n else 0.0,
        "llm_answers_cut_share": round(sum(1 for r in records if r.get("finish_reason") == "length") / n, 4)
        if n else 0.0,
        "llm_input_truncated_share": round(sum(1 for r in records if r.get("prompt_truncated_tokens")) / n, 4)
        if n else 0.0,
    }
