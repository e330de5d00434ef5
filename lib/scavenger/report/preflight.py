"""What a report checks of its inputs before it reads them whole: each table holds the columns the report's
sections read (named by the contracts), a ground truth of the data's number of positions, and an ``--out`` that is
none of the input directories (UsageError, exit 2, naming the flag)."""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from ..errors import UsageError
from .layout import is_remote, local_path, root_layout


# The columns each input table must have for the report to show it: the report's sections read these without a
# fallback. Their names are the contracts' (schemas/<kind>.schema.json; the validation table's shape is
# checks/verdict.py VERDICT_COLUMNS), checked in one place (:func:`check_columns`) when a table is read.
REPORT_COLUMNS = {
    "adc": ("position", "method", "coefficient", "ci_low", "ci_high"),
    "estimates": ("policy_id", "estimator", "value", "ci_low", "ci_high", "interval_kind"),
    "estimates_by_day": ("policy_id", "estimator", "value", "ci_low", "ci_high", "interval_kind", "identified"),
    "diagnostics": ("policy_id", "metric", "slot", "value"),
    "validation": ("check", "verdict"),
    "running": ("policy_id", "baseline_id", "estimator", "value", "ci_low", "ci_high", "cs_low", "cs_high", "level"),
}
_WRITER = {"adc": "`scavenger adc` (or evaluate)", "estimates": "`scavenger evaluate`",
           "estimates_by_day": "`scavenger evaluate --by-day`", "diagnostics": "`scavenger evaluate`",
           "validation": "`scavenger validate`", "running": "`scavenger evaluate --by-day`"}


def required_columns(kind: str) -> list[str]:
    """The columns of ``kind`` the report needs, each checked against its contract (a name that is not in the
    contract is a bug here, not a user's error)."""
    wanted = REPORT_COLUMNS[kind]
    if kind == "validation":
        from ..checks.verdict import VERDICT_COLUMNS as declared
    else:
        from ..contract import load_contract

        declared = load_contract("estimates" if kind == "estimates_by_day" else kind).columns
    unknown = [c for c in wanted if c not in declared]
    assert not unknown, f"report columns {unknown} are not in the {kind} contract"
    return list(wanted)


def check_columns(df: pd.DataFrame, kind: str, path: str, flag: str) -> pd.DataFrame:
    """``df`` when it has the columns the report reads from a ``kind`` table; else UsageError (exit 2) naming the
    flag, the table and the missing columns."""
    if not len(df.columns):
        raise UsageError(f"{flag}: {path} holds no table (no Parquet file with columns): expected the {kind} table "
                         f"of a {_WRITER[kind]} run")
    missing = [c for c in required_columns(kind) if c not in df.columns]
    if missing:
        schema = "checks/verdict.py" if kind == "validation" else \
            f"schemas/{'estimates' if kind == 'estimates_by_day' else kind}.schema.json"
        raise UsageError(f"{flag}: {path} does not hold the {kind} table ({schema}): missing column(s) "
                         f"{', '.join(missing)}; pass the output of a {_WRITER[kind]} run")
    return df


def _data_k(inp) -> list[tuple[str, int]]:
    """(where, K) of the report's data: each job's result.json counts.K and the ADC table's largest position."""
    out = []
    for job, res in inp.results.items():
        k = (res.get("counts") or {}).get("K") if isinstance(res.get("counts"), dict) else None
        if isinstance(k, (int, float)) and not isinstance(k, bool) and k > 0:
            out.append((f"{job} result.json", int(k)))
    if inp.adc is not None and len(inp.adc):
        pos = pd.to_numeric(inp.adc["position"], errors="coerce").max()
        if pd.notna(pos):
            out.append(("the ADC table", int(pos)))
    return out


def check_truth_matches(inp, ground_truth: str) -> None:
    """Refuse (exit 2) a ground truth of another number of positions K than the data reported: its true values
    and ADCs would be drawn beside estimates of other logs."""
    gt = inp.ground_truth or {}
    k = gt.get("n_positions")
    if not isinstance(k, int) or isinstance(k, bool):
        k = len(gt["adc"]) if isinstance(gt.get("adc"), list) and gt.get("adc") else None
    if k is None:
        return
    other = [(where, dk) for where, dk in _data_k(inp) if dk != k]
    if other:
        where, dk = other[0]
        raise UsageError(f"--ground-truth {ground_truth}: the truth is of K={k} positions but {where} has K={dk}: "
                         f"pass the ground_truth.json of the logs these runs read")


def input_dirs(adc=None, estimates=None, diagnostics=None, validation=None, history=None, ground_truth=None,
               root=None, dt=None) -> list[tuple[str, str, bool]]:
    """(flag, local directory, inside) of every input the report would read and of the job directories they
    belong to (whose result.json and _manifest.json a report written there would replace): ``--out`` must not be
    one of them, nor (``inside`` true) below one. Below ``--root`` is allowed (the daily DAG writes
    {root}/report/dt=DS) but not inside the job directories read from it. Remote inputs are left out."""
    out: list[tuple[str, str, bool]] = []

    def add(flag: str, path: str | None, inside: bool = True) -> None:
        if path is None or is_remote(path):
            return
        p = local_path(path).resolve()
        if p.is_dir():
            out.append((flag, str(p), inside))
        else:                                            # a file (ground truth, a CSV table): its directory
            out.append((flag, str(p.parent), False))
            p = p.parent
        if (p.parent / "result.json").exists() or (p.parent / "_manifest.json").exists():
            out.append((flag, str(p.parent), False))     # a table inside a job's --out directory

    if root is not None and dt is not None and local_path(root).is_dir():
        out.append(("--root", str(local_path(root).resolve()), False))
        try:
            r_adc, r_val, r_hist, r_est = root_layout(root, dt, None, None, None, None)
        except UsageError:
            r_adc, r_val, r_hist, r_est = None, None, None, []
        for path in (r_adc, r_val, *[job for _, job in r_est]):
            add("--root", path)
        add("--root", r_hist, inside=False)              # {root}/evaluate: its dt= directories are the inputs
    for flag, path in (("--adc", adc), ("--estimates", estimates), ("--diagnostics", diagnostics),
                       ("--validation", validation), ("--history", history), ("--ground-truth", ground_truth)):
        add(flag, path)
    return out


def check_out(out_dir: str, dirs: list[tuple[str, str, bool]]) -> None:
    """UsageError when ``--out`` is an input directory (or inside one): the report's result.json and
    _manifest.json would replace the input job's before it is read."""
    if is_remote(out_dir):
        return
    o = local_path(out_dir).resolve()
    for flag, d, inside in dirs:
        dp = Path(d)
        if o == dp or (inside and dp in o.parents):
            where = "is" if o == dp else "is inside"
            raise UsageError(f"--out {out_dir} {where} the input directory {d} ({flag}): the report's result.json "
                             f"and _manifest.json would replace that run's; pass another --out")
