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
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from urllib.parse import quote

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from demo_time import demo_config, run_demo  # noqa: E402  (bench/demo_time.py: the demo as a newcomer runs it)

from wse_platform.ui import descendants  # noqa: E402

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
BROWSER_ARGS = ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                "--disable-background-networking", "--disable-component-update", "--disable-sync"]
SENSORS = ("config_observer", "sync_status", "wse_automation")
CELL_ASSETS = ("wse_trajectories", "wse_consistency_verdicts", "wse_cell_metrics")  # whose checks tab is shown
EDIT = ("wse", "horizon", 3)
EDIT_TEXT = "horizon: 2 → 3"
IN_SYNC = "in_sync"
ACTIVE_RUN = {"QUEUED", "NOT_STARTED", "STARTING", "STARTED", "MANAGED", "CANCELING"}
POLL_S = 5.0
QUIET_TICK = r"no in_sync verdict changed|no configuration or input-file change"  # ticks with nothing to say


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


OVERRIDES = ("DAGSTER_HOME", "WSE_CONFIG", "WSE_WAREHOUSE", "WSE_CACHE_DIR", "WSE_ARTIFACTS_DIR")


def child_env() -> dict[str, str]:
    """This checkout's code first; no inherited instance or output overrides (the folder's own)."""
    env = {k: v for k, v in os.environ.items() if k not in OVERRIDES}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])])
    env["DAGSTER_DISABLE_TELEMETRY"] = "1"
    return env


# ---- 1. the demo folder ----------------------------------------------------------------------------
def prepare(folder: Path | None, work: Path) -> None:
    if folder is not None:
        if not (folder / "wse.yaml").exists() or not (folder / ".wse" / "warehouse.duckdb").exists():
            raise SystemExit(f"error: {folder} is not a demo folder (no wse.yaml and .wse/warehouse.duckdb); "
                             "make one with `python bench/demo_time.py --keep DIR`")
        log(f"copying the demo folder {folder} to {work}")
        shutil.copytree(folder, work, ignore=shutil.ignore_patterns("*.lock", "*.pid"))
        return
    work.mkdir(parents=True)
    demo_config(work)
    log(f"running `wse demo` in {work} (the quick demo, ~4 min) ...")
    env = child_env()  # run_demo inherits this process's environment
    for k in OVERRIDES:
        os.environ.pop(k, None)
    os.environ.update(env)
    took, steps, rc = run_demo(work, full=False)
    log(f"`wse demo`: exit {rc} after {took:.0f} s ({len(steps)} steps)")
    if rc != 0:
        raise SystemExit("error: the demo failed (its output is above)")


def edit_config(config: Path) -> str:
    raw = yaml.safe_load(config.read_text(encoding="utf-8"))
    section, key, value = EDIT
    before = (raw.get(section) or {}).get(key, "(from the profile)")
    raw.setdefault(section, {})[key] = value
    config.write_text(yaml.safe_dump(raw, sort_keys=False), encoding="utf-8")
    return f"{section}.{key}: {before} → {value} written to {config}"


# ---- 2. wse ui / wse view and stopping them --------------------------------------------------------
class Proc:
    """A `wse` command started by this script: its process tree is noted while it runs, so that
    after stopping it the script can say whether anything it started is still alive."""

    def __init__(self, name: str, args: list[str], cwd: Path, logfile: Path):
        self.name = name
        self.logfile = logfile
        self.out = open(logfile, "w", encoding="utf-8")
        self.proc = subprocess.Popen([sys.executable, "-m", "wse_platform.cli", *args], cwd=cwd, env=child_env(),
                                     stdout=self.out, stderr=subprocess.STDOUT, start_new_session=True)
        self.tree: dict[int, str] = {}
        self.leftover: list[str] | None = None
        self.note_tree()

    def note_tree(self) -> None:
        self.tree.update(descendants(self.proc.pid))

    def text(self) -> str:
        return self.logfile.read_text(encoding="utf-8", errors="replace")

    def stop(self, sig=signal.SIGTERM, wait_s: float = 120.0) -> list[str]:
        """Stop it by `sig` to its own pid (as a user's Ctrl-C or `kill` would) and wait; return
        what of its process tree is still alive after that (then killed, and reported)."""
        if self.proc.poll() is None:
            self.note_tree()
            self.proc.send_signal(sig)
            try:
                self.proc.wait(wait_s)
            except subprocess.TimeoutExpired:
                pass
        left = leftovers({self.proc.pid: "", **self.tree}) if self.proc.poll() is None else leftovers(self.tree)
        for pid, cmd in left:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        self.out.close()
        return [f"{self.name}: pid {pid} still running after {sig.name}: {cmd}" for pid, cmd in left]


def leftovers(tree: dict[int, str]) -> list[tuple[int, str]]:
    """(pid, command line) of the noted processes still alive (same pid and start time, not zombie)."""
    out = []
    for pid, start in tree.items():
        try:
            stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")[:160]
        except OSError:
            continue
        if stat[0] not in ("Z", "X") and (not start or stat[19] == start):
            out.append((pid, cmd))
    return out


class GraphQL:
    def __init__(self, port: int):
        self.url = f"http://127.0.0.1:{port}/graphql"

    def __call__(self, query: str, variables: dict | None = None, timeout: float = 60.0) -> dict:
        body = json.dumps({"query": query, "variables": variables or {}}).encode()
        req = urllib.request.Request(self.url, data=body, headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            out = json.loads(resp.read())
        if out.get("errors"):
            raise RuntimeError(f"GraphQL errors: {out['errors']}")
        return out["data"]


def wait_ready(gql: GraphQL, ui: Proc, timeout: float = 600.0) -> dict:
    """Wait until the webserver answers and the code location is loaded; (repo name, location name)."""
    end = time.monotonic() + timeout
    last = None
    while time.monotonic() < end:
        if ui.proc.poll() is not None:
            raise SystemExit(f"error: wse ui exited ({ui.proc.returncode}):\n{ui.text()[-3000:]}")
        try:
            data = gql("{ repositoriesOrError { ... on RepositoryConnection { nodes { name location { name } "
                       "sensors { name } } } } }", timeout=10)
            nodes = data["repositoriesOrError"].get("nodes") or []
            if nodes:
                return {"repo": nodes[0]["name"], "location": nodes[0]["location"]["name"],
                        "sensors": [s["name"] for s in nodes[0]["sensors"]]}
        except Exception as err:  # noqa: BLE001 - not up yet
            last = err
        ui.note_tree()
        time.sleep(2)
    raise SystemExit(f"error: the UI did not come up within {timeout:.0f} s ({last})")


# ---- 3. what the UI knows, polled: the timeline's facts --------------------------------------------
CHECKS_Q = """{ assetNodes { assetKey { path } groupName isMaterializable dependencyKeys { path }
  assetChecksOrError { ... on AssetChecks { checks { name executionForLatestMaterialization {
    runId status timestamp evaluation { timestamp description severity targetMaterialization { storageId }
      metadataEntries { label ... on IntMetadataEntry { intValue } } } } } } } } }"""
RUNS_Q = """{ runsOrError(limit: 60) { ... on Runs { results { runId status creationTime startTime endTime
  tags { key value } assetSelection { path } assetMaterializations { assetKey { path } timestamp } } } } }"""
TICKS_Q = """query ($s: SensorSelector!) { sensorOrError(sensorSelector: $s) { ... on Sensor {
  sensorState { ticks(limit: 25) { tickId status timestamp endTimestamp runIds skipReason error { message } } } } } }"""
FAILURES_Q = """query ($id: ID!) { runOrError(runId: $id) { ... on Run { eventConnection(limit: 5000) { events {
  __typename ... on ExecutionStepFailureEvent { stepKey error { message } }
  ... on RunFailureEvent { message } } } } } }"""


class Observer(threading.Thread):
    """Polls the webserver's GraphQL every POLL_S seconds and records every change as a timeline line."""

    def __init__(self, gql: GraphQL, where: dict, t0: float):
        super().__init__(name="observer", daemon=True)
        self.gql, self.where, self.t0 = gql, where, t0
        self.edit_at: float | None = None
        self.lock = threading.Lock()
        self.events: list[dict] = []  # {ts, text, kind: check|run|tick, ...}
        self.checks: dict[tuple[str, str], dict] = {}
        self.groups: dict[str, str] = {}
        self.deps: dict[str, list[str]] = {}
        self.runs: dict[str, dict] = {}
        self.ticks: dict[str, dict[str, dict]] = {s: {} for s in SENSORS}
        self.failures: dict[str, list[str]] = {}
        self.history: dict[tuple[str, str], list[tuple[float, str, str]]] = {}  # (seen at, status, description)
        self.errors: list[str] = []
        self.polls = 0
        self._halt = threading.Event()

    def rel(self, ts: float) -> str:
        base = self.edit_at if self.edit_at is not None else self.t0
        d = ts - base
        return f"{'edit' if self.edit_at is not None else 'start'}{'+' if d >= 0 else '-'}{abs(d):5.0f}s"

    def add(self, ts: float, text: str, **info) -> None:
        self.events.append({"ts": ts, "text": text, **info})
        log(f"{self.rel(ts)}  {text}")

    def run(self) -> None:
        while not self._halt.is_set():
            try:
                self.poll()
            except Exception as err:  # noqa: BLE001 - a slow webserver on a loaded machine: try again
                self.errors.append(f"{time.strftime('%H:%M:%S')} {err}")
            self._halt.wait(POLL_S)

    def stop(self) -> None:
        self._halt.set()
        self.join(120)

    def poll(self) -> None:
        asked = time.time()  # check changes are dated by when they were asked for (a poll takes seconds)
        checks = self.gql(CHECKS_Q)["assetNodes"]
        runs = self.gql(RUNS_Q)["runsOrError"]["results"]
        ticks = {s: self.gql(TICKS_Q, {"s": {"repositoryName": self.where["repo"],
                                             "repositoryLocationName": self.where["location"],
                                             "sensorName": s}})["sensorOrError"] for s in SENSORS}
        with self.lock:
            self._checks(checks, asked)
            self._runs(runs)
            for s, data in ticks.items():
                self._ticks(s, ((data or {}).get("sensorState") or {}).get("ticks") or [])
            self.polls += 1

    def _checks(self, nodes: list[dict], asked: float) -> None:
        for node in nodes:
            asset = "/".join(node["assetKey"]["path"])
            self.groups[asset] = node["groupName"]
            self.deps[asset] = ["/".join(d["path"]) for d in node.get("dependencyKeys") or []]
            for c in (node.get("assetChecksOrError") or {}).get("checks") or []:
                ex = c["executionForLatestMaterialization"]
                ev = (ex or {}).get("evaluation") or {}
                meta = {m["label"]: m.get("intValue") for m in ev.get("metadataEntries") or []}
                now = {"status": ex["status"] if ex else "NONE", "description": ev.get("description") or "",
                       "target": (ev.get("targetMaterialization") or {}).get("storageId"),
                       "run": (ex or {}).get("runId") or "", "n_checked": meta.get("n_checked"),
                       "at": ev.get("timestamp") or (ex or {}).get("timestamp") or time.time()}
                key = (asset, c["name"])
                old = self.checks.get(key)
                self.checks[key] = now
                if old is None or (old["status"], old["description"]) != (now["status"], now["description"]):
                    self.history.setdefault(key, []).append((asked, now["status"], now["description"]))
                    if old is None and self.polls == 0:
                        continue  # the first poll: the baseline, summarized separately
                    by = "-" if not ex else f"run {now['run'][:8]}" if now["run"] else "sync_status"
                    self.add(asked, f"check {asset} · {c['name']}: {old['status'] if old else '-'} → "
                                          f"{now['status']} ({by}){_first_lines(now['description'])}",
                             kind="check", asset=asset, check=c["name"], old=old["status"] if old else None,
                             status=now["status"], by=by, description=now["description"])

    def _runs(self, runs: list[dict]) -> None:
        for r in runs:
            tags = {t["key"]: t["value"] for t in r["tags"]}
            now = {"status": r["status"], "created": r["creationTime"], "start": r["startTime"], "end": r["endTime"],
                   "trigger": tags.get("wse/trigger") or tags.get("dagster/sensor_name") or "cli/manual",
                   "partition": tags.get("dagster/partition", ""),
                   "assets": sorted("/".join(a["path"]) for a in r["assetSelection"] or []),
                   "written": {}}
            for m in sorted(r.get("assetMaterializations") or [], key=lambda m: float(m["timestamp"])):
                now["written"].setdefault("/".join(m["assetKey"]["path"]), float(m["timestamp"]) / 1000)
            old = self.runs.get(r["runId"])
            self.runs[r["runId"]] = now
            if old is None and self.polls == 0:
                continue
            rid = r["runId"][:8]
            if old is None:
                self.add(r["creationTime"], f"run {rid} launched by {now['trigger']}"
                                            f"{' [' + now['partition'] + ']' if now['partition'] else ''}: "
                                            f"{', '.join(now['assets'])}", kind="run")
            if (old or {}).get("status") != now["status"] and now["status"] not in ACTIVE_RUN - {"STARTED"}:
                took = f" after {now['end'] - now['start']:.0f} s" if now["end"] and now["start"] else ""
                self.add(now["end"] or now["start"] or time.time(), f"run {rid} {now['status']}{took}", kind="run")
                if now["status"] == "FAILURE":
                    self.failures[r["runId"]] = self._failure_lines(r["runId"])
                    for line in self.failures[r["runId"]][:8]:
                        self.add(now["end"] or time.time(), f"    {line}", kind="run")

    def _failure_lines(self, run_id: str) -> list[str]:
        try:
            events = self.gql(FAILURES_Q, {"id": run_id})["runOrError"]["eventConnection"]["events"]
        except Exception as err:  # noqa: BLE001
            return [f"(could not read the run's events: {err})"]
        out = []
        for e in events:
            if e["__typename"] == "ExecutionStepFailureEvent":
                out.append(f"step {e['stepKey']}: {(e['error'] or {}).get('message', '').strip().splitlines()[0][:220]}")
            elif e["__typename"] == "RunFailureEvent":
                out.append(f"run failure: {(e.get('message') or '').strip()[:220]}")
        return out

    def _ticks(self, sensor: str, ticks: list[dict]) -> None:
        seen = self.ticks[sensor]
        for t in sorted(ticks, key=lambda t: t["timestamp"]):
            old = seen.get(t["tickId"])
            seen[t["tickId"]] = t
            if self.polls == 0 or (old is not None and old["status"] == t["status"]):
                continue
            if t["status"] == "FAILURE":
                msg = ((t.get("error") or {}).get("message") or "").strip().splitlines()
                self.add(t["timestamp"], f"sensor {sensor} tick ERRORED: {msg[0][:220] if msg else '(no message)'}",
                         kind="tick")
            elif t["status"] == "SUCCESS":
                runs = f", {len(t['runIds'])} run(s) requested" if t["runIds"] else ""
                self.add(t["timestamp"], f"sensor {sensor} tick did something{runs}", kind="tick")
            elif t["status"] == "SKIPPED" and says_something(t):
                # a tick that recorded events without requesting a run: Dagster files it as skipped;
                # its reason is the tooltip of its "0 runs requested" tag in the tick history
                self.add(t["timestamp"], f"sensor {sensor} tick (skipped, 0 runs): {(t.get('skipReason') or '')[:300]}",
                         kind="tick")

    # -- questions the main loop asks
    def active_runs(self) -> list[str]:
        with self.lock:
            return [r for r, v in self.runs.items() if v["status"] in ACTIVE_RUN]

    def runs_since(self, ts: float) -> dict[str, dict]:
        with self.lock:
            return {r: v for r, v in self.runs.items() if v["created"] >= ts}

    def ticks_after(self, sensor: str, ts: float) -> list[dict]:
        with self.lock:
            return [t for t in self.ticks[sensor].values() if t["timestamp"] > ts and t["status"] != "STARTED"]

    def check(self, asset: str, name: str = "in_sync") -> dict | None:
        with self.lock:
            return self.checks.get((asset, name))


def says_something(tick: dict) -> bool:
    """A skipped tick whose reason is not one of our sensors' "nothing new" (nor empty)."""
    reason = tick.get("skipReason") or ""
    return bool(reason) and not re.match(QUIET_TICK, reason)


def _first_lines(text: str, n: int = 3) -> str:
    lines = [line for line in (text or "").splitlines() if line.strip()]
    if not lines:
        return ""
    shown = " | ".join(line.strip()[:200] for line in lines[:n])
    return f": {shown}" + (f" | … ({len(lines) - n} more lines)" if len(lines) > n else "")


# ---- 4. the browser ----------------------------------------------------------------------------------
# What a page shows, in one line, from its text (Dagster 1.13's layout; the full text is saved too).
NAME = re.compile(r"^[a-z][a-z0-9_]*$")
RUN_STATUS = ("Success", "Failure", "Started", "Queued", "Starting", "Canceled", "Canceling", "Not started")


def read_graph(lines: list[str]) -> str:
    groups = sorted({x for x in lines if NAME.match(x) and "_" in x or x == "platform"})
    return f"{len(groups)} groups: {', '.join(groups)}"


def read_group(lines: list[str]) -> str:
    out, last = [], None
    for i, x in enumerate(lines):
        if NAME.match(x) and x not in ("llm",):
            last = x
        if x == "Asset checks" and last and i + 1 < len(lines):
            out.append(f"{last} checks {lines[i + 1]}")
    return "; ".join(out) or "(no asset card shows its checks at this zoom)"


def read_checks(lines: list[str]) -> str:
    listed = []
    if "Execute all" in lines:
        i = lines.index("Execute all") + 1
        while i + 2 < len(lines) and lines[i] == lines[i + 1]:
            listed.append(f"{lines[i]} {lines[i + 2]}")
            i += 3
    said, result = "", ""
    if "Latest execution" in lines:
        j = lines.index("Latest execution") + 1
        k = lines.index("Evaluation result") if "Evaluation result" in lines else j
        said = " / ".join(lines[j:k])[:600]
        result = lines[k + 1] if k + 1 < len(lines) else ""
    return f"checks: {', '.join(listed)} || in_sync: {result}: \"{said}\""


def read_runs(lines: list[str]) -> str:
    counts = [x for x in lines if re.match(r"^(Queued|In progress) \(\d+\)$", x)]
    statuses = [x for x in lines if x in RUN_STATUS]
    tally = {st: statuses.count(st) for st in RUN_STATUS if st in statuses}
    return f"{', '.join(counts)}; rows on the first page: {tally}"


def read_sensor(lines: list[str]) -> str:
    latest = ""
    if "Latest tick" in lines:
        i = lines.index("Latest tick")
        latest = " ".join(lines[i + 1:i + 3])
    body = lines[lines.index("Timestamp"):] if "Timestamp" in lines else lines
    failures = sum(1 for x in body if x in ("Failure", "Failed") or x.startswith("Error"))
    return f"latest tick: {latest}; error/failure rows in the tick table: {failures}"


class Walk:
    """Headless Chromium through the Dagster UI; each visit saves the page text and a screenshot."""

    def __init__(self, pw, base: str, where: dict, out: Path):
        self.browser = pw.chromium.launch(executable_path=CHROMIUM, args=BROWSER_ARGS)
        self.page = self.browser.new_page(viewport={"width": 1600, "height": 1000})
        self.page.set_default_timeout(90_000)
        self.base, self.where, self.out = base.rstrip("/"), where, out
        self.visits: list[tuple[str, str, str]] = []  # (phase, name, first lines of interest)

    def pid_tree(self) -> dict[int, str]:
        return descendants(os.getpid())

    def dismiss_modal(self) -> None:
        """Dagster's "Join the community" dialog covers the page once per browser profile."""
        skip = self.page.get_by_role("button", name="Skip")
        try:
            skip.wait_for(timeout=8_000 if not self.visits else 500)
            skip.click()
        except Exception:  # noqa: BLE001 - not shown
            pass

    def visit(self, phase: str, name: str, path: str, wait_text: str | None = None, reader=None,
              full_page: bool = False) -> str:
        """Open `path`, wait for `wait_text`, save its text and a screenshot; `reader(lines)` says
        what the page shows in one line (for the summary)."""
        page = self.page
        try:
            page.goto(self.base + path, wait_until="domcontentloaded")
            if wait_text:  # attached: a node far off the graph's viewport is in the page, not visible
                page.get_by_text(wait_text, exact=False).first.wait_for(state="attached", timeout=120_000)
            self.dismiss_modal()
            end = time.monotonic() + 60  # asset cards fill in after the graph is drawn
            while time.monotonic() < end and page.get_by_text(re.compile(r"^Loading")).count():
                time.sleep(1)
            try:
                page.wait_for_load_state("networkidle", timeout=15_000)
            except Exception:  # noqa: BLE001 - the UI polls; a busy page still renders
                pass
            time.sleep(1.5)
            text = page.inner_text("body")
        except Exception as err:  # noqa: BLE001 - record what was there and go on
            text = f"(page did not load as expected: {str(err).splitlines()[0]})\n" + _safe_text(page)
        stem = f"{phase}-{name}"
        (self.out / f"{stem}.txt").write_text(text, encoding="utf-8")
        try:
            page.screenshot(path=str(self.out / f"{stem}.png"), full_page=full_page)
        except Exception:  # noqa: BLE001
            pass
        lines = [line.strip() for line in text.splitlines() if line.strip()]
        lines = lines[:lines.index("Join the Dagster community")] if "Join the Dagster community" in lines else lines
        try:
            seen = reader(lines) if reader else " | ".join(lines[10:20])
        except Exception as err:  # noqa: BLE001
            seen = f"(could not read the page: {err})"
        self.visits.append((phase, name, seen))
        return text

    def ui_pages(self, phase: str, groups: dict[str, str]) -> None:
        """The pages a reviewer opens: the lineage (groups), each WSE group, the `in_sync` check of
        the WSE cells, the runs, the two sensors' ticks. `groups`: group -> an asset in it."""
        where = self.where
        loc = where["location"] if where["repo"] == "__repository__" else f"{where['repo']}@{where['location']}"
        loc = quote(loc, safe=":@")
        log(f"browser: {phase} ...")
        self.visit(phase, "asset-graph", "/asset-groups", wait_text=next(iter(groups), None), reader=read_graph)
        for group, asset in groups.items():
            self.visit(phase, f"group-{group}", f"/locations/{loc}/asset-groups/{quote(group)}", wait_text="Latest event",
                       reader=read_group)
        for asset in CELL_ASSETS:
            self.visit(phase, f"checks-{asset}", f"/assets/{quote(asset)}?view=checks&checkDetail=in_sync",
                       wait_text="Latest execution", reader=read_checks)
        self.visit(phase, "runs", "/runs", wait_text="Launched by", reader=read_runs)
        for sensor in ("sync_status", "wse_automation"):
            self.visit(phase, f"sensor-{sensor}", f"/locations/{loc}/sensors/{sensor}", wait_text="Latest tick",
                       reader=read_sensor, full_page=True)

    def view_pages(self, phase: str, base: str) -> dict:
        """`wse view`: the WSE list, then the first trajectory cell; how many steps it shows."""
        out: dict = {}
        page = self.page
        try:
            page.goto(base + "wse", wait_until="domcontentloaded")
            (self.out / f"{phase}-view-wse.txt").write_text(page.inner_text("body"), encoding="utf-8")
            page.screenshot(path=str(self.out / f"{phase}-view-wse.png"), full_page=True)
            rows = page.locator("tbody tr")
            out["list_rows"] = [rows.nth(i).inner_text().replace("\t", " | ") for i in range(rows.count())]
            page.locator("tbody tr a").first.click()
            page.wait_for_load_state("domcontentloaded")
            out["url"] = page.url
            out["steps"] = page.locator("section.step").count()
            main = page.inner_text("body")
            head = re.search(r"length \d+ of H = \d+[^\n]*", main)
            out["head"] = head.group(0) if head else ""
            (self.out / f"{phase}-view-trajectory.txt").write_text(main, encoding="utf-8")
            page.screenshot(path=str(self.out / f"{phase}-view-trajectory.png"), full_page=True)
        except Exception as err:  # noqa: BLE001
            out["error"] = str(err).splitlines()[0]
            out["text"] = _safe_text(page)[:500]
        return out

    def close(self) -> None:
        self.browser.close()


def _safe_text(page) -> str:
    try:
        return page.inner_text("body")
    except Exception:  # noqa: BLE001
        return ""


def open_view(work: Path, out: Path, walk: Walk, phase: str, started: list[Proc]) -> dict:
    view = Proc(f"wse view ({phase})", ["view", "--port", "0"], work, out / f"wse_view-{phase}.log")
    started.append(view)
    url = None
    end = time.monotonic() + 120
    while time.monotonic() < end and url is None and view.proc.poll() is None:
        m = re.search(r"(http://127\.0\.0\.1:\d+/)", view.text())
        url = m.group(1) if m else None
        time.sleep(0.3)
    if url is None:
        seen = {"error": f"wse view did not start: {view.text()[-800:]}"}
    else:
        seen = walk.view_pages(phase, url)
    view.leftover = view.stop(signal.SIGINT, wait_s=30)
    return seen


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


def compact_timeline(events: list[dict]) -> list[tuple[float, str]]:
    """Runs and sensor ticks as they are; check changes grouped per poll, check and new status
    (IN_PROGRESS omitted: a run's planned evaluations), with one `in_sync` text per group, the one
    naming the edit if any."""
    out: list[tuple[float, str]] = [(e["ts"], e["text"]) for e in events if e.get("kind") != "check"]
    groups: dict[tuple, list[dict]] = {}
    for e in events:
        if e.get("kind") == "check" and e["status"] != "IN_PROGRESS" and e["old"] != e["status"]:
            who = "sync_status" if e["by"] == "sync_status" else "-" if e["by"] == "-" else "its run"
            groups.setdefault((round(e["ts"]), e["check"] == IN_SYNC, e["status"], who), []).append(e)
    for (ts, is_sync, status, who), evs in groups.items():
        names = sorted({e["asset"] + ("" if is_sync else f" · {e['check']}") for e in evs})
        what = "in_sync" if is_sync else "check"
        text = f"{what} {status} ({'no evaluation' if who == '-' else 'by ' + who}) on {len(names)}: {', '.join(names)}"
        if is_sync and status == "FAILED":
            said = next((e for e in evs if EDIT_TEXT in e["description"]), evs[0])
            cause = next((x.strip() for x in said["description"].splitlines() if EDIT_TEXT in x), "")
            text += f"\n{'':12}e.g. {said['asset']}: \"{(cause or said['description'].splitlines()[0])[:240]}\""
        elif not is_sync and status not in ("SUCCEEDED",):
            text += "".join(f"\n{'':12}{e['asset']} · {e['check']}: {_first_lines(e['description'], 1)[2:][:200]}"
                            for e in evs[:6])
        out.append((ts, text))
    return sorted(out, key=lambda x: x[0])


def summary(obs: Observer, edit_at: float, edit: str, views: dict, leftover: list[str], notes: list[str],
            visits: list[tuple[str, str, str]]) -> str:
    L = []
    rel = lambda ts: f"{ts - edit_at:+.0f} s"  # noqa: E731
    L.append("=" * 100)
    L.append(f"UI walkthrough: {edit}")
    L.append("=" * 100)
    L.append("timeline (seconds from the edit; every change: timeline-full.txt):")
    L += [f"  {rel(ts):>8}  {text}" for ts, text in compact_timeline(obs.events)]
    L.append("")
    # checks
    in_sync = {a: v for (a, c), v in obs.checks.items() if c == "in_sync"}
    wse = sorted(a for a in in_sync if a.startswith("wse_"))
    L.append("in_sync on the WSE assets:")
    said: dict[str, str] = {}
    for a in wse:
        after = [(ts, st, d) for ts, st, d in obs.history.get((a, "in_sync"), []) if ts >= edit_at]
        failed = [(ts, d) for ts, st, d in after if st == "FAILED"]
        passed_again = [ts for ts, st, _ in after if st == "SUCCEEDED" and failed and ts > failed[0][0]]
        named = any(EDIT_TEXT in d for _, d in failed)
        if failed:
            said[a] = failed[0][1]
        L.append(f"  {a:34s} now {in_sync[a]['status']:10s} "
                 + (f"FAILED at {rel(failed[0][0])}, " if failed else "never failed after the edit, ")
                 + (f"passed again at {rel(passed_again[0])}; " if passed_again else "")
                 + (f"named the edit (`{EDIT_TEXT}`)" if named else "did not name the edit" if failed else ""))
    for a in ("wse_trajectories", "wse_cell_metrics"):
        if a in said:
            L.append(f"  what in_sync said on {a}:")
            L += [f"    {line}" for line in said[a].splitlines()[:6]]
    bad_pass = sorted(f"{a} · {c}" for (a, c), v in obs.checks.items() if v["status"] == "SUCCEEDED" and v["n_checked"] == 0)
    L.append(f"checks passed having examined nothing (n_checked 0): {', '.join(bad_pass) or 'none'}")
    def at_edit(key):
        before = [st for ts, st, _ in obs.history.get(key, []) if ts < edit_at]
        return before[-1] if before else None

    not_ok = {k: v for k, v in obs.checks.items() if v["status"] != "SUCCEEDED"}
    new_bad = sorted(f"{a} · {c}: {v['status']} (was {at_edit((a, c))}){_first_lines(v['description'], 1)}"
                     for (a, c), v in not_ok.items() if at_edit((a, c)) != v["status"])
    L.append(f"checks not passing at the end: {len(not_ok)} of {len(obs.checks)}; "
             f"{len(not_ok) - len(new_bad)} of them were already so before the edit (the tiny model's failures, "
             f"listed in pages/ and the baseline), {len(new_bad)} changed since:")
    L += [f"  {x}" for x in new_bad]
    # runs
    runs = obs.runs_since(edit_at - 1)
    failed = {r: v for r, v in runs.items() if v["status"] == "FAILURE"}
    L.append(f"runs launched after the edit: {len(runs)}; failed: {len(failed)}")
    for r, v in sorted(runs.items(), key=lambda kv: kv[1]["created"]):
        took = f"{v['end'] - v['start']:.0f} s" if v["end"] and v["start"] else "-"
        L.append(f"  {r[:8]} {rel(v['created']):>7} {v['status']:9s} {took:>6} {v['trigger']:12s} "
                 f"{v['partition'] or '-':28s} {', '.join(v['assets'])}")
        for line in obs.failures.get(r, [])[:8]:
            L.append(f"      {line}")
    clashes = overlapping_lineage(obs, runs)
    L.append("runs that executed while another run had yet to write one of their inputs (or inputs of inputs): "
             + ("; ".join(clashes) if clashes else "none"))
    # sensors
    for s in SENSORS:
        ticks = [t for t in obs.ticks[s].values() if t["timestamp"] >= edit_at - 1]
        errored = [t for t in ticks if t["status"] == "FAILURE"]
        said = [t for t in ticks if t["status"] == "SKIPPED" and says_something(t)]
        L.append(f"sensor {s}: {len(ticks)} ticks after the edit, {len(errored)} errored"
                 + (f" (first: {((errored[0].get('error') or {}).get('message') or '').strip().splitlines()[0][:200]})"
                    if errored else "")
                 + (f"; {len(said)} skipped tick(s) that recorded something, tick history says: "
                    + " | ".join(f"\"{(t.get('skipReason') or '')[:160]}\"" for t in said[:3]) if said else ""))
    L.append("what the browser showed (page texts and screenshots in pages/):")
    for phase, name, seen in visits:
        L.append(f"  {phase:14s} {name:34s} {seen[:700]}")
    # wse view
    for phase, seen in views.items():
        if "error" in seen:
            L.append(f"wse view ({phase}): ERROR {seen['error']} {seen.get('text', '')[:200]}")
        else:
            L.append(f"wse view ({phase}): {seen.get('url')} shows {seen.get('steps')} step(s); "
                     f"\"{seen.get('head', '')[:160]}\"")
    L.append(f"left running after stopping: {'; '.join(leftover) if leftover else 'nothing (checked every noted process)'}")
    if obs.errors:
        L.append(f"GraphQL polls that failed (slow webserver): {len(obs.errors)}; first: {obs.errors[0][:200]}")
    L += notes
    return "\n".join(L)


STATE = ("events", "checks", "history", "runs", "ticks", "failures", "deps", "groups", "errors")


def save_observed(obs, path: Path, **extra) -> None:
    """What was observed, as JSON: `--summarize OUT` prints the summary again from it."""
    data = {k: getattr(obs, k) for k in STATE}
    data["checks"] = {"\t".join(k): v for k, v in obs.checks.items()}
    data["history"] = {"\t".join(k): v for k, v in obs.history.items()}
    path.write_text(json.dumps({**data, **extra}, indent=1, default=str), encoding="utf-8")


class Recorded:
    """A saved observation (`save_observed`), read back with the attributes `summary` uses."""

    def __init__(self, data: dict):
        for k in STATE:
            setattr(self, k, data[k])
        self.checks = {tuple(k.split("\t")): v for k, v in data["checks"].items()}
        self.history = {tuple(k.split("\t")): [tuple(x) for x in v] for k, v in data["history"].items()}

    def runs_since(self, ts: float) -> dict[str, dict]:
        return {r: v for r, v in self.runs.items() if v["created"] >= ts}


class _LookedOnly(Exception):
    pass


def ancestors(deps: dict[str, list[str]], assets: list[str]) -> set[str]:
    out, todo = set(), list(assets)
    while todo:
        for d in deps.get(todo.pop(), []):
            if d not in out:
                out.add(d)
                todo.append(d)
    return out


def overlapping_lineage(obs, runs: dict[str, dict]) -> list[str]:
    """Runs that executed while another run was still to write one of their upstream assets (from
    that run's start until it wrote the asset, or ended): the table rebuild beside its inputs'
    re-judge that issue 21 saw fail. A run that reads an input another run already wrote is fine."""
    out = []
    for b, vb in runs.items():
        up = ancestors(obs.deps, vb["assets"])
        for a, va in runs.items():
            if a == b or not (va["start"] and vb["start"]):
                continue
            b_end = vb["end"] or time.time()
            for x in sorted(up & set(va["assets"])):
                done = va.get("written", {}).get(x) or va["end"] or time.time()
                if va["start"] < b_end and vb["start"] < done:
                    out.append(f"{b[:8]} ({', '.join(vb['assets'])}) ran {vb['start'] - va['start']:+.0f} s after "
                               f"{a[:8]} started and {done - vb['start']:.0f} s before it wrote {x}")
    return out


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


def _cmd(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _group_sizes(groups: dict[str, str]) -> list[tuple[str, int]]:
    sizes: dict[str, int] = {}
    for g in groups.values():
        sizes[g] = sizes.get(g, 0) + 1
    return sorted(sizes.items())


if __name__ == "__main__":
    raise SystemExit(main())
