"""Names a user gives that the data do not hold: ``--policies`` ids the decisions lack, answered with the close ids
("did you mean") and the ones held."""
from __future__ import annotations

from ..contract import DECISIONS, load_contract
from ..errors import UsageError


def check_policy_names(engine, inputs, named, have, dates) -> None:
    """--policies naming ids the window's decisions do not hold at all (misspelled): exit 2 when none of those
    named is there, naming the close ids and the ones held; a note on stderr when others are. One query of the
    decisions' policy_id column, made only when a named policy is missing from the estimates' policies ``have``
    (a policy whose every row was quarantined is held: the gate judges it)."""
    missing = [p for p in named or [] if p not in set(have)]
    if not missing or inputs.decisions is None:
        return
    engine.read("scv_policy_ids", inputs.decisions, load_contract(DECISIONS), list(dates))
    held = sorted(str(p) for p in engine.fetch("SELECT DISTINCT policy_id FROM scv_policy_ids",
                                               "policy_ids")["policy_id"].dropna())
    unknown = [p for p in missing if p not in held]
    if not unknown:
        return
    from ..errors import did_you_mean
    from ..safe import clip

    said = "; ".join(f"{clip(repr(p), 80)}{did_you_mean(p, held)}" for p in unknown[:5])
    shown = ", ".join(clip(h, 60) for h in held[:10]) + (f" and {len(held) - 10} more" if len(held) > 10 else "")
    message = (f"--policies: no decisions of {said} in the window; the decisions hold {len(held)} "
               f"polic{'y' if len(held) == 1 else 'ies'}: {shown or 'none'}")
    if len(unknown) == len(named):
        raise UsageError(message)
    from ..progress import note

    note(message)
