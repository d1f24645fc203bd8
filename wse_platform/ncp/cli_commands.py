"""`wse ncp ...` subcommands beyond `play` (registered from cli.py in one line; imports stay lazy)."""
from __future__ import annotations

import argparse


def _reference_check(args: argparse.Namespace) -> int:
    from wse_platform.ncp.reference import main
    return main(args.path)


def register(ncp_sub: argparse._SubParsersAction) -> None:
    ref = ncp_sub.add_parser("reference", help="the authors' NCP-Bench checkout (ncp.reference)")
    ref_sub = ref.add_subparsers(dest="ref_cmd", required=True)
    chk = ref_sub.add_parser("check", help="check that a checkout of NLP2CT/NCP-Bench has every prompt file the "
                                           "platform reads, with the placeholders the reference runner fills")
    chk.add_argument("path", help="folder of the checkout")
    chk.set_defaults(func=_reference_check)
