"""Shared scripted outputs and a toy spec for the NCP loop tests (scripted backend, real client)."""
from __future__ import annotations

import json
import re
from functools import lru_cache

from wse_platform.ncp.episode import (ROLE_COMMITMENT_STATUS, ROLE_CONFLICT_CHECK, ROLE_DOUBLE_CHECK,
                                      ROLE_FACT_UPDATE, ROLE_HIAGENT, ROLE_MEMORY, ROLE_NARRATOR, ROLE_NODE_UPDATE,
                                      ROLE_OPENING)
from wse_platform.ncp.spec import NarrativeSpec

PLAYER = "ncp.player_adversarial"
COUNT_FIELDS = {"fact": "fact_conflict_count", "commitment": "commitment_conflict_count",
                "player_input": "player_input_conflict_count"}


def diff(add=(), negate=(), reason="only durable changes") -> str:
    return json.dumps({"add_facts": list(add), "negate_facts": list(negate), "reason": reason})


def conflicts_json(*items: tuple[str, str, str], **extra) -> str:
    """A conflict report (or review, with `confirmed`/`review_reason` in extra) with agreeing counts."""
    out = {f: sum(k == kind for k, _, _ in items) for kind, f in COUNT_FIELDS.items()}
    out["total_conflict_count"] = len(items)
    out["conflicts"] = [{"kind": k, "target_id": t, "reason": r} for k, t, r in items]
    out.update(extra)
    return json.dumps(out)


def review(*items: tuple[str, str, str], reason: str = "checked") -> str:
    return conflicts_json(*items, confirmed=bool(items), review_reason=reason)


def node(trigger: bool, delta: bool) -> str:
    return json.dumps({"trigger": {"occurred": trigger, "reason": "t"}, "delta": {"occurred": delta, "reason": "d"}})


def statuses(ids=("c_0", "c_1"), satisfied=()) -> str:
    return json.dumps({"statuses": [{"commitment_id": c, "status": "SATISFIED" if c in satisfied else "PENDING",
                                     "reason": "see f_0"} for c in ids]})


NONE_DIFF = diff()
NO_CONFLICT = conflicts_json()
NODE_NO = node(False, False)
NODE_YES = node(True, True)
ALL_PENDING = statuses()


def make_spec(spec_id: str = "m0", genre: str = "Mystery") -> NarrativeSpec:
    return NarrativeSpec.model_validate({
        "meta": {"id": spec_id, "title": "The Manor", "genres": [genre, "Drama"], "player_role": "Detective Lane"},
        "synopsis": "A detective opens a vault in an old manor.",
        "initial_facts": [
            {"id": "f_0", "content": "The vault door is locked.", "negated": False},
            {"id": "f_1", "content": "The butler hides a silver key in his coat.", "negated": False},
            {"id": "f_2", "content": "The garden gate stands open.", "negated": True},
        ],
        "commitments": [
            {"id": "c_0", "type": "achievement", "description": "Lane must open the vault by s_1.",
             "satisfaction_condition": "The vault is open at s_1.", "violation_condition": "The vault is destroyed."},
            {"id": "c_1", "type": "ordering", "description": "The key is found at s_0 before the vault opens at s_1.",
             "satisfaction_condition": "s_0 precedes s_1.", "violation_condition": "The vault opens before s_0."},
        ],
        "trajectory": [
            {"id": "s_0", "description": "Lane searches the manor hall.", "trigger_event": "The butler drops a key.",
             "key_delta": "Lane holds the silver key."},
            {"id": "s_1", "description": "Lane opens the vault with the key.", "trigger_event": "Lane turns the key.",
             "key_delta": "The vault stands open."},
        ],
    })


DEFAULTS = {ROLE_OPENING: '{"text": "You stand in the hall of the manor."}',
            ROLE_NARRATOR: '{"text": "You stand in the hall."}', ROLE_FACT_UPDATE: NONE_DIFF,
            ROLE_CONFLICT_CHECK: NO_CONFLICT, ROLE_DOUBLE_CHECK: review(reason="nothing stands"),
            ROLE_NODE_UPDATE: NODE_NO, ROLE_COMMITMENT_STATUS: ALL_PENDING,
            ROLE_HIAGENT: '{"text": "You stand in the hall."}',
            ROLE_MEMORY: '{"summary": "Lane searched the hall and found the key."}'}


class Script:
    """Per-role output queues (the last entry repeats); players get fresh plain-text inputs."""

    def __init__(self, **queues: list[str]):
        self.queues = {k.replace("__", "."): list(v) for k, v in queues.items()}
        self.n_player = 0

    def __call__(self, call) -> list[str]:
        return [self.one(call) for _ in range(call.n)]

    def one(self, call) -> str:
        q = self.queues.get(call.role)
        if q is None:
            if call.role.startswith("ncp.player"):
                self.n_player += 1
                return f"I try move number {self.n_player}."
            return DEFAULTS[call.role]
        return q.pop(0) if len(q) > 1 else q[0]


def text_of(call) -> str:
    return "\n".join(m["content"] for m in call.messages)


class Recorder:
    """Wraps the client: records every `LLMRequest` (with its tags) and each batch's roles and size."""

    def __init__(self, client):
        self.client = client
        self.requests: list = []
        self.batches: list[tuple[tuple[str, ...], int]] = []

    def complete_many(self, reqs):
        self.requests.extend(reqs)
        self.batches.append((tuple(sorted({r.role for r in reqs})), len(reqs)))
        return self.client.complete_many(reqs)

    def of(self, role: str, turn: int | None = None) -> list:
        return [r for r in self.requests if r.role == role and (turn is None or r.tags.get("turn") == str(turn))]


@lru_cache(maxsize=1)
def released_specs() -> tuple[NarrativeSpec, ...]:
    """The 100 released specs, parsed once per test process with libyaml (fast) and validated into
    NarrativeSpec; the full loader (`load_specs`, its own tests) is not needed for figures/budgets."""
    import yaml

    from wse_platform.ncp.spec import NCP_DATASET_DIR, read_index

    order, _ = read_index(NCP_DATASET_DIR / "index.yaml")
    out = []
    for spec_id in order:
        with open(NCP_DATASET_DIR / "specs" / f"{spec_id}.yaml", encoding="utf-8") as fh:
            out.append(NarrativeSpec.model_validate(yaml.load(fh, Loader=yaml.CSafeLoader)))
    return tuple(out)


def ncp_asset_runner(tmp_path, cfg: dict):
    """Write `cfg` as the config, build the NCP assets and return `run(names, partition_key=None)`,
    which materializes exactly those assets through Dagster and asserts success (`fails=True`: failure)."""
    import yaml
    from dagster import AssetChecksDefinition, AssetsDefinition, materialize

    from assets.ncp import episodes as ep_assets, specs as spec_assets, tables as table_assets
    from assets.partitions import build_partitions
    from resources import LLMResource, SettingsResource, WarehouseResource, settings_for

    path = tmp_path / "wse.yaml"
    path.write_text(yaml.safe_dump(cfg), encoding="utf-8")
    config = str(path)
    s = settings_for(config)
    parts = build_partitions(s)
    objs = [o for m in (spec_assets, ep_assets, table_assets) for o in m.build(s, parts)]
    resources = {"settings": SettingsResource(config_path=config), "warehouse": WarehouseResource(config_path=config),
                 "llm": LLMResource(config_path=config)}

    def run(names, partition_key=None, fails=False):
        sel = [o for o in objs if isinstance(o, AssetsDefinition) and not isinstance(o, AssetChecksDefinition)
               and {k.to_user_string() for k in o.keys} <= names]
        result = materialize(sel, partition_key=partition_key, resources=resources, raise_on_error=not fails)
        assert result.success is not fails
        return result

    return run


def scripted_cell(tmp_path, monkeypatch, namespace: str, arch: str, t_max: int, override=None,
                  more_models: tuple[str, ...] = ()):
    """Every model of the config answered by the NCP script (one PENDING status for every commitment
    listed); `override(call)` may answer first (None: fall through). `more_models`: further config
    models on the same backend (model_id `<name>.gguf`). Returns (run, cell, backend, cfg)."""
    from tests.conftest import route_llm_clients
    from assets.partitions import cell_key
    from wse_platform.llm import ScriptedBackend

    script = Script()

    def answer(call):
        got = override(call) if override is not None else None
        if got is not None:
            return got
        if call.role == "ncp.commitment_status":
            ids = re.findall(r"^- (c_[0-9]+) \[", text_of(call), flags=re.MULTILINE)
            return [statuses(ids=tuple(ids))] * call.n
        return script(call)

    backend = ScriptedBackend(answer, namespace=namespace)
    route_llm_clients(monkeypatch, {"smollm2": backend, **{m: backend for m in more_models}})
    cfg = {"profile": "demo", "warehouse_path": str(tmp_path / "wh.duckdb"), "cache_dir": str(tmp_path / "cache"),
           "artifacts_dir": str(tmp_path / "artifacts"),
           "models": {"smollm2": {"backend": "embedded", "model_id": "SmolLM2-135M-Instruct.Q4_1.gguf"},
                      **{m: {"backend": "embedded", "model_id": f"{m}.gguf"} for m in more_models}},
           "ncp": {"narrators": ["smollm2"], "architectures": [arch], "player_model": "smollm2",
                   "auditor": {"model": "smollm2"}, "t_max": t_max, "n_specs": 1}}
    return ncp_asset_runner(tmp_path, cfg), str(cell_key("smollm2", arch)), backend, cfg
