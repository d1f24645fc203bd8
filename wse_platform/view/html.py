"""Small HTML building blocks for `wse view`: every value is escaped, no script, no external asset."""
from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from html import escape
from typing import Any
from urllib.parse import urlencode

STYLE = """
body{font-family:system-ui,sans-serif;margin:0;color:#1d2433;background:#f7f8fa}
header{background:#1d2433;color:#fff;padding:.6em 1.2em}header a{color:#cfe0ff;margin-right:1em}
main{padding:1em 1.2em;max-width:1400px}h1{font-size:1.35em}h2{font-size:1.1em;margin-top:1.6em}
table{border-collapse:collapse;background:#fff;margin:.4em 0}td,th{border:1px solid #d5d9e0;padding:.3em .5em;
vertical-align:top;text-align:left;font-size:.92em}th{background:#eef1f5}
.step{display:grid;grid-template-columns:minmax(0,3fr) minmax(0,2fr);gap:1em;background:#fff;
border:1px solid #d5d9e0;margin:.8em 0;padding:.8em}.step.first{border:3px solid #c0392b}
.label{font-weight:600;color:#56607a;font-size:.85em;text-transform:uppercase;margin-top:.5em}
.text{white-space:pre-wrap}.bad{color:#c0392b;font-weight:600}.ok{color:#1e8449}.muted{color:#7a8399}
pre{white-space:pre-wrap;background:#f2f4f7;padding:.5em;font-size:.85em;max-height:22em;overflow:auto}
form.filters{background:#fff;border:1px solid #d5d9e0;padding:.5em;margin:.5em 0}form.filters label{margin-right:1em}
mark{background:#ffe08a}.pos{background:#dbe9ff;border-radius:3px;padding:0 .2em;font-size:.8em;font-weight:600}
"""


def e(value: Any) -> str:
    return "" if value is None else escape(str(value))


def link(path: str, text: Any, **params: Any) -> str:
    query = urlencode({k: v for k, v in params.items() if v not in (None, "")})
    return f'<a href="{e(path + ("?" + query if query else ""))}">{e(text)}</a>'


def page(title: str, body: str) -> str:
    nav = "".join(link(p, t) for p, t in (("/", "Overview"), ("/wse", "WSE-bench"), ("/ncp", "NCP-Bench"),
                                            ("/endings", "100-Endings")))
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>{e(title)} · wse view</title>"
            f"<style>{STYLE}</style></head><body><header>{nav}</header><main><h1>{e(title)}</h1>{body}"
            "</main></body></html>")


def table(columns: Sequence[str], rows: Iterable[Sequence[str]], raw: bool = True) -> str:
    """`rows` hold ready HTML (already escaped) when `raw`, else plain values."""
    head = "".join(f"<th>{e(c)}</th>" for c in columns)
    body = "".join("<tr>" + "".join(f"<td>{c if raw else e(c)}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def empty(what: str) -> str:
    return f"<p class='muted'>{e(what)}</p>"


def pretty_json(raw: str | None) -> str:
    """A JSON column as an indented block ('' for NULL; text that is not JSON as it is)."""
    if raw is None:
        return ""
    try:
        return f"<pre>{e(json.dumps(json.loads(raw), indent=2, ensure_ascii=False))}</pre>"
    except (TypeError, ValueError):
        return f"<pre>{e(raw)}</pre>"


def loads(raw: str | None) -> Any:
    try:
        return json.loads(raw) if raw else None
    except (TypeError, ValueError):
        return None


def filters(path: str, current: Mapping[str, str], choices: Mapping[str, Sequence[str]]) -> str:
    """A GET form with one select per filter (the page re-renders with the chosen values)."""
    parts = []
    for name, values in choices.items():
        opts = "<option value=''>all</option>" + "".join(
            f"<option value='{e(v)}'{' selected' if current.get(name) == v else ''}>{e(v)}</option>" for v in values)
        parts.append(f"<label>{e(name)} <select name='{e(name)}'>{opts}</select></label>")
    return f"<form class='filters' method='get' action='{e(path)}'>{''.join(parts)}<button>filter</button></form>"


def curve_svg(points: Sequence[tuple[float, float | None]], width: int = 560, height: int = 180) -> str:
    """A no-rate curve (x = revealed share 0..1, y = no-rate 0..1) as inline SVG; gaps at None."""
    pad = 28
    if not points:
        return empty("no positions judged yet")

    def xy(x: float, y: float) -> str:
        return f"{pad + x * (width - 2 * pad):.1f},{height - pad - y * (height - 2 * pad):.1f}"
    dots = "".join(f"<circle cx='{xy(x, y).split(',')[0]}' cy='{xy(x, y).split(',')[1]}' r='3' fill='#2c5aa0'/>"
                   for x, y in points if y is not None)
    line = " ".join(xy(x, y) for x, y in points if y is not None)
    axes = (f"<line x1='{pad}' y1='{height - pad}' x2='{width - pad}' y2='{height - pad}' stroke='#888'/>"
            f"<line x1='{pad}' y1='{pad}' x2='{pad}' y2='{height - pad}' stroke='#888'/>"
            f"<text x='{width / 2}' y='{height - 6}' font-size='11' text-anchor='middle'>share of the story revealed</text>"
            f"<text x='4' y='{pad - 8}' font-size='11'>no-rate</text>"
            f"<text x='{pad - 4}' y='{height - pad + 12}' font-size='10' text-anchor='end'>0</text>"
            f"<text x='{pad - 4}' y='{pad + 4}' font-size='10' text-anchor='end'>1</text>")
    return (f"<svg role='img' aria-label='no-rate curve' width='{width}' height='{height}' "
            f"xmlns='http://www.w3.org/2000/svg'>{axes}<polyline fill='none' stroke='#2c5aa0' "
            f"points='{line}'/>{dots}</svg>")
