"""What the Dagster UI and `wse view` show after a config edit, seen in a real browser (issue 21).

The walkthrough a reviewer does by hand, scripted and rerunnable (not a test: it takes 10-20 min):

1. a quick-demo folder (`wse demo` on the repo's `wse.yaml`, ~4 min on the embedded SmolLM2), or a
   copy of one kept by `bench/demo_time.py --keep DIR` (`--folder DIR`; DIR itself is not touched);
2. `wse ui` in it (127.0.0.1, a free port);
3. headless Chromium (Playwright, Debian's /usr/bin/chromium) through the UI: the asset graph and
   its groups, the `in_sync` (and other) checks of the WSE cells, the runs page, the sensors' ticks;
   page text and screenshots go to the output folder, before the edit, right after it, while the
   automation runs and after it settles;
4. the edit: `wse.horizon` 2 → 3 written into the folder's `wse.yaml` while the UI runs (the
   `config_observer` sensor records it, `sync_status` reports `in_sync`, `wse_automation` rebuilds);
5. `wse view` on the trajectory cell, right after the edit and after the rebuild;
6. a summary (also `timeline.txt`; every change in `timeline-full.txt`, the raw observation in
   `observed.json`): check status changes, every run and how it ended (with the failed steps'
   errors), runs that executed while another run had yet to write one of their inputs, every sensor
   tick that requested runs, errored or recorded something (with the reason the tick history shows),
   what `in_sync` said, checks that passed having examined nothing, what each page showed, whether
   `wse view` shows the 3-step trajectory, and whether anything it started is left running.

The timeline's facts come from the webserver's GraphQL API (what the UI pages render), polled every
few seconds through the same guarded port; the screenshots and page texts are what the browser showed.

    python bench/ui_walkthrough.py                          # a fresh quick demo first (~4 min)
    python bench/ui_walkthrough.py --folder /tmp/demo       # a copy of a kept demo folder
    python bench/ui_walkthrough.py --out /tmp/walk --settle-timeout 1800
    python bench/ui_walkthrough.py --folder /tmp/demo --look-only    # the pages before the edit only
    python bench/ui_walkthrough.py --summarize /tmp/walk              # print a walk's summary again
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from uiwalk.common import SENSORS, free_port, log  # noqa: E402
from uiwalk.graphql import GraphQL, Observer, wait_ready  # noqa: E402
from uiwalk.pages import Walk, open_view  # noqa: E402
from uiwalk.procs import Proc, _cmd, edit_config, leftovers, prepare  # noqa: E402
from uiwalk.summary import Recorded, _group_sizes, save_observed, summary  # noqa: E402
from wse_platform.ui import descendants  # noqa: E402


# ---- 5. the run ------------------------------------------------------------------------------------
def settled(obs: Observer, edit_at: float) -> str | None:
    """Why the automation has settled after the edit, or None: a run was launched after the edit,
    none is active, and since the last one ended `wse_automation` ticked twice requesting nothing and
    `sync_status` ticked once."""
    runs = obs.runs_since(edit_at)
    if not runs or obs.active_runs():
        return None
    last_end = max((v["end"] or v["created"]) for v in runs.values())
    quiet = [t for t in obs.ticks_after("wse_automation", last_end) if not t["runIds"]]
    synced = obs.ticks_after("sync_status", last_end)
    if len(quiet) >= 2 and synced and not [t for t in obs.ticks_after("wse_automation", last_end) if t["runIds"]]:
        return f"{len(runs)} run(s) after the edit, none active; wse_automation ticked {len(quiet)}x with nothing to do"
    return None



class _LookedOnly(Exception):
    pass


def _stop_on_sigterm(signum, _frame):
    raise SystemExit(128 + signum)  # `timeout` or kill: run the clean-up below as on Ctrl-C


def main() -> int:
    signal.signal(signal.SIGTERM, _stop_on_sigterm)
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--folder", type=Path, help="a kept demo folder (bench/demo_time.py --keep DIR); copied, not touched")
    ap.add_argument("--out", type=Path, help="output folder (default: a new one under /tmp)")
    ap.add_argument("--settle-timeout", type=float, default=1800.0, help="seconds to wait for the automation to settle")
    ap.add_argument("--look-only", action="store_true", help="the pages before the edit only (no edit, no waiting)")
    ap.add_argument("--during-every", type=float, default=240.0, help="seconds between snapshots while runs are active")
    ap.add_argument("--summarize", type=Path, metavar="OUT", help="print the summary of an earlier walk again")
    args = ap.parse_args()
    if args.summarize:
        d = json.loads((args.summarize / "observed.json").read_text(encoding="utf-8"))
        print(summary(Recorded(d), d["edit_at"], d["edit"], d["views"], d["leftover"], d["notes"],
                      [tuple(v) for v in d["visits"]]))
        return 0
    out = args.out or Path(tempfile.mkdtemp(prefix="wse-ui-walk-"))
    out.mkdir(parents=True, exist_ok=True)
    shots = out / "pages"
    shots.mkdir(exist_ok=True)
    work = out / "demo"
    t0 = time.time()
    prepare(args.folder, work)
    config = work / "wse.yaml"

    from playwright.sync_api import sync_playwright

    started: list[Proc] = []
    views: dict = {}
    notes: list[str] = []
    leftover: list[str] = []
    obs = None
    visits: list[tuple[str, str, str]] = []
    edit = "(edit not made)"
    edit_at = time.time()
    ui = None
    try:
        port = free_port()
        ui = Proc("wse ui", ["ui", "--port", str(port)], work, out / "wse_ui.log")
        started.append(ui)
        gql = GraphQL(port)
        where = wait_ready(gql, ui)
        log(f"wse ui up on http://127.0.0.1:{port}/ ({where['repo']}@{where['location']}; sensors {where['sensors']})")
        obs = Observer(gql, where, t0)
        obs.start()
        with sync_playwright() as pw:
            walk = Walk(pw, f"http://127.0.0.1:{port}", where, shots)
            visits = walk.visits
            try:
                # before: wait for every sensor to have ticked once (the baseline the edit is compared to)
                end = time.monotonic() + 300
                while time.monotonic() < end and not (obs.polls and all(obs.ticks[s] for s in SENSORS)):
                    ui.note_tree()
                    time.sleep(2)
                groups = {g: min(a for a, g2 in obs.groups.items() if g2 == g)
                          for g in sorted({g for a, g in obs.groups.items() if a.startswith("wse_")})}
                log(f"groups: {sorted(set(obs.groups.values()))}; WSE groups: {list(groups)}")
                notes.append(f"asset groups: {', '.join(f'{g} ({n})' for g, n in _group_sizes(obs.groups))}")
                walk.ui_pages("1-before", groups)
                views["before the edit"] = open_view(work, out, walk, "1-before", started)
                if args.look_only:
                    raise _LookedOnly
                # the edit
                edit = edit_config(config)
                edit_at = obs.edit_at = time.time()
                log(f"EDIT: {edit}")
                # right after: until `in_sync` on the trajectories says it (or 5 min)
                end = time.monotonic() + 300
                while time.monotonic() < end:
                    c = obs.check("wse_trajectories")
                    if c and c["status"] == "FAILED" and c["at"] >= edit_at:
                        break
                    ui.note_tree()
                    time.sleep(2)
                views["right after the edit"] = open_view(work, out, walk, "2-after-edit", started)
                walk.ui_pages("2-after-edit", groups)
                # while the automation runs, until it settles
                end = time.monotonic() + args.settle_timeout
                n, last_snap, why = 0, time.monotonic() - args.during_every + 60, None  # the first 60 s on
                while time.monotonic() < end:
                    ui.note_tree()
                    why = settled(obs, edit_at)
                    if why:
                        break
                    if obs.active_runs() and time.monotonic() - last_snap >= args.during_every:
                        n += 1
                        walk.ui_pages(f"3-during-{n}", groups)
                        last_snap = time.monotonic()
                    time.sleep(3)
                notes.append(f"settled: {why}" if why else
                             f"NOT settled within {args.settle_timeout:.0f} s (active runs: {obs.active_runs()})")
                log(notes[-1])
                walk.ui_pages("4-settled", groups)
                views["after it settled"] = open_view(work, out, walk, "4-settled", started)
            except _LookedOnly:
                notes.append("--look-only: no edit made")
            finally:
                browser_tree = {p: st for p, st in walk.pid_tree().items() if "chrom" in _cmd(p)}
                walk.close()
        time.sleep(1)
        leftover += [f"chromium: pid {p} {c}" for p, c in leftovers(browser_tree)]
    finally:
        if obs is not None:
            obs.stop()
        for p in started:
            if p.leftover is None:
                p.leftover = p.stop(signal.SIGTERM)
            leftover += p.leftover
        # anything of ours still alive below this process (a chromium, a dagster child)?
        leftover += [f"child of this script: pid {p} {c}" for p, c in leftovers(descendants(os.getpid()))]
    if obs is None:
        print("(no UI: nothing observed)")
        return 1
    save_observed(obs, out / "observed.json", edit_at=edit_at, edit=edit, views=views, leftover=leftover,
                  notes=notes, visits=visits)
    (out / "timeline-full.txt").write_text("".join(f"{e['ts'] - edit_at:+8.0f} s  {e['text']}\n" for e in obs.events),
                                           encoding="utf-8")
    text = summary(obs, edit_at, edit, views, leftover, notes, visits)
    (out / "timeline.txt").write_text(text + "\n", encoding="utf-8")
    print(text)
    print(f"\npages (text + screenshots): {shots}\ntimeline: {out / 'timeline.txt'}\n"
          f"total {(time.time() - t0) / 60:.1f} min")
    return 0



if __name__ == "__main__":
    raise SystemExit(main())
