"""The merge's numpy group-by (statistics/fast_merge.py) gives the frame pandas' group-by gives: on random days of
the declared tables (sums with nulls, numeric and text maxima and minima, int32 keys, keys repeated within and across
days), the same rows, order, columns and dtypes; keys with nulls (or types numpy cannot order) go to pandas' path.
And pair support (estimators/rows._pairs_shown, numpy) equals the left join pandas made of it."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import scavenger.statistics.declarations  # noqa: F401 - fills the declared tables
from scavenger.statistics import fast_merge as F
from scavenger.statistics import tables as T


def _ad_position(rng, n: int) -> pd.DataFrame:
    text = np.array(["c10", "c9", "Z", "a", None], dtype=object)
    return pd.DataFrame({
        "dt": pd.Timestamp("2026-03-01").date(),
        "logging_policy": rng.choice(np.array(["lp_b", "lp_a", "lp_c"], dtype=object), n),
        "fold": rng.integers(0, 2, n).astype("int32"),
        "ad_id": rng.choice(np.array(["a1", "a2", "b", "c10", "c9"], dtype=object), n),
        "position": rng.integers(1, 4, n).astype("int32"),
        "m": rng.integers(0, 5, n), "m_r": rng.integers(0, 3, n),
        "c": np.where(rng.random(n) < 0.2, np.nan, rng.random(n)), "c2": rng.random(n), "ev": rng.random(n),
        "n_p": rng.integers(0, 4, n), "sum_p": rng.random(n),
        "min_p": np.where(rng.random(n) < 0.3, np.nan, rng.random(n)),
        "max_p": np.where(rng.random(n) < 0.3, np.nan, rng.random(n)),
        "stratum_min": rng.choice(text, n), "stratum_max": rng.choice(text, n)})


def _log_summary(rng, n: int) -> pd.DataFrame:
    return pd.DataFrame({
        "dt": pd.Timestamp("2026-03-01").date(),
        "logging_policy": rng.choice(np.array(["lp_a", "lp_b"], dtype=object), n),
        "n_events": rng.integers(0, 100, n), "n_slots": rng.integers(0, 300, n), "s_r": rng.random(n),
        "s_r2": np.where(rng.random(n) < 0.3, np.nan, rng.random(n)), "n_missing_propensity": rng.integers(0, 3, n),
        "n_null_reward": rng.integers(0, 3, n), "n_partial": rng.integers(0, 3, n),
        "k_max": rng.integers(1, 6, n).astype("int32"), "r_max": rng.random(n),
        "r_min": np.where(rng.random(n) < 0.3, np.nan, -rng.random(n))})


def _target_placements(rng, n: int) -> pd.DataFrame:
    return pd.DataFrame({
        "dt": pd.Timestamp("2026-03-01").date(),
        "policy_id": rng.choice(np.array(["p", "q", "r"], dtype=object), n),
        "logging_policy": rng.choice(np.array(["lp_a", "lp_b"], dtype=object), n),
        "ad_id": rng.choice(np.array(["x", "y", "z"], dtype=object), n),
        "pos_j": rng.integers(1, 4, n).astype("int32"), "s_p": np.where(rng.random(n) < 0.1, np.nan, rng.random(n))})


MAKERS = {"ad_position": _ad_position, "log_summary": _log_summary, "target_placements": _target_placements}


def _pandas_merge(name: str, frames: list, monkeypatch) -> pd.DataFrame:
    """The merge with the numpy paths switched off: pandas' group-by (and its one-frame test)."""
    with monkeypatch.context() as m:
        m.setattr(T, "grouped", lambda *a, **k: None)
        m.setattr(T, "_one_row_per_key", lambda *a, **k: None)
        return T.merge(name, frames)


@pytest.mark.parametrize("name", sorted(MAKERS))
def test_the_numpy_group_by_equals_pandas(name, monkeypatch):
    rng = np.random.default_rng(7)
    for trial in range(40):
        frames = [MAKERS[name](rng, int(rng.integers(1, 30))) for _ in range(int(rng.integers(1, 4)))]
        fast = T.merge(name, frames)
        slow = _pandas_merge(name, frames, monkeypatch)
        # pandas adds a group's floats with a compensated sum, numpy in order: equal to rounding
        pd.testing.assert_frame_equal(fast, slow, check_exact=False, rtol=1e-13, atol=1e-15)


@pytest.mark.parametrize("name", sorted(MAKERS))
def test_one_day_one_row_per_key_is_sorted_by_its_keys(name, monkeypatch):
    rng = np.random.default_rng(8)
    for _ in range(20):
        day = MAKERS[name](rng, 40)
        day = day.drop_duplicates(list(T.TABLES[name].keys)).sample(frac=1.0, random_state=1)   # the engine's order
        pd.testing.assert_frame_equal(T.merge(name, [day]), _pandas_merge(name, [day], monkeypatch))


def test_keys_with_nulls_are_left_to_pandas():
    df = pd.DataFrame({"k": np.array(["a", None, "a"], dtype=object), "v": [1.0, 2.0, 3.0]})
    assert F.key_codes(df, ["k"]) is None and F.grouped(df, ["k"], {"v": "sum"}) is None
    mixed = pd.DataFrame({"k": np.array(["a", 1, "a"], dtype=object), "v": [1.0, 2.0, 3.0]})
    assert F.grouped(mixed, ["k"], {"v": "sum"}) is None
    got = F.grouped(pd.DataFrame({"k": [2, 1, 2], "v": [1, 2, 3], "t": np.array(["b", None, "a"], dtype=object)}),
                    ["k"], {"v": "sum", "t": "max"})
    assert got["k"].tolist() == [1, 2] and got["v"].tolist() == [2, 4] and got["t"].tolist() == [None, "b"]


def test_pair_support_equals_the_left_join():
    from scavenger.checks.check_c import unsupported
    from scavenger.estimators.rows import _pairs_shown

    rng = np.random.default_rng(9)
    lp, ads = np.array(["a", "b", None], dtype=object), np.array(["x", "y", "z", "w", None], dtype=object)
    for it in range(300):
        na, nt = int(rng.integers(0, 40)), int(rng.integers(1, 40))
        ap = pd.DataFrame({"logging_policy": rng.choice(lp[:2 + it % 2], na), "fold": rng.integers(0, 2, na),
                           "ad_id": rng.choice(ads[:4 + (it % 3 == 0)], na),
                           "position": rng.integers(1, 4, na).astype("int32"), "m": rng.integers(0, 3, na),
                           "max_p": np.where(rng.random(na) < 0.2, np.nan, rng.choice([0.0, 0.3, 0.5], na))})
        tp = pd.DataFrame({"logging_policy": rng.choice(lp[:2 + it % 2], nt),
                           "ad_id": rng.choice(ads[:4 + (it % 3 == 0)], nt),
                           "pos_j": rng.integers(1, 4, nt).astype("int32")})
        g = ap.groupby(["logging_policy", "position", "ad_id"], sort=False)
        shown = pd.concat([g["m"].sum().rename("n"), g["max_p"].max()], axis=1).reset_index()
        joined = tp.rename(columns={"pos_j": "position"}).merge(shown, on=["logging_policy", "position", "ad_id"],
                                                                how="left")
        seen, n, max_p = _pairs_shown(ap, tp)
        assert np.array_equal(seen, joined["n"].notna().to_numpy())
        assert np.array_equal(np.where(seen, n, np.nan), joined["n"].to_numpy(float), equal_nan=True)
        assert np.array_equal(max_p, joined["max_p"].to_numpy(float), equal_nan=True)
        mine = unsupported(pd.DataFrame({"n": np.where(seen, n, np.nan), "max_p": max_p}))
        assert mine.tolist() == unsupported(joined).tolist()
