"""What a scan makes: the tables declared ``always`` (statistics/declarations.py) and the optional ones that the
estimators and checks in use read.

    plan = plan_for(tables, checks, adcs_given)   # tables: what the estimators read (registry.Estimator.tables)
    plan.tables(decisions, config)                # the tables a pass makes (and a stored day must hold to be reused)
    ScanPlan()                                    # by hand: every table
"""
from __future__ import annotations

from dataclasses import InitVar, dataclass

import pandas as pd

from .declarations import TABLES, maker

# the switches of a plan built by hand (ScanPlan(slate_targets=False, ...)): each leaves out the tables it names
SWITCHES = {"slate_targets": ("slate_targets", "slate_covered"), "context_cells": ("context_cells",),
            "pair_strata": ("pair_strata",), "reorder_pairs": ("reorder_pairs",),
            "interaction_cells": ("interaction_cells",)}


def optional_tables() -> frozenset:
    """The declared tables a plan may leave out (by the name of the table whose statement makes them): those not
    made ``always``."""
    return frozenset(n for n, t in TABLES.items() if t.made_by is None and not t.always)


@dataclass(frozen=True)
class ScanPlan:
    """The optional tables a scan makes (``optional``; None: every one) and when it makes the ADC-based ones
    (``adc_tables``): "always"; "identifiable": only when the batch's ads can identify the ADCs
    (:func:`adcs_identifiable`: ADCs estimated from these logs, the window asks again after merging); "never": no
    ADC-based table asked for. The switches leave tables out of a plan built by hand (:data:`SWITCHES`)."""

    slate_targets: InitVar[bool] = True
    context_cells: InitVar[bool] = True
    pair_strata: InitVar[bool] = True
    reorder_pairs: InitVar[bool] = True
    interaction_cells: InitVar[bool] = True
    adc_tables: str = "always"
    optional: frozenset | None = None

    def __post_init__(self, *switches):
        off = {n for on, name in zip(switches, SWITCHES) if not on for n in SWITCHES[name]}
        if off:
            kept = optional_tables() if self.optional is None else self.optional
            object.__setattr__(self, "optional", frozenset(kept) - off)

    def makes(self, name: str, decisions: bool, config=None, identified: bool = False) -> bool:
        """Whether a pass makes table ``name`` (``decisions``: the pass joins decisions; ``config``: its StatsConfig,
        whose settings a table's ``when`` reads, or a bool that answers every ``when``: the former argument, whether
        the calibration scope key is fixed; ``identified``: the batch's ads identify the ADCs)."""
        t, m = TABLES[name], maker(name)
        if t.side == "decision" and not decisions:
            return False
        if m.when is not None and not (config if isinstance(config, bool) else config is not None and m.when(config)):
            return False
        if m.always:
            return True
        if m.adc == "identified" and not (self.adc_tables == "always" or identified and
                                          self.adc_tables == "identifiable"):
            return False
        return self.optional is None or m.name in self.optional

    def tables(self, decisions: bool, config=None, identified: bool = False) -> set:
        """The tables a pass makes (see :meth:`makes`)."""
        return {n for n in TABLES if self.makes(n, decisions, config, identified)}

    def adc_names(self) -> set:
        """The ADC-based tables this plan makes where the ADCs are identified."""
        return {n for n in TABLES if maker(n).adc == "identified" and
                (self.optional is None or maker(n).name in self.optional)}


def plan_for(tables, checks=(), adcs_given: bool = True) -> ScanPlan:
    """The plan of a run whose estimators read ``tables`` (table names) and that runs ``checks`` (letters of
    checks.assumptions.CHECK_TABLES). ``adcs_given``: False when the ADCs are estimated from the same logs: the
    tables declared adc="given" are then read by nothing, and the ADC-based ones are made only where the logs can
    identify the ADCs (adc_tables="identifiable")."""
    from ..checks.assumptions import CHECK_TABLES

    asked = set(tables) | {n for c in checks for n in CHECK_TABLES.get(c, ())}
    unknown = asked - set(TABLES)
    asked |= {d for n in asked - unknown for d in TABLES[n].needs}
    if unknown:
        raise ValueError(f"no statistics table is declared as {', '.join(sorted(unknown))}")
    optional = {maker(n).name for n in asked} & optional_tables()
    optional = {n for n in optional if adcs_given or TABLES[n].adc != "given"}
    adc = any(TABLES[n].adc == "identified" for n in optional)
    return ScanPlan(adc_tables="never" if not adc else "always" if adcs_given else "identifiable",
                    optional=frozenset(optional))


def adcs_identifiable(ad_position: pd.DataFrame, K: int) -> bool:
    """Whether these ad_position rows can identify any ADC the factored and re-ordering estimates need: one
    position only (C = (1)), or some ad shown at two positions or more. Otherwise every C_i, i > 1, compares
    different ads (estimators/adc_family.adc_identification) and the ADC-based estimates are not identified, so their
    tables are not computed (ScanPlan.adc_tables = "identifiable")."""
    if K < 2:
        return True
    if not len(ad_position):
        return False
    shown = ad_position[pd.to_numeric(ad_position["m"], errors="coerce").fillna(0) > 0]
    return bool((shown.groupby("ad_id", observed=True)["position"].nunique() > 1).any())
