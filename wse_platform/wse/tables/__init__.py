"""The WSE-bench final tables, one module per table family, each a pure function of polars frames.

`frame` joins the upstream warehouse tables into one row per trajectory; `cells`, `contrasts`,
`scaling`, `families`, `horizon`, `violations`, `failures`, `agreement`, `richness_agreement`,
`precursors`, `robustness`, `validation` build the tables from it; `schema`
fixes every table's columns (mirrored in sql/wse_tables.sql). This module re-exports the public
names so callers write `from wse_platform.wse import tables as T; T.cell_metrics(...)`.
"""
from wse_platform.wse.tables.agreement import cohen_kappa, fleiss_kappa, judge_agreement
from wse_platform.wse.tables.build import WseTables, build_all_tables
from wse_platform.wse.tables.cells import cell_metrics, pareto_table
from wse_platform.wse.tables.contrasts import ContrastSpec, arch_pairs, architecture_contrasts, contrast_specs
from wse_platform.wse.tables.failures import failure_kinds, generation_failures
from wse_platform.wse.tables.families import cell_mean_weights, source_family_pooled, source_family_table
from wse_platform.wse.tables.frame import (
    CELL,
    COMMITMENT_SOURCES,
    CONSISTENCY_ROLE,
    CONTRASTS,
    DEFAULT_BOOTSTRAP_SEED,
    EARLY_STEP,
    END_KINDS,
    NO_CATEGORY,
    RICHNESS_ROLE,
    SENSITIVITY_HORIZONS,
    TRAJ,
    UPSTREAM_COLUMNS,
    TableInputError,
    TableParams,
    build_panel,
    horizon_of,
    require_columns,
    seed_design,
    select_judge,
    trajectory_frame,
    trajectory_richness,
)
from wse_platform.wse.tables.horizon import horizon_sensitivity
from wse_platform.wse.tables.precursors import precursor_audit
from wse_platform.wse.tables.richness_agreement import icc_2_1, richness_agreement
from wse_platform.wse.tables.robustness import COST_COLUMNS, cell_costs, cost_contrasts, full_horizon_contrasts
from wse_platform.wse.tables.scaling import SCALING_METRICS, model_pooled_consistency, scaling_fit
from wse_platform.wse.tables.schema import FINAL_COLUMNS
from wse_platform.wse.tables.validation import human_validation, read_labels
from wse_platform.wse.tables.violations import first_violations

__all__ = [
    "CELL", "COMMITMENT_SOURCES", "COST_COLUMNS", "CONSISTENCY_ROLE", "CONTRASTS", "DEFAULT_BOOTSTRAP_SEED", "EARLY_STEP",
    "END_KINDS", "FINAL_COLUMNS", "NO_CATEGORY", "RICHNESS_ROLE", "SCALING_METRICS", "SENSITIVITY_HORIZONS",
    "TRAJ", "UPSTREAM_COLUMNS", "ContrastSpec", "TableInputError", "TableParams", "WseTables", "arch_pairs",
    "architecture_contrasts", "build_all_tables", "build_panel", "cell_mean_weights", "cell_metrics",
    "contrast_specs", "first_violations", "generation_failures", "horizon_of", "horizon_sensitivity",
    "pareto_table", "require_columns", "scaling_fit", "seed_design", "select_judge", "source_family_table",
    "trajectory_frame", "trajectory_richness", "cohen_kappa", "fleiss_kappa", "judge_agreement", "failure_kinds",
    "source_family_pooled", "precursor_audit", "cell_costs", "cost_contrasts", "full_horizon_contrasts",
    "model_pooled_consistency", "human_validation", "read_labels",
    "icc_2_1", "richness_agreement",
]
