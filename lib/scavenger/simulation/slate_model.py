"""Section 6 of seed 002 at full scale: the simulation model (cells, reward tensors) and its exact pattern sampler.

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
per pattern: cost O(2^K) whatever N. All estimators are functions of (n_m, s_m) (slate_patterns.pattern_estimates).
The truth is v = p(0,..,0) = q(1,..,1).

Tensors are independent, seeded by (seed, group, tensor) (:func:`tensor_for`).
"""
from __future__ import annotations

import itertools
import json
from dataclasses import asdict, dataclass, field

import numpy as np

MODELS = ("elementwise", "pairwise")


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
