"""The report's decision against a baseline (issue 59, item 4; report/decision.py): from running/, the first day each
target's confidence sequence of the difference excludes 0, said at the top ("oracle beats logging since
2026-10-10, anytime-valid at 95%", or "not yet") and in the running section beside a plot of both bands; every
value escaped. Pure pieces first, then one DuckDB chain generate -> evaluate --by-day --baseline logging -> report."""
from __future__ import annotations

import base64
import math
import re
from pathlib import Path

import pandas as pd
import pytest

from scavenger import cli
from scavenger.report import decision as RR
from scavenger.report.inputs import ReportInputs

from helpers.html_dom import Dom

EVIL = '<img src=x onerror="document.title=1">'
DAYS = ("2026-10-10", "2026-10-11", "2026-10-12", "2026-10-13")


def _running(policy: str, lows, highs, estimator="slate_pi", baseline="logging", level=0.95) -> pd.DataFrame:
    rows = []
    for d, lo, hi in zip(DAYS, lows, highs):
        mid = 0.5 * (lo + hi) if math.isfinite(lo) else 0.0
        rows.append({"policy_id": policy, "baseline_id": baseline, "estimator": estimator, "value": mid,
                     "ci_low": mid - 0.01, "ci_high": mid + 0.01, "cs_low": lo, "cs_high": hi, "level": level,
                     "n_events": 100, "cs_reason": None if math.isfinite(lo) else "too few events", "dt": d})
        rows.append({**rows[-1], "baseline_id": None, "value": 0.5 + mid, "cs_low": 0.4, "cs_high": 0.7})
    return pd.DataFrame(rows)


def test_decisions_name_the_first_day_the_sequence_excludes_zero():
    nan = math.nan
    run = pd.concat([_running("soft", [-0.2, -0.1, 0.01, 0.02], [0.3, 0.2, 0.1, 0.08]),
                     _running("worse", [nan, -0.4, -0.3, -0.25], [nan, 0.1, -0.05, -0.1]),
                     _running("same", [-0.2, -0.1, -0.05, -0.03], [0.3, 0.2, 0.1, 0.05]),
                     _running("young", [nan] * 4, [nan] * 4)], ignore_index=True)
    got = {d["policy_id"]: d for d in RR.decisions(run)}
    assert RR.sentence(got["soft"]) == "soft beats logging since 2026-10-12, anytime-valid at 95%"
    assert RR.sentence(got["worse"]) == "worse trails logging since 2026-10-12, anytime-valid at 95%"
    assert RR.sentence(got["same"]).startswith("same vs logging: not yet (the 95% confidence sequence of the "
                                               "difference holds 0 on every day through 2026-10-13: [-0.03, 0.05]")
    assert "no confidence sequence on 2026-10-13: too few events" in RR.sentence(got["young"])
    assert got["soft"]["since"] == "2026-10-12" and got["same"]["since"] is None


def test_the_recommended_estimator_speaks_else_the_lowest_rank():
    run = pd.concat([_running("soft", [-0.1] * 4, [0.1] * 4, "slate_ips"),
                     _running("soft", [0.01] * 4, [0.1] * 4, "slate_pi"),
                     _running("soft", [0.02] * 4, [0.1] * 4, "slate_pi_plus_plus")], ignore_index=True)
    assert RR.decisions(run)[0]["estimator"] == "slate_pi_plus_plus"       # the registry's first choice
    est = pd.DataFrame([{"policy_id": "soft", "estimator": "slate_ips", "recommended": True}])
    (d,) = RR.decisions(run, est)
    assert d["estimator"] == "slate_ips" and d["since"] is None        # not the band that looks best


def test_every_value_is_escaped_and_the_section_says_what_is_missing():
    run = _running(EVIL, [0.1] * 4, [0.2] * 4, estimator="slate_pi", baseline=EVIL)
    inp = ReportInputs(running=run)
    html = RR.section_running(inp) + RR.answer_lines(inp)
    assert EVIL not in html and "&lt;img src=x" in html
    assert "data:image/png;base64," in html
    assert "No running table" in RR.section_running(ReportInputs())
    plain = run[run["baseline_id"].isna()]
    assert "holds no difference" in RR.section_running(ReportInputs(running=plain))
    assert RR.answer_lines(ReportInputs()) == ""


@pytest.fixture(scope="module")
def chain(tmp_path_factory):
    from scavenger.simulation.generator import GeneratorConfig, generate

    base = tmp_path_factory.mktemp("report_running")
    gen, ev, rep = base / "gen", base / "ev", base / "rep"
    generate("duckdb", GeneratorConfig(layout="slotted", days=3, events_per_day=2000, start_date=DAYS[0], seed=5),
             str(gen))
    codes = {"evaluate": cli.main(["evaluate", "--engine", "duckdb", "--gate", "report", "--logs", f"{gen}/logs",
                                   "--decisions", f"{gen}/decisions", "--out", str(ev), "--stats-dir",
                                   str(base / "st"), "--estimators", "slate_pi,slate_pi_plus_plus",
                                   "--by-day", "--baseline", "logging"]),
             "report": cli.main(["report", "--estimates", str(ev), "--out", str(rep)])}
    return {"codes": codes, "ev": ev, "html": rep / "report.html"}


def test_report_of_a_by_day_baseline_run_shows_the_sentence_and_the_figure(chain):
    assert chain["codes"] == {"evaluate": 0, "report": 0}
    run = pd.concat([pd.read_parquet(p).assign(dt=p.name.split("=", 1)[1])
                     for p in sorted((chain["ev"] / "running").glob("dt=*"))], ignore_index=True)
    est = pd.read_parquet(chain["ev"] / "estimates")
    text = Path(chain["html"]).read_text()
    dom = Dom(text)
    answer_at, running_at = dom.find("div", id="answer")[0], dom.find("section", id="running")[0]
    counts_at = dom.find("table", data_table="row_counts")[0]
    beats = 0
    for p in sorted(est["policy_id"].unique()):
        rec = est[(est["policy_id"] == p) & est["recommended"]]["estimator"].iloc[0]
        diff = run[(run["policy_id"] == p) & (run["baseline_id"] == "logging") & (run["estimator"] == rec)]
        diff = diff.sort_values("dt")
        out = diff[(diff["cs_low"] > 0) | (diff["cs_high"] < 0)]
        since = out["dt"].iloc[0] if len(out) else ""
        found = [i for i in dom.find("p", data_name="decision", data_policy=p)]
        assert len(found) == 2 and answer_at < found[0] < counts_at < running_at < found[1], p
        for i in found:
            assert dom.events[i][2]["data-since"] == since and dom.events[i][2]["data-estimator"] == rec
            line = dom.text(i)
            if since:
                beats += 1
                verb = "beats" if out["cs_low"].iloc[0] > 0 else "trails"
                assert line.startswith(f"{p} {verb} logging since {since}, anytime-valid at 95%"), line
            else:
                assert line.startswith(f"{p} vs logging: not yet"), line
        (img,) = dom.find("img", alt=f"running estimate of {p} against logging")
        assert img > running_at
        src = dom.events[img][2]["src"]
        assert base64.b64decode(src.split(",", 1)[1])[:4] == b"\x89PNG"
    assert beats >= 2                      # oracle and most_clicked clear logging within three days
    assert re.search(r"oracle beats logging since 2026-10-1\d, anytime-valid at 95%", text)
