"""The --reorder policies of ``scavenger evaluate`` as derived decisions: SQL over the pass's flagged rows (the
re-orderings of each logged slate, statistics/reorder.py), joined like the decisions read, and a spec of them for
the stored days' fingerprint. A CTR re-ordering is fitted first on an earlier window."""
from __future__ import annotations

from ..errors import DataCheckFailed, UsageError
from .common import GateConfig, Inputs, run_window


def derived_policies(engine, inputs: Inputs, options, gate, config, store, batch_days):
    """(SQL of each --reorder policy over the pass's rows, a spec of them for the stored days' fingerprint). A
    CTR re-ordering is fitted on an earlier window (its ad_position statistics; the store is reused)."""
    import hashlib

    from ..contract import parse_date
    from ..statistics import reorder as R
    from ..statistics.scan import ScanPlan

    _check_names(engine, inputs, [r["policy_id"] for r in options.reorder or []])
    sqls, spec = [], []
    for i, r in enumerate(options.reorder or []):
        if r["kind"] == "random":
            sqls.append(R.random_sql(r["policy_id"], r["seed"]))
            spec.append(r)
            continue
        if r["kind"] == "ctr":
            start = inputs.date_from
            if start is None or parse_date(r["fit_to"], "ctr fit --to") >= start:
                raise UsageError("--reorder ctr:FROM:TO: the fit window must end before --from (fitted and "
                                 "evaluated on disjoint windows)")
            fit_from, fit_to = parse_date(r["fit_from"]), parse_date(r["fit_to"])
            logs = inputs.logs
            if logs.kind == "files":
                # the logs were described for the evaluation window, which the fit window precedes: describe
                # the fit window's days
                from ..contract import LOGS, load_contract
                from ..io import sources

                logs = sources.describe(logs.uri, load_contract(LOGS), fit_from, fit_to, "--logs")
            fit = Inputs(logs, None, fit_from, fit_to)
            w = run_window(engine, fit, (), ScanPlan(False, False, False, interaction_cells=False),
                           GateConfig(mode="off", rules=gate.rules), config, store, None, "fit", batch_days)
            scores = R.ctr_scores(w.stats.table("ad_position"))
            if not len(scores):
                raise DataCheckFailed(f"--reorder ctr: no impressions in the fit window {r['fit_from']}.."
                                      f"{r['fit_to']}")
        else:
            scores = R.read_scores(r["path"])
        by_context = R.check_scores(scores)
        table = f"scv_scores_{i}"
        engine.register_frame(table, scores)
        sqls.append(R.scores_sql(r["policy_id"], table, by_context))
        spec.append({**r, "scores_sha": hashlib.sha256(scores.to_csv(index=False).encode()).hexdigest()})
    return sqls, (spec or None)




def _check_names(engine, inputs: Inputs, ids: list) -> None:
    """UsageError (exit 2) when the decisions read hold a policy named like a --reorder policy: the two would share
    one policy id, so the second decision of each event would be quarantined as DUPLICATE_DECISION and the
    estimates would mix them. One look at the decisions' policy ids (a column), before the pass."""
    if not ids or inputs.decisions is None:
        return
    from ..contract import DECISIONS, load_contract
    from ..safe import clip
    from ..statistics.sql.literals import text

    engine.read("scv_dec_names", inputs.decisions, load_contract(DECISIONS), None)
    named = ", ".join(text(i) for i in ids)
    clash = engine.fetch(f"SELECT DISTINCT policy_id FROM scv_dec_names WHERE policy_id IN ({named})",
                         "reorder_names")
    if len(clash):
        taken = ", ".join(sorted(clip(p, 80) for p in clash["policy_id"]))
        raise UsageError(f"the decisions hold a policy named {taken}, the name of a --reorder policy: rename that "
                         f"policy in the decisions, or leave out the --reorder that makes it")
