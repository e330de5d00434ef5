"""What every plot of the report shares: a matplotlib Figure on the Agg canvas (no display, no global pyplot
state) rendered to PNG bytes, with every text literal: policy ids, ad ids and estimator names come from the data, so
in a plot they are text, never markup, and never a control character."""
from __future__ import annotations

import io
import math

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

DPI = 100
COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22",
          "#17becf"]


# Policy ids, ad ids and estimator names come from the data: in a plot they are text, never markup (a "$" would
# start matplotlib's mathtext, a TeX setting would hand them to LaTeX) and never a control character
_LITERAL_RC = {"text.usetex": False, "text.parse_math": False}


def literal_text(fig: Figure) -> Figure:
    """Every text of ``fig`` literal: mathtext and TeX off, control characters escaped, long values cut."""
    from matplotlib.text import Text

    from ..safe import bound

    for ax in fig.axes:                  # tick labels given as text are set again from the formatter at draw time
        for axis in (ax.xaxis, ax.yaxis):
            for fmt in (axis.get_major_formatter(), axis.get_minor_formatter()):
                if hasattr(fmt, "seq"):                                   # FixedFormatter
                    fmt.seq = [bound(str(x), limit=300, value_limit=80) for x in fmt.seq]
                elif callable(getattr(fmt, "func", None)) and not getattr(fmt.func, "_literal", False):
                    fmt.func = _bounded_func(fmt.func)                      # FuncFormatter (set_ticklabels)
    for a in fig.findobj():              # artists' labels (legend entries are built from them)
        label = a.get_label() if hasattr(a, "get_label") else None
        if isinstance(label, str) and label and not label.startswith("_"):
            safe = bound(label, limit=300, value_limit=80)
            if safe != label:
                a.set_label(safe)
    for t in fig.findobj(Text):
        t.set_usetex(False)
        t.set_parse_math(False)
        text = t.get_text()
        safe = bound(text, limit=300, value_limit=80) if text else text
        if safe != text:
            t.set_text(safe)
    return fig


def _bounded_func(func):
    from ..safe import bound

    def wrapped(x, pos=None):
        return bound(str(func(x, pos)), limit=300, value_limit=80)

    wrapped._literal = True
    return wrapped


def _literal(fn):
    """A figure function whose texts are literal (see :func:`literal_text`), also in the notebook."""
    import functools

    import matplotlib

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        with matplotlib.rc_context(_LITERAL_RC):
            fig = fn(*args, **kwargs)
        return literal_text(fig) if fig is not None else fig

    return wrapper


def to_png(fig: Figure) -> bytes:
    """Render a Figure to PNG bytes with the Agg canvas (texts literal, see :func:`literal_text`)."""
    import matplotlib

    FigureCanvasAgg(fig)
    buf = io.BytesIO()
    with matplotlib.rc_context(_LITERAL_RC):
        literal_text(fig)
        fig.savefig(buf, format="png", dpi=DPI, bbox_inches="tight")
    return buf.getvalue()


def _finite(x) -> bool:
    try:
        return x is not None and math.isfinite(float(x))
    except (TypeError, ValueError):
        return False


def _err(values, lows, highs):
    """Asymmetric error bars (non-negative, NaN where the interval is missing)."""
    v, lo, hi = (np.asarray(a, dtype=float) for a in (values, lows, highs))
    return np.vstack([np.clip(v - lo, 0, None), np.clip(hi - v, 0, None)])
