"""The checks at the top of the report: failed and warned checks first, each with the scopes that did not pass;
every passing check collapsed to one line (``<details>``, its scopes inside).

From the validate job's table when the report has one (``check``, ``scope``, ``statistic``, ``threshold``,
``verdict``, ``message``), else from the verdicts evaluate recorded on its estimates (the ``checks`` column).
"""
from __future__ import annotations

import pandas as pd

from .markup import _esc, html_table

SHOWN_PER_CHECK = 3          # failed/warned scopes listed per check (all of them are in the validation section)
_RANK = {"fail": 0, "warn": 1, "pass": 3}


def rank(verdict) -> int:
    """Verdicts worst first: fail 0, warn 1, anything else (not_run, ...) 2, pass 3."""
    return _RANK.get(str(verdict).lower(), 2)


def check_groups(validation: pd.DataFrame | None, estimates: pd.DataFrame | None = None) -> list[dict]:
    """One dict per check (``check``, worst ``verdict``, ``rows``), worst first, then by name."""
    groups = []
    if validation is not None and len(validation) and {"check", "verdict"} <= set(validation.columns):
        for name, g in validation.groupby("check", sort=True):
            groups.append({"check": name, "verdict": str(min(g["verdict"], key=rank)), "rows": g,
                           "source": "validate"})
    elif estimates is not None and len(estimates) and "checks" in estimates.columns:
        groups = _evaluate_groups(estimates)
    return sorted(groups, key=lambda g: (rank(g["verdict"]), str(g["check"])))


def _evaluate_groups(estimates: pd.DataFrame) -> list[dict]:
    """The verdicts evaluate recorded on its estimates (``checks``: ``a:pass b:fail ...``), one group per check
    (not per (check, verdict): a check a target's own gate failed for one policy and passed for another is one
    group, failed), a row per verdict it took naming the estimators and policies that saw it."""
    policies = estimates["policy_id"] if "policy_id" in estimates.columns else [None] * len(estimates)
    seen: dict = {}
    for est, pol, checks in zip(estimates["estimator"], policies, estimates["checks"]):
        for token in (checks.split() if isinstance(checks, str) else []):
            key, _, verdict = token.partition(":")
            ests, pols = seen.setdefault(key, {}).setdefault(verdict or "not_run", (set(), set()))
            ests.add(str(est))
            if pol is not None:
                pols.add(str(pol))
    groups = []
    for key, by_verdict in seen.items():
        order = sorted(by_verdict, key=lambda v: (rank(v), v))
        scopes = [f"estimators {', '.join(sorted(by_verdict[v][0]))}"
                  + (f"; policies {', '.join(sorted(by_verdict[v][1]))}" if by_verdict[v][1] else "") for v in order]
        rows = pd.DataFrame({"scope": scopes, "verdict": order,
                             "message": ["verdict recorded by evaluate on its estimates"] * len(order)})
        groups.append({"check": key, "verdict": order[0], "rows": rows, "source": "evaluate"})
    return groups


def _counts(rows: pd.DataFrame) -> str:
    counts = rows["verdict"].astype(str).value_counts()
    order = sorted(counts.index, key=rank)
    return ", ".join(f"{int(counts[v])} {_esc(v)}" for v in order) + f" of {len(rows)} scope(s)"


def _bad_group(g: dict) -> str:
    rows = g["rows"]
    bad = rows[rows["verdict"].map(rank) < 3]
    items = [f'<li data-verdict="{_esc(r.get("verdict"))}"><span class="scope">{_esc(r.get("scope"))}</span>: '
             f'{_esc(r.get("message"))}</li>' for r in bad.head(SHOWN_PER_CHECK).to_dict("records")]
    if len(bad) > SHOWN_PER_CHECK:
        items.append(f'<li class="muted">and {len(bad) - SHOWN_PER_CHECK} more (Validation verdicts below)</li>')
    v = _esc(g["verdict"])
    return (f'<div class="check verdict-{v}" data-check="{_esc(g["check"])}" data-verdict="{v}">'
            f'<p><span class="badge verdict-{v}">{v}</span> <b>{_esc(g["check"])}</b>: {_counts(rows)}</p>'
            f"<ul>{''.join(items)}</ul></div>")


def _pass_group(g: dict) -> str:
    rows = g["rows"]
    cols = [c for c in ("scope", "statistic", "threshold", "message") if c in rows.columns]
    return (f'<details class="check verdict-pass" data-check="{_esc(g["check"])}" data-verdict="pass"><summary>'
            f'<span class="badge verdict-pass">pass</span> <b>{_esc(g["check"])}</b>: {_counts(rows)}</summary>'
            + html_table(rows, f"check:{g['check']}", cols) + "</details>")


def checks_block(validation: pd.DataFrame | None, estimates: pd.DataFrame | None = None) -> str:
    """The checks, failed and warned first; passing ones one line each."""
    groups = check_groups(validation, estimates)
    if not groups:
        return '<p class="missing">No check verdicts (pass --validation, or --estimates of an evaluate run).</p>'
    source = "validate" if groups[0]["source"] == "validate" else "evaluate (no --validation given)"
    n = {k: sum(rank(g["verdict"]) == r for g in groups) for k, r in (("failed", 0), ("warned", 1), ("passed", 3))}
    head = (f'<p class="muted">{len(groups)} checks from {_esc(source)}: {n["failed"]} failed, {n["warned"]} warned, '
            f'{n["passed"]} passed{"; others not run" if len(groups) > sum(n.values()) else ""}.</p>')
    return head + "".join(_pass_group(g) if rank(g["verdict"]) == 3 else _bad_group(g) for g in groups)
