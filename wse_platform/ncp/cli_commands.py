"""`wse ncp ...` subcommands beyond `play` (registered from cli.py in one line; imports stay lazy)."""
from __future__ import annotations

import argparse


def _reference_check(args: argparse.Namespace) -> int:
    from wse_platform.ncp.reference import main
    return main(args.path)


def _warehouse(args: argparse.Namespace):
    from wse_platform.cli import _settings
    from wse_platform.warehouse import Warehouse
    settings = _settings(args)
    return settings, Warehouse(settings.warehouse)


def _auditor_id(settings, given: str | None) -> str:
    if given:
        return given
    if settings.ncp.auditor is None:
        raise SystemExit("error: give --auditor ID (no ncp.auditor in the configuration)")
    from wse_platform.ncp.episode import EpisodeSetup
    model = settings.ncp.narrators[0] if settings.ncp.narrators else settings.ncp.auditor.model
    return EpisodeSetup.from_settings(settings, model, "baseline+adversarial").auditor.auditor_id


def _import_runs(args: argparse.Namespace) -> int:
    from wse_platform.ncp.results import ResultFileError, import_runs
    settings, wh = _warehouse(args)
    try:
        n = import_runs(wh, args.dir, args.model, args.arch, _auditor_id(settings, args.auditor))
    except ResultFileError as err:
        print(f"error: {err}")
        return 1
    print(f"imported {n} reference result file(s) from {args.dir} as ncp_episodes and ncp_turns of {args.model} / "
          f"{args.arch}; "
          "materialize the NCP tables (ncp_summary, ncp_survival, model_scorecard) to see them")
    return 0


def _export_runs(args: argparse.Namespace) -> int:
    from wse_platform.ncp.results import export_runs
    from wse_platform.ncp.spec import NarrativeSpec
    _, wh = _warehouse(args)
    specs = {r["spec_id"]: NarrativeSpec.model_validate_json(r["spec_json"])
             for r in wh.query("SELECT spec_id, spec_json FROM ncp_specs").to_dicts()}
    paths = export_runs(wh, specs, args.dir, args.model, args.arch, args.auditor)
    print(f"wrote {len(paths)} result file(s) to {args.dir}")
    return 0


def register(ncp_sub: argparse._SubParsersAction) -> None:
    imp = ncp_sub.add_parser("import-runs", help="load a folder of reference result files (runs/<spec>.json of "
                                                 "NLP2CT/NCP-Bench) into ncp_episodes and ncp_turns")
    imp.add_argument("dir")
    imp.add_argument("--model", required=True, help="narrator model name the results belong to")
    imp.add_argument("--arch", required=True, help="architecture, e.g. baseline+adversarial")
    imp.add_argument("--auditor", default=None, help="auditor id (default: the configured in-loop auditor)")
    imp.set_defaults(func=_import_runs)
    exp = ncp_sub.add_parser("export-runs", help="write the stored episodes of a cell as reference result files")
    exp.add_argument("dir")
    exp.add_argument("--model", required=True)
    exp.add_argument("--arch", required=True)
    exp.add_argument("--auditor", default=None, help="only this auditor's episodes")
    exp.set_defaults(func=_export_runs)
    ref = ncp_sub.add_parser("reference", help="the authors' NCP-Bench checkout (ncp.reference)")
    ref_sub = ref.add_subparsers(dest="ref_cmd", required=True)
    chk = ref_sub.add_parser("check", help="check that a checkout of NLP2CT/NCP-Bench has every prompt file the "
                                           "platform reads, with the placeholders the reference runner fills")
    chk.add_argument("path", help="folder of the checkout")
    chk.set_defaults(func=_reference_check)
