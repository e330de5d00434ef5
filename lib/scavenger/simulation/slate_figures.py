"""Presets of ``scavenger simulate`` for the four figures of seed 002 section 6, their tables and PNG plots.

fig1  K=3, D=[3,50,800], elementwise; grid of true Pbar x assumed P' (section 6.2). Paper: T=50, 1000 sims.
fig2  K=2, d_k in {2,10,100,1000} (all 16 pairs), elementwise (section 6.3). Paper: T=50, 1000 sims.
fig3  K=2..5, N in {1e6,1e7}, elementwise and pairwise, D evenly spread over [2,100] (section 6.4; the paper's
      example K=4 -> [2,33,66,100] is reproduced by d = [2] + [floor(100 i/(K-1)), i=1..K-1]). T=200, 500 sims.
fig4  K=2..5, N in {1e6,1e7}, elementwise, d_k ~ U{2..100} per tensor; delta_nmse against K(M-H) with a fitted
      line and R^2 per K (paper: R^2 = 0.93, 0.93, 0.91 for K = 2, 3, 4). T=200, 500 sims.
"""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from .presets import PRESETS
from .slate_sim import Cell, fit_lines, run_cells, summarize

FIG1_GRID = (0.05, 0.10, 0.15, 0.20, 0.25, 0.30, 0.35, 0.40, 0.45, 0.50)
FIG2_SIZES = (2, 10, 100, 1000)
FIG34_K = (2, 3, 4, 5)
FIG34_N = (1_000_000, 10_000_000)
# Paper's scale per preset: (tensors, sims, N list)
PAPER_SCALE = {"fig1": (50, 1000, (10_000_000,)), "fig2": (50, 1000, (10_000_000,)),
               "fig3": (200, 500, FIG34_N), "fig4": (200, 500, FIG34_N)}


def evenly_spread_D(K: int, lo: int = 2, hi: int = 100) -> tuple:
    """[lo] + [floor(hi i / (K-1))] for i = 1..K-1; K=4 gives the paper's [2, 33, 66, 100]."""
    if K == 1:
        return (lo,)
    return tuple([lo] + [int(math.floor(hi * i / (K - 1))) for i in range(1, K)])


MISSPECIFIED = (0.5, 1.5, 2.0, 2.5)  # extra priors P' = factor * Pbar reported for fig2-fig4


def preset_cells(preset: str, sims: int, N_list, pbar: float = 0.25) -> list[Cell]:
    """The simulation cells of a preset (one Cell per setting; tensors are drawn per cell group).

    PI++ with fixed weights is evaluated at P' = Pbar (the headline) and, for fig2-fig4, also at the
    misspecified priors P' = f Pbar, f in MISSPECIFIED; fig1 uses the full grid of P'.
    """
    cells: list[Cell] = []
    pri = (pbar,) + tuple(round(f * pbar, 12) for f in MISSPECIFIED)
    if preset == "fig1":
        for g, pb in enumerate(FIG1_GRID):
            for N in N_list:
                grid = (pb,) + tuple(x for x in FIG1_GRID if x != pb)  # P' = Pbar first (headline)
                cells.append(Cell(len(cells), 3, (3, 50, 800), "elementwise", int(N), pb, grid, sims, g))
    elif preset == "fig2":
        g = 0
        for d1 in FIG2_SIZES:
            for d2 in FIG2_SIZES:
                for N in N_list:
                    cells.append(Cell(len(cells), 2, (d1, d2), "elementwise", int(N), pbar, pri, sims, g))
                g += 1
    elif preset == "fig3":
        g = 0
        for model in ("elementwise", "pairwise"):
            for K in FIG34_K:
                for N in N_list:
                    cells.append(Cell(len(cells), K, evenly_spread_D(K), model, int(N), pbar, pri, sims, g))
                g += 1
    elif preset == "fig4":
        for g, K in enumerate(FIG34_K):
            for N in N_list:
                cells.append(Cell(len(cells), K, None, "elementwise", int(N), pbar, pri, sims, g))
    else:
        raise ValueError(f"unknown preset {preset!r}; choose from {PRESETS}")
    return cells


def _headline(summary: pd.DataFrame) -> pd.DataFrame:
    """PI++ rows whose prior is the true Pbar (the paper's main setting)."""
    s = summary[(summary["estimator"] == "pi_plus_plus")]
    return s[np.isclose(s["prior"], s["pbar"])]


def _plot(preset: str, per_tensor: pd.DataFrame, summary: pd.DataFrame, fits: pd.DataFrame | None, path: Path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    head = _headline(summary)
    if preset == "fig1":
        fig = _plot_fig1(plt, head, summary)
    elif preset == "fig2":
        fig = _plot_fig2(plt, head, per_tensor)
    elif preset == "fig3":
        fig = _plot_fig3(plt, head)
    else:
        fig = _plot_fig4(plt, per_tensor, fits)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _plot_fig1(plt, head: pd.DataFrame, summary: pd.DataFrame):
    """delta_nmse against P' = Pbar with the theory Pbar^2 K(M-H); % improvement over the (true Pbar, assumed P')
    grid (section 6.2)."""
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(12, 4.8))
    for N, part in head.groupby("N"):
        a1.errorbar(part["pbar"], part["delta_nmse"], yerr=2 * part["delta_nmse_se"], fmt="o-",
                    label=f"measured, N={N:.0e}")
    x = np.linspace(min(FIG1_GRID), max(FIG1_GRID), 100)
    kmh = float(head["k_m_minus_h"].iloc[0])
    a1.plot(x, x ** 2 * kmh, "k--", label="theory $\\bar P^2 K(M-H)$")
    a1.set_xlabel("$P' = \\bar P$")
    a1.set_ylabel("delta_nmse = N MSE(PI) - N MSE(PI++)")
    a1.legend()
    a1.set_title("K=3, D=[3,50,800]")
    pp = summary[summary["estimator"] == "pi_plus_plus"]
    grid = pp.pivot_table(index="prior", columns="pbar", values="pct_improvement", aggfunc="mean")
    im = a2.imshow(grid.to_numpy(), origin="lower", cmap="RdBu", aspect="auto", vmin=-100, vmax=100)
    a2.set_xticks(range(len(grid.columns)), [f"{c:.2f}" for c in grid.columns], rotation=45)
    a2.set_yticks(range(len(grid.index)), [f"{c:.2f}" for c in grid.index])
    a2.set_xlabel("true $\\bar P$")
    a2.set_ylabel("assumed $P'$")
    cols = list(grid.columns)
    a2.plot(range(len(cols)), [np.interp(2 * c, grid.index, range(len(grid.index)), right=np.nan)
                               for c in cols], "k--", label="$P' = 2\\bar P$")
    a2.legend(loc="upper left")
    fig.colorbar(im, ax=a2, label="% improvement of PI++ over PI (clipped at -/+100)", extend="min")
    return fig


def _plot_fig2(plt, head: pd.DataFrame, per_tensor: pd.DataFrame):
    """% improvement of PI++ over PI on the (d_1, d_2) grid, K = 2 (section 6.3)."""
    fig, a = plt.subplots(figsize=(6, 5))
    h = head.assign(d1=head["cell_id"].map(_cell_D(per_tensor, 0)), d2=head["cell_id"].map(_cell_D(per_tensor, 1)))
    grid = h.pivot_table(index="d1", columns="d2", values="pct_improvement", aggfunc="mean")
    im = a.imshow(grid.to_numpy(), origin="lower", cmap="viridis")
    for i in range(grid.shape[0]):
        for j in range(grid.shape[1]):
            a.text(j, i, f"{np.round(grid.iat[i, j], 1) + 0.0:.1f}%", ha="center", va="center", color="w")
    a.set_xticks(range(grid.shape[1]), grid.columns)
    a.set_yticks(range(grid.shape[0]), grid.index)
    a.set_xlabel("$d_2$")
    a.set_ylabel("$d_1$")
    a.set_title("% improvement of PI++ over PI (K=2)")
    fig.colorbar(im, ax=a)
    return fig


def _plot_fig3(plt, head: pd.DataFrame):
    """delta_nmse and % improvement against K per (model, N), with the theory line (section 6.4)."""
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(12, 4.8))
    for (model, N), part in head.groupby(["model", "N"]):
        part = part.sort_values("K")
        a1.errorbar(part["K"], part["delta_nmse"], yerr=2 * part["delta_nmse_se"], fmt="o-",
                    label=f"{model}, N={N:.0e}")
        a2.plot(part["K"], part["pct_improvement"], "o-", label=f"{model}, N={N:.0e}")
    th = head.drop_duplicates("K").sort_values("K")
    a1.plot(th["K"], th["theory_delta"], "k--", label="theory $\\bar P^2 K(M-H)$")
    a1.set_xlabel("K")
    a1.set_ylabel("delta_nmse")
    a2.set_xlabel("K")
    a2.set_ylabel("% improvement over PI")
    a1.legend()
    a2.legend()
    return fig


def _plot_fig4(plt, per_tensor: pd.DataFrame, fits: pd.DataFrame | None):
    """Per N: each tensor's delta_nmse against K(M-H), the fitted line and R^2 per K, the theory Pbar^2 K(M-H)."""
    Ns = sorted(per_tensor["N"].unique())
    fig, axes = plt.subplots(1, len(Ns), figsize=(6 * len(Ns), 4.8), squeeze=False)
    pt = per_tensor[(per_tensor["estimator"] == "pi_plus_plus")
                    & np.isclose(per_tensor["prior"], per_tensor["pbar"])]
    for ax, N in zip(axes[0], Ns):
        for K, part in pt[pt["N"] == N].groupby("K"):
            sc = ax.scatter(part["k_m_minus_h"], part["delta_nmse"], s=6, alpha=0.5)
            f = fits[(fits["K"] == K) & (fits["N"] == N)] if fits is not None else pd.DataFrame()
            if len(f):
                x = np.linspace(part["k_m_minus_h"].min(), part["k_m_minus_h"].max(), 10)
                ax.plot(x, f["intercept"].iloc[0] + f["slope"].iloc[0] * x, color=sc.get_facecolor()[0],
                        label=f"K={K}: R$^2$={f['r2'].iloc[0]:.2f}")
        x = np.linspace(0, pt["k_m_minus_h"].max(), 10)
        ax.plot(x, pt["pbar"].iloc[0] ** 2 * x, "k--", label="theory $\\bar P^2 K(M-H)$")
        ax.set_xlabel("K (M - H)")
        ax.set_ylabel("delta_nmse")
        ax.set_title(f"d_k ~ U(2,100), N={N:.0e}")
        ax.legend()
    return fig


def _cell_D(per_tensor: pd.DataFrame, k: int) -> dict:
    import json

    first = per_tensor.drop_duplicates("cell_id")
    return {c: json.loads(d)[k] for c, d in zip(first["cell_id"], first["D"])}


def run_preset(preset: str, out: str | Path, tensors: int, sims: int, N_list, seed: int = 0,
               pbar: float = 0.25, spark=None, partitions: int | None = None) -> dict:
    """Run a preset, write ``<preset>_per_tensor.parquet``, ``<preset>_summary.{parquet,csv}``,
    (fig4) ``<preset>_fit.csv`` and ``<preset>.png`` under ``out``; return paths and headline numbers."""
    import time

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    cells = preset_cells(preset, sims, N_list, pbar)
    t0 = time.perf_counter()
    per_tensor = run_cells(cells, tensors, seed, spark=spark, partitions=partitions)
    sim_seconds = time.perf_counter() - t0
    summary = summarize(per_tensor)
    fits = fit_lines(per_tensor) if preset == "fig4" else None
    paths = {
        "per_tensor": out / f"{preset}_per_tensor.parquet",
        "summary": out / f"{preset}_summary.parquet",
        "summary_csv": out / f"{preset}_summary.csv",
        "plot": out / f"{preset}.png",
    }
    per_tensor.to_parquet(paths["per_tensor"], index=False)
    summary.to_parquet(paths["summary"], index=False)
    summary.to_csv(paths["summary_csv"], index=False)
    if fits is not None:
        paths["fit_csv"] = out / f"{preset}_fit.csv"
        fits.to_csv(paths["fit_csv"], index=False)
    _plot(preset, per_tensor, summary, fits, paths["plot"])

    head = _headline(summary)
    theory_z = ((head["delta_nmse"] - head["theory_delta"]) / head["delta_nmse_se"]).replace([np.inf, -np.inf],
                                                                                              np.nan)
    headline = [
        {k: (None if isinstance(v, float) and not math.isfinite(v) else v)
         for k, v in row.items()}
        for row in head[["model", "K", "N", "pbar", "nmse_pi", "nmse", "delta_nmse", "delta_nmse_se",
                         "theory_delta", "pct_improvement"]].to_dict("records")
    ]
    return {
        "paths": {k: str(v) for k, v in paths.items()},
        "cells": len(cells), "tensors": int(tensors), "sims": int(sims),
        "simulations": len(cells) * int(tensors) * int(sims),
        "rows_simulated": int(sum(c.N for c in cells) * int(tensors) * int(sims)),
        "simulate_seconds": round(sim_seconds, 3),
        "headline": headline,
        "max_abs_theory_z_elementwise": float(np.nanmax(np.abs(theory_z[head["model"] == "elementwise"])))
        if (head["model"] == "elementwise").any() else None,
        "fits": None if fits is None else fits.to_dict("records"),
    }
