"""What the UI knows, from the webserver's GraphQL API, polled: the timeline's facts."""
from __future__ import annotations

import json
import re
import threading
import time
import urllib.request

from uiwalk.common import ACTIVE_RUN, POLL_S, QUIET_TICK, SENSORS, log
from uiwalk.procs import Proc


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

