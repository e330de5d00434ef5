"""Features of the policy learners: context tokens, one-hot design matrices, and the position correction (ADCs).

Context x of an event: its ``context_id`` and its ``context`` map (categorical features name -> value). The learners'
unit of context is the pair, keyed by ``ctx_key`` (``statements.ctx_key_sql``: the id and the map's sorted entries
as text), so that two events with the same id but other features (the OBD's campaign id and user features) are
scored apart. Tokens of x (strings, one-hot with binary counts over a sorted vocabulary):
  interactions 1:     "k=v" for every entry (sorted by key);
  interactions 2:     also "k1=v1&k2=v2" for every pair of entries;
  interactions full:  also "@<ctx_key>" (one indicator per distinct context: a tabular model).
The "k=v" tokens are built in SQL (``statements``), pairs and the rest here, on the few distinct contexts.

The regression reduction crosses every context token with the ad ("ad=<a>" plus "ad=<a>|<token>"); the
cost-sensitive classifier uses the context tokens alone (the class is the ad).

Position correction (MATH.md "Factoring assumption"): P(click | x, a at i) = C_i P(x, a). ``resolve_adc`` turns
the ``--adc`` flag (numbers, a stored ADC table, or 'estimate') into the vector C_1..C_K; 'estimate' runs the
statistics pass of ``scavenger adc``/``evaluate`` over the training window and the same ADC code
(``estimate.resolve_adc``).
"""
from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import scipy.sparse as sp

from ..errors import UsageError

INTERACTIONS = ("1", "2", "full")


def context_tokens(singles, key: str, interactions: str = "2") -> list[str]:
    """Tokens of one context from its "k=v" entries (in key order) and its ctx_key (module docstring)."""
    if interactions not in INTERACTIONS:
        raise UsageError(f"--interactions must be one of {', '.join(INTERACTIONS)}; got {interactions!r}")
    singles = [str(s) for s in (singles if singles is not None else [])]
    tokens = list(singles)
    if interactions in ("2", "full"):
        tokens += [f"{a}&{b}" for i, a in enumerate(singles) for b in singles[i + 1:]]
    if interactions == "full":
        tokens.append(f"@{key}")
    return tokens


def tokens_by_context(contexts, interactions: str) -> dict:
    """{ctx_key: tokens} from a fetched contexts frame (ctx_key, singles)."""
    return {k: context_tokens(s, k, interactions) for k, s in zip(contexts["ctx_key"], contexts["singles"])}


def ad_cross_tokens(ad: str, tokens: list[str]) -> list[str]:
    """["ad=<a>"] + ["ad=<a>|<t>" for t in tokens]: ad effects and ad x context interactions."""
    head = f"ad={ad}"
    return [head] + [f"{head}|{t}" for t in tokens]


def vocabulary(rows) -> list[str]:
    """Sorted distinct tokens of the rows (every token seen at least once: CountVectorizer minDF = 1)."""
    return sorted({t for r in rows for t in r})


def design(rows, vocab: list[str]) -> sp.csr_matrix:
    """Binary one-hot matrix (rows x vocabulary); tokens outside the vocabulary are ignored."""
    index = {t: j for j, t in enumerate(vocab)}
    indptr, indices = [0], []
    for r in rows:
        cols = sorted({index[t] for t in r if t in index})
        indices.extend(cols)
        indptr.append(len(indices))
    data = np.ones(len(indices), dtype=float)
    return sp.csr_matrix((data, np.asarray(indices, dtype=np.int64), np.asarray(indptr, dtype=np.int64)),
                         shape=(len(indptr) - 1, len(vocab)))


def parse_adc_numbers(text: str) -> np.ndarray:
    """'1,.613,.527' -> array; must start at 1 and be positive."""
    try:
        values = np.array([float(v) for v in text.split(",") if v.strip()], dtype=float)
    except ValueError:
        raise UsageError(f"--adc expects comma-separated numbers, a path, or 'estimate'; got {text!r}") from None
    if values.size == 0 or not math.isclose(values[0], 1.0, abs_tol=1e-9) or np.any(values <= 0) \
            or not np.all(np.isfinite(values)):
        raise UsageError(f"--adc numbers must start with 1 and be positive; got {text!r}")
    return values


def is_adc_table(spec: str) -> bool:
    from ..io import fs

    return "://" in spec or fs.exists(spec)


def resolve_adc(engine, spec: str, inputs, method: str = "heuristic") -> tuple[np.ndarray, str]:
    """(C_1..C_K, source) from numbers, a stored ADC table (``scavenger adc`` output: position, method,
    coefficient), or 'estimate': the alpha-weighted ADCs of the training window (``inputs``: pipelines.common
    Inputs of that window), through the statistics pass and ``estimate.resolve_adc`` as ``evaluate`` does."""
    from .. import estimate as E
    from ..estimators.adc import adc_vector

    if spec in (None, "", "estimate"):
        from ..pipelines.common import GateConfig, run_window
        from ..statistics.scan import ScanPlan

        window = run_window(engine, inputs, (), ScanPlan(False, False, False), GateConfig(mode="off"))
        ctx = E.Context(options=SimpleNamespace(adc="estimate", adc_method=method, level=0.95, dcg_base=2.0))
        E.resolve_adc(window.stats, ctx)
        if ctx.C is None:
            raise UsageError(f"cannot estimate ADCs from the training logs ({ctx.adc_reason}); pass --adc numbers")
        return np.asarray(ctx.C, dtype=float), f"estimate:{method}"
    if is_adc_table(spec):
        table = E.read_adc_table(spec)
        methods = [str(x) for x in table["method"].dropna().unique()]
        pick = method if method in methods else methods[0]
        C = adc_vector(table[table["method"] == pick], pick)
        if not np.all(np.isfinite(C)) or np.any(C <= 0):
            raise UsageError(f"--adc table {spec} has missing or non-positive coefficients: {list(C)}")
        return np.asarray(C, dtype=float), f"table:{spec}:{pick}"
    return parse_adc_numbers(spec), "numbers"
