"""Assumption checks a-f (docs/checks.md): pure numpy/scipy functions of the window's merged
statistics (the small tables checks/judge.py builds from them) that return (check, scope, statistic, threshold,
verdict, message) rows.

a  context independence  (seed 001 section 3, Theorem 1 / Theorem 3 condition (2)): per logging policy and
   position, contingency table of each context feature value x logged ad; chi-square + bias-corrected Cramer's V.
   Dependence on the day (history) is allowed by Theorem 3: shown, never failed.                 (:mod:`.check_a`)
b  enough exploration: T_a (impressions of ad a at any position) and M(a, i) per (ad, position) against
   minimums; the share of each target policy's mass on (position, ad) pairs observed fewer than min_m times.
                                                                                                 (:mod:`.check_b`)
c  support: target mass on (position, ad) pairs the event's logging policy never showed (or only with a
   non-positive propensity).                                                                     (:mod:`.check_c`)
d  factorized logging (seed 002 section 2: mu(A|X) = prod_k mu_k(A_k|X)): within context strata, slot j's ad vs
   slot k's ad -- a pooled bias-corrected Cramer's V, and a collision test: the number of events showing the
   same ad in both slots against its expectation under the product of the slot marginals (a ranked layout
   samples without replacement, so it never repeats an ad although the marginals overlap).     (:mod:`.check_d`)
e  propensity calibration: where the logged propensity of (policy, day, position, ad) is constant (logging
   independent of the input), the observed count M must match n_events * propensity (a cell is off past 10%,
   4 sigma and an exact binomial p-value under 0.001 / cells tested, Bonferroni) -- within the scope where
   logging is input-independent: per logging policy and, by default (``calibration_scope="auto"``), per value
   of context_id when context_id partitions the ads (the Open Bandit Dataset's campaigns: each has its own items
   and propensities, so pooled they would sum to 3); ``context:<key>`` scopes by a context-map value. Per
   (policy, position) the (day, ad) cells are tested; per policy each ad is also tested over all its days and
   positions (``e.calibration_window``). A policy whose propensity varies within most cells (history- or
   context-dependent logging, e.g. OBD's Thompson sampling) is reported as not testable (warn).
                                                                          (:mod:`.calibration`, :mod:`.check_e`)
f  reward interaction (additive slots, which the PI family, independent IPS, factored and re-ordering assume): per
   logging policy and positions j < k <= 4, the reward at k against the ad at j within (day, fold, context_id, ad
   at k) strata -- by ad (a stratified mean-score chi-square; many ads ranked into click-rate groups by the other
   fold) and by the ad's click rate at j in its context (a stratified trend test); fails when a p-value is below
   0.001 / tests made (Bonferroni) and the difference passes 2% of the mean reward (a cascade: a click above
   takes the click below).                                                                       (:mod:`.check_f`)

The thresholds and the verdict rows are :mod:`.verdict`; the contingency-table statistics :mod:`.contingency`
(one group) and :mod:`.vector` (every group at once). This module gathers them under one name.
"""
from __future__ import annotations

from .calibration import (binomial_two_sided_p, bonferroni_z, calibration_cells, calibration_slot, mixed_scope,
                          no_partition_reasons, normal_two_sided_p, parse_calibration_scope, partition_strata, rounding_slack,
                          window_calibration)
from .check_a import check_a
from .check_b import check_b
from .check_c import check_c
from .check_d import check_d
from .check_e import check_e
from .check_f import check_f
from .contingency import chi2_cramers_v, stratified_dependence
from .verdict import (ALL_CHECKS, CHECK_NAMES, FAIL, PASS, VERDICT_COLUMNS, WARN, AssumptionConfig, row,
                      worst)

# the statistics tables each check reads (checks/judge.py builds its inputs from them): the scan plan makes them
# for the checks of a run (statistics/plan.plan_for); calibration_cells only exists under a fixed scope key
CHECK_TABLES = {"a": ("context_cells", "ad_position"),
                "b": ("ad_position", "target_placements"),
                "c": ("ad_position", "target_placements"),
                "d": ("pair_strata",),
                "e": ("ad_position", "calibration_cells"),
                "f": ("interaction_cells",)}

__all__ = ["ALL_CHECKS", "CHECK_NAMES", "FAIL", "PASS", "VERDICT_COLUMNS", "WARN", "AssumptionConfig", "row",
           "CHECK_TABLES", "worst", "chi2_cramers_v", "stratified_dependence", "parse_calibration_scope", "partition_strata",
           "calibration_slot", "calibration_cells", "mixed_scope", "no_partition_reasons", "rounding_slack", "binomial_two_sided_p",
           "window_calibration",
           "normal_two_sided_p", "bonferroni_z", "check_a", "check_b", "check_c", "check_d", "check_e", "check_f"]
