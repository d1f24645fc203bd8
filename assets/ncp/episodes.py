"""NCP-Bench episode assets: live episodes per cell (narrator model × arch) and their re-audits.

Thin: the loop lives in `wse_platform.ncp.episode`, the replay in `wse_platform.ncp.reaudit`.
(No `from __future__ import annotations`: Dagster needs real annotations on resources.)
"""
import polars as pl
from dagster import AssetKey, AssetSpec, MaterializeResult, MetadataValue, multi_asset

from assets.helpers import markdown_preview, transcripts
from assets.ncp.specs import run_specs, specs_from_table
from assets.partitions import BenchmarkPartitions, cell_of
from assets.versioning import code_version
from resources import LLMResource, SettingsResource, WarehouseResource
from wse_platform import versions
from wse_platform.config import Settings
from wse_platform.ncp.ablation import ablation_auditors, run_auditor_ablation
from wse_platform.ncp.episode import (AuditorSetup, EpisodeSetup, episode_frame, failed_frame, run_episodes,
                                      turn_frame)
from wse_platform.ncp.failures import (ANALYSIS_ABLATION, ANALYSIS_CELLS, ANALYSIS_REAUDIT, attempts_for_retry,
                                       retry_round)
from wse_platform.ncp.kept import answered, early_replays, keeping, replaying
from wse_platform.ncp.reaudit import reaudit, transcripts_from_rows
from wse_platform.ncp.turn_frames import TurnFrames

GROUP = "ncp_bench"
PROMPTS = [f"wse_platform/prompts/ncp/{n}.v1.md" for n in (
    "player_adversarial", "player_natural", "narrator_opening", "narrator", "memory_hiagent", "memory_summary",
    "fact_update", "conflict_check", "conflict_double_check", "node_update", "commitment_status")]
EPISODE_CODE = ("wse_platform/ncp/episode.py", "wse_platform/ncp/audit.py", "wse_platform/ncp/prompter.py",
                "wse_platform/ncp/render.py", "wse_platform/ncp/ledger.py", "wse_platform/ncp/memory.py",
                "wse_platform/ncp/schemas.py", "wse_platform/ncp/ref_format.py", "wse_platform/ncp/ref_schemas.py",
                "wse_platform/ncp/reference.py", "wse_platform/ncp/state.py", "wse_platform/ncp/roles.py",
                "wse_platform/ncp/hiagent.py", "wse_platform/ncp/hiagent_ref.py", "wse_platform/ncp/tokens.py",
                "wse_platform/ncp/failures.py", *PROMPTS)
REAUDIT_CODE = (*EPISODE_CODE, "wse_platform/ncp/reaudit.py")


def reaudit_auditors(settings: Settings) -> list[AuditorSetup]:
    """The in-loop auditor (a replay baseline, answered from the cache) plus `ncp.reaudit_auditors`."""
    judges = ([settings.ncp.auditor] if settings.ncp.auditor is not None else []) + list(settings.ncp.reaudit_auditors)
    out: dict[str, AuditorSetup] = {}
    for j in judges:
        a = AuditorSetup.from_judge(j)
        out.setdefault(a.auditor_id, a)
    return list(out.values())


def _reaudit_in_run(context) -> bool:
    """Whether this run may also materialize `ncp_reaudit_episodes` (the replays made early are for it): not
    when the run names its assets without it (an empty or missing selection says nothing)."""
    selection = context.run.asset_selection
    return not selection or AssetKey("ncp_reaudit_episodes") in selection


def _both(*calls):
    """One `on_episode` callback calling each of `calls` that is not None, in order."""
    calls = [c for c in calls if c is not None]

    def each(runs) -> None:
        for call in calls:
            call(runs)
    return each


def _list_failed(wh, rows: list[dict], key: dict, round_: int) -> int:
    """Replace the partition `key` (its `analysis` included) of `ncp_failed_episodes` with `rows`."""
    failed = failed_frame(rows).with_columns(pl.lit(round_, dtype=pl.Int64).alias("retry_round"),
                                             pl.lit(key["analysis"], dtype=pl.Utf8).alias("analysis"))
    wh.replace_partition("ncp_failed_episodes", failed, key)
    return failed.height


def _result(key: str, df: pl.DataFrame, n: int, extra: dict) -> MaterializeResult:
    return MaterializeResult(asset_key=key, metadata={
        "dagster/row_count": n, "table": key, "preview": MetadataValue.md(markdown_preview(df)), **extra})


def build(settings: Settings, parts: BenchmarkPartitions) -> list:
    if parts.ncp is None:
        return []

    @multi_asset(
        specs=[
            AssetSpec("ncp_episodes", deps=["ncp_specs", "ncp_cell_config"], group_name=GROUP,
                      kinds={"duckdb", "llm"},
                      description="One row per NCP-Bench episode of a cell (narrator model × architecture, the "
                                  "partition) on `ncp.spec_ids` or the first `ncp.n_specs` specs: turns survived, termination "
                                  "(CONFLICT / SUCCESS / SURVIVAL; an episode whose call still fails has no row "
                                  "but one in ncp_failed_episodes and is played again by the next run), confirmed "
                                  "conflict kinds, trajectory progress, satisfied-commitment share."),
            AssetSpec("ncp_turns", deps=["ncp_specs", "ncp_cell_config"], group_name=GROUP, kinds={"duckdb", "llm"},
                      description="One row per turn of every episode (turn 0 = opening narration): player input, "
                                  "narrator response, fact diff, conflict report (double-checked), node assessment, "
                                  "commitment statuses, ledger snapshot and the LLM call ids."),
        ],
        partitions_def=parts.ncp,
        code_version=code_version(*EPISODE_CODE),
    )
    def ncp_episodes(context, settings: SettingsResource, warehouse: WarehouseResource, llm: LLMResource):
        s = settings.get()
        model, arch = cell_of(context.partition_key)
        wh = warehouse.get()
        specs = run_specs(wh, s.ncp, s.ncp.n_specs)
        setup = EpisodeSetup.from_settings(s, model, arch,
                                           generation_version=versions.ncp_cell_version(s, model, arch))
        # the in-loop auditor is part of the cell's key: another auditor adds rows next to these, never over them
        key = {"model": model, "arch": arch, "auditor_id": setup.auditor.auditor_id}
        fkey = {"analysis": ANALYSIS_CELLS, **key}
        round_ = retry_round(wh, fkey)
        # episodes without a result last time: fresh attempts for the failing requests
        with llm.session(context) as client, attempts_for_retry(client, round_):
            # the auditor's answers are kept for the re-audit of this run (same process: `ncp/kept.py`), which
            # each episode's replay under the in-loop auditor is made from as soon as the episode has ended
            replays = (replaying(client, context.partition_key, {sp.spec_id: sp for sp in specs},
                                 reaudit_auditors(s)[0], t_max=s.ncp.t_max, prompts_dir=s.prompts_dir,
                                 sampling=s.ncp.sampling)
                       if s.ncp.auditor is not None and _reaudit_in_run(context) else None)
            frames = TurnFrames()   # each episode's turn rows as a frame when it ends, not after the last answer
            result = run_episodes(keeping(client, context.partition_key), specs, setup,
                                  progress=lambda n, N: context.log.info(f"NCP {model}/{arch}: episode {n}/{N} done"),
                                  on_episode=_both(replays, frames.add))
        eps = episode_frame(result.episode_rows())
        turns = frames.frame(result)
        with wh.held():   # one warehouse open for the three writes (the last cell's are after the last answer)
            n_eps = wh.replace_partition("ncp_episodes", eps, key)
            n_turns = wh.replace_partition("ncp_turns", turns, key)
            n_failed = _list_failed(wh, result.failed_rows(), fkey, round_)
        if n_failed:
            context.log.warning(f"NCP {model}/{arch}: {n_failed} episode(s) without a result (see "
                                "ncp_failed_episodes); the next run of this cell plays them again")
        terms = {str(k): int(v) for k, v in eps["termination"].value_counts().iter_rows()}
        yield _result("ncp_episodes", eps, n_eps, {"terminations": MetadataValue.json(terms),
                                                   "auditor_id": setup.auditor.auditor_id,
                                                   "episodes_without_result": n_failed,
                                                   **transcripts(s, "ncp", model=model, arch=arch)})
        yield _result("ncp_turns", turns, n_turns, {})

    @multi_asset(
        specs=[
            AssetSpec("ncp_reaudit_episodes", deps=["ncp_turns", "ncp_reaudit_config"], group_name=GROUP,
                      kinds={"duckdb", "llm"},
                      description="Re-audit (a second, cheaper analysis next to the live Table-2 ablation): "
                                  "stored episode transcripts of a cell replayed turn by turn by each auditor "
                                  "configuration (the in-loop auditor, then `ncp.reaudit_auditors`); one row per "
                                  "episode × auditor. The first confirmed conflict ends a replay; a transcript that "
                                  "runs out is CENSORED there (SURVIVAL if it reached T_max). Narrator and player "
                                  "are never called."),
            AssetSpec("ncp_reaudit_turns", deps=["ncp_turns", "ncp_reaudit_config"], group_name=GROUP,
                      kinds={"duckdb", "llm"},
                      description="Per-turn audit records of the re-audits (same layout as ncp_turns)."),
        ],
        partitions_def=parts.ncp,
        code_version=code_version(*REAUDIT_CODE),
    )
    def ncp_reaudit_episodes(context, settings: SettingsResource, warehouse: WarehouseResource, llm: LLMResource):
        s = settings.get()
        model, arch = cell_of(context.partition_key)
        wh = warehouse.get()
        # the transcripts played with today's in-loop auditor (other auditors' cells are kept beside them)
        in_loop = EpisodeSetup.from_settings(s, model, arch).auditor.auditor_id if s.ncp.auditor is not None else None
        stored = wh.query("SELECT model, arch, spec_id, turn, player_input, narrator_text FROM ncp_turns "
                          "WHERE model = ? AND arch = ? AND (? IS NULL OR auditor_id = ?) AND session IS NULL "
                          "ORDER BY spec_id, turn",
                          [model, arch, in_loop, in_loop])
        transcripts = transcripts_from_rows(stored.iter_rows(named=True))
        specs = {sp.spec_id: sp for sp in specs_from_table(wh)}
        eps_frames, turn_frames, per_auditor, n_failed = [], [], {}, 0
        with llm.session(context) as client:
            # the in-loop auditor's answers of this run's live episodes (same process), else the cache's;
            # the replays of those episodes made while they ran (`ncp/kept.py`), where their transcripts match
            early = early_replays(client, context.partition_key)
            replay = answered(client, context.partition_key)
            for auditor in reaudit_auditors(s):
                key = {"model": model, "arch": arch, "auditor_id": auditor.auditor_id}
                fkey = {"analysis": ANALYSIS_REAUDIT, **key}
                round_ = retry_round(wh, fkey)
                with attempts_for_retry(client, round_):
                    res = reaudit(replay, specs, transcripts, auditor, t_max=s.ncp.t_max, prompts_dir=s.prompts_dir,
                                  sampling=s.ncp.sampling, early=early)
                eps, turns = episode_frame(res.episode_rows()), turn_frame(res.turn_rows())
                with wh.held():   # one warehouse open for the three writes
                    wh.replace_partition("ncp_reaudit_episodes", eps, key)
                    wh.replace_partition("ncp_reaudit_turns", turns, key)
                    n_failed += _list_failed(wh, res.failed_rows(), fkey, round_)
                eps_frames.append(eps)
                turn_frames.append(turns)
                per_auditor[auditor.auditor_id] = {str(k): int(v) for k, v in
                                                   eps["termination"].value_counts().iter_rows()}
        all_eps = pl.concat(eps_frames) if eps_frames else episode_frame([])
        all_turns = pl.concat(turn_frames) if turn_frames else turn_frame([])
        if n_failed:
            context.log.warning(f"NCP re-audit {model}/{arch}: {n_failed} replay(s) without a result (see "
                                "ncp_failed_episodes, analysis ncp_reaudit_episodes); the next run replays them")
        yield _result("ncp_reaudit_episodes", all_eps, all_eps.height,
                      {"terminations_by_auditor": MetadataValue.json(per_auditor), "episodes_without_result": n_failed})
        yield _result("ncp_reaudit_turns", all_turns, all_turns.height, {})

    out = [ncp_episodes, ncp_reaudit_episodes]
    if settings.ncp.ablation is not None:
        out.append(_ablation_asset())
    return out


def _ablation_asset():
    @multi_asset(
        specs=[
            AssetSpec("ncp_ablation_episodes", deps=["ncp_specs"], group_name=GROUP, kinds={"duckdb", "llm"},
                      description="Paper Table 2 as run: live episodes of the `ncp.ablation` cell (one narrator, "
                                  "the adversarial player) played once per auditor configuration in the loop; "
                                  "same columns as ncp_episodes, one partition per auditor_id."),
            AssetSpec("ncp_ablation_turns", deps=["ncp_specs"], group_name=GROUP, kinds={"duckdb", "llm"},
                      description="Per-turn records of the ablation episodes (same layout as ncp_turns)."),
        ],
        code_version=code_version(*EPISODE_CODE, "wse_platform/ncp/ablation.py"),
    )
    def ncp_ablation_episodes(context, settings: SettingsResource, warehouse: WarehouseResource, llm: LLMResource):
        s = settings.get()
        ab = s.ncp.ablation
        wh = warehouse.get()
        specs = run_specs(wh, s.ncp, ab.n_specs if ab.n_specs is not None else s.ncp.n_specs)
        setup = EpisodeSetup.from_settings(s, ab.narrator, ab.arch, auditor=ab.auditors[0],
                                           generation_version=versions.ncp_cell_version(s, ab.narrator, ab.arch))
        eps_frames, turn_frames, per_auditor, n_failed = [], [], {}, 0
        with llm.session(context) as client:
            for auditor in ablation_auditors(s):
                auditor_id = auditor.auditor_id
                fkey = {"analysis": ANALYSIS_ABLATION, "auditor_id": auditor_id}
                round_ = retry_round(wh, fkey)
                with attempts_for_retry(client, round_):
                    res = run_auditor_ablation(client, specs, setup, [auditor])[auditor_id]
                eps, turns = episode_frame(res.episode_rows()), turn_frame(res.turn_rows())
                wh.replace_partition("ncp_ablation_episodes", eps, {"auditor_id": auditor_id})
                wh.replace_partition("ncp_ablation_turns", turns, {"auditor_id": auditor_id})
                n_failed += _list_failed(wh, res.failed_rows(), fkey, round_)
                eps_frames.append(eps)
                turn_frames.append(turns)
                per_auditor[auditor_id] = {str(k): int(v) for k, v in eps["termination"].value_counts().iter_rows()}
        if n_failed:
            context.log.warning(f"NCP ablation: {n_failed} episode(s) without a result (see ncp_failed_episodes, "
                                "analysis ncp_ablation_episodes); the next run plays them again")
        all_eps = pl.concat(eps_frames) if eps_frames else episode_frame([])
        all_turns = pl.concat(turn_frames) if turn_frames else turn_frame([])
        yield _result("ncp_ablation_episodes", all_eps, all_eps.height,
                      {"terminations_by_auditor": MetadataValue.json(per_auditor), "episodes_without_result": n_failed})
        yield _result("ncp_ablation_turns", all_turns, all_turns.height, {})

    return ncp_ablation_episodes
