"""The gate per target policy: verdict rows that judge one target (its own mass on rarely or never logged
(position, ad) pairs, checks b and c) refuse that target's estimates only; the rows that judge the logs refuse an
estimator for every target (pipelines/evaluate.py)."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from .. import registry
from ..checks import assumptions as A
from ..checks import judge as J

# Verdict rows that judge one target policy (scope "policy=<id>"): the share of ITS mass on rarely logged or never
# logged (position, ad) pairs. A failure there says nothing about the other targets of the same decisions.
TARGET_CHECKS = ("b.rare_mass", "c.support")


@dataclass
class PolicyVerdicts:
    """The checks' verdicts as each target policy sees them: ``base`` from the rows that judge the logs (every
    target shares them), ``own`` the worst verdict and first failing message of each target's own rows
    (TARGET_CHECKS). ``verdict(p, c)`` is what target p's estimates rely on."""

    base: dict
    own: dict = field(default_factory=dict)      # policy -> {check letter: (verdict, message of a failing row)}

    @classmethod
    def of_window(cls, window) -> "PolicyVerdicts":
        rows = window.verdicts
        base = J.worst_by_check([r for r in rows if r["check"] not in TARGET_CHECKS], window.checks)
        own: dict = {}
        for r in rows:
            scope = str(r.get("scope") or "")
            if r["check"] not in TARGET_CHECKS or not scope.startswith("policy="):
                continue
            c = r["check"].split(".")[0]
            mine = own.setdefault(scope[len("policy="):], {})
            verdict = A.worst([mine[c][0], r["verdict"]]) if c in mine else r["verdict"]
            msg = mine[c][1] if c in mine and mine[c][0] == A.FAIL else r["message"]
            mine[c] = (verdict, msg)
        return cls(base, own)

    def verdict(self, policy, check: str) -> str:
        b = self.base.get(check, "not_run")
        o = self.own.get(policy, {}).get(check)
        if o is None:
            return b
        return o[0] if b == "not_run" else A.worst([b, o[0]])

    def failed_everywhere(self, check: str, policies: list) -> bool:
        """A check that fails on the logs, or for every target (then no target's estimate can be written)."""
        if self.base.get(check) == A.FAIL:
            return True
        return bool(policies) and all(self.verdict(p, check) == A.FAIL for p in policies)

    def own_failures(self, policy, checks) -> list:
        """(check, message) of the checks that fail for this target alone (not on the logs)."""
        mine = self.own.get(policy, {})
        return [(c, mine[c][1]) for c in checks
                if self.base.get(c) != A.FAIL and c in mine and mine[c][0] == A.FAIL]


def gate_rows(est: pd.DataFrame, verdicts: PolicyVerdicts) -> pd.DataFrame:
    """--gate enforce: the estimates of a target whose own check failed (TARGET_CHECKS: its mass on (position, ad)
    pairs logged rarely or never) are not identified, with the check's message; the other targets' stand."""
    for i, (p, e) in enumerate(zip(est["policy_id"], est["estimator"])):
        if not bool(est["identified"].iloc[i]) and pd.notna(est["reason"].iloc[i]):
            continue
        failed = verdicts.own_failures(p, registry.get(registry.base_of(e)).checks)
        if not failed:
            continue
        why = "; ".join(f"check {c} ({A.CHECK_NAMES[c]}) failed for this target: {m}" for c, m in failed)
        idx = est.index[i]
        est.loc[idx, ["value", "std_error", "ci_low", "ci_high"]] = np.nan
        est.loc[idx, "interval_kind"] = "none"
        est.loc[idx, "identified"] = False
        est.loc[idx, "reason"] = why
    return est
