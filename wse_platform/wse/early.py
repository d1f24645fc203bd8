"""WSE-bench judges asked while the cell is generated (`wse_platform.early_judges` has the design).

`simulate_cell(..., early=CellJudges(...))` reports each narrated step and each trajectory's end;
the consistency panel of step k goes out once step k exists (after the panel found steps < k
consistent, as `judges.judge_consistency` does), the richness panel once the trajectory ended.
The trajectory the judges see is built as `judges.judged_trajectories` builds it from the stored
rows (narrated steps 1..L, the day from the start day and the new-day flags), so the judging
asset's requests are the same requests and find their answers in the cache.
"""
from __future__ import annotations

import contextlib
import queue
from collections.abc import Iterator
from typing import Any

from wse_platform import early_judges
from wse_platform.config import Settings
from wse_platform.llm.limiter import expect
from wse_platform.wse.judges import (
    JudgedTrajectory,
    NarratedStep,
    aggregate_step,
    consistency_request,
    richness_request,
)
from wse_platform.wse.world import EpisodeSeed


class CellJudges:
    def __init__(self, client: Any, settings: Settings, model: str, arch: str):
        self.client, self.settings, self.model, self.arch = client, settings, model, arch
        self.consistency = settings.wse.consistency_judge
        self.richness = settings.wse.richness_judge
        self._ask = early_judges.Ask("WSE judge")
        self._chains: dict[str, queue.SimpleQueue] = {}
        self._steps: dict[str, list[NarratedStep]] = {}

    # ---- called from the trajectory's own thread (simulate._advance) ----------------------
    def step(self, seed: EpisodeSeed, step: int, player_action: str, narrative: str, new_day: bool | None) -> None:
        """Step `step` of `seed`'s trajectory is narrated (and final)."""
        steps = self._steps.setdefault(seed.seed_id, [])
        day = (steps[-1].day if steps else seed.time.day) + (1 if new_day else 0)
        steps.append(NarratedStep(step=step, player_action=player_action, narrative=narrative, day=day))
        if self.consistency is None:
            return
        chain = self._chains.get(seed.seed_id)
        if chain is None:
            chain = self._chains[seed.seed_id] = queue.SimpleQueue()
            self._ask.submit(lambda: self._consistency_chain(seed, chain))
        chain.put(tuple(steps))

    def end(self, seed: EpisodeSeed) -> None:
        """`seed`'s trajectory has ended (horizon, story end or failure): no further step comes."""
        chain = self._chains.get(seed.seed_id)
        if chain is not None:
            chain.put(None)
        steps = tuple(self._steps.get(seed.seed_id, ()))
        if self.richness is not None and steps:
            traj = self._trajectory(seed, steps)
            self._ask.submit(lambda: self.client.complete_many(
                [richness_request(self.settings, self.richness, traj, j) for j in range(self.richness.count)]))

    @property
    def consistency_count(self) -> int:
        return self.consistency.count if self.consistency is not None else 0

    @property
    def richness_count(self) -> int:
        return self.richness.count if self.richness is not None else 0

    def stop(self) -> None:
        """No new judge request (the cell failed or was interrupted); answers in flight are kept."""
        self._ask.stopped = True

    def close(self) -> None:
        self._ask.close()

    # ---- the judges -----------------------------------------------------------------------
    def _trajectory(self, seed: EpisodeSeed, steps: tuple[NarratedStep, ...]) -> JudgedTrajectory:
        return JudgedTrajectory(model=self.model, arch=self.arch, seed=seed, steps=steps)

    def _consistency_chain(self, seed: EpisodeSeed, chain: queue.SimpleQueue) -> None:
        """Step k's panel once step k exists; stops where `judge_consistency` stops."""
        judge = self.consistency
        while (steps := chain.get()) is not None:
            if self._ask.stopped:
                return
            k = len(steps)
            expect((max(self.settings.wse.horizon or k, k) - k + 1) * judge.count + self.richness_count)   # limiter
            traj = self._trajectory(seed, steps)
            results = self.client.complete_many([consistency_request(self.settings, judge, traj, k, j)
                                                 for j in range(judge.count)])
            agg = aggregate_step([r.output if r.ok else None for r in results], judge.count, k)
            if agg["majority"] != "consistent":
                return  # judging of this trajectory ends here; later steps are never asked


@contextlib.contextmanager
def early_judging(client: Any, settings: Settings, model: str, arch: str,
                  force: bool | None = None) -> Iterator[CellJudges | None]:
    """`CellJudges` for one cell when early judging is on (`early_judges.enabled`, or `force`), else None.
    Leaving the block waits for every judge request asked."""
    s = settings.wse
    panels = [p for p in (s.consistency_judge, s.richness_judge) if p is not None]
    on = force if force is not None else bool(panels) and early_judges.enabled(
        settings, client, [model, *(m.model for p in panels for m in p.members)])
    if not on or not panels:
        yield None
        return
    judges = CellJudges(client, settings, model, arch)
    try:
        yield judges
    except BaseException:
        judges.stop()
        raise
    finally:
        judges.close()
