"""`scavenger demo` (what `make demo` runs) at a small scale: it completes and its numbers are the truth's."""
from __future__ import annotations

import json

import pandas as pd
import pytest



@pytest.fixture(scope="module")
def demo_run(tmp_path_factory):
    """The demo at a small scale on DuckDB (its default: generation and estimates, no JVM)."""
    from scavenger.demo import run_demo

    work = tmp_path_factory.mktemp("demo")
    lines = []
    summary = run_demo(None, str(work / "demo"), days=2, events_per_day=6000, seed=3, printer=lines.append)
    return {"text": "\n".join(str(x) for x in lines), "summary": summary, "workdir": work}


def test_demo_runs_and_recovers_the_truth(demo_run):
    text, summary, tmp_path = demo_run["text"], demo_run["summary"], demo_run["workdir"]
    for heading in ("attention-decay coefficients", "data gate on the ranked logs", "ranked target policies",
                    "data gate on the slotted logs", "slotted target policies"):
        assert heading in text
    adc = pd.read_parquet(tmp_path / "demo" / "adc")
    truth = json.loads((tmp_path / "demo" / "ranked" / "ground_truth.json").read_text())
    vo = adc[(adc["method"] == "variance_optimal") & (adc["interval_kind"] == "delta")].sort_values("position")
    # the variance-optimal ADC lands within 4 standard errors of the true C_i
    for (_, row), c in zip(vo.iterrows(), truth["adc"]):
        assert abs(row["coefficient"] - c) <= 4 * max(row["std_error"], 1e-12)
    est = pd.read_parquet(tmp_path / "demo" / "estimates_slotted")
    assert {"slate_pi", "slate_pi_plus_plus", "slate_ips"} <= set(est["estimator"])
    for key in ("ranked", "slotted"):
        cov = summary[key]["coverage"]
        assert cov["intervals"] > 0 and cov["covering"] >= 0.75 * cov["intervals"]


def test_demo_prints_no_estimate_outside_its_interval_nor_one_from_too_few_matches(demo_run):
    """The demo is honest (issue 60): every identified estimate with a finite interval lies inside it, and no
    scavenging or IPS/SNIPS estimate from fewer than the stated minimum of matching events is identified."""
    import re

    import numpy as np

    from scavenger.estimators.intervals import MIN_MATCHING

    out = demo_run["workdir"] / "demo"
    cols = ["policy_id", "estimator", "value", "ci_low", "ci_high", "identified", "reason", "note"]
    est = pd.concat([pd.read_parquet(out / t)[cols].astype({"reason": object, "note": object})
                     for t in ("estimates_ranked", "estimates_slotted")], ignore_index=True)
    ident = est[est["identified"].astype(bool)]
    finite = ident[np.isfinite(ident["ci_low"].astype(float)) & np.isfinite(ident["ci_high"].astype(float))]
    assert len(finite) >= 20
    outside = finite[(finite["value"] < finite["ci_low"] - 1e-12) | (finite["value"] > finite["ci_high"] + 1e-12)]
    assert outside.empty, outside[["policy_id", "estimator", "value", "ci_low", "ci_high"]]

    # scavenging: the count of matching events is in the note (matched=N)
    scav = ident[ident["estimator"].str.startswith("scavenging")]
    for note in scav["note"].dropna():
        m = re.search(r"matched=(\d+)", note)
        assert m is None or int(m.group(1)) >= MIN_MATCHING, note
    unmatched = est[~est["identified"].astype(bool) & est["reason"].fillna("").str.contains("stated minimum")]
    for reason in unmatched["reason"]:
        assert int(re.search(r"only (\d+) logged", reason).group(1)) < MIN_MATCHING
    # IPS/SNIPS: matching events = events whose slate weight W is positive (diagnostics share_W_nonzero x n_events)
    diag = pd.read_parquet(out / "diagnostics_slotted").pivot_table(index="policy_id", columns="metric",
                                                                      values="value", aggfunc="first")
    matches = (diag["share_W_nonzero"] * diag["n_events"]).round().astype(int)
    ips = ident[ident["estimator"].isin(["slate_ips", "slate_snips"])]
    assert len(ips)
    for pid in ips["policy_id"]:
        assert matches[pid] >= MIN_MATCHING, (pid, matches[pid])


def test_demo_coverage_counts_finite_intervals_and_reads_the_misses(demo_run):
    """The coverage line counts only identified estimates with a finite interval, and says what its misses mean
    at that sample size: the exact binomial range within chance."""
    from scipy.stats import binom

    from scavenger.demo import miss_statement

    text, summary = demo_run["text"], demo_run["summary"]
    cov = summary["slotted"]["coverage"]
    est = pd.read_parquet(demo_run["workdir"] / "demo" / "estimates_slotted")
    finite = est[est["identified"].astype(bool) & est["ci_low"].notna() & est["ci_high"].notna()]
    assert cov["intervals"] == len(finite) and cov["intervals"] - cov["covering"] == len(cov["missed"])
    assert f"{cov['covering']}/{cov['intervals']} slotted intervals cover the true value" in text
    assert "within chance" in text and "Binomial(" in text
    # 24 intervals at 95%: 0-3 misses within chance, 4 or more 3.0%
    line = miss_statement(24, 5, 0.95)
    assert "0-3 misses are within chance (P(4 or more) = 3.0%)" in line
    assert f"P(5 or more) = {binom.sf(4, 24, 0.05):.1%}" in line
    assert "0-3 misses" in miss_statement(24, 0, 0.95) and "P(" in miss_statement(24, 0, 0.95)
