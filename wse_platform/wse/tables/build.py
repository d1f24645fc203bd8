"""Every WSE-bench final table in one call (used by the benchmark script and the tests)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import polars as pl

from wse_platform.wse.tables.agreement import judge_agreement
from wse_platform.wse.tables.cells import cell_metrics, pareto_table
from wse_platform.wse.tables.contrasts import architecture_contrasts
from wse_platform.wse.tables.failures import failure_kinds, generation_failures
from wse_platform.wse.tables.families import source_family_table
from wse_platform.wse.tables.frame import TableParams, trajectory_frame
from wse_platform.wse.tables.horizon import horizon_sensitivity
from wse_platform.wse.tables.precursors import precursor_audit
from wse_platform.wse.tables.richness_agreement import richness_agreement
from wse_platform.wse.tables.robustness import cost_contrasts, full_horizon_contrasts
from wse_platform.wse.tables.scaling import model_pooled_consistency, scaling_fit
from wse_platform.wse.tables.schema import FINAL_COLUMNS
from wse_platform.wse.tables.validation import human_validation
from wse_platform.wse.tables.violations import first_violations


@dataclass
class WseTables:
    tables: dict[str, pl.DataFrame]
    notes: dict[str, str]
    frame: pl.DataFrame
    info: dict[str, Any]


def empty(table: str) -> pl.DataFrame:
    return pl.DataFrame(schema=FINAL_COLUMNS[table])


def build_all_tables(trajectories: pl.DataFrame, trajectory_consistency: pl.DataFrame,
                     consistency_steps: pl.DataFrame, richness_verdicts: pl.DataFrame,
                     params: TableParams, *, consistency_verdicts: pl.DataFrame | None = None,
                     trajectory_steps: pl.DataFrame | None = None, llm_calls: pl.DataFrame | None = None,
                     consistency_labels: pl.DataFrame | None = None,
                     richness_labels: pl.DataFrame | None = None) -> WseTables:
    """Every final table from the upstream tables (one consistency and one richness panel).

    Tables needing an optional input that is not given (votes, steps, llm_calls, human labels)
    come back empty with their columns."""
    frame, info = trajectory_frame(trajectories, trajectory_consistency, richness_verdicts, params)
    cells = cell_metrics(frame, info)
    scaling, note = scaling_fit(cells, params, model_pooled_consistency(frame, info))
    no_votes = consistency_verdicts is None
    tables = {
        "wse_cell_metrics": cells,
        "wse_architecture_contrasts": architecture_contrasts(frame, info, params),
        "wse_pareto": pareto_table(cells, params),
        "wse_scaling_fit": scaling,
        "wse_source_family": source_family_table(frame, info, params, trajectory_steps),
        "wse_horizon_sensitivity": horizon_sensitivity(frame, info, params),
        "wse_first_violations": first_violations(frame, consistency_steps, info, params),
        "wse_generation_failures": generation_failures(trajectories, params),
        "wse_failure_kinds": (
            failure_kinds(trajectory_steps, consistency_verdicts, richness_verdicts, llm_calls, params)
            if trajectory_steps is not None and not no_votes else empty("wse_failure_kinds")),
        "wse_judge_agreement": (empty("wse_judge_agreement") if no_votes else
                                judge_agreement(consistency_verdicts, params, {"c": info["consistency_judge_id"]})),
        "wse_richness_agreement": richness_agreement(richness_verdicts, params, [info["richness_judge_id"]]),
        "wse_precursor_audit": (precursor_audit(frame, consistency_verdicts, trajectory_steps, info, params)
                                if trajectory_steps is not None and not no_votes else empty("wse_precursor_audit")),
        "wse_full_horizon_contrasts": full_horizon_contrasts(frame, info, params),
        "wse_cost_contrasts": (cost_contrasts(llm_calls, cells, params) if llm_calls is not None
                               else empty("wse_cost_contrasts")),
        "wse_human_validation": human_validation(consistency_labels, richness_labels, consistency_steps, frame,
                                                 richness_verdicts, info),
    }
    return WseTables(tables, {"wse_scaling_fit": note} if note else {}, frame, info)
