"""What both learners share: the Newton solver, the aggregated statistics as numbers, and the model files.

Solver. Both objectives (the Poisson GLM of ``regression``, the weighted multinomial logistic regression of
``cost_sensitive``) are smooth, convex and, with the L2 term, strictly convex in the penalised coefficients. They are
minimised by a trust-region Newton method with conjugate-gradient steps on exact Hessian-vector products (scipy
``trust-ncg``): no Hessian is formed, so the cost grows with the non-zeros of the design, and the quadratic
convergence ends at the optimum to rounding, so the same statistics give the same model on any engine.

Model files (engine-independent, any URI ``io.fs`` opens): ``<out>/model/<method>/model.json`` (the learner, its
vocabulary, classes, ADCs, configuration and training metadata) and ``coefficients.npz`` (the arrays).
"""
from __future__ import annotations

import io
import json

import numpy as np
import pandas as pd

GTOL = 1e-10


def newton(fun, x0: np.ndarray, hessp, max_iter: int, gtol: float = GTOL) -> tuple[np.ndarray, dict]:
    """argmin of ``fun`` (returns value, gradient) from ``x0``; ``hessp(x, v)`` = Hessian(x) v."""
    import warnings

    from scipy.optimize import minimize

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        res = minimize(fun, x0, jac=True, hessp=hessp, method="trust-ncg",
                       options={"gtol": gtol, "maxiter": int(max_iter)})
    grad = float(np.max(np.abs(res.jac))) if np.size(res.jac) else 0.0
    return res.x, {"iterations": int(res.nit), "converged": bool(grad <= 10 * gtol), "max_abs_gradient": grad}


def numbers(frame: pd.DataFrame, column: str) -> np.ndarray:
    """A fetched exact-decimal text column (statements.exact_sum) as doubles (NULL: 0)."""
    return np.array([0.0 if v is None or (isinstance(v, float) and v != v) else float(v) for v in frame[column]],
                    dtype=float)


def aggregated(frame: pd.DataFrame) -> pd.DataFrame:
    """The fetched aggregate (statements.aggregate) with numeric columns, in a fixed row order."""
    out = frame.assign(s_r=numbers(frame, "s_r"), s_w=numbers(frame, "s_w"),
                       n=frame["n"].astype("int64"), coef=frame["coef"].astype(float),
                       position=frame["position"].astype("int64"))
    return out.sort_values(["ctx_key", "ad_id", "position"], kind="mergesort").reset_index(drop=True)


def save_model(out_dir: str, meta: dict, arrays: dict) -> str:
    """model.json and coefficients.npz under ``out_dir``; returns ``out_dir``."""
    from ..io import fs

    buf = io.BytesIO()
    np.savez(buf, **{k: np.asarray(v) for k, v in arrays.items()})
    fs.write_bytes(fs.join(out_dir, "coefficients.npz"), buf.getvalue())
    fs.write_bytes(fs.join(out_dir, "model.json"),
                   (json.dumps(meta, indent=1, default=_jsonable) + "\n").encode("utf-8"))
    return out_dir


def read_model(model_dir: str) -> tuple[dict, dict]:
    """(model.json, {name: array}) of a saved model."""
    from ..io import fs

    meta = json.loads(fs.read_bytes(fs.join(model_dir, "model.json")).decode("utf-8"))
    with np.load(io.BytesIO(fs.read_bytes(fs.join(model_dir, "coefficients.npz"))), allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files}
    return meta, arrays


def _jsonable(value):
    if hasattr(value, "item"):
        return value.item()
    if hasattr(value, "tolist"):
        return value.tolist()
    return str(value)
