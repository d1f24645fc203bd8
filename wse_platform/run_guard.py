"""What a command does between its runs: stop at a broken environment, never build on a failed upstream.

`wse materialize` executes its plan run by run (`runner.execute`). After each run the guard
looks at why a failed run failed:

* An *infrastructure* failure — an error of a class derived from `errors.InfrastructureError`
  (warehouse, Dagster instance, full or read-only disk) or from `llm.errors.LLMInfrastructureError`
  (missing key, no server, unusable cache, transport failures that outlast the retries), or an
  error whose wording is a full or read-only disk ("No space left on device", "database or disk
  is full", "Read-only file system", "disk I/O error") anywhere in its chain — stops the command:
  no further run starts (each would fail the same way, and its LLM calls could not be recorded).
  Classes are matched by name through Dagster's serialized error, over every subclass defined,
  so a new infrastructure error type is covered without touching this module.
* Any failed run marks its assets (at its partition) failed for the rest of the command: a later
  run whose assets read one of them (an aggregate table over the cells) is skipped with the
  reason, instead of reporting "ok" over an empty or partial upstream; its own descendants are
  skipped in turn. So is a run reading an asset that was never built (`wse materialize` gives
  the guard its instance): it would report "ok" over an empty table. A skipped run counts as not
  succeeded.

Before each run the guard also notes (once) when the config file changed since the command
read it: the runs go on with the configuration read at start (`config_snapshot`).

The guard is thread-safe, for a caller that runs several steps at once: call `skip_reason` before
starting a step (and `mark_failed` when skipping it), `after` when it finishes, and start no
step once `stopped` is set.
"""
from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterator

from wse_platform.diskcheck import one_line

# wording of a broken environment, whatever the exception class (lower case)
INFRASTRUCTURE_TEXT = ("no space left on device", "database or disk is full", "disk quota exceeded",
                       "read-only file system", "disk i/o error", "attempt to write a readonly database")
_WRAPPER_PREFIXES = ("Error occurred while executing", "Error occurred during the execution")


def infrastructure_classes() -> set[str]:
    """Names of every infrastructure error class defined so far (subclasses included)."""
    from wse_platform.errors import InfrastructureError
    from wse_platform.llm.errors import LLMInfrastructureError

    names: set[str] = set()
    todo: list[type] = [InfrastructureError, LLMInfrastructureError]
    while todo:
        cls = todo.pop()
        if cls.__name__ not in names:
            names.add(cls.__name__)
            todo.extend(cls.__subclasses__())
    return names


def _errors(error) -> Iterator:
    """A serialized error and its causes and contexts, outermost first."""
    seen = 0
    while error is not None and seen < 20:
        yield error
        seen += 1
        error = getattr(error, "cause", None) or getattr(error, "context", None)


def failure_errors(result) -> list:
    """The serialized errors of the failed steps of a Dagster execution result."""
    out = []
    for ev in result.all_events:
        data = ev.step_failure_data if ev.is_step_failure else None
        if data is not None and data.error is not None:
            out.append((ev.step_key, data.error))
    return out


def _text(e) -> str:
    """The message of a serialized error without its leading `module.Class: `."""
    msg = (e.message or "").strip()
    m = re.match(r"^([\w.]+): ", msg)
    if m and m.group(1).rsplit(".", 1)[-1] == e.cls_name:
        msg = msg[m.end():]
    return msg


def cause_of(error) -> str:
    """The message that says what went wrong: the first error in the chain that is not Dagster's
    wrapper ("Error occurred while executing op ..."), on one line."""
    for e in _errors(error):
        msg = _text(e)
        if msg and not msg.startswith(_WRAPPER_PREFIXES) and not e.cls_name.startswith("DagsterExecution"):
            return one_line(msg)
    return one_line(getattr(error, "message", "") or "see the run log in the Dagster UI")


def infrastructure_error(error) -> str | None:
    """The cause (one line) when this serialized error is an infrastructure failure, else None."""
    classes = infrastructure_classes()
    chain = list(_errors(error))
    for e in chain:
        if e.cls_name in classes:
            return one_line(_text(e))
    for e in chain:
        if any(t in (e.message or "").lower() for t in INFRASTRUCTURE_TEXT):
            return cause_of(error)
    return None


class RunGuard:
    """Per command: which assets failed, whether the environment broke, whether the config moved."""

    def __init__(self, defs, config_changed: Callable[[], str | None] | None = None, instance=None):
        self.graph = defs.resolve_asset_graph()
        self.instance = instance  # given: a run is also skipped when an asset it reads was never built
        self.failed: dict = {}  # asset key -> partition keys failed or skipped in this command (None = all)
        self.stopped: str | None = None  # the infrastructure failure that stopped the command
        self._config_changed = config_changed
        self.notes: list[str] = []
        self._lock = threading.RLock()  # runs may finish in several threads at once
        self._built: set = set()  # (asset key, partition key) found materialized in this command: not asked again
        self._config_records = self._latest_config_records()  # the config versions this command recorded

    def _parents(self, key) -> set:
        from wse_platform.runner import _parents
        return _parents(self.graph, key)

    def skip_reason(self, step) -> str | None:
        """Why `step` must not run: an asset it reads failed (or was skipped) earlier in this command."""
        with self._lock:
            failed = {k: set(v) for k, v in self.failed.items()}
        for key in step.keys:
            for parent in sorted(self._parents(key), key=lambda k: k.to_user_string()):
                pks = failed.get(parent)
                if pks is None:
                    continue
                same = self.graph.get(parent).partitions_def == self.graph.get(key).partitions_def
                if step.partition_key is not None and same and step.partition_key not in pks and None not in pks:
                    continue  # another cell of the same benchmark failed, not the one this run reads
                where = ", ".join(sorted(p for p in pks if p)) or ""
                return (f"not run: it reads {parent.to_user_string()}{f'[{where}]' if where else ''}, "
                        "which failed earlier in this command")
        return self._never_built(step)

    def _never_built(self, step) -> str | None:
        """An asset this run reads has no materialization at all (of the same partition, when both
        share a partitioning): the run would report "ok" over an empty table."""
        if self.instance is None:
            return None
        from dagster import AssetRecordsFilter

        in_step = set(step.keys)
        for key in step.keys:
            for parent in sorted(self._parents(key) - in_step, key=lambda k: k.to_user_string()):
                node = self.graph.get(parent)
                if not node.is_materializable:
                    continue
                same = node.partitions_def is not None and node.partitions_def == self.graph.get(key).partitions_def
                pk = step.partition_key if same else None
                if (parent, pk) in self._built:  # several assets of the run, or earlier runs, read it
                    continue
                found = self.instance.fetch_materializations(
                    AssetRecordsFilter(asset_key=parent, asset_partitions=[pk] if pk else None), limit=1).records
                if found:
                    self._built.add((parent, pk))
                else:
                    name = parent.to_user_string() + (f"[{pk}]" if pk else "")
                    return (f"not run: it reads {name}, which has never been built; materialize it first "
                            "(or select it too)")
        return None

    def _latest_config_records(self) -> dict:
        """Storage id of the latest recorded version of each config asset (`assets.versioning`)."""
        if self.instance is None:
            return {}

        from assets.versioning import CONFIG_TAG
        keys = [k for k in self.graph.get_all_asset_keys() if self.graph.get(k).tags.get(CONFIG_TAG) == "true"]
        out: dict = dict.fromkeys(keys)
        for record in self.instance.get_asset_records(keys) if keys else []:  # one query for all of them
            entry = record.asset_entry
            out[entry.asset_key] = entry.last_materialization_storage_id or None
        return out

    def config_recorded_elsewhere(self) -> str | None:
        """A config asset got a new recorded version from another process while this command ran
        (e.g. `wse ui`'s config_observer after the file was edited): a run started now would be
        recorded against that version but computed with the one this command read, so the command
        stops instead (checked before each run; Dagster takes a run's input versions at its start)."""
        if not self._config_records:
            return None
        changed = [k.to_user_string() for k, sid in self._latest_config_records().items()
                   if sid != self._config_records.get(k)]
        if not changed:
            return None
        return (f"another process recorded a new version of {', '.join(sorted(changed))} while this command ran "
                "(the config changed; e.g. `wse ui`'s config_observer): a further run would be recorded against "
                "that version but computed with the one this command read, so none was started — fix: rerun "
                "`wse materialize --stale`")

    def mark_failed(self, step) -> None:
        with self._lock:
            for key in step.keys:
                self.failed.setdefault(key, set()).add(step.partition_key)

    def after(self, step, result) -> None:
        """Record a finished run; an infrastructure failure stops the command."""
        self.after_outcome(step, result.success, infrastructure_cause(result))

    def after_outcome(self, step, ok: bool, infrastructure: str | None) -> None:
        """The same from a run's outcome (a worker process sends these, not the result object)."""
        if ok:
            return
        self.mark_failed(step)
        if infrastructure:
            with self._lock:
                self.stopped = self.stopped or infrastructure

    def config_note(self) -> str | None:
        """Once: the config file changed since the command read it (the runs keep the version read)."""
        if self._config_changed is None or self.notes:
            return None
        change = self._config_changed()
        if change:
            self.notes.append(change)
        return change


def infrastructure_cause(result) -> str | None:
    """`step: cause` of the first infrastructure failure of a failed run (None: none, or a success)."""
    if result.success:
        return None
    for step_key, error in failure_errors(result):
        cause = infrastructure_error(error)
        if cause:
            return f"{step_key}: {cause}"
    return None


def first_failure(result) -> str:
    """`step: cause` of the first failed step of a run (the FAILED line)."""
    errors = failure_errors(result)
    if not errors:
        return "see the run log in the Dagster UI"
    step_key, error = errors[0]
    return f"{step_key}: {cause_of(error)}"
