"""scavenger's contract read as obp's inputs, for benchmarks/obp_ranking_check.py (its docstring says what is kept
and how): the dt-partitioned logs exploded per slot, the decisions, the slates as obp's arrays (``Data``), a target's
action distribution and a q_hat file. Runs in obp's own virtualenv: numpy, pandas and pyarrow only."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds


def read_partitioned(path: str) -> pa.Table:
    """A dt-partitioned Parquet directory (dt=YYYY-MM-DD/...) or a single Parquet file, dt as a string."""
    part = ds.partitioning(pa.schema([("dt", pa.string())]), flavor="hive")
    return ds.dataset(path, format="parquet", partitioning=part).to_table()


def explode_slots(table: pa.Table, fields: list[str], keys: list[str]) -> pd.DataFrame:
    """One row per slot: the key columns of its event, the row index of the event (``row``), the slot fields."""
    slots = table.column("slots").combine_chunks()
    parent = pc.list_parent_indices(slots).to_numpy()
    flat = pc.list_flatten(slots)
    out = pd.DataFrame({"row": parent})
    for k in keys:
        out[k] = table.column(k).to_numpy(zero_copy_only=False)[parent]
    for f in fields:
        out[f] = flat.field(f).to_numpy(zero_copy_only=False)
    return out


def load_logs(path: str, K: int | None, logging_policy: str | None):
    t = read_partitioned(path)
    counts = {"log_rows": t.num_rows}
    if logging_policy is not None:
        t = t.filter(pc.equal(t.column("logging_policy"), logging_policy))
        counts["log_rows_of_logging_policy"] = t.num_rows
    ev = pd.DataFrame({"event_id": t.column("event_id").to_numpy(zero_copy_only=False),
                       "dt": t.column("dt").to_numpy(zero_copy_only=False),
                       "slate_reward": t.column("slate_reward").to_numpy(zero_copy_only=False)})
    ev["row"] = np.arange(len(ev))
    ev = ev.sort_values(["dt", "row"], kind="stable")
    dup = ev.duplicated("event_id", keep="first")
    counts["dropped_duplicate_event_id"] = int(dup.sum())
    ev = ev[~dup]
    sl = explode_slots(t, ["position", "ad_id", "propensity", "reward"], [])
    sl = sl[sl["row"].isin(ev["row"])]
    if K is None:
        K = int(sl["position"].max())
    # per event: the reason it cannot be used (first that applies)
    g = sl.groupby("row")
    bad_pos = g["position"].agg(lambda s: sorted(s.dropna().astype(int).tolist()) != list(range(1, K + 1)))
    bad_prop = g["propensity"].agg(lambda s: bool(s.isna().any() or (s <= 0).any() or (s > 1).any()))
    bad_rew = g["reward"].agg(lambda s: bool(s.isna().any()))
    ev = ev.set_index("row")
    ev["bad_pos"] = bad_pos
    ev["bad_prop"] = bad_prop
    ev["bad_rew"] = bad_rew
    ev["bad_pos"] = ev["bad_pos"].fillna(True).astype(bool)       # an empty slate
    ev["bad_prop"] = ev["bad_prop"].fillna(True).astype(bool)
    ev["bad_rew"] = ev["bad_rew"].fillna(True).astype(bool)
    counts["dropped_not_positions_1_to_K"] = int(ev["bad_pos"].sum())
    counts["dropped_missing_or_invalid_propensity"] = int((~ev["bad_pos"] & ev["bad_prop"]).sum())
    counts["dropped_null_slot_reward"] = int((~ev["bad_pos"] & ~ev["bad_prop"] & ev["bad_rew"]).sum())
    keep = ev[~(ev["bad_pos"] | ev["bad_prop"] | ev["bad_rew"])]
    counts["events_kept"] = len(keep)
    sl = sl[sl["row"].isin(keep.index)].merge(keep[["event_id", "slate_reward"]], left_on="row", right_index=True)
    sl = sl.drop(columns="row").sort_values(["event_id", "position"]).reset_index(drop=True)
    return sl, K, counts


def load_decisions(path: str, policies: list[str] | None) -> pd.DataFrame:
    t = read_partitioned(path)
    if policies:
        t = t.filter(pc.is_in(t.column("policy_id"), pa.array(policies)))
    d = explode_slots(t, ["position", "ad_id", "probability"], ["policy_id", "event_id"])
    # (policy, event) pairs with more than one decision row: keep the first
    first = (pd.DataFrame({"policy_id": t.column("policy_id").to_numpy(zero_copy_only=False),
                           "event_id": t.column("event_id").to_numpy(zero_copy_only=False)})
             .reset_index().drop_duplicates(["policy_id", "event_id"])["index"])
    return d[d["row"].isin(first)].drop(columns="row")


class Data:
    """obp's per-row arrays for the kept events (rows sorted by slate, then position)."""

    def __init__(self, sl: pd.DataFrame, K: int, ad_index: dict[str, int]):
        self.K = K
        self.events = sl["event_id"].to_numpy()[::K]
        self.n = len(self.events)
        self.A = len(ad_index)
        self.position = np.tile(np.arange(K), self.n).astype(int)
        self.slate_id = np.repeat(np.arange(self.n), K).astype(int)
        self.action = sl["ad_id"].map(ad_index).to_numpy().astype(int)
        self.reward = sl["reward"].to_numpy(float)
        mu = sl["propensity"].to_numpy(float).reshape(self.n, K)
        self.pscore_item_position = mu.ravel()
        self.pscore_cascade = np.cumprod(mu, axis=1).ravel()
        self.pscore = np.repeat(mu.prod(axis=1), K)
        sr = sl["slate_reward"].to_numpy(float).reshape(self.n, K)[:, 0]
        rsum = self.reward.reshape(self.n, K).sum(axis=1)
        self.slate_reward = np.where(np.isnan(sr), rsum, sr)
        self.slate_reward_differs = bool(np.any(np.abs(self.slate_reward - rsum) > 1e-12))

    def subset(self, keep: np.ndarray) -> "Data":
        """The events keep (a boolean mask over events), renumbered 0..m-1."""
        new = object.__new__(Data)
        new.K, new.A = self.K, self.A
        rows = np.repeat(keep, self.K)
        new.events = self.events[keep]
        new.n = int(keep.sum())
        new.position = np.tile(np.arange(self.K), new.n).astype(int)
        new.slate_id = np.repeat(np.arange(new.n), self.K).astype(int)
        for f in ("action", "reward", "pscore_item_position", "pscore_cascade", "pscore"):
            setattr(new, f, getattr(self, f)[rows])
        new.slate_reward = self.slate_reward[keep]
        new.slate_reward_differs = self.slate_reward_differs
        return new


def action_dist_for(data: Data, dec: pd.DataFrame, ad_index: dict[str, int]):
    """(mask over data's events that have a usable decision, dist (m, K, A), counts)."""
    K, A = data.K, data.A
    ev_pos = {e: i for i, e in enumerate(data.events)}
    d = dec[dec["event_id"].isin(ev_pos)]
    counts = {"events_without_decision": int(data.n - d["event_id"].nunique())}
    out_of_range = (d["position"] < 1) | (d["position"] > K)
    counts["decision_entries_outside_positions_1_to_K"] = int(out_of_range.sum())
    d = d[~out_of_range]
    dist = np.zeros((data.n, K, A))
    i = d["event_id"].map(ev_pos).to_numpy()
    np.add.at(dist, (i, d["position"].to_numpy(int) - 1, d["ad_id"].map(ad_index).to_numpy()),
              d["probability"].to_numpy(float))
    has = np.zeros(data.n, bool)
    has[np.unique(i)] = True
    sums_ok = np.all(np.abs(dist.sum(axis=2) - 1.0) <= 1e-9, axis=1)
    counts["events_decision_not_summing_to_1_per_position"] = int((has & ~sums_ok).sum())
    keep = has & sums_ok
    counts["events_evaluated"] = int(keep.sum())
    return keep, dist[keep], counts


def q_hat_from_file(path: str, data: Data, ad_index: dict[str, int]):
    f = pd.read_csv(path) if path.endswith(".csv") else pd.read_parquet(path)
    ev_pos = {e: i for i, e in enumerate(data.events)}
    f = f[f["event_id"].isin(ev_pos) & f["position"].between(1, data.K) & f["ad_id"].isin(ad_index)]
    q = np.zeros((data.n, data.K, data.A))
    q[f["event_id"].map(ev_pos).to_numpy(), f["position"].to_numpy(int) - 1,
      f["ad_id"].map(ad_index).to_numpy()] = f["q_hat"].to_numpy(float)
    have = np.zeros_like(q, bool)
    have[f["event_id"].map(ev_pos).to_numpy(), f["position"].to_numpy(int) - 1,
         f["ad_id"].map(ad_index).to_numpy()] = True
    logged = have.reshape(-1, data.A)[np.arange(data.n * data.K), data.action]
    return q, {"q_hat_file_entries_used": int(len(f)), "logged_slots_without_q_hat": int((~logged).sum())}
