"""`scavenger report`: the HTML has every section with the numbers of the run it came from, and renders in headless
Chromium (screenshot not blank). Fast unit tests of the pure pieces first, then one small end-to-end run."""
from __future__ import annotations

import base64
import html.parser
import json
import math
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from scavenger import cli
from scavenger.report import build, inputs as rinputs

CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-default-apps",
                  "--disable-extensions"]


# ---- parsing the report ------------------------------------------------------------------------------------------
class ReportParser(html.parser.HTMLParser):
    """Collects section ids, tables (data-table -> list of {col: value}), data-name spans and images."""

    def __init__(self):
        super().__init__()
        self.sections, self.tables, self.named, self.images, self.links = [], {}, [], [], []
        self._table = self._row = self._col = None
        self._value = None
        self._text = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "section":
            self.sections.append(a.get("id"))
        elif tag == "table" and "data-table" in a:
            self._table = a["data-table"]
            self.tables[self._table] = []
        elif tag == "tr" and self._table is not None:
            self._row = {}
        elif tag == "td" and self._row is not None:
            self._col, self._value, self._text = a.get("data-col"), a.get("data-value"), []
        elif tag == "img":
            self.images.append(a.get("src", ""))
        if tag in ("a", "link", "script", "img", "iframe"):
            for key in ("href", "src"):
                if key in a:
                    self.links.append(a[key])
        if "data-name" in a and "data-value" in a:
            self.named.append(a)

    def handle_data(self, data):
        if self._col is not None:
            self._text.append(data)

    def handle_endtag(self, tag):
        if tag == "td" and self._row is not None and self._col is not None:
            if self._value is not None:
                self._row[self._col] = float(self._value)
            else:
                self._row[self._col] = "".join(self._text)
            self._col = None
        elif tag == "tr" and self._row is not None:
            if self._row:
                self.tables[self._table].append(self._row)
            self._row = None
        elif tag == "table":
            self._table = None


def parse_report(path) -> ReportParser:
    p = ReportParser()
    p.feed(Path(path).read_text(encoding="utf-8"))
    return p


def _same(a, b) -> bool:
    """Equal as numbers (NaN == NaN) or as strings."""
    if isinstance(a, str) or isinstance(b, str):
        return str(a) == str(b)
    a, b = float(a), float(b)
    return (math.isnan(a) and math.isnan(b)) or a == b


def _same_multiset(a, b) -> bool:
    """The same numbers in any order (NaN equal to NaN)."""
    def key(v):
        return (math.isnan(v), 0.0 if math.isnan(v) else v)

    a, b = sorted(map(float, a), key=key), sorted(map(float, b), key=key)
    return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))


# ---- pure pieces -------------------------------------------------------------------------------------------------
def test_truth_for_window_is_the_event_weighted_mean_of_days():
    gt = {"policies": {"p": {"per_day": {"2026-01-01": 0.2, "2026-01-02": 0.5, "2026-01-03": 0.9}}},
          "logging_policy": {"per_day": {"2026-01-01": {"realized_value": 0.1},
                                         "2026-01-02": {"realized_value": 0.3}}},
          "counts": {"per_day": {"2026-01-01": {"events": 100}, "2026-01-02": {"events": 300},
                                 "2026-01-03": {"events": 50}}}}
    assert build.truth_for_window(gt, "p", "2026-01-01..2026-01-02") == pytest.approx((0.2 * 100 + 0.5 * 300) / 400,
                                                                                     rel=1e-12)
    assert build.truth_for_window(gt, "p", "2026-01-03") == pytest.approx(0.9, rel=1e-12)
    assert build.truth_for_window(gt, None, "2026-01-01..2026-01-03") == pytest.approx((10 + 90) / 400, rel=1e-12)
    assert build.truth_for_window(gt, "unknown", "2026-01-01") is None
    assert build.window_days("2026-01-30..2026-02-02") == ["2026-01-30", "2026-01-31", "2026-02-01", "2026-02-02"]


def test_variance_reduction_equals_numpy():
    rng = np.random.default_rng(4)
    rows, diags = [], []
    for p in ("a", "b"):
        n = int(rng.integers(100, 1000))
        se_pi, se_pp = rng.uniform(0.01, 0.05, 2)
        rows += [{"policy_id": p, "estimator": "slate_pi", "std_error": se_pi, "n_events": n},
                 {"policy_id": p, "estimator": "slate_pi_plus_plus", "std_error": se_pp, "n_events": n},
                 {"policy_id": p, "estimator": "slate_ips", "std_error": 1.0, "n_events": n}]
        for metric, v in (("M", 3.0), ("H", 2.0), ("prior_mean", 0.1), ("predicted_nmse_reduction", 0.05)):
            diags.append({"policy_id": p, "metric": metric, "slot": None, "value": v})
    est, diag = pd.DataFrame(rows), pd.DataFrame(diags)
    diag["slot"] = diag["slot"].astype("Int64")
    vr = build.variance_reduction(est, diag)
    for p in ("a", "b"):
        e = est[est["policy_id"] == p].set_index("estimator")
        expected = e.loc["slate_pi", "n_events"] * (e.loc["slate_pi", "std_error"] ** 2
                                                   - e.loc["slate_pi_plus_plus", "std_error"] ** 2)
        got = vr.set_index("policy_id").loc[p]
        assert got["realized"] == pytest.approx(expected, rel=1e-9)
        assert got["predicted"] == 0.05 and got["M"] == 3.0 and got["H"] == 2.0


def test_html_table_carries_exact_values():
    df = pd.DataFrame({"x": [0.1 + 0.2, 1e-17, float("nan"), 12345.0], "n": [1, 2, 3, 4],
                       "s": ["<a>", "b", "c", "d"]})
    p = ReportParser()
    p.feed(build.html_table(df, "t"))
    rows = p.tables["t"]
    assert [r["x"] for r in rows][:2] == [0.1 + 0.2, 1e-17] and math.isnan(rows[2]["x"])
    assert [r["n"] for r in rows] == [1, 2, 3, 4] and rows[0]["s"] == "<a>"


def test_quarantine_counts_from_parquet_footers(tmp_path):
    for table, dt, n in (("logs", "2026-01-01", 3), ("logs", "2026-01-02", 5), ("decisions", "2026-01-01", 2)):
        d = tmp_path / "quarantine" / table / f"dt={dt}"
        d.mkdir(parents=True)
        pd.DataFrame({"event_id": [f"e{i}" for i in range(n)]}).to_parquet(d / "part-0.parquet")
    q = rinputs.quarantine_counts(tmp_path / "quarantine").set_index(["table", "dt"])["rows"]
    assert q.to_dict() == {("decisions", "2026-01-01"): 2, ("logs", "2026-01-01"): 3, ("logs", "2026-01-02"): 5}


def test_report_bad_arguments_exit_2(tmp_path, capsys):
    assert cli.main(["report", "--out", str(tmp_path / "r")]) == 2
    assert cli.main(["report", "--out", str(tmp_path / "r"), "--adc", str(tmp_path / "nope")]) == 2
    assert cli.main(["report", "--out", str(tmp_path / "r"), "--root", str(tmp_path), "--dt", "2026-13-01"]) == 2
    err = capsys.readouterr().err
    assert "no such path" in err and "Traceback" not in err


# ---- end to end: generate -> adc, evaluate (two daily runs), validate -> report -----------------------------------
D1, D2 = "2026-01-01", "2026-01-02"


@pytest.fixture(scope="module")
def report_run(spark, tmp_path_factory) -> dict:
    """Generate, then adc, evaluate (two daily runs), validate a dirtied day (duplicated with the suite's Spark
    session) and report through ``cli.main`` (DuckDB, the default engine for local paths); returns each job's exit
    code."""
    from scavenger.contract import read_logs, write_partitioned
    from scavenger.simulation.generator import GeneratorConfig, generate

    base = tmp_path_factory.mktemp("report")
    gen = base / "gen"
    cfg = GeneratorConfig(layout="ranked", logging="uniform", n_positions=3, n_ads=6, n_contexts=6, days=2,
                          events_per_day=2500, start_date=D1, seed=11)
    generate("duckdb", cfg, str(gen))          # the same rows as on Spark, faster
    root = base / "root"
    logs, decisions, stats = str(gen / "logs"), str(gen / "decisions"), str(base / "stats")
    codes = {"adc": cli.main(["adc", "--gate", "off", "--logs", logs, "--from", D1, "--to", D2, "--stats-dir", stats,
                              "--out", str(root / "adc" / f"dt={D2}")])}
    for dt in (D1, D2):
        codes[f"evaluate {dt}"] = cli.main(
            ["evaluate", "--gate", "off", "--logs", logs, "--decisions", decisions, "--from", D1, "--to", dt,
             "--estimators", "factored,pi,pi_plus_plus,ips,scavenging", "--stats-dir", stats,
             "--out", str(root / "evaluate" / "demo" / f"dt={dt}")])
    # validate a copy of day 2 with 3 duplicated events, so the quarantine is not empty
    day = read_logs(spark, logs, D2, D2)
    dirty = str(base / "dirty_logs")
    write_partitioned(day.unionByName(day.orderBy("event_id").limit(3)), dirty)
    codes["validate"] = cli.main(["validate", "--logs", dirty, "--decisions", decisions, "--from", D2, "--to", D2,
                                  "--out", str(root / "validate" / f"dt={D2}"), "--no-gate"])
    out = base / "report"
    codes["report"] = cli.main(["report", "--root", str(root), "--dt", D2, "--ground-truth",
                                str(gen / "ground_truth.json"), "--out", str(out)])
    return {"root": root, "gen": gen, "out": out, "html": out / "report.html", "codes": codes}


@pytest.mark.slow
def test_report_chain_exits_0(report_run):
    codes = report_run["codes"]
    assert codes["adc"] == 0
    assert codes[f"evaluate {D1}"] == 0 and codes[f"evaluate {D2}"] == 0
    assert codes["validate"] == 0
    assert codes["report"] == 0


@pytest.mark.slow
def test_report_has_every_section_with_the_run_numbers(report_run):
    root, html_path = report_run["root"], report_run["html"]
    rep = parse_report(html_path)
    assert rep.sections == list(build.SECTIONS)

    # ADC: the page's table is the adc job's table, value for value
    adc = pd.read_parquet(root / "adc" / f"dt={D2}" / "adc")
    page = pd.DataFrame(rep.tables["adc"]).astype({"position": int})
    merged = adc.merge(page, on=["position", "method", "interval_kind"], suffixes=("", "_page"))
    assert len(merged) == len(adc) == len(page)
    for col in ("coefficient", "std_error", "ci_low", "ci_high", "ads_used", "impressions_used", "dcg"):
        assert all(_same(a, b) for a, b in zip(merged[col], merged[f"{col}_page"])), col

    # estimates: one table per policy, every estimator row with the evaluate job's numbers
    est = pd.read_parquet(root / "evaluate" / "demo" / f"dt={D2}" / "estimates")
    assert set(est["policy_id"]) >= {"oracle", "most_clicked"}
    for p, rows in est.groupby("policy_id"):
        page = pd.DataFrame(rep.tables[f"estimates:{p}"])
        assert len(page) == len(rows)
        for (_, r), (_, q) in zip(rows.iterrows(), page.iterrows()):
            assert q["estimator"] == r["estimator"] and q["interval_kind"] == r["interval_kind"]
            for col in ("value", "std_error", "ci_low", "ci_high", "n_events"):
                assert _same(r[col], q[col]), (p, r["estimator"], col)

    # logging reference line = logged mean reward of the diagnostics table; true value from ground_truth.json
    diag = pd.read_parquet(root / "evaluate" / "demo" / f"dt={D2}" / "diagnostics")
    truth = json.loads((report_run["gen"] / "ground_truth.json").read_text())
    named = {(a["data-name"], a.get("data-policy")): float(a["data-value"]) for a in rep.named}
    for p in est["policy_id"].unique():
        pbar = diag[(diag["policy_id"] == p) & (diag["metric"] == "pbar_hat")]["value"].iloc[0]
        assert named[("logging_value", p)] == pbar
        if p in truth["policies"]:
            days = truth["counts"]["per_day"]
            v = sum(truth["policies"][p]["per_day"][d] * days[d]["events"] for d in (D1, D2)) / \
                sum(days[d]["events"] for d in (D1, D2))
            assert named[("true_value", p)] == pytest.approx(v, rel=1e-12)

    # PI vs PI++: alpha_k per slot from diagnostics; realized reduction n (se_PI^2 - se_PI++^2)
    alpha = pd.DataFrame(rep.tables["alpha"])
    d_alpha = diag[diag["metric"] == "alpha"]
    assert len(alpha) == len(d_alpha) > 0
    for _, r in d_alpha.iterrows():
        got = alpha[(alpha["policy_id"] == r["policy_id"]) & (alpha["slot"] == r["slot"])]["alpha"].iloc[0]
        assert _same(got, r["value"])
    vr = pd.DataFrame(rep.tables["variance_reduction"]).set_index("policy_id")
    for p, rows in est.groupby("policy_id"):
        e = rows.set_index("estimator")
        n = float(e.loc["slate_pi", "n_events"])
        realized = n * (e.loc["slate_pi", "std_error"] ** 2 - e.loc["slate_pi_plus_plus", "std_error"] ** 2)
        assert vr.loc[p, "realized"] == pytest.approx(realized, rel=1e-9)
        pred = diag[(diag["policy_id"] == p) & (diag["metric"] == "predicted_nmse_reduction")]["value"].iloc[0]
        assert _same(vr.loc[p, "predicted"], pred)

    # trend: both daily runs, each run's values
    for p in est["policy_id"].unique():
        trend = pd.DataFrame(rep.tables[f"trend:{p}"])
        assert sorted(trend["run_dt"].unique()) == [D1, D2]
        for dt in (D1, D2):
            day = pd.read_parquet(root / "evaluate" / "demo" / f"dt={dt}" / "estimates")
            day = day[day["policy_id"] == p]
            t = trend[trend["run_dt"] == dt]
            assert _same_multiset(t["value"], day["value"]), (p, dt)  # NaN: estimates not identified

    # overview: the data window and the jobs' row counts
    assert f"{D1}..{D2}" in html_path.read_text()
    counts = pd.DataFrame(rep.tables["row_counts"])
    ev_result = json.loads((root / "evaluate" / "demo" / f"dt={D2}" / "result.json").read_text())
    assert counts[(counts["job"] == "evaluate") & (counts["count"] == "logs.rows_used")]["value"].iloc[0] == \
        ev_result["counts"]["logs"]["rows_used"] == 5000

    # validation verdicts + quarantine counts
    val = pd.read_parquet(root / "validate" / f"dt={D2}" / "validation")
    page = pd.DataFrame(rep.tables["validation"])
    assert len(page) == len(val)
    assert sorted(page["verdict"]) == sorted(val["verdict"])
    assert sorted(page["message"]) == sorted(val["message"])
    vres = json.loads((root / "validate" / f"dt={D2}" / "result.json").read_text())
    quarantined = sum(v["rows_quarantined"] for v in vres["counts"].values()
                      if isinstance(v, dict) and "rows_quarantined" in v)
    assert vres["counts"]["logs"]["rows_quarantined"] == 3
    assert named[("quarantine_total", None)] == quarantined
    assert counts[(counts["job"] == "validate") & (counts["count"] == "logs.rows_in")]["value"].iloc[0] == \
        vres["counts"]["logs"]["rows_in"] == 2503
    docs = [u for u in rep.links if u.endswith("index.html")]
    if vres["outputs"].get("data_docs"):
        assert len(docs) == 1 and (report_run["out"] / docs[0]).resolve().exists()

    # plots: real PNGs, embedded; nothing points to the network
    pngs = [s for s in rep.images if s.startswith("data:image/png;base64,")]
    assert len(pngs) == len(rep.images) >= 1 + est["policy_id"].nunique() * 2 + 2
    for src in pngs:
        assert base64.b64decode(src.split(",", 1)[1])[:8] == b"\x89PNG\r\n\x1a\n"
    assert not [u for u in rep.links if u.startswith(("http:", "https:", "//"))]


def _chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.slow
@pytest.mark.e2e
def test_report_renders_in_headless_chromium(report_run, tmp_path):
    binary = _chromium()
    if binary is None:
        pytest.skip("chromium not installed (apt-get install -y chromium)")
    from matplotlib import image as mpimg

    url = report_run["html"].resolve().as_uri()
    profile = tempfile.mkdtemp(prefix="chromium-profile-", dir=tmp_path)
    shot = tmp_path / "shot.png"
    env = {**os.environ, "HOME": str(tmp_path)}
    subprocess.run([binary, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", f"--screenshot={shot}",
                    "--window-size=1200,2400", "--hide-scrollbars", url], check=True, timeout=180,
                   capture_output=True, env=env)
    pixels = mpimg.imread(shot)[..., :3]
    assert pixels.shape[0] >= 2000 and pixels.shape[1] >= 1000
    assert float(pixels.std()) > 0.05                      # not a blank page
    assert float((pixels.mean(axis=2) < 0.5).mean()) > 0.005  # some dark ink (text, axes)
    dom = subprocess.run([binary, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", "--dump-dom", url], check=True,
                         timeout=180, capture_output=True, text=True, env=env).stdout
    rendered = ReportParser()
    rendered.feed(dom)
    assert rendered.sections == list(build.SECTIONS)
    original = parse_report(report_run["html"]).tables["adc"]
    assert len(rendered.tables["adc"]) == len(original)
    for a, b in zip(rendered.tables["adc"], original):
        assert a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)


# ---- progress: Spark jobs inside a phase carry its job tag --------------------------------------------------------
def test_phase_tags_spark_jobs_and_restores(spark, capsys, monkeypatch):
    from scavenger.progress import console_progress_conf, phase

    monkeypatch.delenv("SCAVENGER_PROGRESS", raising=False)
    before = set(spark.getTags())
    with phase(spark, "statistics", "scan 2026-01-01") as outer:
        assert outer == "scavenger statistics: scan 2026-01-01"
        assert "scavenger-statistics" in spark.getTags()
        with phase(spark, "write", "quarantine", group="test-group"):
            assert {"scavenger-statistics", "scavenger-test-group"} <= set(spark.getTags())
            assert "scavenger-write" not in spark.getTags()          # the group names the tag
            assert spark.range(10).count() == 10
        assert "scavenger-statistics" in spark.getTags()
        assert "scavenger-test-group" not in spark.getTags()
        assert spark.range(7).count() == 7
    assert set(spark.getTags()) == before
    # the tags reached Spark's status store (what the UI / History Server show, what spark.interruptTag cancels)
    store = spark.sparkContext._jsc.sc().statusStore()
    jobs = store.jobsList(None)
    # (classic Spark stores a session tag as spark-session-<id>-thread-<id>-<tag>)
    tags = [{t.rsplit("-thread-", 1)[-1].split("-", 5)[-1] for t in jobs.apply(i).jobTags().mkString("\t").split("\t")}
            for i in range(jobs.size())]
    assert any({"scavenger-test-group", "scavenger-statistics"} <= t for t in tags), tags
    assert any("scavenger-statistics" in t and "scavenger-test-group" not in t for t in tags), tags
    err = capsys.readouterr().err
    assert "[scavenger] scavenger statistics: scan 2026-01-01 done in" in err
    with open(os.devnull, "w") as devnull:
        assert console_progress_conf(devnull) == {"spark.ui.showConsoleProgress": "false"}
    monkeypatch.setenv("SCAVENGER_PROGRESS", "1")
    assert console_progress_conf() == {"spark.ui.showConsoleProgress": "true"}


def test_progress_0_silences_every_note(tmp_path, capsys, monkeypatch):
    """SCAVENGER_PROGRESS=0 silences the gate's note too (it was printed whenever checks ran, on the notebook's
    stderr included); under Spark Connect no console-progress setting is sent (a static conf of the server)."""
    import scavenger
    from scavenger.progress import console_progress_conf

    from helpers.reference import build_random, write_parquet

    monkeypatch.setenv("SCAVENGER_PROGRESS", "0")
    write_parquet(build_random(seed=3, K=2, n_ads=4, days=(0,), per_day=40), str(tmp_path))
    scavenger.adc(str(tmp_path / "logs"), engine="duckdb", gate="report")
    assert "[scavenger]" not in capsys.readouterr().err
    monkeypatch.setenv("SPARK_REMOTE", "sc://localhost:15002")
    monkeypatch.setenv("SCAVENGER_PROGRESS", "1")
    assert console_progress_conf() == {}


def test_summary_says_when_it_lists_only_some_quarantine_reasons():
    """The rows line names the three commonest reasons and says how many more there are (before: 102 rows
    quarantined shown as '(MISSING_REWARD 88, NULL_EVENT_ID 1, NULL_LOGGING_POLICY 1)' and nothing else)."""
    from scavenger.cli.summary import _rows_lines

    counts = {"logs": {"rows_in": 200, "rows_used": 98, "rows_quarantined": 102,
                       "by_reason": {"MISSING_REWARD": 88, "NULL_EVENT_ID": 1, "NULL_AD": 7, "POSITION_GAP": 6,
                                     "EMPTY_SLATE": 1}}}
    line = _rows_lines(counts)[0]
    assert "(MISSING_REWARD 88, NULL_AD 7, POSITION_GAP 6 and 2 more reason(s), see result.json)" in line
    counts["logs"]["by_reason"] = {"MISSING_REWARD": 88}
    assert _rows_lines(counts)[0].endswith("(MISSING_REWARD 88)")


def test_adc_section_says_why_a_position_is_not_identified():
    """The ADC section shows the adc table's reason where a coefficient is not identified (before: "–" without
    it): in the table's cell and once per reason under the plot."""
    from scavenger.report.inputs import ReportInputs
    from scavenger.report.sections import section_adc

    why = "ADCs are not identifiable: no ad was shown at more than one position"
    rows = [{"method": m, "position": p, "interval_kind": "delta", "coefficient": 1.0 if p == 1 else float("nan"),
             "std_error": 0.0 if p == 1 else float("nan"), "ci_low": 1.0 if p == 1 else float("nan"),
             "ci_high": 1.0 if p == 1 else float("nan"), "ads_used": 3, "impressions_used": 100, "dcg": 1.0 / p,
             "identified": p == 1, "reason": None if p == 1 else why}
            for m in ("naive", "heuristic") for p in (1, 2, 3)]
    html = section_adc(ReportInputs(adc=pd.DataFrame(rows)))
    assert f'data-name="adc_not_identified">position(s) 2, 3 (naive, heuristic): not identified: {why}' in html
    assert html.count(f'class="why" data-value="nan">not identified: {why}</td>') == 4
