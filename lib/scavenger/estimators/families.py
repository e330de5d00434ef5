"""Estimates from a window's statistics: one module per estimator family, each calling the pure estimators of
``estimators/`` on the merged tables, and saying "not identified: why" where the data cannot support a number.

    slate.py        IPS, SNIPS, PI, wPI, PI++, pi_beta (seed 002)
    scavenging.py   the direct approach and the base-policy action (seed 001 section 3)
    adc.py          ADCs with their identification, factored and re-ordering (seed 001 section 4)
    common.py       the run's Context, the estimates row, the bounds of weights and rewards

Every function returns rows of the estimates table (``registry.ESTIMATE_COLUMNS``); the pipeline adds the window,
the check verdicts and the recommended flag. No Spark or DuckDB here except :func:`scavenging_sums`, the one
reduction of the big slate tables, which runs on the engine that holds them.
"""
from .adc_family import adc_based_rows, adc_identification, adc_rows, read_adc_table, resolve_adc
from .rows import Context, not_identified, reward_range, row, slot_weight_bounds, weight_and_reward_bounds
from .scavenging_family import scavenging_base_rows, scavenging_slate_rows, scavenging_sums
from .slate_family import slate_moments, slate_rows

__all__ = ["Context", "row", "not_identified", "reward_range", "weight_and_reward_bounds", "slot_weight_bounds",
           "slate_moments", "slate_rows", "scavenging_sums", "scavenging_slate_rows", "scavenging_base_rows",
           "adc_identification", "adc_rows", "resolve_adc", "read_adc_table", "adc_based_rows"]
