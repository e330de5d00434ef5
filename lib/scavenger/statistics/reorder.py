"""Built-in re-ordering policies as decisions, in the same pass (SQL over the day's flagged rows, scv_ev).

A re-ordering keeps the logged ads of an event and sorts them by a score (descending; ties keep the logged order)
over the positions the event holds, giving a deterministic decision (policy_id, event_id, slots, base_policy, dt)
that goes through the same join and tables as any other target (seed 001 section 4.2, the re-ordering estimator).

Scores: ``ctr`` (empirical CTR per ad, fitted on the ``ad_position`` statistics of an earlier window, optionally
position-normalised by an ADC vector: sum_i C(a,i) / sum_i M(a,i) C_i); ``random`` (a seeded hash of (seed,
event_id, ad_id)); a user table (ad_id, score) or (context_id, ad_id, score). Ads without a score go last. A score
table is registered with the engine and read as one map (no shuffle of the logs).
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from ..errors import UsageError

LOWEST = "-1.7976931348623157E308"


def ctr_scores(ad_position: pd.DataFrame, adc: np.ndarray | None = None) -> pd.DataFrame:
    """(ad_id, score): clicks / impressions per ad over all positions; with ``adc``: clicks / sum_i M(a,i) C_i
    (impressions whose reward is known, estimators.adc.rewarded)."""
    from ..estimators.attention_decay import rewarded

    df = rewarded(ad_position).groupby(["ad_id", "position"])[["m", "c"]].sum().reset_index()
    if adc is not None:
        C = np.asarray(adc, dtype=float)
        df["m"] = df["m"] * C[np.clip(df["position"].to_numpy(int), 1, C.size) - 1]
    agg = df.groupby("ad_id")[["m", "c"]].sum()
    agg = agg[agg["m"] > 0]
    return pd.DataFrame({"ad_id": agg.index.to_numpy(), "score": (agg["c"] / agg["m"]).to_numpy(float)})


def _sorted(policy_id: str, score_of, source: str = "scv_ev", join: str = "") -> str:
    """Decisions that order each event's logged slots by ``score_of(s)`` (a SQL expression of slot s) over the
    positions the row holds: the i-th ad by score goes to the i-th held position (a row holding positions 2 and 5
    is re-ordered among 2 and 5, not moved to 1 and 2: the re-ordering estimate compares C_j / C_i at positions
    the logs showed)."""
    from .sql.literals import text

    held = "array_sort(transform(e.slots, s -> s.position))"
    return f"""
SELECT {text(policy_id)} AS policy_id, e.event_id AS event_id,
  transform(array_sort(transform(e.slots, s -> named_struct('neg', -1D * coalesce({score_of}, {LOWEST}),
    'p', s.position, 'a', s.ad_id))),
    (x, i) -> named_struct('position', CAST(try_element_at({held}, i + 1) AS INT), 'ad_id', x.a,
      'probability', 1D)) AS slots,
  CAST(NULL AS STRING) AS base_policy, e.dt AS dt, CAST(0 AS BIGINT) AS _rid
FROM {source} e {join}
WHERE e.event_id IS NOT NULL AND size(e.slots) > 0"""


def random_sql(policy_id: str, seed: int) -> str:
    """A uniformly random order per event: score = a uniform from md5(seed, event_id, ad_id)."""
    u = (f"CAST(conv(substr(md5(concat('{int(seed)}:', e.event_id, ':', s.ad_id)), 1, 13), 16, 10) AS DOUBLE) "
         f"/ 4503599627370496D")
    return _sorted(policy_id, u)


def scores_sql(policy_id: str, table: str, by_context: bool) -> str:
    """Order by a registered score table ``table`` (ad_id, score) or (context_id, ad_id, score)."""
    key = _pair_key("e.context_id", "s.ad_id") if by_context else "s.ad_id"
    kcol = _pair_key("context_id", "ad_id") if by_context else "ad_id"
    join = (f"CROSS JOIN (SELECT map_from_entries(collect_list(named_struct('k', {kcol}, 'v', "
            f"CAST(score AS DOUBLE)))) AS scores FROM {table}) m")
    return _sorted(policy_id, f"element_at(m.scores, {key})", join=join)


def _pair_key(context: str, ad: str) -> str:
    """(context_id, ad_id) as one map key: both escaped as in the slate keys (logs.key_ad: no bare '|' left) and
    joined by '|', so two different pairs never share a key, whatever the ids hold."""
    from .sql.logs import key_ad

    return f"concat({key_ad(context)}, '|', {key_ad(ad)})"


def read_scores(path: str) -> pd.DataFrame:
    """A score table from CSV or Parquet with its keys (ad_id, context_id) as text: ids such as ``007`` stay
    ``007`` (a CSV reader's guess would make them the number 7, which matches no logged ad, and a numeric key
    column would stop the engine mid-pass when the map is looked up with a text ad id)."""
    from ..io import fs

    keys = ("ad_id", "context_id")
    if path.endswith(".csv"):
        return pd.read_csv(fs.local_path(path), dtype={k: str for k in keys})
    scores = fs.read_parquet(path)
    for k in keys:
        if k in scores.columns and not pd.api.types.is_string_dtype(scores[k]):
            scores[k] = scores[k].map(lambda v: v if v is None or isinstance(v, str) or pd.isna(v) else str(v))
    return scores


def check_scores(scores: pd.DataFrame, max_entries: int = 500_000) -> bool:
    """Whether the table is keyed by context; UsageError when it is not a score table: columns, size, and one
    number per key (the table is read as one map: a repeated or empty key, or a score that is no number, would stop
    the engine mid-pass)."""
    from ..safe import clip

    cols = set(scores.columns)
    if not {"ad_id", "score"} <= cols:
        raise UsageError("a score table needs columns (ad_id, score) or (context_id, ad_id, score)")
    if len(scores) > max_entries:
        raise UsageError(f"score table has {len(scores)} rows; at most {max_entries} are supported")
    keys = ["context_id", "ad_id"] if "context_id" in cols else ["ad_id"]
    empty = int(scores[keys].isna().any(axis=1).sum())
    if empty:
        raise UsageError(f"score table: {empty} row(s) without {' or '.join(keys)}; every score needs its key")
    repeated = scores[scores.duplicated(keys, keep=False)]
    if len(repeated):
        first = ", ".join(clip(v, 80) for v in repeated[keys].iloc[0])
        raise UsageError(f"score table: {repeated[keys].drop_duplicates().shape[0]} key(s) with more than one "
                         f"score (first: {first}); give one score per {', '.join(keys)}")
    number = pd.to_numeric(scores["score"], errors="coerce")
    bad = scores["score"][number.isna() & scores["score"].notna()]
    if len(bad):
        raise UsageError(f"score table: {len(bad)} score(s) that are not numbers (first: {clip(bad.iloc[0], 80)})")
    return "context_id" in cols


def parse_reorder_specs(specs) -> list[dict]:
    """``--reorder`` values: ``random[:seed]``, ``ctr:FROM:TO`` (fit window), ``scores:PATH`` -> spec dicts."""
    from ..contract import parse_date

    out = []
    for spec in specs or []:
        parts = spec.split(":")
        kind = parts[0]
        if kind == "random":
            try:
                seed = int(parts[1]) if len(parts) > 1 and parts[1] else 0
            except ValueError:
                raise UsageError(f"--reorder random:SEED needs an integer seed, got {spec!r}") from None
            out.append({"kind": "random", "seed": seed, "policy_id": f"reorder_random_{seed}"})
        elif kind == "ctr":
            if len(parts) != 3:
                raise UsageError(f"--reorder ctr needs ctr:FROM:TO (the fit window), got {spec!r}")
            parse_date(parts[1], "--reorder ctr FROM")
            parse_date(parts[2], "--reorder ctr TO")
            out.append({"kind": "ctr", "fit_from": parts[1], "fit_to": parts[2],
                        "policy_id": f"reorder_ctr_{parts[1]}_{parts[2]}"})
        elif kind == "scores":
            if len(parts) < 2:
                raise UsageError(f"--reorder scores needs scores:PATH, got {spec!r}")
            path = ":".join(parts[1:])
            import os

            if "://" not in path and not os.path.exists(path):
                raise UsageError(f"--reorder scores: no such file {path}")
            out.append({"kind": "scores", "path": path, "policy_id": "reorder_scores"})
        else:
            raise UsageError(f"unknown --reorder kind {kind!r} (random[:seed], ctr:FROM:TO, scores:PATH)")
    return out
