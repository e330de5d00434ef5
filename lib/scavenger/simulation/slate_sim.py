"""Section 6 of seed 002 at full scale: the simulations of ``scavenger simulate``, one tensor at a time.

The model and its exact sampler are :mod:`.slate_model` (one simulation of N rows costs O(2^K) whatever N); the
estimators from pattern counts :mod:`.slate_patterns`. Here: S simulations per tensor (:func:`simulate_tensor_rows`),
many (cell, tensor) jobs spread over Spark tasks or run in-process (:func:`run_cells` uses ``mapInPandas`` over a tiny
job table; this is simulation, not the log hot path), and their summaries (:func:`summarize`, :func:`fit_lines`).
Tensors are independent, seeded by (seed, group, tensor), so results do not depend on how they are spread over
tasks.
"""
from __future__ import annotations

import json
import math
import os

import numpy as np
import pandas as pd

from .slate_model import (MODELS, Cell, Tensor, _tensor_rng, draw_tensor, pattern_means, pattern_probs, patterns,
                          sample_patterns, sample_rows, tensor_for)
from .slate_patterns import (SIM_ESTIMATORS, _pattern_design, exact_nmse, moments_from_patterns, pattern_estimates,
                             pipp_weights_exact, row_level_estimates)

__all__ = ["MODELS", "SIM_ESTIMATORS", "RESULT_COLUMNS", "Cell", "Tensor", "draw_tensor", "patterns", "pattern_probs",
           "pattern_means", "sample_patterns", "sample_rows", "tensor_for", "pattern_estimates", "pipp_weights_exact",
           "moments_from_patterns", "row_level_estimates", "exact_nmse", "simulate_tensor", "simulate_tensor_rows",
           "job_table", "run_cells", "summarize", "fit_lines"]


RESULT_COLUMNS = ["cell_id", "tensor_id", "model", "K", "N", "pbar", "D", "estimator", "prior", "nmse",
                  "nmse_se", "bias", "nvar", "delta_nmse", "delta_nmse_se", "nmse_exact", "n_sims",
                  "n_undefined", "value_true", "M", "H", "k_m_minus_h", "theory_delta"]


def simulate_tensor(cell: Cell, tensor_id: int, seed: int) -> pd.DataFrame:
    """:func:`simulate_tensor_rows` as a DataFrame with columns RESULT_COLUMNS."""
    return pd.DataFrame(simulate_tensor_rows(cell, tensor_id, seed), columns=RESULT_COLUMNS)


def simulate_tensor_rows(cell: Cell, tensor_id: int, seed: int) -> list[dict]:
    """S exact simulations for one tensor; one row per estimator (and per prior for PI++ with fixed weights).

    nmse = N mean_s (est_s - v)^2; delta_nmse = N mean_s [(pi_s - v)^2 - (est_s - v)^2] (paired, same sims) with
    its standard error; nmse_exact from :func:`exact_nmse` for IPS, PI and fixed-weight PI++;
    theory_delta = P'(2 Pbar - P') K (M - H) for fixed-weight PI++ (seed 002 eq. 41), alpha_k = d_k - 1.
    """
    tensor = tensor_for(cell, tensor_id, seed)
    _, sim_rng = _tensor_rng(seed, cell, tensor_id)
    D = np.asarray(tensor.D, dtype=float)
    K, N, S = cell.K, int(cell.N), int(cell.sims)
    probs = pattern_probs(D)
    q = pattern_means(tensor)
    v = float(q[-1])
    counts, succ = sample_patterns(sim_rng, N, probs, q, S)
    est = pattern_estimates(counts, succ, D, cell.priors)

    alpha = D - 1.0
    M = float(alpha.mean())
    H = float(K / np.sum(1.0 / alpha))
    kmh = K * (M - H)
    Y, G, W = _pattern_design(D)
    err_pi = (est["pi"] - v) ** 2
    rows = []
    for name, values in est.items():
        prior = float("nan")
        base = name
        exact = float("nan")
        theory = float("nan")
        if name.startswith("pi_plus_plus@"):
            prior = float(cell.priors[int(name.split("@")[1])])
            base = "pi_plus_plus"
            exact = exact_nmse(probs, q, G, Y @ pipp_weights_exact(D, prior), N, v)
            theory = prior * (2 * cell.pbar - prior) * kmh
        elif name == "pi":
            exact = exact_nmse(probs, q, G, np.zeros_like(G), N, v)
            theory = 0.0
        elif name == "ips":
            exact = exact_nmse(probs, q, W, np.zeros_like(W), N, v)
        elif name == "pi_plus_plus_estimated_alpha":
            prior = float(cell.priors[0])
        ok = np.isfinite(values)
        n_ok = int(ok.sum())
        e2 = (values[ok] - v) ** 2
        diff = N * (err_pi[ok] - e2)
        rows.append({
            "cell_id": cell.cell_id, "tensor_id": tensor_id, "model": cell.model, "K": K, "N": N,
            "pbar": cell.pbar, "D": json.dumps([int(d) for d in D]), "estimator": base, "prior": prior,
            "nmse": float(N * e2.mean()) if n_ok else float("nan"),
            "nmse_se": float(N * e2.std(ddof=1) / math.sqrt(n_ok)) if n_ok > 1 else float("nan"),
            "bias": float(values[ok].mean() - v) if n_ok else float("nan"),
            "nvar": float(N * values[ok].var(ddof=1)) if n_ok > 1 else float("nan"),
            "delta_nmse": float(diff.mean()) if n_ok else float("nan"),
            "delta_nmse_se": float(diff.std(ddof=1) / math.sqrt(n_ok)) if n_ok > 1 else float("nan"),
            "nmse_exact": exact, "n_sims": S, "n_undefined": S - n_ok, "value_true": v,
            "M": M, "H": H, "k_m_minus_h": kmh, "theory_delta": theory,
        })
    return rows


def _run_job_frame(pdf: pd.DataFrame) -> pd.DataFrame:
    cells: dict = {}
    rows: list = []
    for c, t, s in zip(pdf["cell"], pdf["tensor_id"], pdf["seed"]):
        cell = cells.get(c) or cells.setdefault(c, Cell.from_json(c))
        rows.extend(simulate_tensor_rows(cell, int(t), int(s)))
    return pd.DataFrame(rows, columns=RESULT_COLUMNS)


def _job_mapper(jobs: pd.DataFrame):
    """mapInPandas body over ``spark.range(len(jobs))``: row ``id`` runs job ``jobs.iloc[id]``.

    The job table is tiny (one short JSON string per (cell, tensor)) and travels inside the closure.
    """
    cell_col = jobs["cell"].tolist()
    tensor_col = jobs["tensor_id"].tolist()
    seed_col = jobs["seed"].tolist()

    def run(iterator):
        for pdf in iterator:
            idx = pdf["id"].to_numpy()
            part = pd.DataFrame({"cell": [cell_col[i] for i in idx], "tensor_id": [tensor_col[i] for i in idx],
                                 "seed": [seed_col[i] for i in idx]})
            out = _run_job_frame(part)
            if len(out):
                yield out

    return run


def _result_schema():
    from pyspark.sql import types as T

    dbl = T.DoubleType()
    types = {"cell_id": T.LongType(), "tensor_id": T.LongType(), "model": T.StringType(), "K": T.LongType(),
             "N": T.LongType(), "D": T.StringType(), "estimator": T.StringType(), "n_sims": T.LongType(),
             "n_undefined": T.LongType()}
    return T.StructType([T.StructField(c, types.get(c, dbl), True) for c in RESULT_COLUMNS])


def job_table(cells, tensors: int, seed: int) -> pd.DataFrame:
    """One row per (cell, tensor): the unit of work spread over Spark tasks."""
    rows = [{"cell": c.to_json(), "tensor_id": t, "seed": int(seed)} for c in cells for t in range(int(tensors))]
    return pd.DataFrame(rows, columns=["cell", "tensor_id", "seed"])


def run_cells(cells, tensors: int, seed: int, spark=None, partitions: int | None = None) -> pd.DataFrame:
    """Per-tensor results of every cell: with ``spark`` the jobs run in ``mapInPandas`` tasks, else in-process.

    Seeds depend only on (seed, cell, tensor), so both paths give identical numbers.
    """
    jobs = job_table(cells, tensors, seed)
    if spark is None:
        out = _run_job_frame(jobs)
    else:
        n_parts = partitions or max(1, min(len(jobs), 4 * (os.cpu_count() or 2)))
        ids = spark.range(0, len(jobs), 1, numPartitions=int(n_parts))
        out = ids.mapInPandas(_job_mapper(jobs), schema=_result_schema()).toPandas()
    return out.sort_values(["cell_id", "tensor_id", "estimator", "prior"], kind="mergesort").reset_index(drop=True)


def summarize(per_tensor: pd.DataFrame) -> pd.DataFrame:
    """Average over tensors per (cell, estimator, prior): N*MSE, delta_nmse vs PI, % improvement, theory.

    Standard errors are over tensors (sd / sqrt(T)); pct_improvement = 100 mean(delta) / mean(nmse_PI).
    """
    keys = ["cell_id", "model", "K", "N", "pbar", "estimator", "prior"]
    df = per_tensor.copy()
    df["prior"] = df["prior"].fillna(-1.0)
    g = df.groupby(keys, sort=True)
    out = g.agg(tensors=("tensor_id", "nunique"), nmse=("nmse", "mean"), nmse_sd=("nmse", "std"),
                nmse_exact=("nmse_exact", "mean"), delta_nmse=("delta_nmse", "mean"),
                delta_sd=("delta_nmse", "std"), bias=("bias", "mean"), k_m_minus_h=("k_m_minus_h", "mean"),
                theory_delta=("theory_delta", "mean"), n_undefined=("n_undefined", "sum")).reset_index()
    out["nmse_se"] = out["nmse_sd"] / np.sqrt(out["tensors"])
    out["delta_nmse_se"] = out["delta_sd"] / np.sqrt(out["tensors"])
    pi_rows = out.loc[out["estimator"] == "pi", ["cell_id", "nmse"]].rename(columns={"nmse": "nmse_pi"})
    out = out.merge(pi_rows, on="cell_id", how="left")
    out["pct_improvement"] = 100.0 * out["delta_nmse"] / out["nmse_pi"]
    out["prior"] = out["prior"].where(out["prior"] >= 0)
    return out.drop(columns=["nmse_sd", "delta_sd"])


def fit_lines(per_tensor: pd.DataFrame, estimator: str = "pi_plus_plus") -> pd.DataFrame:
    """Least-squares line delta_nmse = a + b K(M-H) per (K, N) over tensors, with R^2 (Figure 4).

    For PI++ only the rows with P' = Pbar are used.
    """
    rows = []
    df = per_tensor[per_tensor["estimator"] == estimator]
    if estimator == "pi_plus_plus":
        df = df[np.isclose(df["prior"], df["pbar"])]
    for (K, N), part in df.groupby(["K", "N"]):
        x = part["k_m_minus_h"].to_numpy()
        y = part["delta_nmse"].to_numpy()
        if len(x) < 3 or np.ptp(x) == 0:
            continue
        slope, intercept = np.polyfit(x, y, 1)
        resid = y - (intercept + slope * x)
        r2 = 1.0 - np.sum(resid ** 2) / np.sum((y - y.mean()) ** 2)
        rows.append({"K": int(K), "N": int(N), "tensors": len(x), "slope": float(slope),
                     "intercept": float(intercept), "r2": float(r2),
                     "theory_slope": float(part["pbar"].iloc[0] ** 2)})
    return pd.DataFrame(rows, columns=["K", "N", "tensors", "slope", "intercept", "r2", "theory_slope"])
