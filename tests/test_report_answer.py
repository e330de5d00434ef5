"""The report leads with the answer (issue 26, item 6): one line per policy (recommended estimate and interval, the
logged value, the lift, the checks bearing on it) before the row counts, one plot of every policy side by side,
failed and warned checks before passing ones, and "not identified" / "no interval" in words, never a number.

Fast pure tests first; then one DuckDB chain (generate -> validate -> evaluate -> report, no Spark) whose page is
opened in headless Chromium and read back from the rendered DOM."""
from __future__ import annotations

import base64
import math
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pandas as pd
import pytest

from scavenger import cli
from scavenger.report import answer, build, verdicts
from scavenger.report.inputs import ReportInputs

from helpers.html_dom import Dom

CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--disable-default-apps", "--disable-extensions"]
EVIL = '<img src=x onerror="document.title=1">'


def _estimates() -> tuple[pd.DataFrame, pd.DataFrame]:
    nan = math.nan
    rows = [  # policy, estimator, value, lo, hi, kind, identified, recommended, reason, checks
        ("good", "slate_pi_plus_plus", 0.5, 0.4, 0.6, "el", True, True, None, "b:pass d:fail"),
        ("good", "factored", nan, nan, nan, "none", False, False, "ADCs are not identifiable: no ad moved", "a:pass"),
        ("noint", "slate_pi", 0.45, nan, nan, "none", True, False, "fewer than two events", "b:pass"),
        ("none", "slate_pi", nan, nan, nan, "none", False, False, "no propensities", "b:pass"),
        ("none", "factored", nan, nan, nan, "none", False, False, "ADCs are not identifiable", "a:pass"),
        (EVIL, "slate_ips", 0.2, 0.1, 0.35, "el", True, True, None, "b:warn c:pass"),
    ]
    est = pd.DataFrame(rows, columns=["policy_id", "estimator", "value", "ci_low", "ci_high", "interval_kind",
                                      "identified", "recommended", "reason", "checks"])
    est = est.assign(std_error=0.05, n_events=1000, level=0.95, window="2026-01-01..2026-01-02")
    diag = pd.DataFrame([{"policy_id": p, "metric": m, "slot": None, "value": v}
                         for p in est["policy_id"].unique() for m, v in (("logged_value", 0.3),
                                                                         ("logged_value_se", 0.01))])
    diag["slot"] = diag["slot"].astype("Int64")
    return est, diag


def test_policy_lines_give_the_estimate_or_say_why_not():
    est, diag = _estimates()
    lines = {ln["policy_id"]: ln for ln in answer.policy_lines(est, diag)}
    good = lines["good"]
    assert (good["status"], good["estimator"]) == ("ok", "slate_pi_plus_plus")
    assert (good["ci_low"], good["ci_high"]) == (0.4, 0.6)
    assert good["logged_value"] == 0.3 and good["lift"] == pytest.approx(0.2) and good["vs_logged"] == "above"
    assert lines["noint"]["status"] == "no_interval" and lines["noint"]["reason"] == "fewer than two events"
    assert lines["none"]["status"] == "not_identified" and "value" not in lines["none"]
    assert "slate_pi: no propensities" in lines["none"]["reason"] and "factored: ADCs" in lines["none"]["reason"]
    order = [ln["policy_id"] for ln in answer.policy_lines(est, diag)]
    assert order == ["good", EVIL, "noint", "none"]        # with an interval by value, then without, then none


def test_page_says_not_identified_and_no_interval_in_words_and_escapes_ids():
    est, diag = _estimates()
    val = pd.DataFrame({"check": ["b.exploration_M", "d.slot_dependence", "e.calibration", "b.exploration_M"],
                        "scope": ["p=1", "slots=1,2", "position=1", "p=2"], "statistic": [1.0, 0.5, 0.2, 1.0],
                        "threshold": [0.1, 0.1, 0.1, 0.1], "verdict": ["pass", "fail", "warn", "pass"],
                        "message": ["ok", "slot 2 depends on slot 1", "not testable", "ok"]})
    page = build.render_html(ReportInputs(estimates=est, diagnostics=diag, validation=val))
    assert "<img src=x" not in page and "&lt;img src=x" in page
    dom = Dom(page)
    rows = {dom.events[i][2]["data-policy"]: i for i in dom.find("tr") if "data-status" in dom.events[i][2]}
    none = dom.text(rows["none"])
    assert "not identified: slate_pi: no propensities; factored: ADCs are not identifiable" in none
    assert not any(ch.isdigit() for ch in none.split("not identified")[0])      # no number before the reason
    assert "no interval: fewer than two events" in dom.text(rows["noint"])
    # the per-policy detail: a not-identified estimator is words under the plot and in the table, not an empty row
    detail = [i for i in dom.find("li", class_="why") if dom.events[i][2].get("data-estimator") == "factored"]
    assert any("not identified: ADCs are not identifiable: no ad moved" in dom.text(i) for i in detail)
    cells = [dom.text(i) for i in dom.find("td", data_col="value")]
    assert "not identified: no propensities" in cells
    # checks: fail, then warn, then the passing one collapsed to one line
    order = [e[2]["data-verdict"] for e in dom.events if e[0] == "start" and "data-verdict" in e[2]
             and e[1] in ("div", "details")]
    assert order == ["fail", "warn", "pass"]
    assert [g["check"] for g in verdicts.check_groups(val)] == ["d.slot_dependence", "e.calibration",
                                                               "b.exploration_M"]


# ---- end to end on DuckDB, read back from Chromium's DOM -----------------------------------------------------------
@pytest.fixture(scope="module")
def answer_run(tmp_path_factory) -> dict:
    """Slotted logs with contextual logging (checks a and d fail, e warns) through validate, evaluate and report on
    DuckDB (the default for local paths): no Spark."""
    base = tmp_path_factory.mktemp("answer")
    gen, val, ev, rep = (str(base / n) for n in ("gen", "val", "ev", "rep"))
    codes = {"generate": cli.main(["generate", "--days", "2", "--events-per-day", "3000", "--layout", "slotted",
                                   "--logging", "contextual", "--out", gen])}
    codes["validate"] = cli.main(["validate", "--logs", f"{gen}/logs", "--decisions", f"{gen}/decisions",
                                  "--out", val, "--no-gate", "--no-great-expectations"])
    codes["evaluate"] = cli.main(["evaluate", "--logs", f"{gen}/logs", "--decisions", f"{gen}/decisions",
                                  "--out", ev, "--gate", "report"])
    codes["report"] = cli.main(["report", "--out", rep, "--estimates", ev, "--validation", val,
                                "--ground-truth", gen])
    return {"codes": codes, "ev": Path(ev), "html": Path(rep) / "report.html", "base": base}


@pytest.mark.e2e
def test_rendered_report_leads_with_the_answer(answer_run, tmp_path):
    assert answer_run["codes"] == {"generate": 0, "validate": 0, "evaluate": 0, "report": 0}
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        pytest.skip("chromium not installed (apt-get install -y chromium)")
    profile = tempfile.mkdtemp(prefix="chromium-", dir=tmp_path)
    out = subprocess.run([exe, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", "--dump-dom",
                          answer_run["html"].resolve().as_uri()], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "HOME": str(tmp_path)})
    assert "<html" in out.stdout, out.stderr[-2000:]
    dom = Dom(out.stdout)
    counts_at = dom.find("table", data_table="row_counts")[0]

    est = pd.read_parquet(answer_run["ev"] / "estimates")
    diag = pd.read_parquet(answer_run["ev"] / "diagnostics")
    logged = diag[(diag["metric"] == "logged_value") & diag["slot"].isna()]["value"].iloc[0]
    for p, rows in est.groupby("policy_id"):
        rec = rows[rows["recommended"]].iloc[0]
        (tr,) = [i for i in dom.find("tr", data_policy=p) if "data-status" in dom.events[i][2]]
        assert tr < counts_at, p                                   # the top line comes before the row counts
        line = dom.text(tr)
        assert line.startswith(p) and rec["estimator"] in line
        for name, col in (("answer_value", "value"), ("answer_ci_low", "ci_low"), ("answer_ci_high", "ci_high")):
            (i,) = [j for j in dom.find("span", data_name=name, data_policy=p) if tr < j < counts_at]
            assert float(dom.events[i][2]["data-value"]) == rec[col], (p, name)
            assert dom.text(i) == f"{rec[col]:.4g}" and dom.text(i) in line
        (i,) = [j for j in dom.find("span", data_name="answer_logged", data_policy=p) if tr < j < counts_at]
        assert float(dom.events[i][2]["data-value"]) == logged
        assert all(token in line for token in rec["checks"].split())   # e.g. d:fail e:warn b:pass c:pass

    # the side-by-side plot: an inline PNG before the row counts
    (img,) = dom.find("img", alt="every policy side by side with intervals")
    assert img < counts_at
    src = dom.events[img][2]["src"]
    assert src.startswith("data:image/png;base64,") and base64.b64decode(src.split(",", 1)[1])[:4] == b"\x89PNG"

    # failed and warned checks first, then the passing ones, each one line (<details>, its summary)
    checks = [(i, e[2]["data-verdict"]) for i, e in enumerate(dom.events)
              if e[0] == "start" and e[1] in ("div", "details") and "data-verdict" in e[2]]
    kinds = [v for _, v in checks]
    assert "fail" in kinds and "warn" in kinds and "pass" in kinds
    assert kinds == sorted(kinds, key=verdicts.rank)
    assert all(dom.events[i][1] == "details" for i, v in checks if v == "pass")
    assert max(i for i, v in checks if v != "pass") < min(i for i, v in checks if v == "pass") < counts_at

    # not-identified estimates are words in the per-policy detail; nothing points outside the page
    gone = est[~est["identified"].astype(bool)]
    words = " ".join(dom.text(i) for i in dom.find("li", class_="why"))
    for reason in gone["reason"].unique():
        assert f"not identified: {reason}" in words
    links = [e[2].get(k, "") for e in dom.events if e[0] == "start" for k in ("src", "href")]
    assert not [u for u in links if u.startswith(("http:", "https:", "//"))]
