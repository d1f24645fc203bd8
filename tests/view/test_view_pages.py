"""`wse view` pages and server without a browser: content, escaping, empty warehouse, refusals."""
from __future__ import annotations

import http.client
import signal
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from tests.conftest import write_config
from tests.view._view_fixture import HOSTILE, build_warehouse
from wse_platform.view import pages
from wse_platform.view.server import ViewServer


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory):
    return build_warehouse(tmp_path_factory.mktemp("view") / "wh.duckdb")


@pytest.fixture(scope="module")
def con(warehouse):
    with duckdb.connect(str(warehouse), read_only=True) as c:
        yield c


def test_wse_trajectory_shows_every_step_with_its_verdicts_and_the_first_contradiction(con):
    html = pages.wse_trajectory(con, {"model": "gen", "arch": "B2", "seed": "s1"})
    assert "option 2" in html and "Bo wants to talk (3)" in html and "Ada opens the gate at dawn." in html
    assert "<section class='step first' id='step-2'>" in html and "first agreed contradiction" in html
    assert "claim: Ada greets Bo" in html and "Ada died in the opening" in html and "world-fact" in html
    assert HOSTILE not in html and "&lt;script&gt;" in html          # model text is escaped


def test_a_failed_cell_shows_the_failure_kind_and_raw_output(con):
    html = pages.wse_trajectory(con, {"model": "gen", "arch": "B1", "seed": "s1"})
    assert "failure: invalid_json" in html and "Once upon a {broken" in html
    listing = pages.wse_list(con, {"failure": "story_agent"})
    assert "story_agent @ 1" in listing and "B2" not in listing.split("<tbody>")[1]


def test_wse_filters_by_verdict(con):
    only = pages.wse_list(con, {"verdict": "contradiction"}).split("<tbody>")[1]
    assert "step 2" in only and ">B1<" not in only


def test_ncp_episode_turn_by_turn_with_where_it_ended(con):
    html = pages.ncp_episode(con, {"model": "gen", "arch": "baseline+adversarial", "spec": "movie26"})
    assert "I try move 1" in html and "The narrator, turn 2." in html and "the ship sank" in html
    assert "episode ends here: CONFLICT" in html and "ended <b class='bad'>CONFLICT</b> after turn 2" in html


def test_an_episode_without_a_result_is_listed_with_its_failure(con):
    listing = pages.ncp_list(con, {})
    assert "episodes without a result" in listing and "server answered 503 three times" in listing
    html = pages.ncp_episode(con, {"model": "gen", "arch": "baseline+adversarial", "spec": "movie52"})
    assert "no result: the ncp.conflict_check call of turn 3 still failed" in html


def test_endings_story_with_positions_predictions_verdicts_and_curve(con):
    html = pages.endings_story(con, {"set": "human:pd", "story": "human:pd/hour"})
    assert "<span class='pos'>P0</span>" in html and "<span class='pos'>P1</span>" in html
    assert "She lives happily (p1k1)" in html and "<b>N</b>" in html and "<svg role='img'" in html


def test_final_table_rows_link_to_their_transcripts(con):
    html = pages.overview(con, {})
    assert 'href="/wse?model=gen&amp;arch=B2"' in html
    assert 'href="/ncp?model=gen&amp;arch=baseline%2Badversarial&amp;auditor=ncp.auditor%3Aj%3Av1%3Ax1"' in html


def test_an_empty_warehouse_says_what_is_not_built(tmp_path):
    server = ViewServer(tmp_path / "none.duckdb").start()
    try:
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
        conn.request("GET", "/")
        body = conn.getresponse().read().decode()
        assert "wse_cell_metrics is not built yet" in body
        assert not (tmp_path / "none.duckdb").exists()          # viewing never creates a warehouse
    finally:
        server.stop()


def test_the_server_refuses_foreign_hosts_and_anything_but_get(warehouse):
    server = ViewServer(warehouse).start()
    try:
        def ask(method, host):
            conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
            conn.request(method, "/wse", headers={"Host": host})
            r = conn.getresponse()
            return r.status, r.getheader("Content-Security-Policy"), r.read()
        status, csp, body = ask("GET", f"127.0.0.1:{server.port}")
        assert status == 200 and "script" not in (csp or "") and b"trajectories" in body
        assert ask("GET", f"localhost:{server.port}")[0] == 200
        assert ask("GET", f"evil.example.com:{server.port}")[0] == 403     # DNS rebinding
        assert ask("GET", "127.0.0.1")[0] == 403
        assert ask("POST", f"127.0.0.1:{server.port}")[0] == 405
    finally:
        server.stop()


def test_each_cell_asset_links_to_its_transcripts():
    from dagster import MetadataValue

    from assets.helpers import transcripts
    from wse_platform.config import settings_from_dict
    s = settings_from_dict({"view_port": 4100})
    assert transcripts(s, "wse", model="m", arch="B2+WMEM") == {
        "transcripts": MetadataValue.url("http://127.0.0.1:4100/wse?model=m&arch=B2%2BWMEM")}
    assert transcripts(settings_from_dict({"view_port": 0}), "ncp", model="m") == {}


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_wse_view_stops_on_a_signal_even_with_sigint_ignored_by_its_parent(warehouse, tmp_path, sig):
    """Started in the background of a non-interactive shell, a process inherits SIGINT ignored (the
    walkthrough's `wse view` outlived its Ctrl-C that way); `wse view` stops on it all the same."""
    cfg = write_config(tmp_path, warehouse_path=str(warehouse))
    proc = subprocess.Popen([sys.executable, "-m", "wse_platform.cli", "--config", str(cfg), "view", "--port", "0"],
                            cwd=Path(__file__).resolve().parents[2], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    try:
        assert "wse view: http://127.0.0.1:" in proc.stdout.readline()
        proc.send_signal(sig)
        assert proc.wait(20) == 130
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
