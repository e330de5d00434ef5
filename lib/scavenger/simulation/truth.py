"""The generator's ground truth: exact values of every policy from the world's arrays, weighted by the generated
events' contexts (per-(dt, context) counts read back from the written logs), as ``ground_truth.json`` and the small
tables of ``out/truth/`` (click rates, ADCs, per-context values). No engine here: pandas and numpy only."""
from __future__ import annotations

import numpy as np
import pandas as pd

from ..io import fs
from . import model
from .world import World, target_values


def realized(values: np.ndarray, counts: np.ndarray) -> float:
    """Realized-context value: sum_c n_c v_c / sum_c n_c (exact expectation given the generated contexts)."""
    total = counts.sum()
    return float(counts @ values / total) if total else float("nan")


def per_day_counts(world: World, counts: pd.DataFrame, dates: list) -> dict:
    """{dt: events per context index} from the per-(dt, context_id) counts."""
    ctx_index = {name: i for i, name in enumerate(world.ctx_names)}
    out = {}
    for d in dates:
        key = d.isoformat()
        sub = counts[counts["dt"] == key]
        vec = np.zeros(world.cfg.n_contexts)
        vec[[ctx_index[c] for c in sub["context_id"]]] = sub["events"].to_numpy(dtype=float)
        out[key] = vec
    return out


def policy_truth(world: World, day_counts: dict, per_context: dict) -> dict:
    """Every target policy's value, realized value and per-day realized value (per_context gets their vectors)."""
    all_counts = sum(day_counts.values())
    policies = {}
    for pid, v in target_values(world).items():
        per_context[(pid, None)] = v
        policies[pid] = {"value": float(world.weights @ v), "realized_value": realized(v, all_counts),
                         "per_day": {d: realized(v, c) for d, c in day_counts.items()}}
    return policies


def logging_truth(world: World, day_counts: dict, logging_per_day: dict, per_context: dict) -> dict:
    """The logging policy's values (per day: history mode changes it daily) and its base policies'."""
    cfg, weights = world.cfg, world.base_weights
    base_names = [b.name for b in world.bases]
    all_counts = sum(day_counts.values())
    info = {"name": base_names[0] if len(base_names) == 1 else "multi", "base_policies": {}, "per_day": {}}
    total = 0.0
    for d, base_vals in logging_per_day.items():
        mix = model.mixture_value(base_vals, weights)
        if cfg.logging == "history":
            per_context[(base_names[0], d)] = mix
        total += float(day_counts[d] @ mix)
        info["per_day"][d] = {"value": float(world.weights @ mix), "realized_value": realized(mix, day_counts[d])}
    info["value"] = float(np.mean([v["value"] for v in info["per_day"].values()]))
    info["realized_value"] = total / all_counts.sum()
    if cfg.logging != "history":
        for name, w, b, vals in zip(base_names, weights, world.bases, world.base_values):
            per_context[(name, None)] = vals
            info["base_policies"][name] = {
                "weight": float(w), "epsilon": float(b.epsilon), "value": float(world.weights @ vals),
                "realized_value": realized(vals, all_counts)}
    else:
        info["base_policies"][base_names[0]] = {"weight": 1.0, "epsilon": float(cfg.epsilon)}
    return info


def ground_truth(world: World, counts: pd.DataFrame, dates: list, logging_per_day: dict, paths: dict
                 ) -> tuple[dict, dict]:
    """(ground_truth.json content, per-context values for truth/context_values)."""
    cfg = world.cfg
    counts = counts.assign(dt=counts["dt"].astype(str))
    day_counts = per_day_counts(world, counts, dates)
    per_context: dict = {}
    policies = policy_truth(world, day_counts, per_context)
    logging_info = logging_truth(world, day_counts, logging_per_day, per_context)
    by_day = counts.groupby("dt")[["events", "slots", "clicks"]].sum()
    total = by_day.sum()
    truth = {
        "generator": "scavenger.simulation.generator",
        "config": cfg.to_dict(),
        "layout": cfg.layout,
        "logging": cfg.logging,
        "n_positions": cfg.n_positions,
        "adc": [float(c) for c in world.adc],
        "ads": {"n_total": world.pools.n_total, "pool_sizes": [int(s) for s in world.pools.sizes]},
        "contexts": {"n": cfg.n_contexts, "mean_click_rate": float(world.weights @ world.P.mean(axis=1))},
        "policies": policies,
        "logging_policy": logging_info,
        "mean_reward": {
            "overall": float(total["clicks"] / total["events"]),
            "per_day": {d: float(r["clicks"] / r["events"]) for d, r in by_day.iterrows()},
        },
        "counts": {
            "events": int(total["events"]), "slots": int(total["slots"]), "clicks": int(total["clicks"]),
            "per_day": {d: {"events": int(r["events"]), "slots": int(r["slots"]), "clicks": int(r["clicks"])}
                        for d, r in by_day.iterrows()},
        },
        "paths": paths,
        "notes": ("value = expected slate reward per event under the context distribution; realized_value = the "
                  "same expectation averaged over the generated events' contexts."),
    }
    if getattr(cfg, "click_model", "additive") == "cascade":
        truth["click_model"] = "cascade"
        truth["notes"] += (" Cascade clicks: the user stops at the first click (r_k = c_k prod_{j<k} (1 - c_j), "
                           "c_k ~ Bernoulli(C_k P(x, a_k))), so a policy's value per context is sum_k m_k prod_{j<k} "
                           "(1 - m_j) with m_k = sum_a pi_k(a|x) C_k P(x, a), each position drawn independently; "
                           "true_policy_value (additive) does not apply.")
    share = float(getattr(cfg, "partial_slates", 0.0))
    if share > 0:
        held = 1.0 - share + share / cfg.n_positions   # P(position k is held), the same for every k
        truth["held_slots"] = {
            "partial_slates": share, "held_fraction": held,
            "notes": ("a partial event holds one slot at a uniform position, independently of everything else, so "
                      "each position is held with probability held_fraction: the expected reward of the held slots "
                      "under a policy is held_fraction * value (what IPS/SNIPS/PI/PI++ and the direct approach "
                      "estimate on these logs); factored and re-ordering still estimate value (the full slate)."),
            "policies": {pid: {"value": held * v["value"], "realized_value": held * v["realized_value"]}
                         for pid, v in policies.items()},
        }
    return truth, per_context


def _write_small_table(pdf: pd.DataFrame, columns: str, path: str) -> None:
    """One small table as Parquet at any URI, committed whole (io.outputs.write_table: a hidden sibling swapped
    in), so a killed run leaves the previous table or the new one, never a half. ``columns`` documents them."""
    from ..io.outputs import write_table

    missing = [c.split()[0] for c in columns.split(",") if c.split()[0] not in pdf.columns]
    if missing:
        raise ValueError(f"truth table {path} lacks columns {missing}")
    write_table(pdf, path)


def write_truth_tables(world: World, truth_dir: str, per_context: dict) -> None:
    """truth/click_rates, truth/adc and truth/context_values."""
    pools, n = world.pools, world.cfg.n_contexts
    slot_of = pools.slot_of_ad()
    ci, ai = np.meshgrid(np.arange(n), np.arange(pools.n_total), indexing="ij")
    rates = pd.DataFrame({
        "context_id": np.asarray(world.ctx_names, dtype=object)[ci.ravel()],
        "context_index": ci.ravel().astype("int32"),
        "ad_id": np.asarray(pools.names, dtype=object)[ai.ravel()],
        "slot": pd.array([None if s == 0 else int(s) for s in slot_of[ai.ravel()]], dtype="Int32"),
        "p": world.P.ravel().astype(float),
        "context_weight": world.weights[ci.ravel()].astype(float),
    })
    _write_small_table(rates, "context_id string, context_index int, ad_id string, slot int, p double, "
                              "context_weight double", fs.join(truth_dir, "click_rates"))
    adc = pd.DataFrame({"position": np.arange(1, len(world.adc) + 1, dtype="int32"),
                        "coefficient": world.adc.astype(float)})
    _write_small_table(adc, "position int, coefficient double", fs.join(truth_dir, "adc"))
    rows = []
    for (policy, dt), values in per_context.items():
        for c in range(n):
            rows.append((policy, dt, world.ctx_names[c], c, float(values[c]), float(world.weights[c])))
    values = pd.DataFrame(rows, columns=["policy_id", "dt", "context_id", "context_index", "value", "context_weight"])
    _write_small_table(values, "policy_id string, dt string, context_id string, context_index int, "
                               "value double, context_weight double", fs.join(truth_dir, "context_values"))
