"""The browser: headless Chromium through the Dagster UI and `wse view` (page texts, screenshots)."""
from __future__ import annotations

import os
import re
import shutil
import signal
import time
from pathlib import Path
from urllib.parse import quote

from uiwalk.common import CELL_ASSETS, log
from uiwalk.procs import Proc
from wse_platform.ui import descendants

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
BROWSER_ARGS = ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                "--disable-background-networking", "--disable-component-update", "--disable-sync"]

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

