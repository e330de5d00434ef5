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
