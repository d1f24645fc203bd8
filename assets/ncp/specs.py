"""NCP-Bench spec assets: the released specs, their statistics (Table 6), and LLM extraction from synopses.

Thin: loading, statistics and extraction live in `wse_platform.ncp.{spec,stats,extraction}`.
(No `from __future__ import annotations`: Dagster needs real annotations on resources.)
"""
from pathlib import Path

import polars as pl
from dagster import (AssetCheckResult, AssetCheckSeverity, AssetSpec, Failure, MaterializeResult, MetadataValue,
                     asset, asset_check, multi_asset)

from assets.helpers import markdown_preview, pick_ids, write_table
from assets.partitions import BenchmarkPartitions
from assets.versioning import code_version
from resources import LLMResource, SettingsResource, WarehouseResource
from wse_platform import versions
from wse_platform.config import Settings
from wse_platform.inputs import files_stamp
from wse_platform.ncp.extraction import ROLES, compare_extracted, extract_specs, extraction_rows
from wse_platform.ncp.spec import DOCUMENT, NCP_DATASET_DIR, NarrativeSpec, load_specs
from wse_platform.ncp.plots import plot_count_histograms, plot_genre_distribution
from wse_platform.ncp.stats import QUANTITIES, spec_breakdown, spec_rows, spec_stats, table6_display

GROUP = "ncp_bench"
SPEC_CODE = ("wse_platform/ncp/spec.py",)
STATS_CODE = (*SPEC_CODE, "wse_platform/ncp/stats.py", "wse_platform/ncp/plots.py",
              "wse_platform/plotting.py")
EXTRACTION_CODE = (*SPEC_CODE, "wse_platform/ncp/extraction.py",
                   *(f"wse_platform/prompts/ncp/{role.split('.', 1)[1]}.v1.md" for role in ROLES.values()))


def specs_from_table(wh, limit: int | None = None, spec_ids=None) -> list[NarrativeSpec]:
    """The validated specs stored in `ncp_specs`, in evaluation order: those in `spec_ids` (e.g.
    `ncp.spec_ids`, each must exist), else the first `limit` (all when None)."""
    df = wh.query("SELECT spec_id, eval_order, spec_json, source_file FROM ncp_specs ORDER BY eval_order")
    if df.is_empty():
        raise ValueError("ncp_specs is empty: materialize ncp_specs before NCP episodes or extraction")
    rows = list(df.iter_rows(named=True))
    if spec_ids is not None:
        rows = pick_ids(rows, spec_ids, lambda r: r["spec_id"], "ncp.spec_ids", "ncp_specs")
    elif limit is not None:
        rows = rows[:limit]
    return [_parsed(r["spec_json"], r["source_file"], r["eval_order"]) for r in rows]


_PARSED: dict[tuple, NarrativeSpec] = {}   # (spec_json, source_file, eval_order) -> the validated spec (read-only)
MAX_PARSED = 2048


def _parsed(spec_json: str, source_file: str | None, eval_order: int | None) -> NarrativeSpec:
    """`spec_json` validated once per process: a cell's run reads the stored specs twice (its episodes, then
    the re-audit, ~1 ms of CPU per spec each) and a worker runs several cells. The spec is frozen and
    only read (episodes of a cell already share it); the origin is part of the key."""
    key = (spec_json, source_file, eval_order)
    got = _PARSED.get(key)
    if got is None:
        if len(_PARSED) >= MAX_PARSED:
            _PARSED.clear()
        got = _PARSED[key] = NarrativeSpec.model_validate_json(spec_json).with_origin(source_file, eval_order)
    return got


def run_specs(wh, ncp, limit: int | None) -> list[NarrativeSpec]:
    """The specs a run uses: `ncp.spec_ids` when set, else the first `limit` in evaluation order."""
    return specs_from_table(wh, limit, ncp.spec_ids)


def _keyed(key: str, result: MaterializeResult) -> MaterializeResult:
    """The same result addressed to one output of a multi-asset."""
    return MaterializeResult(asset_key=key, metadata=result.metadata)


def _problems_markdown(problems) -> str:
    if not problems:
        return "_(none)_"
    return "\n".join(f"- `{p.line()}`" for p in problems)


_LOADED: dict = {}   # {the files' stamp: load_specs(include_warnings=True)}: this process's last load (`_load_all`)


def _load_all() -> tuple:
    """`load_specs(NCP_DATASET_DIR, include_warnings=True)`, loaded once while the files stay as they were:
    `ncp_specs` and its check `ncp_specs_valid` run one after the other in the source run, which the
    cells' first requests wait for, and each loaded and validated the 100 files (~0.4 s of CPU each).
    Without `ncp.exclude_specs` the asset's specs and errors are the same load's (same positions)."""
    dataset_dir = Path(NCP_DATASET_DIR)
    stamp = (str(dataset_dir.resolve()),
             files_stamp([dataset_dir / "index.yaml", *sorted((dataset_dir / "specs").glob("*.yaml"))]))
    if stamp not in _LOADED:
        loaded = load_specs(dataset_dir, include_warnings=True)
        _LOADED.clear()
        _LOADED[stamp] = loaded
    return _LOADED[stamp]


def _spec_of(problem) -> str | None:
    """The spec id a problem belongs to (None: the index itself, or an unknown excluded id)."""
    if problem.field == "exclude":
        return None
    if Path(problem.file).name == "index.yaml":
        return None if problem.record_id == DOCUMENT else problem.record_id
    return Path(problem.file).stem


def _spec_failure(problems, excluded) -> Failure:
    """A bad input spec fails the asset (never silently dropped: `n_specs` would then pick other specs)."""
    unknown = {p.record_id for p in problems if p.field == "exclude"}
    ids = {s for s in map(_spec_of, problems) if s is not None}
    lines = "\n".join(f"  {p.line()}" for p in problems)
    return Failure(
        description=f"{len(problems)} problem(s) in the NCP-Bench specs:\n{lines}\nFix the file(s), or leave the "
                    "spec(s) out explicitly in the config: ncp.exclude_specs: "
                    f"{sorted((set(excluded) - unknown) | ids)}",
        metadata={"problems": MetadataValue.md(_problems_markdown(problems))})


def build(settings: Settings, parts: BenchmarkPartitions) -> list:
    excluded = list(settings.ncp.exclude_specs)

    @asset(
        name="ncp_specs",
        deps=["ncp_spec_files"],  # the spec files as an observable source (assets/source_files.py)
        group_name=GROUP,
        kinds={"duckdb"},
        # an explicit exclusion changes the table, so it is part of the version
        code_version=code_version(*STATS_CODE) + (f"-x{versions.fingerprint(sorted(excluded))}" if excluded else ""),
        description="One row per released NCP-Bench narrative spec (data/ncp_bench, MIT) that validates: "
                    "evaluation order from index.yaml, title (display form without '——'), genres, player "
                    "role, counts of facts / commitments / nodes / commitment types, derived commitment → "
                    "node links and the full spec as JSON. A spec file that fails validation fails this asset "
                    "(file, record, field, message) unless listed in `ncp.exclude_specs`; the "
                    "`ncp_specs_valid` check lists every problem of the released files.",
    )
    def ncp_specs(context, warehouse: WarehouseResource):
        if excluded:
            specs, problems = load_specs(NCP_DATASET_DIR, exclude=excluded)
        else:   # the load its check `ncp_specs_valid` reads next, in the same run (`_load_all`)
            specs, problems = _load_all()
            problems = [p for p in problems if p.severity == "error"]
        if problems:
            raise _spec_failure(problems, excluded)
        if excluded:
            context.log.warning(f"ncp.exclude_specs: left out {excluded} (ncp.n_specs counts the remaining specs)")
        return write_table(warehouse.get(), "ncp_specs", spec_rows(specs), extra_metadata={
            "n_specs": len(specs),
            "excluded": MetadataValue.json(excluded),
        })

    @asset_check(asset=ncp_specs, name="ncp_specs_valid",
                 description="Every released spec file passes validation (ids, types, node mentions); "
                             "lists each problem as file: record id: field: message.")
    def ncp_specs_valid():
        specs, problems = _load_all()
        errors = [p for p in problems if p.severity == "error"]
        bad_files = sorted({p.file for p in errors})
        return AssetCheckResult(
            passed=not errors,
            severity=AssetCheckSeverity.ERROR,
            metadata={
                "n_loaded": len(specs),
                "bad_specs": MetadataValue.json(bad_files),
                "errors": MetadataValue.md(_problems_markdown(errors)),
                "warnings": MetadataValue.md(_problems_markdown([p for p in problems if p.severity == "warning"])),
            },
        )

    @multi_asset(
        specs=[
            AssetSpec("ncp_spec_stats", deps=["ncp_specs"], group_name=GROUP, kinds={"duckdb"},
                      description="Paper Table 6: one row per quantity (facts / commitments / trajectory_nodes) "
                                  "with total, mean, sample std (ddof 1, which reproduces the printed digits), "
                                  "min and max over the loaded specs; plot: Figure 6 (per-spec count histograms)."),
            AssetSpec("ncp_spec_breakdown", deps=["ncp_specs"], group_name=GROUP, kinds={"duckdb"},
                      description="Commitment types by count (share of commitments) and the primary-genre and "
                                  "any-genre distributions (share of specs); one row per dimension × category; plot: "
                                  "Figure 3 (primary-genre distribution)."),
        ],
        code_version=code_version(*STATS_CODE),
    )
    def ncp_spec_stats(warehouse: WarehouseResource, settings: SettingsResource):
        wh = warehouse.get()
        specs = specs_from_table(wh)
        stats = spec_stats(specs)
        s = settings.get()
        figs = s.artifacts / "ncp"
        fig6 = plot_count_histograms({q: [len(getattr(sp, attr)) for sp in specs] for q, attr in QUANTITIES.items()},
                                     figs / "spec_count_histograms.png")
        yield _keyed("ncp_spec_stats", write_table(wh, "ncp_spec_stats", stats, plots={"figure6": fig6}, settings=s,
                                                   extra_metadata={
            "table6": MetadataValue.md(markdown_preview(table6_display(stats)))}))
        breakdown = spec_breakdown(specs)
        fig3 = plot_genre_distribution(breakdown, figs / "genre_distribution.png")
        yield _keyed("ncp_spec_breakdown", write_table(wh, "ncp_spec_breakdown", breakdown,
                                                       plots={"figure3": fig3}, settings=s))

    out = [ncp_specs, ncp_specs_valid, ncp_spec_stats]

    if parts.ncp_extraction is not None:
        @asset(
            name="ncp_spec_extraction",
            partitions_def=parts.ncp_extraction,
            deps=["ncp_specs"],
            group_name=GROUP,
            kinds={"duckdb", "llm"},
            code_version=code_version(*EXTRACTION_CODE),
            description="Specs extracted from the released synopses by one extraction model (the partition), "
                        "in three stages: reference trajectory, commitments, initial facts. One row per movie "
                        "(`ncp.spec_ids`, else the first `ncp.n_extraction_specs` in evaluation order): the extracted spec as JSON, or the stage "
                        "that stayed invalid after the client's retries.",
        )
        def ncp_spec_extraction(context, warehouse: WarehouseResource, llm: LLMResource,
                                settings: SettingsResource):
            model = context.partition_key
            wh = warehouse.get()
            cfg = settings.get().ncp
            specs = run_specs(wh, cfg, cfg.n_extraction_specs)
            with llm.session(context) as client:
                results = extract_specs(client, model, specs, sampling=cfg.extraction_sampling)
            rows = extraction_rows(results)
            return write_table(wh, "ncp_spec_extraction", rows, key={"extraction_model": model}, extra_metadata={
                "n_ok": int(rows["ok"].sum()),
                "n_failed": int((~rows["ok"]).sum()),
                "failed_stages": MetadataValue.json(
                    {str(k): int(v) for k, v in rows.filter(~pl.col("ok"))["failed_stage"].value_counts().iter_rows()}),
            })

        @asset(
            name="ncp_extraction_comparison",
            partitions_def=parts.ncp_extraction,
            deps=["ncp_spec_extraction", "ncp_specs"],
            group_name=GROUP,
            kinds={"duckdb"},
            code_version=code_version(*SPEC_CODE, "wse_platform/ncp/extraction.py"),
            description="Extracted vs released spec per movie and extraction model: counts of facts, "
                        "commitments and trajectory nodes, and the commitment type mix (count and share); "
                        "one row per movie × quantity. Failed extractions keep the released side only.",
        )
        def ncp_extraction_comparison(context, warehouse: WarehouseResource):
            model = context.partition_key
            wh = warehouse.get()
            ext = wh.query("SELECT spec_id, spec_json FROM ncp_spec_extraction WHERE extraction_model = ? "
                           "ORDER BY spec_id", [model])
            items = [(model, r["spec_id"],
                      NarrativeSpec.model_validate_json(r["spec_json"]) if r["spec_json"] is not None else None)
                     for r in ext.iter_rows(named=True)]
            released = specs_from_table(wh, spec_ids={i[1] for i in items})
            df = compare_extracted(items, released)
            return write_table(wh, "ncp_extraction_comparison", df, key={"extraction_model": model})

        out += [ncp_spec_extraction, ncp_extraction_comparison]
    return out
