"""The report's checks summary without --validation, from the verdicts evaluate recorded on its estimates (the
``checks`` column): one group per check, its verdict the worst any estimate saw, however many estimators, targets
or verdicts share it. Grouped by (check, verdict), a check that failed for one target (the per-target gate: b's
rare mass, c's support) and passed for another was listed twice, once failed and once passed."""
from __future__ import annotations

import re

import pandas as pd

from scavenger.report import build, verdicts
from scavenger.report.inputs import ReportInputs


def _estimates() -> pd.DataFrame:
    rows = [("t1", "slate_pi", "b:fail c:fail d:pass e:warn"), ("t1", "ips", "c:fail e:warn"),
            ("t2", "slate_pi", "b:pass c:pass d:pass e:warn"), ("t2", "ips", "c:pass e:warn"),
            ("t1", "factored", "a:pass b:fail"), ("t2", "factored", "a:pass b:pass")]
    est = pd.DataFrame(rows, columns=["policy_id", "estimator", "checks"])
    return est.assign(value=0.1, ci_low=0.05, ci_high=0.15, interval_kind="clt", identified=True, recommended=False)


def test_one_group_per_check_worst_verdict():
    groups = verdicts.check_groups(None, _estimates())
    assert [(g["check"], g["verdict"]) for g in groups] == [("b", "fail"), ("c", "fail"), ("e", "warn"),
                                                            ("a", "pass"), ("d", "pass")]
    assert all(g["source"] == "evaluate" for g in groups)
    b = groups[0]["rows"]
    assert list(b["verdict"]) == ["fail", "pass"]
    assert list(b["scope"]) == ["estimators factored, slate_pi; policies t1", "estimators factored, slate_pi; "
                                                                               "policies t2"]
    assert list(groups[2]["rows"]["scope"]) == ["estimators ips, slate_pi; policies t1, t2"]


def test_checks_block_lists_each_check_once():
    block = verdicts.checks_block(None, _estimates())
    assert re.findall(r'data-check="([^"]+)"', block) == ["b", "c", "e", "a", "d"]
    assert "5 checks from evaluate (no --validation given): 2 failed, 1 warned, 2 passed." in block
    assert "<b>b</b>: 1 fail, 1 pass of 2 scope(s)" in block
    page = build.render_html(ReportInputs(estimates=_estimates()))
    checks = page[page.index('id="answer-checks"'):]
    assert sorted(re.findall(r'<(?:div|details) class="check[^"]*" data-check="([^"]+)"', checks)) == \
        ["a", "b", "c", "d", "e"]
