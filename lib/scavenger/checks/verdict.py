"""What every assumption check shares: the thresholds it judges by (:class:`AssumptionConfig`) and the shape of
its verdict rows (check, scope, statistic, threshold, verdict, message)."""
from __future__ import annotations

from dataclasses import dataclass

PASS, WARN, FAIL = "pass", "warn", "fail"
CHECK_NAMES = {"a": "context independence", "b": "enough exploration", "c": "support",
               "d": "factorized logging", "e": "propensity calibration", "f": "reward interaction"}
ALL_CHECKS = ("a", "b", "c", "d", "e", "f")
VERDICT_COLUMNS = ["check", "scope", "statistic", "threshold", "verdict", "message"]
_ORDER = {PASS: 0, WARN: 1, FAIL: 2}


@dataclass(frozen=True)
class AssumptionConfig:
    cramers_v_max: float = 0.1          # a: fail above (effect size; p-values are ~0 at scale) ...
    independence_alpha: float = 0.001   # a: ... and when the chi-square p < independence_alpha / (tables tested):
                                        #    an independent logger fails with probability <= 0.1%, as in check e
    min_per_level: int = 10             # a: a table with fewer impressions per feature value or per ad on average
                                        #    is too sparse for the chi-square (V_bc is 0 by construction when each
                                        #    value is seen once): cannot judge, warn
    min_table_n: int = 500              # a, d: fewer impressions -> warn "not enough data to judge"
    include_context_id: bool = True     # a: context_id as one more feature
    max_feature_levels: int = 500       # a: features with more levels are reported, not tested
    min_t: int = 30                     # b: T_a minimum
    min_m: int = 30                     # b: M(a, i) minimum
    rare_mass_max: float = 0.05         # b: target mass on rarely observed (position, ad)
    support_max: float = 0.001          # c: unsupported target mass
    factor_v_max: float = 0.1           # d: pooled within-stratum V
    collision_tol: float = 0.5          # d: fail when |O/E - 1| > tol ...
    min_expected: float = 5.0           # d, e: ... and the expectation E is at least this
    calib_tol: float = 0.1              # e: fail when |O/E - 1| > tol ...
    calib_z: float = 4.0                # e: ... and |z| > calib_z ...
    calib_alpha: float = 0.001          # e: ... and p < calib_alpha / (cells tested): Bonferroni, so a calibrated
                                        #    logger fails with probability <= calib_alpha however many cells
    calibration_scope: str = "auto"     # e: where logging is input-independent, see parse_calibration_scope
    calib_max_varying: float = 0.5      # e: a policy whose propensity varies within more than this share of its
                                        #    (day, position, ad) cells seen twice or more is not input-independent
    interaction_alpha: float = 0.001    # f: fail when a stratified test's p < interaction_alpha / (tests made,
                                        #    two per slot pair): Bonferroni, additive logs fail w.p. <= 0.1% ...
    interaction_tol: float = 0.02       # f: ... and the reward at k differs across slot j's ads by more than this
                                        #    share of its mean (bias-corrected root mean square)
    interaction_groups: int = 10        # f: more ads than this at slot j: ranked into this many click-rate groups


def row(check, scope, statistic, threshold, verdict, message) -> dict:
    return {"check": check, "scope": scope,
            "statistic": None if statistic is None else float(statistic),
            "threshold": None if threshold is None else float(threshold),
            "verdict": verdict, "message": message}


def worst(verdicts) -> str:
    vs = list(verdicts)
    return max(vs, key=lambda v: _ORDER[v]) if vs else PASS
