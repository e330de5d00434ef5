"""Section 6 of seed 002 at full scale: exact pattern sampler for slate OPE simulations.

Setting (seed 002 section 6.1; MATH.md "Slate OPE", Simulation): non-contextual slates with K slots of sizes
D = [d_1..d_K], uniform logging mu_k = 1/d_k, deterministic target pi(a) = 1[a = (0,..,0)], Bernoulli rewards with
rate p(a) drawn from a reward model:

* elementwise additive (eq. 42): p(a) = sum_k phi_k(a_k), phi_k(.) iid N(Pbar/K, (0.1 Pbar/K)^2);
* pairwise additive (eq. 43): p(a) = sum_{k<j} phi_kj(a_k, a_j), phi_kj(.,.) iid N(Pbar/C, (0.1 Pbar/C)^2) with
  C = K(K-1)/2 pairs. The paper gives no parameters for this model; we use the elementwise recipe per pair so
  that E[p(a)] = Pbar again. The second argument of N(., .) is read as a standard deviation.

Exact sampler. With uniform logging and target (0,..,0), Y_k = d_k 1[a_k = 0], so a row enters every estimator
only through its match pattern m in {0,1}^K (m_k = 1[a_k = 0]); P(m) = prod_k (1/d_k)^{m_k} (1 - 1/d_k)^{1-m_k}.
Given m, the other coordinates are uniform over {1..d_k - 1}, so the row's reward is Bernoulli with the pattern
mean q(m) = E[p(A) | m]:

* elementwise: q(m) = sum_k [m_k phi_k(0) + (1 - m_k) mean_{a>0} phi_k(a)];
* pairwise:    q(m) = sum_{k<j} c_kj(m_k, m_j), c(1,1) = phi(0,0), c(1,0) = mean_{b>0} phi(0,b),
               c(0,1) = mean_{a>0} phi(a,0), c(0,0) = mean_{a>0,b>0} phi(a,b).

One simulation of N rows is then n ~ Multinomial(N, P) over the 2^K patterns and s_m ~ Binomial(n_m, q(m)) rewards
per pattern: cost O(2^K) whatever N. All estimators are functions of (n_m, s_m) (:func:`pattern_estimates`).
The truth is v = p(0,..,0) = q(1,..,1).

Tensors are independent, seeded by (seed, group, tensor) so results do not depend on how they are spread
over Spark tasks (:func:`run_cells` uses ``mapInPandas`` over a tiny job table; this is simulation, not the log
hot path).
"""
from __future__ import annotations

import os

import itertools
import json
import math
from dataclasses import asdict, dataclass, field

import numpy as np
import pandas as pd

from ..estimators import slate as slate_est

MODELS = ("elementwise", "pairwise")
# Estimators reported by the simulator (PI++ rows carry the prior P' they used in column ``prior``).
SIM_ESTIMATORS = ("ips", "snips", "pi", "wpi", "pi_plus_plus", "pi_plus_plus_logged_prior",
                  "pi_plus_plus_estimated_alpha", "pi_beta")


# ---- cells, tensors ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Cell:
    """One simulation setting; ``D=None`` draws d_k ~ U{d_low..d_high} per tensor (Figure 4)."""

    cell_id: int
    K: int
    D: tuple | None
    model: str = "elementwise"
    N: int = 10_000_000
    pbar: float = 0.25
    priors: tuple = (0.25,)   # P' values for PI++ with fixed weights; the first is the headline "pi_plus_plus"
    sims: int = 500
    group: int = 0            # tensors of cells with the same group and tensor index are identical
    d_low: int = 2
    d_high: int = 100
    label: dict = field(default_factory=dict)

    def __post_init__(self):
        if self.model not in MODELS:
            raise ValueError(f"model must be one of {MODELS}, got {self.model!r}")
        if self.model == "pairwise" and self.K < 2:
            raise ValueError("the pairwise model needs K >= 2")
        if self.D is not None:
            if len(self.D) != self.K or min(self.D) < 2:
                raise ValueError(f"D must have K={self.K} sizes >= 2, got {self.D}")

    def to_json(self) -> str:
        d = asdict(self)
        d["D"] = None if self.D is None else [int(x) for x in self.D]
        return json.dumps(d)

    @classmethod
    def from_json(cls, text: str) -> "Cell":
        d = json.loads(text)
        d["D"] = None if d["D"] is None else tuple(d["D"])
        d["priors"] = tuple(d["priors"])
        return cls(**d)


@dataclass
class Tensor:
    """A drawn reward model: ``tables`` are phi_k (elementwise, 1-d) or phi_kj (pairwise, keyed (k, j))."""

    model: str
    D: tuple
    tables: dict

    def p(self, A: np.ndarray) -> np.ndarray:
        """p(a) for rows a of A (n, K) -- the row-level reference."""
        A = np.asarray(A)
        if self.model == "elementwise":
            return sum(self.tables[k][A[:, k]] for k in range(len(self.D)))
        return sum(tab[A[:, k], A[:, j]] for (k, j), tab in self.tables.items())

    def p_range(self) -> tuple[float, float]:
        """Bounds on p(a): exact for elementwise, sum of per-pair extremes (conservative) for pairwise."""
        lo = sum(float(t.min()) for t in self.tables.values())
        hi = sum(float(t.max()) for t in self.tables.values())
        return lo, hi


def draw_tensor(rng: np.random.Generator, D, model: str, pbar: float) -> Tensor:
    """Reward tensor of seed 002 eqs. 42/43 with phi ~ N(Pbar/C, 0.1 Pbar/C), C = K or K(K-1)/2."""
    D = tuple(int(d) for d in D)
    K = len(D)
    if model == "elementwise":
        mu = pbar / K
        tables = {k: rng.normal(mu, 0.1 * mu, size=D[k]) for k in range(K)}
    else:
        C = K * (K - 1) / 2
        mu = pbar / C
        tables = {(k, j): rng.normal(mu, 0.1 * mu, size=(D[k], D[j])) for k in range(K) for j in range(k + 1, K)}
    tensor = Tensor(model, D, tables)
    lo, hi = tensor.p_range()
    if lo < 0 or hi > 1:
        raise ValueError(f"reward tensor leaves [0, 1] (range {lo:.3g}..{hi:.3g}); use a smaller pbar")
    return tensor


def patterns(K: int) -> np.ndarray:
    """All 2^K match patterns as a (2^K, K) 0/1 array; the last row is the all-match pattern."""
    return np.array(list(itertools.product((0, 1), repeat=K)), dtype=np.int64)


def pattern_probs(D) -> np.ndarray:
    """P(m) = prod_k (1/d_k)^{m_k} (1 - 1/d_k)^{1 - m_k} under uniform logging."""
    D = np.asarray(D, dtype=float)
    M = patterns(len(D))
    return np.prod(np.where(M == 1, 1.0 / D, 1.0 - 1.0 / D), axis=1)


def pattern_means(tensor: Tensor) -> np.ndarray:
    """q(m) = E[p(A) | match pattern m] (module docstring), exact for both reward models."""
    K = len(tensor.D)
    M = patterns(K)
    if tensor.model == "elementwise":
        q = np.zeros(len(M))
        for k, phi in tensor.tables.items():
            q += np.where(M[:, k] == 1, phi[0], phi[1:].mean())
        return q
    q = np.zeros(len(M))
    for (k, j), tab in tensor.tables.items():
        c = np.array([[tab[1:, 1:].mean(), tab[1:, 0].mean()], [tab[0, 1:].mean(), tab[0, 0]]])
        q += c[M[:, k], M[:, j]]
    return q


# ---- estimators from pattern counts -----------------------------------------------------------------------
def _pattern_design(D):
    """Per-pattern Y (P, K), G (P,), W (P,) for uniform logging and target (0,..,0)."""
    D = np.asarray(D, dtype=float)
    M = patterns(len(D))
    Y = M * D
    G = 1.0 - len(D) + Y.sum(1)
    W = np.prod(Y, axis=1)
    return Y, G, W


def pipp_weights_exact(D, prior: float) -> np.ndarray:
    """PI++ weights with exact alpha_k = d_k - 1 (uniform logging, deterministic target; seed 002 eq. 24, 39)."""
    w, _, _, _ = slate_est.pi_plus_plus_weights(np.asarray(D, dtype=float) - 1.0, prior)
    return w


def pattern_estimates(counts: np.ndarray, succ: np.ndarray, D, priors) -> dict:
    """Every simulator estimator for S simulations given pattern counts n_m and reward sums s_m (both (S, P)).

    Returns {name: (S,) array} plus {"pi_plus_plus@<i>": ...} for each prior index i (fixed weights, exact
    alpha). Formulas as in :mod:`scavenger.estimators.slate` with sums over rows replaced by sums over patterns.
    """
    counts = np.asarray(counts, dtype=float)
    succ = np.asarray(succ, dtype=float)
    D = np.asarray(D, dtype=float)
    K = len(D)
    Y, G, W = _pattern_design(D)
    N = counts.sum(1)
    sum_rG = succ @ G
    sum_G = counts @ G
    sum_rW = succ @ W
    sum_W = counts @ W
    mean_Y = (counts @ Y) / N[:, None]
    out = {}
    out["ips"] = sum_rW / N
    with np.errstate(invalid="ignore", divide="ignore"):
        out["snips"] = np.where(sum_W > 0, sum_rW / np.where(sum_W > 0, sum_W, 1.0), np.nan)
        out["wpi"] = np.where(sum_G != 0, sum_rG / np.where(sum_G != 0, sum_G, 1.0), np.nan)
    pi_val = sum_rG / N
    out["pi"] = pi_val
    for i, prior in enumerate(priors):
        out[f"pi_plus_plus@{i}"] = pi_val - mean_Y @ pipp_weights_exact(D, prior)
    # P' = logged mean reward, exact alpha (w scales linearly in P')
    w1 = pipp_weights_exact(D, 1.0)
    out["pi_plus_plus_logged_prior"] = pi_val - (succ.sum(1) / N) * (mean_Y @ w1)
    # P' = first prior, alpha_k = mean(Y_k^2) - 1 estimated per simulation
    alpha_hat = (counts @ (Y * Y)) / N[:, None] - 1.0
    used = alpha_hat > slate_est.ALPHA_TOL
    inv = np.where(used, 1.0 / np.where(used, alpha_hat, 1.0), 0.0)
    n_used = used.sum(1)
    with np.errstate(invalid="ignore", divide="ignore"):
        H = np.where(n_used > 0, n_used / np.where(n_used > 0, inv.sum(1), 1.0), 0.0)
    w_hat = np.where(used, priors[0] * (1.0 - H[:, None] * inv), 0.0)
    out["pi_plus_plus_estimated_alpha"] = pi_val - np.sum(mean_Y * w_hat, axis=1)
    # data-driven beta_k = sum rG (Y_k - 1) / sum (Y_k - 1)^2
    Z = Y - 1.0
    num = succ @ (G[:, None] * Z)
    den = counts @ (Z * Z)
    beta = np.where(den > 0, num / np.where(den > 0, den, 1.0), 0.0)
    out["pi_beta"] = pi_val - np.sum(beta * (mean_Y - 1.0), axis=1)
    return out


def moments_from_patterns(counts: np.ndarray, succ: np.ndarray, D) -> slate_est.SlateMoments:
    """SlateMoments of one simulation from its pattern counts (binary rewards: r^2 = r)."""
    counts = np.asarray(counts, dtype=float)
    succ = np.asarray(succ, dtype=float)
    Y, G, W = _pattern_design(D)
    K = Y.shape[1]
    return slate_est.SlateMoments(
        K=K, n=counts.sum(), s_r=succ.sum(), s_r2=succ.sum(),
        s_Y=counts @ Y, s_rY=succ @ Y, s_r2Y=succ @ Y,
        s_YY=(Y * counts[:, None]).T @ Y, s_rYY=(Y * succ[:, None]).T @ Y, s_r2YY=(Y * succ[:, None]).T @ Y,
        s_W=counts @ W, s_rW=succ @ W, s_W2=counts @ (W * W), s_rW2=succ @ (W * W), s_r2W2=succ @ (W * W),
        n_W_pos=float(counts[W > 0].sum()), max_W=float(W[counts > 0].max()),
        max_Y=np.max(np.where(counts[:, None] > 0, Y, 0.0), axis=0), n_Y_pos=counts @ (Y > 0),
    )


def sample_patterns(rng: np.random.Generator, N: int, probs: np.ndarray, q: np.ndarray, sims: int):
    """Exact sampler: counts ~ Multinomial(N, probs), successes ~ Binomial(counts, q); both (sims, 2^K)."""
    counts = rng.multinomial(int(N), probs, size=sims)
    succ = rng.binomial(counts, np.clip(q, 0.0, 1.0))
    return counts, succ


def sample_rows(rng: np.random.Generator, tensor: Tensor, N: int):
    """Row-level reference sampler: N uniform slates, Bernoulli(p(a)) rewards, Y_k = d_k 1[a_k = 0]."""
    D = np.asarray(tensor.D)
    A = (rng.random((int(N), len(D))) * D).astype(np.int64)
    r = (rng.random(int(N)) < tensor.p(A)).astype(float)
    Y = np.where(A == 0, D.astype(float), 0.0)
    return r, Y, A


def row_level_estimates(rng: np.random.Generator, tensor: Tensor, N: int, sims: int, priors) -> dict:
    """Same estimators as :func:`pattern_estimates` but by sampling every row and using estimators/slate.py."""
    D = np.asarray(tensor.D, dtype=float)
    out = {name: np.empty(sims) for name in ("ips", "snips", "pi", "wpi", "pi_plus_plus_logged_prior",
                                             "pi_plus_plus_estimated_alpha", "pi_beta")}
    for i in range(len(priors)):
        out[f"pi_plus_plus@{i}"] = np.empty(sims)
    alpha = D - 1.0
    for s in range(sims):
        r, Y, _ = sample_rows(rng, tensor, N)
        m = slate_est.SlateMoments.from_arrays(r, Y)
        out["ips"][s] = slate_est.ips(m).value
        out["snips"][s] = slate_est.snips(m).value
        out["pi"][s] = slate_est.pi(m).value
        out["wpi"][s] = slate_est.wpi(m).value
        for i, prior in enumerate(priors):
            out[f"pi_plus_plus@{i}"][s] = slate_est.pi_plus_plus(m, prior, alpha).value
        out["pi_plus_plus_logged_prior"][s] = slate_est.pi_plus_plus(m, None, alpha).value
        out["pi_plus_plus_estimated_alpha"][s] = slate_est.pi_plus_plus(m, priors[0], None).value
        out["pi_beta"][s] = slate_est.pi_beta(m).value
    return out


# ---- exact risk of the fixed-weight linear estimators -----------------------------------------------------
def exact_nmse(probs, q, a, b, N: int, v: float) -> float:
    """N*MSE of mean_t(r_t a(m_t) - b(m_t)): N bias^2 + Var(T), T = r a - b, r | m ~ Bernoulli(q(m)) (eq. 7-11)."""
    ET = np.sum(probs * (q * a - b))
    ET2 = np.sum(probs * (q * a * a - 2 * q * a * b + b * b))
    return float(N * (ET - v) ** 2 + (ET2 - ET ** 2))


# ---- one tensor, many cells -------------------------------------------------------------------------------
def _tensor_rng(seed: int, cell: Cell, tensor_id: int):
    tensor_rng = np.random.default_rng(np.random.SeedSequence([int(seed), int(cell.group), int(tensor_id), 0]))
    sim_rng = np.random.default_rng(np.random.SeedSequence([int(seed), int(cell.cell_id), int(tensor_id), 1]))
    return tensor_rng, sim_rng


def tensor_for(cell: Cell, tensor_id: int, seed: int) -> Tensor:
    """The tensor (and D, if random) of (cell.group, tensor_id, seed)."""
    tensor_rng, _ = _tensor_rng(seed, cell, tensor_id)
    D = cell.D
    if D is None:
        D = tuple(int(x) for x in tensor_rng.integers(cell.d_low, cell.d_high + 1, size=cell.K))
    return draw_tensor(tensor_rng, D, cell.model, cell.pbar)


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
