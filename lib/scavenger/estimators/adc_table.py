"""What a stored ADC table given with ``--adc`` must hold before any step reads it (UsageError, exit 2, naming the
file, the column and the first bad value): read by ``estimate.read_adc_table`` and by the commands' shared
``--adc`` check (pipelines/options.check_adc_option), so that evaluate and train refuse the same tables alike."""
from __future__ import annotations

import numpy as np
import pandas as pd


def check_adc_table(table: pd.DataFrame, spec: str) -> None:
    """The values of a stored ADC table given with ``--adc`` (a CSV written by hand, or an ``adc``/``evaluate``
    output) that no later step can read: a position that is not a whole number, a coefficient that is text, not a
    number, and C_1 other than 1 (adc_vector takes C_1 = 1). UsageError (exit 2) naming the file, the column and
    the first bad value. Missing, non-finite or non-positive coefficients and positions other than 1..n, each
    once, are refused for the method used where it is chosen (:func:`check_adc_method_rows`)."""
    from ..errors import UsageError

    def first(mask, column) -> str:
        i = int(np.flatnonzero(np.asarray(mask))[0])
        value = table[column].iloc[i]
        value = value.item() if isinstance(value, np.generic) else value
        return f"{value!r} (data row {i + 1}, method {table['method'].iloc[i]!r})"

    where = f"--adc {spec}"
    if not len(table):
        raise UsageError(f"{where}: the ADC table holds no rows")
    pos = pd.to_numeric(table["position"], errors="coerce")
    bad = ~np.isfinite(pos) | (pos != np.floor(pos))
    if bad.any():
        raise UsageError(f"{where}: column position holds {first(bad, 'position')}: positions are whole numbers "
                         f"1, 2, ...; fix the table")
    coef = pd.to_numeric(table["coefficient"], errors="coerce")
    raw = table["coefficient"]
    unparsed = coef.isna() & raw.notna() & ~raw.astype(str).str.strip().str.lower().isin(["", "nan", "none", "null"])
    if unparsed.any():
        raise UsageError(f"{where}: column coefficient holds {first(unparsed, 'coefficient')}, not a number; fix "
                         f"the table")
    not_one = (pos == 1) & np.isfinite(coef.astype(float)) & (coef > 0) & ((coef - 1.0).abs() > 1e-9)
    if not_one.any():
        raise UsageError(f"{where}: C_1 (position 1) is {first(not_one, 'coefficient')}: ADCs are relative to the "
                         f"top position, C_1 = 1; fix the table")


def check_adc_method_rows(adc: str, method: str, rows) -> None:
    """The stored ADC row of ``method``: one positive finite coefficient per position 1..n (exit 2 naming the table
    and the problem; unreadable values are :func:`check_adc_table`'s to refuse)."""
    from ..errors import UsageError

    pos = pd.to_numeric(rows["position"], errors="coerce")
    coef = pd.to_numeric(rows["coefficient"], errors="coerce").astype(float)
    where = f"--adc {adc} (method {method})"
    if pos.isna().any() or not (pos == pos.round()).all():
        return                                     # positions that are not numbers: refused where it is read
    bad = rows[~np.isfinite(coef.to_numpy()) | (coef.to_numpy() <= 0)]
    if len(bad):
        shown = ", ".join(f"C_{p}={c}" for p, c in zip(bad["position"].head(3), bad["coefficient"].head(3)))
        why = [str(r) for r in bad["reason"].dropna().unique()] if "reason" in bad.columns else []
        raise UsageError(f"{where}: {len(bad)} coefficient(s) missing, not finite or not positive ({shown})"
                         + (f", as the run that wrote it said: {why[0]}" if why else "")
                         + "; every C_k must be a positive number: pass --adc numbers or a table estimated from "
                           "ranked logs")
    have = sorted(int(p) for p in pos)
    if not have or have != list(range(1, len(have) + 1)):
        raise UsageError(f"{where}: positions must be 1..n, each once; the table holds {have[:10]}")
