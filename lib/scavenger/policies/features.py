"""Features of the policy learners: context tokens, one-hot design matrices, and the position correction (ADCs).

Context x of an event: its ``context_id`` and its ``context`` map (categorical features name -> value). The learners'
unit of context is the pair, keyed by ``ctx_key`` (``statements.ctx_key_sql``: the id and the map's sorted entries
as text, their separators escaped so that no two pairs share a key), so that two events with the same id but other features (the OBD's campaign id and user features) are
scored apart. Tokens of x (strings, one-hot with binary counts over a sorted vocabulary):
  interactions 1:     "k=v" for every entry (sorted by key; k and v escaped as in the key, "k=~n" for a null v);
  interactions 2:     also "k1=v1&k2=v2" for every pair of entries among the context's first ``max_pair_keys``
                      entries (default ``PAIR_KEYS`` = 64, ``--max-pair-keys``);
  interactions full:  also "@<ctx_key>" (one indicator per distinct context: a tabular model).
The "k=v" tokens are built in SQL (``statements``), pairs and the rest here, on the few distinct contexts.
A null ``context`` map (the contract allows it; it arrives as None, pandas NA or NaN) has no entries, and a null
entry is skipped: such a context has only the ad tokens (and its "@<ctx_key>").

Bounded work per row. Pairs grow with the square of a context's entries (one 4,000-key map: 8 million pair
tokens, crossed with every ad), so only the first ``max_pair_keys`` entries in key order form pairs: at most
max_pair_keys (max_pair_keys - 1) / 2 pairs per context, whatever a row holds; every entry still gives its "k=v"
token (linear in the row). Deterministic, and the same on both engines (the entries come sorted by key from SQL);
contexts within the cap (all normal data) get exactly the tokens they always had. The rows and contexts whose
pairs were capped are counted (``capped_rows``; result.json counts ``train_rows_pairs_capped``,
``train_contexts_pairs_capped``, ``score_rows_pairs_capped``, ``score_contexts_pairs_capped``) and named in a
warning of the run summary.

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
import pandas as pd
import scipy.sparse as sp

from ..errors import DataCheckFailed, UsageError

INTERACTIONS = ("1", "2", "full")
PAIR_KEYS = 64          # default --max-pair-keys: entries of a context that form pair tokens (module docstring)


def _is_null(value) -> bool:
    """None, pandas NA/NaT, float NaN (a scalar; lists and arrays are not null)."""
    if value is None:
        return True
    if not pd.api.types.is_scalar(value):
        return False
    try:
        return bool(pd.isna(value))
    except (TypeError, ValueError):
        return False


def entries(singles) -> list[str]:
    """The "k=v" entries of one context as text, in their order: a null map (None, NA, NaN) has none, a null entry
    is skipped."""
    if _is_null(singles):
        return []
    if isinstance(singles, (str, bytes)):
        singles = [singles]
    out = []
    for s in singles:
        if _is_null(s):
            continue
        out.append(s.decode("utf-8", "replace") if isinstance(s, bytes) else str(s))
    return out


def check_pair_keys(max_pair_keys) -> int:
    """--max-pair-keys as an int >= 1 (exit 2 otherwise)."""
    try:
        value = None if isinstance(max_pair_keys, bool) else int(max_pair_keys)
    except (TypeError, ValueError, OverflowError):
        value = None
    if value is None or value < 1 or value != max_pair_keys:
        raise UsageError(f"--max-pair-keys must be an integer >= 1; got {max_pair_keys!r}")
    return value


def context_tokens(singles, key: str, interactions: str = "2", max_pair_keys: int = PAIR_KEYS) -> list[str]:
    """Tokens of one context from its "k=v" entries (in key order) and its ctx_key (module docstring); pairs only
    among the first ``max_pair_keys`` entries."""
    if interactions not in INTERACTIONS:
        raise UsageError(f"--interactions must be one of {', '.join(INTERACTIONS)}; got {interactions!r}")
    singles = entries(singles)
    tokens = list(singles)
    if interactions in ("2", "full"):
        paired = singles[:max(int(max_pair_keys), 0)]
        tokens += [f"{a}&{b}" for i, a in enumerate(paired) for b in paired[i + 1:]]
    if interactions == "full":
        tokens.append(f"@{'' if _is_null(key) else key}")
    return tokens


def pairs_capped(singles, interactions: str, max_pair_keys: int = PAIR_KEYS) -> bool:
    """Whether ``context_tokens`` left some of this context's entries out of its pairs."""
    return interactions in ("2", "full") and len(entries(singles)) > int(max_pair_keys)


def tokens_by_context(contexts, interactions: str, max_pair_keys: int = PAIR_KEYS) -> dict:
    """{ctx_key: tokens} from a fetched contexts frame (ctx_key, singles)."""
    return {k: context_tokens(s, k, interactions, max_pair_keys)
            for k, s in zip(contexts["ctx_key"], contexts["singles"])}


def capped_rows(contexts, interactions: str, max_pair_keys: int = PAIR_KEYS) -> tuple[int, int]:
    """(rows, contexts) of a fetched contexts frame (ctx_key, singles, n_rows) whose pairs were capped."""
    rows = ctxs = 0
    n_rows = contexts["n_rows"] if "n_rows" in contexts else [1] * len(contexts)
    for s, n in zip(contexts["singles"], n_rows):
        if pairs_capped(s, interactions, max_pair_keys):
            ctxs += 1
            rows += 0 if _is_null(n) else int(n)
    return rows, ctxs


def ad_cross_tokens(ad: str, tokens: list[str]) -> list[str]:
    """["ad=<a>"] + ["ad=<a>|<t>" for t in tokens]: ad effects and ad x context interactions. The ad id is escaped
    as the context key's text (statements.key_text; ids without separators, nearly all, are kept), so the bare '|'
    is the ad/context boundary: ad 'ad=x|page=a' alone is not ad 'ad=x' with context entry page=a."""
    from .scoring_sql import key_text

    head = f"ad={key_text(str(ad))}"
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


MAX_ADC_POSITIONS = 10_000     # a stored ADC table naming a larger position is not an ADC table


def _table_vector(table, spec: str, method: str) -> tuple[np.ndarray, str]:
    """C_1..C_K of ``method`` from a stored ADC table, refused as evaluate refuses it (exit 2): a method the table
    does not hold, a missing, non-finite or non-positive coefficient, positions other than 1..n
    (pipelines/options.check_adc_option, which train's prepare runs before an engine starts)."""
    from ..pipelines.options import check_adc_option
    from ..estimators.attention_decay import adc_vector

    check_adc_option(spec, method, table)
    sub = table[table["method"].astype(str) == method]
    sub = sub.assign(position=pd.to_numeric(sub["position"]).astype("int64"),
                     coefficient=pd.to_numeric(sub["coefficient"]).astype(float))
    if sub["position"].max() > MAX_ADC_POSITIONS:
        raise UsageError(f"--adc table {spec} names position {sub['position'].max():.0f}: more than "
                         f"{MAX_ADC_POSITIONS} positions is not an ADC table")
    return np.asarray(adc_vector(sub, method), dtype=float), method


def resolve_adc(engine, spec: str, inputs, method: str = "heuristic", rules=None) -> tuple[np.ndarray, str]:
    """(C_1..C_K, source) from numbers, a stored ADC table (``scavenger adc`` output: position, method,
    coefficient), or 'estimate': the alpha-weighted ADCs of the training window (``inputs``: pipelines.common
    Inputs of that window), through the statistics pass and ``estimators.adc_family.resolve_adc`` as ``evaluate`` does.
    Logs (or a table) that cannot identify the ADCs are a data condition: DataCheckFailed (exit 3). ``rules``: the
    row rules of that pass (checks.rules.RuleConfig; default: the contract's)."""
    from ..estimators import adc_family as E

    if spec in (None, "", "estimate"):
        from ..pipelines.common import GateConfig, run_window
        from ..checks.rules import RuleConfig
        from ..statistics.scan import ScanPlan, StatsConfig

        rules = rules or RuleConfig()
        window = run_window(engine, inputs, (), ScanPlan(False, False, False, interaction_cells=False),
                            GateConfig(rules=rules, mode="off"),
                            StatsConfig(rules=rules))
        ctx = E.AdcContext(options=SimpleNamespace(adc="estimate", adc_method=method, level=0.95, dcg_base=2.0))
        E.resolve_adc(window.stats, ctx)
        if ctx.C is None:
            raise DataCheckFailed(f"cannot estimate ADCs from the training logs ({ctx.adc_reason}); "
                                  f"pass --adc numbers", counts=window.record())
        return np.asarray(ctx.C, dtype=float), f"estimate:{method}"
    if is_adc_table(spec):
        C, pick = _table_vector(E.read_adc_table(spec), spec, method)
        return C, f"table:{spec}:{pick}"
    return parse_adc_numbers(spec), "numbers"
