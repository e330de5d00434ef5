"""The generator's configuration: everything that defines a generated data set (the same config gives the same rows
on either engine)."""
from __future__ import annotations

import dataclasses
import datetime as _dt
import math
from dataclasses import dataclass

from ..errors import UsageError
from . import model

LAYOUTS = ("ranked", "slotted")
LOGGING_MODES = ("uniform", "history", "contextual", "multi")
TARGET_POLICIES = ("oracle", "most_clicked", "uniform_random", "oracle_mix")
MULTI_BASES = ("uniform", "greedy_popular", "greedy_random")
CLICK_MODELS = ("additive", "cascade")   # model.py: independent clicks C_k P(x, a_k), or the first click ends the scan
MAX_EVENTS_PER_DAY = (1 << 32) - 1   # the row hash takes the index within a day as 32 bits (hashing.py)

@dataclass
class GeneratorConfig:
    """Everything that defines a generated data set; the same config (and seed) gives the same rows."""

    layout: str = "ranked"            # ranked: K distinct ads from one pool; slotted: slot k from its own pool
    logging: str = "uniform"          # uniform | history | contextual | multi
    n_positions: int = 4              # K
    n_ads: int = 100                  # ranked: pool size (>= K)
    slot_sizes: list | None = None    # slotted: d_k per slot (default [5] * K)
    n_contexts: int = 60
    days: int = 3
    events_per_day: int = 200_000
    start_date: str = "2026-01-01"
    adc: tuple | None = None          # C_1..C_K (default: the paper's 1, .613, .527, .433, extended geometrically)
    epsilon: float = 0.2              # exploration rate of the epsilon-greedy logging policies
    seed: int = 0
    context_skew: float = 0.5         # w_c proportional to exp(skew * N(0,1))
    base_ctr: float = 0.08            # sigmoid centre of P(x, a)
    ad_effect_sd: float = 0.6         # sd of the ad effect on the logit
    interaction: float = 1.0          # strength of the context-ad interaction on the logit
    latent_dim: int = 4
    contextual_noise: float = 0.5     # contextual mode: sd of the logit noise of its ranking
    multi_weights: tuple = (0.4, 0.3, 0.3)   # multi mode: probability of each base policy per event
    mix_weight: float = 0.8           # oracle_mix: probability of the oracle slate (else most_clicked)
    partial_slates: float = 0.0       # share of events logged as one slot only, at a uniform position (OBD-like)
    propensities: bool = True         # False: every logged propensity is null (propensity-free logs, seed 001)
    click_model: str = "additive"     # additive: r_k ~ Bernoulli(C_k P(x, a_k)) independently; cascade: the user
    #                                   stops at the first click, r_k = c_k prod_{j<k} (1 - c_j) (slotted only)

    def resolved(self) -> "GeneratorConfig":
        """Validate (UsageError with one clear line) and fill the defaults that depend on K."""
        if self.layout not in LAYOUTS:
            raise UsageError(f"layout must be one of {', '.join(LAYOUTS)}; got {self.layout!r}")
        if self.logging not in LOGGING_MODES:
            raise UsageError(f"logging must be one of {', '.join(LOGGING_MODES)}; got {self.logging!r}")
        K = _int(self.n_positions, "positions")
        if K < 1:
            raise UsageError(f"positions must be >= 1; got {K}")
        n_ads = _int(self.n_ads, "ads")
        slot_sizes = None
        if self.layout == "ranked":
            if n_ads < K:
                raise UsageError(f"ads ({n_ads}) must be >= positions ({K}) for the ranked layout")
        else:
            slot_sizes = [5] * K if self.slot_sizes is None else [_int(d, "slot size") for d in self.slot_sizes]
            if len(slot_sizes) != K:
                raise UsageError(f"slot sizes must give one size per position ({K}); got {len(slot_sizes)}")
            if min(slot_sizes) < 1:
                raise UsageError(f"slot sizes must be >= 1; got {slot_sizes}")
        for name in ("n_contexts", "days", "events_per_day"):
            if _int(getattr(self, name), name) < 1:
                raise UsageError(f"{name.replace('_', '-')} must be >= 1; got {getattr(self, name)}")
        if _int(self.events_per_day, "events_per_day") > MAX_EVENTS_PER_DAY:
            raise UsageError(f"events-per-day must be <= {MAX_EVENTS_PER_DAY}; got {self.events_per_day}")
        if _int(self.seed, "seed") < 0:
            raise UsageError(f"seed must be >= 0; got {self.seed}")
        try:
            start = _dt.date.fromisoformat(str(self.start_date))
        except ValueError:
            raise UsageError(f"start date must be YYYY-MM-DD; got {self.start_date!r}") from None
        adc = model.default_adc(K) if self.adc is None else tuple(float(c) for c in self.adc)
        if len(adc) < K:
            raise UsageError(f"adc must give at least {K} coefficients (one per position); got {len(adc)}")
        adc = adc[:K]
        if not math.isclose(adc[0], 1.0, abs_tol=1e-12):
            raise UsageError(f"adc must start with C_1 = 1; got {adc[0]}")
        if any(not (b < a) for a, b in zip(adc, adc[1:])) or adc[-1] <= 0:
            raise UsageError(f"adc must be strictly decreasing from 1 and positive; got {list(adc)}")
        eps = float(self.epsilon)
        if not 0.0 < eps <= 1.0:
            raise UsageError(f"epsilon must be in (0, 1]; got {eps}")
        weights = tuple(float(w) for w in self.multi_weights)
        if len(weights) != len(MULTI_BASES) or min(weights) <= 0 or not math.isclose(sum(weights), 1.0):
            raise UsageError(f"multi weights must be {len(MULTI_BASES)} positive numbers summing to 1; got {weights}")
        if not 0.0 <= float(self.mix_weight) <= 1.0:
            raise UsageError(f"mix weight must be in [0, 1]; got {self.mix_weight}")
        if not 0.0 < float(self.base_ctr) < 1.0:
            raise UsageError(f"base ctr must be in (0, 1); got {self.base_ctr}")
        try:
            partial = float(self.partial_slates)
        except (TypeError, ValueError):
            raise UsageError(f"partial slates must be a share in [0, 1]; got {self.partial_slates!r}") from None
        if not 0.0 <= partial <= 1.0:
            raise UsageError(f"partial slates must be a share in [0, 1]; got {self.partial_slates}")
        if self.click_model not in CLICK_MODELS:
            raise UsageError(f"click model must be one of {', '.join(CLICK_MODELS)}; got {self.click_model!r}")
        if self.click_model == "cascade" and self.layout != "slotted":
            # a uniform ranked slate draws without replacement: positions are dependent, and the cascade's value
            # E[sum_k m_k prod_{j<k} (1 - m_j)] is then no product of per-position means (no exact truth)
            raise UsageError("the cascade click model needs --layout slotted (independent pools per position give "
                             "its exact truth)")
        return dataclasses.replace(self, n_positions=K, n_ads=n_ads, slot_sizes=slot_sizes, adc=adc,
                                   epsilon=eps, multi_weights=weights, start_date=start.isoformat(),
                                   n_contexts=int(self.n_contexts), days=int(self.days),
                                   events_per_day=int(self.events_per_day), seed=int(self.seed),
                                   partial_slates=partial, propensities=bool(self.propensities))

    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in d.items()}


def _int(value, name: str) -> int:
    try:
        as_float = float(value)
    except (TypeError, ValueError):
        raise UsageError(f"{name} must be an integer; got {value!r}") from None
    if not as_float.is_integer():
        raise UsageError(f"{name} must be an integer; got {value!r}")
    return int(as_float)
