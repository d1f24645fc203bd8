"""The pages of `wse view`: read-only queries on the warehouse, rendered as HTML.

Each function takes an open (read-only) DuckDB connection and the request's query parameters and
returns a page. A table that does not exist yet (an empty warehouse, a benchmark not run) is an
empty list, never an error. Dagster-free: usable from a notebook (`pages.wse_trajectory(con, {...})`).
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import duckdb

from wse_platform.view.html import (curve_svg, e, empty, filters, link, loads, page, pretty_json, table)

Params = Mapping[str, str]


def rows(con: duckdb.DuckDBPyConnection, sql: str, params: list[Any] | None = None) -> list[dict[str, Any]]:
    try:
        cur = con.execute(sql, params or [])
    except duckdb.CatalogException:  # the table is not built yet
        return []
    names = [d[0] for d in cur.description]
    return [dict(zip(names, r)) for r in cur.fetchall()]


def _distinct(con, table_name: str, column: str) -> list[str]:
    return [str(r["v"]) for r in rows(con, f'SELECT DISTINCT "{column}" AS v FROM {table_name} '
                                            f'WHERE "{column}" IS NOT NULL ORDER BY 1')]


def _where(params: Params, columns: Mapping[str, str]) -> tuple[str, list[Any]]:
    """`WHERE` over the filters present in `params` (param name -> SQL expression)."""
    clauses, values = [], []
    for name, expr in columns.items():
        if params.get(name):
            clauses.append(f"{expr} = ?")
            values.append(params[name])
    return (" WHERE " + " AND ".join(clauses)) if clauses else "", values


# ---- overview ------------------------------------------------------------------------------------

def overview(con, params: Params) -> str:
    body = ["<p>Transcripts of every cell, with the verdicts beside them. Rows of the final tables link to the "
            "transcripts behind them.</p>"]
    wse = rows(con, "SELECT model, arch, n, G, C_obs, C_adj, R FROM wse_cell_metrics ORDER BY model, arch")
    body.append("<h2>WSE-bench: wse_cell_metrics</h2>")
    body.append(table(["model", "arch", "n", "G", "C_obs", "C_adj", "R", ""],
                      [[e(r["model"]), e(r["arch"]), e(r["n"]), _f(r["G"]), _f(r["C_obs"]), _f(r["C_adj"]), _f(r["R"]),
                        link("/wse", "trajectories", model=r["model"], arch=r["arch"])] for r in wse])
                if wse else empty("wse_cell_metrics is not built yet"))
    ncp = rows(con, "SELECT model, arch, auditor_id, n_episodes, avg_turns, pct_conflict, pct_success FROM ncp_summary "
                    "ORDER BY model, arch")
    body.append("<h2>NCP-Bench: ncp_summary</h2>")
    body.append(table(["model", "arch", "auditor", "episodes", "avg turns", "% conflict", "% success", ""],
                      [[e(r["model"]), e(r["arch"]), e(r["auditor_id"]), e(r["n_episodes"]), _f(r["avg_turns"]),
                        _f(r["pct_conflict"]), _f(r["pct_success"]),
                        link("/ncp", "episodes", model=r["model"], arch=r["arch"], auditor=r["auditor_id"])]
                       for r in ncp]) if ncp else empty("ncp_summary is not built yet"))
    end = rows(con, "SELECT * FROM endings_corpus_tension ORDER BY 1")
    body.append("<h2>100-Endings: endings_corpus_tension</h2>")
    if end:
        key = "set_key" if "set_key" in end[0] else next(iter(end[0]))
        cols = [c for c in ("set_key", "corpus", "n_stories", "mean_no_rate", "late_no_rate") if c in end[0]]
        body.append(table([*cols, ""], [[e(r[c]) if not isinstance(r[c], float) else _f(r[c]) for c in cols]
                                        + [link("/endings", "stories", set=r[key])] for r in end]))
    else:
        body.append(empty("endings_corpus_tension is not built yet"))
    return page("wse view", "".join(body))


def _f(x: Any) -> str:
    return "" if x is None else f"{x:.3f}" if isinstance(x, float) else e(x)


# ---- WSE-bench -----------------------------------------------------------------------------------

def wse_list(con, params: Params) -> str:
    where, values = _where(params, {"model": "t.model", "arch": "t.arch", "failure": "t.failure_component"})
    verdict = params.get("verdict")
    having = ""
    if verdict == "contradiction":
        having = " AND c.first_contradiction IS NOT NULL" if where else " WHERE c.first_contradiction IS NOT NULL"
    elif verdict == "consistent":
        having = " AND c.first_contradiction IS NULL" if where else " WHERE c.first_contradiction IS NULL"
    found = rows(con, "SELECT t.model, t.arch, t.seed_id, t.source_family, t.horizon, t.length, t.failure_component, "
                      "t.failure_step, t.end_kind, min(c.first_contradiction) AS first_contradiction "
                      "FROM wse_trajectories t LEFT JOIN wse_trajectory_consistency c USING (model, arch, seed_id)"
                      f"{where}{having} GROUP BY ALL ORDER BY t.model, t.arch, t.seed_id", values)
    form = filters("/wse", params, {"model": _distinct(con, "wse_trajectories", "model"),
                                    "arch": _distinct(con, "wse_trajectories", "arch"),
                                    "verdict": ["contradiction", "consistent"],
                                    "failure": _distinct(con, "wse_trajectories", "failure_component")})
    body = table(["model", "arch", "seed", "family", "length / H", "first contradiction", "failure", "end"],
                 [[e(r["model"]), e(r["arch"]), link("/wse/trajectory", r["seed_id"], model=r["model"], arch=r["arch"],
                                                     seed=r["seed_id"]),
                   e(r["source_family"]), f"{e(r['length'])} / {e(r['horizon'])}",
                   f"<span class='bad'>step {e(r['first_contradiction'])}</span>" if r["first_contradiction"] else "",
                   f"<span class='bad'>{e(r['failure_component'])} @ {e(r['failure_step'])}</span>"
                   if r["failure_component"] else "", e(r["end_kind"])] for r in found]) if found else \
        empty("no trajectory matches (or none has been generated yet)")
    return page("WSE-bench trajectories", form + body)


def _failure(raw: str | None) -> str:
    f = loads(raw)
    if not f:
        return ""
    kind = f.get("error_kind") or f.get("kind") or "failure"
    out = f"<div class='bad'>failure: {e(kind)} — {e(f.get('message'))}</div>"
    if f.get("raw_text"):
        out += f"<div class='label'>raw output</div><pre>{e(f['raw_text'])}</pre>"
    return out


def wse_trajectory(con, params: Params) -> str:
    key = [params.get("model"), params.get("arch"), params.get("seed")]
    steps = rows(con, "SELECT * FROM wse_trajectory_steps WHERE model = ? AND arch = ? AND seed_id = ? ORDER BY step", key)
    if not steps:
        return page("WSE-bench trajectory", empty(f"no trajectory {key}"))
    votes = rows(con, "SELECT * FROM wse_consistency_verdicts WHERE model = ? AND arch = ? AND seed_id = ? "
                      "ORDER BY step, judge_config_id, judge_index", key)
    firsts = {r["judge_config_id"]: r["first_contradiction"] for r in rows(
        con, "SELECT judge_config_id, first_contradiction FROM wse_trajectory_consistency "
             "WHERE model = ? AND arch = ? AND seed_id = ?", key)}
    first_steps = {s for s in firsts.values() if s is not None}
    traj = rows(con, "SELECT * FROM wse_trajectories WHERE model = ? AND arch = ? AND seed_id = ?", key)
    head = ""
    if traj:
        t = traj[0]
        head = (f"<p>{e(t['source_family'])} world {e(t['world_id'])}; length {e(t['length'])} of H = {e(t['horizon'])}"
                + (f"; <span class='bad'>{e(t['failure_component'])} failed at step {e(t['failure_step'])}</span>"
                   if t["failure_component"] else "")
                + (f"; story ended ({e(t['end_kind'])}) at step {e(t['end_step'])}" if t["end_kind"] else "")
                + "; first agreed contradiction: "
                + (", ".join(f"step {s} ({e(j)})" for j, s in firsts.items() if s is not None) or "none") + "</p>")
    parts = [head]
    for s in steps:
        left = [f"<div class='label'>step {e(s['step'])} · player option</div><div class='text'>{e(s['player_option'])}</div>"]
        intents = loads(s["intents_json"]) or []
        if intents:
            left.append("<div class='label'>character intents</div>" + table(
                ["character", "intent"], [[e(i.get("character_id")), e(i.get("intent"))] for i in intents]))
        plan = loads(s["plan_json"])
        if plan:
            left.append("<div class='label'>World Model plan</div>" + table(
                ["beat", "content", "depends on"], [[e(b.get("beat_id")), e(b.get("content")), e(b.get("depends_on"))]
                                                    for b in plan.get("beats", [])]))
        left.append(f"<div class='label'>narrative</div><div class='text'>{e(s['narrative'])}</div>")
        if s["memory_delta_json"]:
            left.append("<div class='label'>memory delta</div>" + pretty_json(s["memory_delta_json"]))
        left.append(_failure(s["failure_json"]))
        right = ["<div class='label'>judges</div>"]
        mine = [v for v in votes if v["step"] == s["step"]]
        for v in mine:
            cls = "bad" if v["verdict"] == "inconsistent" else "ok" if v["verdict"] == "consistent" else "muted"
            right.append(f"<div><b>{e(v['judge_member'])}</b>: <span class='{cls}'>{e(v['verdict'] or 'failed')}</span>"
                         + (f" · {e(v['category'])}" if v["category"] else "") + "</div>")
            if v["verdict"] == "inconsistent":
                right.append(f"<div class='text'>claim: {e(v['conflicting_claim'])}\nprior ({e(v['prior_source'])}"
                             f"{' step ' + e(v['prior_step']) if v['prior_step'] is not None else ''}): "
                             f"{e(v['prior_fact'])}</div>")
            right.append(_failure(v["failure_json"]))
        if not mine:
            right.append(empty("not judged"))
        first = " first" if s["step"] in first_steps else ""
        marker = "<div class='bad'>first agreed contradiction</div>" if first else ""
        parts.append(f"<section class='step{first}' id='step-{e(s['step'])}'><div>{''.join(left)}</div>"
                     f"<div>{marker}{''.join(right)}</div></section>")
    return page(f"WSE-bench · {key[1]} · {key[0]} · {key[2]}", "".join(parts))


# ---- NCP-Bench -----------------------------------------------------------------------------------

def ncp_list(con, params: Params) -> str:
    where, values = _where(params, {"model": "model", "arch": "arch", "auditor": "auditor_id",
                                    "termination": "termination"})
    found = rows(con, f"SELECT * FROM ncp_episodes{where} ORDER BY model, arch, eval_order", values)
    form = filters("/ncp", params, {"model": _distinct(con, "ncp_episodes", "model"),
                                    "arch": _distinct(con, "ncp_episodes", "arch"),
                                    "auditor": _distinct(con, "ncp_episodes", "auditor_id"),
                                    "termination": _distinct(con, "ncp_episodes", "termination")})
    body = table(["model", "arch", "spec", "auditor", "turns", "end", "kinds", "nodes"],
                 [[e(r["model"]), e(r["arch"]),
                   link("/ncp/episode", r["spec_id"], model=r["model"], arch=r["arch"], spec=r["spec_id"],
                        auditor=r["auditor_id"], **_session_param(r)),
                   e(r["auditor_id"]), e(r["turns"]),
                   f"<span class='{'bad' if r['termination'] in ('CONFLICT', 'INVALID') else 'ok'}'>"
                   f"{e(r['termination'])}</span>", e(r["conflict_kinds"]),
                   f"{e(r['nodes_completed'])}/{e(r['nodes_total'])}"] for r in found]) if found else \
        empty("no episode matches (or none has been played yet)")
    where_f, values_f = _where(params, {"model": "model", "arch": "arch", "auditor": "auditor_id"})
    failed = rows(con, f"SELECT * FROM ncp_failed_episodes{where_f} ORDER BY model, arch, eval_order", values_f)
    if failed:   # no result (a call still failed after retries): in no denominator, played again next run
        body += "<h2>episodes without a result</h2>" + table(
            ["analysis", "model", "arch", "spec", "turn", "role", "failure", "retry round"],
            [[e(r.get("analysis") or "ncp_episodes"), e(r["model"]), e(r["arch"]),
              link("/ncp/episode", r["spec_id"], model=r["model"], arch=r["arch"], spec=r["spec_id"],
                   auditor=r["auditor_id"]),
              e(r["turn"]), e(r["role"]), f"<span class='bad'>{e(r['error_kind'])}</span>: {e(r['message'])}",
              e(r["retry_round"])] for r in failed])
    return page("NCP-Bench episodes", form + body)


def _in_analysis(failed: dict) -> str:
    """Where a listed failure belongs when it is not the live cell's (the re-audit or the ablation)."""
    analysis = failed.get("analysis") or "ncp_episodes"
    return "" if analysis == "ncp_episodes" else f" in {e(analysis)} (auditor {e(failed['auditor_id'])})"


def _session_param(episode: dict) -> dict:
    """A `wse ncp play` episode's session (its turns are kept per session)."""
    from wse_platform.ncp.state import play_session
    session = play_session(episode.get("generation_version"))
    return {"session": session} if session is not None else {}


def ncp_episode(con, params: Params) -> str:
    key = [params.get("model"), params.get("arch"), params.get("spec")]
    aud = params.get("auditor")
    extra, values = (" AND auditor_id = ?", [*key, aud]) if aud else ("", key)
    session = params.get("session")
    ep_extra, t_extra, ep_values, t_values = extra, extra, values, values
    if session:  # one play session of several on this spec
        from wse_platform.ncp.state import PLAY_VERSION
        ep_extra, ep_values = extra + " AND generation_version = ?", [*values, f"{PLAY_VERSION}{session}"]
        t_extra, t_values = extra + " AND session = ?", [*values, session]
    ep = rows(con, f"SELECT * FROM ncp_episodes WHERE model = ? AND arch = ? AND spec_id = ?{ep_extra}", ep_values)
    turns = rows(con, f"SELECT * FROM ncp_turns WHERE model = ? AND arch = ? AND spec_id = ?{t_extra} ORDER BY turn",
                 t_values)
    failed = rows(con, f"SELECT * FROM ncp_failed_episodes WHERE model = ? AND arch = ? AND spec_id = ?{extra}", values)
    if not ep and not turns and not failed:
        return page("NCP-Bench episode", empty(f"no episode {key}"))
    head = "".join(f"<p class='bad'>no result{_in_analysis(f)}: the {e(f['role'])} call of turn {e(f['turn'])} "
                   f"still failed after retries ({e(f['error_kind'])}: {e(f['message'])}); the next run plays it "
                   "again</p>" for f in failed)
    if ep:
        x = ep[0]
        head += (f"<p>ended <b class='{'bad' if x['termination'] in ('CONFLICT', 'INVALID') else 'ok'}'>"
                f"{e(x['termination'])}</b> after turn {e(x['turns'])}"
                + (f" ({e(', '.join(x['conflict_kinds'] or []))})" if x["conflict_kinds"] else "")
                + f"; nodes {e(x['nodes_completed'])}/{e(x['nodes_total'])}; commitments satisfied "
                f"{e(x['commitments_satisfied'])}/{e(x['commitments_total'])}"
                + (f"; <span class='bad'>invalid output of {e(x['invalid_role'])}: {e(x['invalid_message'])}</span>"
                   if x["invalid_role"] else "") + "</p>")
    parts = [head]
    for t in turns:
        left = [f"<div class='label'>turn {e(t['turn'])} · player</div><div class='text'>{e(t['player_input'])}</div>",
                f"<div class='label'>narrator</div><div class='text'>{e(t['narrator_text'])}</div>"]
        if t.get("memory_json"):
            left.append("<div class='label'>memory</div>" + pretty_json(t["memory_json"]))
        right = [f"<div class='label'>node</div><div>{e(t['node_before'])} → {e(t['node_after'])}</div>"]
        for label, col in (("ΔF (fact update)", "fact_diff_json"), ("conflict report and review", "conflict_report_json"),
                           ("node assessment", "node_assessment_json"), ("commitment statuses", "commitment_status_json")):
            if t.get(col):
                right.append(f"<div class='label'>{e(label)}</div>{pretty_json(t[col])}")
        if t["outcome"]:
            right.append(f"<div class='bad'>episode ends here: {e(t['outcome'])}"
                         + (f" (invalid output of {e(t['invalid_role'])})" if t["invalid_role"] else "") + "</div>")
        first = " first" if t["outcome"] in ("CONFLICT", "INVALID") else ""
        parts.append(f"<section class='step{first}' id='turn-{e(t['turn'])}'><div>{''.join(left)}</div>"
                     f"<div>{''.join(right)}</div></section>")
    return page(f"NCP-Bench · {key[1]} · {key[0]} · {key[2]}", "".join(parts))


# ---- 100-Endings ---------------------------------------------------------------------------------

def endings_list(con, params: Params) -> str:
    where, values = _where(params, {"set": "set_key", "model": "generator_model", "pipeline": "pipeline"})
    found = rows(con, "SELECT story_id, set_key, title, generator_model, pipeline, n_words, included, exclusion_reason "
                      f"FROM endings_stories{where} ORDER BY set_key, story_id", values)
    form = filters("/endings", params, {"set": _distinct(con, "endings_stories", "set_key"),
                                        "model": _distinct(con, "endings_stories", "generator_model"),
                                        "pipeline": _distinct(con, "endings_stories", "pipeline")})
    body = table(["story", "set", "title", "generator", "pipeline", "words", "included"],
                 [[link("/endings/story", r["story_id"], set=r["set_key"], story=r["story_id"]), e(r["set_key"]),
                   e(r["title"]), e(r["generator_model"]), e(r["pipeline"]), e(r["n_words"]),
                   "yes" if r["included"] else f"<span class='muted'>no: {e(r['exclusion_reason'])}</span>"]
                  for r in found]) if found else empty("no story matches (or none has been loaded yet)")
    return page("100-Endings stories", form + body)


def endings_story(con, params: Params) -> str:
    key = [params.get("set"), params.get("story")]
    story = rows(con, "SELECT * FROM endings_stories WHERE set_key = ? AND story_id = ?", key)
    if not story:
        return page("100-Endings story", empty(f"no story {key}"))
    s = story[0]
    positions = rows(con, "SELECT * FROM endings_positions WHERE set_key = ? AND story_id = ? ORDER BY position", key)
    preds = rows(con, "SELECT * FROM endings_predictions WHERE set_key = ? AND story_id = ? "
                      "ORDER BY position, sample_index", key)
    verdicts = rows(con, "SELECT * FROM endings_verdicts WHERE set_key = ? AND story_id = ?", key)
    curve = rows(con, "SELECT revealed_share, no_rate FROM endings_no_rate WHERE set_key = ? AND story_id = ? "
                      "ORDER BY position", key)
    by_sample = {(v["position"], v["sample_index"], v.get("repeat", 0)): v for v in verdicts}
    parts = [f"<p>{e(s['title'])} — {e(s['author'] or s['generator_model'])}; {e(s['n_words'])} words; "
             + ("included" if s["included"] else f"<span class='bad'>excluded: {e(s['exclusion_reason'])}</span>")
             + "</p>", "<h2>no-rate curve</h2>",
             curve_svg([(c["revealed_share"] or 0.0, c["no_rate"]) for c in curve])]
    if s.get("failure_json"):
        parts.append(_failure(s["failure_json"]))
    marks = {p["last_sentence"]: p["position"] for p in positions if p.get("last_sentence")}
    text = e(s["text"] or "")
    for sentence, pos in marks.items():   # the last revealed sentence of each position, marked in the text
        text = text.replace(e(sentence), f"{e(sentence)}<span class='pos'>P{e(pos)}</span>", 1)
    parts.append(f"<h2>text</h2><div class='text'>{text}</div>")
    for p in positions:
        mine = [x for x in preds if x["position"] == p["position"]]
        parts.append(f"<h2 id='p{e(p['position'])}'>position {e(p['position'])} · sentence {e(p['sentence_index'])} "
                     f"· {100 * (p['revealed_share'] or 0):.0f} % revealed</h2>")
        parts.append(table(["#", "predicted ending", "verdict"], [
            [e(x["sample_index"]), e(x["prediction"]) + _failure(x["failure_json"]),
             _verdict(by_sample.get((x["position"], x["sample_index"], x.get("repeat", 0))))] for x in mine])
            if mine else empty("no predictions yet"))
    return page(f"100-Endings · {s['title'] or s['story_id']}", "".join(parts))


def _verdict(v: dict[str, Any] | None) -> str:
    if v is None:
        return "<span class='muted'>not judged</span>"
    if v["verdict"] is None:
        return "<span class='bad'>failed</span>" + _failure(v["failure_json"])
    return f"<b>{e(v['verdict'])}</b> " \
           f"<span class='muted'>({e(v['verdict_raw'])})</span>"


ROUTES = {"/": overview, "/wse": wse_list, "/wse/trajectory": wse_trajectory, "/ncp": ncp_list,
          "/ncp/episode": ncp_episode, "/endings": endings_list, "/endings/story": endings_story}
