"""`dagster_private.share_alembic_revisions`: Dagster's SQLite storages read their migration scripts once per
process instead of once per storage and check (issue 24: ~0.1 s of CPU in every process that opens or creates
an instance, the workers' template first). Run in a fresh interpreter: the patch is per process."""
from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

SCRIPT = textwrap.dedent("""
    import sys
    from pathlib import Path
    import alembic.script.base as base
    from tests.conftest import write_config
    from wse_platform.config import load_settings
    from wse_platform.runner import get_instance

    loads = []
    original = base.ScriptDirectory._load_revisions
    def counted(self):
        loads.append(self.dir)
        return original(self)
    base.ScriptDirectory._load_revisions = counted

    tmp = Path(sys.argv[1])
    settings = load_settings(str(write_config(tmp)))
    instance = get_instance(settings)            # a new Dagster home: three storages made and stamped
    made = len(loads)
    instance.dispose()
    again = get_instance(settings)               # opened again: each storage checks its revision
    from dagster._core.storage.sql import check_alembic_revision, get_alembic_config
    import dagster._core.storage.runs.sqlite.sqlite_run_storage as runs
    with again.run_storage.connect() as conn:
        db_rev, head = check_alembic_revision(get_alembic_config(runs.__file__), conn)
    print(made, len(loads), db_rev == head, again.get_runs(limit=1) == [])
""")


def test_a_new_instance_reads_the_migration_scripts_once_and_stays_at_head(tmp_path):
    out = subprocess.run([sys.executable, "-c", SCRIPT, str(tmp_path)], cwd=REPO, capture_output=True, text=True,
                         env={"PYTHONPATH": str(REPO), "DAGSTER_HOME": str(tmp_path / "dh"),
                              "PATH": "/usr/bin:/bin"}, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    made, total, at_head, empty = out.stdout.split()
    assert (made, total) == ("1", "1"), out.stdout   # without the sharing: one load per storage and check (6, then 8)
    assert at_head == "True" and empty == "True"
