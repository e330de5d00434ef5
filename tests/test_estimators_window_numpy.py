"""Per-window reductions written in numpy (one window of --by-day or running/ runs each once) equal the pandas
group-bys they replaced, on random tables with nulls: ADC identification, the layout's count of slates, the
smallest propensity per position and the policy-event sums."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

from scavenger.estimators import adc_source, rows, scavenging


def _adc_identification_by_pandas(ap: pd.DataFrame) -> set:
    """The positions the group-by of (ad, position) names as not identified."""
    from scavenger.estimators.attention_decay import rewarded

    m = rewarded(ap).groupby(["ad_id", "position"])["m"].sum().unstack(fill_value=0)
    if 1 not in m.columns:
        return set(int(p) for p in m.columns)
    shown = m.to_numpy() > 0
    at_1 = shown[:, list(m.columns).index(1)]
    cols = {c: i for i, c in enumerate(m.columns)}
    return {p for p in range(2, int(max(m.columns)) + 1) if p not in cols or not (at_1 & shown[:, cols[p]]).any()}


def test_adc_identification_names_the_positions_pandas_does():
    rng = np.random.default_rng(1)
    ads = np.array(["a", "b", "c", "d", None], dtype=object)
    for it in range(600):
        n = int(rng.integers(0, 25))
        ap = pd.DataFrame({"ad_id": rng.choice(ads[:3 + it % 3], n), "position": rng.integers(1, 5, n).astype("int32"),
                           "m": rng.integers(0, 3, n),
                           "m_r": np.where(rng.random(n) < 0.2, np.nan, rng.integers(0, 3, n))})
        if it % 5 == 0:
            ap = ap.drop(columns=["m_r"])
        got = adc_source.adc_identification(ap)
        want = _adc_identification_by_pandas(ap) if n else set()
        assert set(got) == want, (it, got, want)
        moved = bool((ap[ap["m"] > 0].groupby("ad_id")["position"].nunique() > 1).any())
        assert adc_source._moved(ap) == moved


def _layout_slates_by_enumeration(ap: pd.DataFrame, K: int) -> float:
    """ln of the count of slates of distinct ads, each position showing an ad logged there (every slate listed)."""
    from itertools import product

    held = ap[ap["position"].between(1, K)]
    if not len(held):
        return -math.inf
    per = [sorted(set(held.loc[held["position"] == p, "ad_id"].dropna())) for p in sorted(held["position"].unique())]
    count = sum(1 for s in product(*per) if len(set(s)) == len(s))
    return math.log(max(count, 1))


def test_the_layouts_slate_count_equals_listing_every_slate():
    rng = np.random.default_rng(2)
    ads = np.array([f"a{i}" for i in range(6)] + [None], dtype=object)
    for it in range(300):
        n, K = int(rng.integers(0, 14)), int(rng.integers(1, 5))
        ap = pd.DataFrame({"ad_id": rng.choice(ads[:3 + it % 5], n), "position": rng.integers(0, 5, n).astype("int32")})
        got = scavenging.log_n_layout_slates(ap, K)
        want = _layout_slates_by_enumeration(ap, K)
        assert got == want or abs(got - want) < 1e-12, (it, got, want)


class _Stats:
    def __init__(self, tables: dict, K: int = 4):
        self.tables, self.K = tables, K

    def table(self, name):
        return self.tables[name]


def test_the_smallest_propensity_per_position_and_the_policy_sums_equal_pandas():
    rng = np.random.default_rng(3)
    for it in range(400):
        n = int(rng.integers(0, 20))
        ap = pd.DataFrame({"position": rng.integers(1, 5, n).astype("int32"),
                           "min_p": np.where(rng.random(n) < 0.3, np.nan, rng.random(n))})
        pe = pd.DataFrame({"policy_id": rng.choice(np.array(["p", "q", None], dtype=object), n),
                           "n_events": rng.integers(0, 9, n),
                           "n_short": np.where(rng.random(n) < 0.2, np.nan, rng.integers(0, 3, n))})
        stats = _Stats({"ad_position": ap, "policy_events": pe})
        low = ap.groupby("position")["min_p"].min()
        mine = rows._min_p_by_position(stats)
        for k in range(1, 5):
            assert np.array_equal([low.get(k, np.nan)], [mine.get(k, np.nan)], equal_nan=True)
        sums = pe.groupby("policy_id")[["n_events", "n_short"]].sum()
        for p in ("p", "q", "r"):
            for c in ("n_events", "n_short", "n_other"):
                want = int(sums.at[p, c]) if p in sums.index and c in sums.columns else 0
                assert rows._policy_events(stats, p, c) == want
