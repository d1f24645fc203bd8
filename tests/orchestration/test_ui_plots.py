"""Plots shown where the user looks first (issue 13): on the asset's Overview page, inline.

The Dagster UI renders a markdown metadata entry inline only below 1,000 characters; an embedded
PNG never is, so plots are published content-addressed and served by `wse ui` on 127.0.0.1."""
from __future__ import annotations

import re
import urllib.error
import urllib.request
from pathlib import Path

import polars as pl
import pytest

from assets.helpers import plot_metadata, write_table
from wse_platform import plot_server
from wse_platform.config import load_settings
from wse_platform.warehouse import Warehouse

INLINE_LIMIT = 1000  # the UI's MetadataEntry: `mdStr.length < 1000` renders inline


def _png(tmp_path: Path, name: str, colour: str) -> Path:
    import matplotlib
    matplotlib.use("Agg")
    from matplotlib.figure import Figure
    fig = Figure(figsize=(2, 2))
    fig.add_subplot().bar([0, 1], [1, 2], color=colour)
    path = tmp_path / name
    fig.savefig(path)
    return path


def test_table_plots_are_short_inline_images_served_content_addressed(config_file, tmp_path):
    s = load_settings(str(config_file))
    wh = Warehouse(s.warehouse)
    first = _png(tmp_path, "curves.png", "red")
    meta = write_table(wh, "wse_trajectories", pl.DataFrame({"model": ["a"], "arch": ["B1"], "seed_id": ["x"],
                                                             "length": [1], "horizon": [2]}),
                       key={"model": "a", "arch": "B1"}, plots={"curves": first}, settings=s).metadata
    inline = meta["curves"].value
    assert len(inline) < INLINE_LIMIT and "base64" not in inline
    url = re.fullmatch(r"!\[curves\]\((http://127\.0\.0\.1:(\d+)/([0-9a-f]+\.png))\)", inline)
    assert url and int(url.group(2)) == s.plots_port
    served = plot_server.served_dir(s.artifacts) / url.group(3)
    assert served.read_bytes() == first.read_bytes()
    assert len(meta["curves_embedded"].value) > INLINE_LIMIT  # the portable copy, one click away
    assert meta["curves_file"].value == "curves.png"  # relative to the config file's folder
    # a redrawn plot gets its own address; the older materialization keeps showing its own plot
    first.write_bytes(_png(tmp_path, "other.png", "blue").read_bytes())
    again = plot_metadata({"curves": first}, s)["curves"].value
    assert again != inline and served.exists()


def test_plot_links_follow_the_folder_when_it_is_moved(tmp_path):
    """Issue 21: the links were absolute `file://` paths of the folder where the demo ran."""
    import shutil

    from tests.conftest import write_config
    first, moved = tmp_path / "first", tmp_path / "elsewhere" / "moved"
    first.mkdir()
    with __import__("socket").socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    links = {}
    for plots_port in (port, 0):
        cfg = write_config(first, warehouse_path="wh.duckdb", artifacts_dir="artifacts", cache_dir="cache",
                           plots_port=plots_port)
        s = load_settings(str(cfg))
        (s.artifacts / "plots").mkdir(parents=True, exist_ok=True)
        png = _png(s.artifacts / "plots", f"p{plots_port}.png", "red")
        links[plots_port] = dict(plot_metadata({"p": png}, s))
    shutil.move(first, moved)
    s = load_settings(str(moved / "wse.yaml"))
    server = plot_server.start(s.artifacts, port)
    try:
        for plots_port, meta in links.items():
            drawn = (s.artifacts / "plots" / f"p{plots_port}.png").read_bytes()
            target = Path(meta["p_file"].value)  # the file's path: relative to the (moved) config folder
            assert not target.is_absolute() and (moved / target).read_bytes() == drawn, target
            if plots_port:  # the inline image: served from the moved artifacts folder
                url = re.fullmatch(r"!\[p\]\((.+)\)", meta["p"].value).group(1)
                with urllib.request.urlopen(url, timeout=10) as r:
                    assert r.status == 200 and r.read() == drawn
    finally:
        server.shutdown()


def test_no_settings_or_port_zero_keeps_the_plot_one_click_away(config_file, tmp_path):
    s = load_settings(str(config_file)).model_copy(update={"plots_port": 0})
    png = _png(tmp_path, "p.png", "green")
    for meta in (plot_metadata({"p": png}, s), plot_metadata({"p": png})):
        assert "p" not in meta and {"p_embedded", "p_file"} <= set(meta)
    assert not plot_server.served_dir(s.artifacts).exists()


def test_plot_server_serves_published_pngs_only(tmp_path):
    png = _png(tmp_path, "p.png", "red")
    (tmp_path / "secret.txt").write_text("not for the browser")
    name = plot_server.publish(png, tmp_path)
    server = plot_server.start(tmp_path, port=0)
    base = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        with urllib.request.urlopen(f"{base}/{name}", timeout=10) as r:
            assert r.headers["Content-Type"] == "image/png" and r.read() == png.read_bytes()
        for bad in ("/", "/secret.txt", "/../secret.txt", f"/{name[:-4]}.txt", "/%2e%2e/p.png"):
            with pytest.raises(urllib.error.HTTPError) as e:
                urllib.request.urlopen(base + bad, timeout=10)
            assert e.value.code == 404, bad
    finally:
        server.shutdown()


def test_plot_server_refuses_links_fifos_and_foreign_hosts(tmp_path):
    """Issue 23 item 2: `ln -s /etc/shadow <hex>.png` in the plots folder was served with 200."""
    import os
    secret = tmp_path / "secret.txt"
    secret.write_text("not for the browser")
    folder = plot_server.served_dir(tmp_path)
    folder.mkdir(parents=True)
    name = plot_server.publish(_png(tmp_path, "p.png", "red"), tmp_path)
    (folder / ("a" * 24 + ".png")).symlink_to(secret)
    (folder / ("b" * 24 + ".png")).symlink_to(folder / name)   # a link even to a real plot
    os.mkfifo(folder / ("c" * 24 + ".png"))                     # would hang a plain read
    (folder / ("d" * 24 + ".png")).mkdir()
    server = plot_server.start(tmp_path, port=0)
    port = server.server_address[1]
    base = f"http://127.0.0.1:{port}"
    try:
        for bad in "abcd":
            with pytest.raises(urllib.error.HTTPError) as e:
                urllib.request.urlopen(f"{base}/{bad * 24}.png", timeout=10)
            assert e.value.code == 404, bad
        req = urllib.request.Request(f"{base}/{name}", headers={"Host": f"rebound.example.com:{port}"})
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(req, timeout=10)
        assert e.value.code == 403
        with urllib.request.urlopen(f"http://localhost:{port}/{name}", timeout=10) as r:
            assert r.status == 200
    finally:
        server.shutdown()


def test_wse_ui_starts_the_plot_server_next_to_dagster(config_file, monkeypatch, capsys):
    """`wse ui` serves the plots for as long as `dagster dev` runs, and stops both on Ctrl-C
    without a traceback (exit 130); a taken port is a note, not an error."""
    import os
    import signal
    import sys
    import threading

    from wse_platform import cli, ui

    s = load_settings(str(config_file))
    name = plot_server.publish(_png(config_file.parent, "p.png", "red"), s.artifacts)
    seen = {}

    def ctrl_c_once_the_plot_is_served():  # the user presses Ctrl-C while the UI runs
        for _ in range(200):
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/{name}", timeout=10) as r:
                    seen["status"] = r.status
                break
            except OSError:
                threading.Event().wait(0.05)
        if "status" in seen:  # `wse ui` is running with its own handler (else the child ends in 60 s)
            os.kill(os.getpid(), signal.SIGINT)

    import socket
    with socket.socket() as sock:  # a free port for this test
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    cfg = config_file.read_text() + f"\nplots_port: {port}\n"
    config_file.write_text(cfg)
    # `dagster dev` is a process that waits to be stopped
    monkeypatch.setattr(ui, "dagster_dev_command",
                        lambda root, p: seen.setdefault("cmd", [sys.executable, "-c", "import time; time.sleep(60)"]))
    threading.Thread(target=ctrl_c_once_the_plot_is_served, daemon=True).start()
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        ui_port = sock.getsockname()[1]
    assert cli.main(["--config", str(config_file), "ui", "--port", str(ui_port)]) == 130
    assert seen["status"] == 200 and "sleep" in seen["cmd"][-1]
    assert "wse ui: stopped" in capsys.readouterr().err
    with pytest.raises(urllib.error.URLError):  # stopped with the UI
        urllib.request.urlopen(f"http://127.0.0.1:{port}/{name}", timeout=2)


def test_dagster_ui_still_renders_short_markdown_inline():
    """Fails loudly on a Dagster upgrade that changes the rule the inline plots rely on."""
    import dagster_webserver

    chunks = Path(dagster_webserver.__file__).parent / "webapp" / "build" / "_next" / "static" / "chunks"
    hits = [p for p in chunks.glob("*.js") if "mdStr.length<1e3" in p.read_text(encoding="utf-8", errors="ignore")]
    assert hits, ("the Dagster UI no longer renders markdown metadata under 1,000 characters inline: "
                  "revisit wse_platform/plot_server.py and the README's 'Asset checks' paragraph")
