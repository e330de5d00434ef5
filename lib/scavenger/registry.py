"""One declaration per estimator: what it is called, what it reads, which checks bear on it, what the data must
show for it to be identified, and the function that estimates it. The CLI's choices, the gate's estimator-to-check
mapping, the scan plan, the Airflow estimator list and the estimates table all read this module.

    spec = registry.get("pi")                 # aliases resolve to slate_pi
    registry.resolve(["scavenging", "pi"])    # groups expand, names are checked (UsageError, exit 2)
    registry.checks_for(["slate_pi"])         # ("b", "c", "d", "e")
    registry.plan_for([...])                  # the statistics tables the scan must compute
"""
from __future__ import annotations

from dataclasses import dataclass, field

from .errors import UsageError

def _columns(name: str) -> dict:
    """{column: Spark type name} of an output contract (schemas/<name>.schema.json, the single source)."""
    from .contract import load_contract

    return {f["name"]: f["type"] for f in load_contract(name).fields}


# The output tables' columns and types, read from schemas/ (estimates, adc, diagnostics) when first used, so that
# importing the registry (the Airflow DAG files do, for the estimator list) opens no file
_OUTPUT_TABLES = {"ESTIMATE_COLUMNS": "estimates", "DIAGNOSTIC_COLUMNS": "diagnostics", "ADC_COLUMNS": "adc"}


def __getattr__(name: str):
    if name in _OUTPUT_TABLES:
        value = _columns(_OUTPUT_TABLES[name])
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@dataclass(frozen=True)
class Estimator:
    """An estimator's declaration (see module doc)."""

    name: str
    family: str                       # scavenging | adc_based | slate | adc
    summary: str                      # formula and seed section
    aliases: tuple = ()
    checks: tuple = ()                # assumption checks (checks/assumptions.py letters) that bear on it
    tables: tuple = ()                # statistics tables it reads
    needs_decisions: bool = True
    needs_propensities: bool = False
    default: bool = True              # in the default set of `evaluate`
    identification: str = ""          # what the data must show (the reason text when it does not)
    recommend_rank: int = 99          # the report's top line: the lowest-ranked identified estimate with an interval
    outputs: tuple = ()               # estimator names of the rows it writes besides its own (variants)
    extra: dict = field(default_factory=dict)


_SCAV, _SLATE_CHECKS = ("a", "b"), ("b", "c", "d", "e")
_SLATE_TABLES = ("slate_moments", "policy_events")
ESTIMATORS: dict[str, Estimator] = {e.name: e for e in [
    Estimator("scavenging_slate", "scavenging",
              "V = sum_s (T_s/T) sum_{a in s} S_a / T_a, action = the logged (partial) slate (seed 001 sec. 3, 4.1)",
              aliases=("direct",), checks=_SCAV, tables=("slate_targets", "slate_covered", "policy_events"),
              identification="every slate the target shows was logged (T_a > 0) for some event", recommend_rank=6,
              outputs=("scavenging_ad", "scavenging_slate_uniform", "scavenging_ad_uniform")),
    Estimator("scavenging_base", "scavenging",
              "V = sum_a S_a / T_a, action = the base (logging) policy that served the event (seed 001 sec. 3.3)",
              checks=_SCAV, tables=("log_summary", "base_targets", "policy_events"),
              identification="the target names a logged base policy on every event", recommend_rank=7,
              outputs=("scavenging_base_uniform",)),
    Estimator("factored", "adc_based",
              "V = sum_a sum_{i,j} F(a,i,j) C_j / C_i / T_a (seed 001 sec. 4.2)",
              checks=_SCAV, tables=("factored", "factored_sq", "target_placements", "ad_position",
                                    "policy_ads", "policy_events"),
              identification="ADCs identified (ads shown at two or more positions) and every ad the target shows "
                             "logged", recommend_rank=4),
    Estimator("reorder", "adc_based",
              "V(h_pi) = sum_{a,i,j} F(a,i,j) C_j / C_i; lift = V / logged clicks (seed 001 sec. 4.2-4.4)",
              aliases=("reordering",), checks=_SCAV, tables=("factored", "factored_sq", "ad_position",
                                                             "policy_ads", "reorder_pairs", "policy_events"),
              identification="the target re-orders the logged ads on every event, and ADCs are identified",
              recommend_rank=5, outputs=("reorder_lift",)),
    Estimator("slate_ips", "slate", "mean(r W), W = prod_k pi_k/mu_k (seed 002 eq. 2)", aliases=("ips",),
              checks=_SLATE_CHECKS, tables=_SLATE_TABLES, needs_propensities=True,
              identification="logged propensities and some logged slate the target would show", recommend_rank=3),
    Estimator("slate_snips", "slate", "sum(r W) / sum(W) (self-normalized IPS)", aliases=("snips",),
              checks=_SLATE_CHECKS, tables=_SLATE_TABLES, needs_propensities=True,
              identification="logged propensities and some logged slate the target would show", recommend_rank=8),
    Estimator("slate_pi", "slate", "mean(r G), G = 1 - K + sum_k Y_k (seed 002 eq. 4, pseudoinverse)",
              aliases=("pi",), checks=_SLATE_CHECKS, tables=_SLATE_TABLES, needs_propensities=True,
              identification="logged propensities (factorized logging)", recommend_rank=2),
    Estimator("slate_wpi", "slate", "sum(r G) / sum(G) (weighted PI)", aliases=("wpi",),
              checks=_SLATE_CHECKS, tables=_SLATE_TABLES, needs_propensities=True,
              identification="logged propensities (factorized logging)", recommend_rank=9),
    Estimator("slate_pi_plus_plus", "slate",
              "mean(r G) - sum_k w_k mean(Y_k), w_k = P'(1 - H/alpha_k) (seed 002 eqs. 25-26, 39)",
              aliases=("pi_plus_plus", "pipp", "pi++"), checks=_SLATE_CHECKS, tables=_SLATE_TABLES,
              needs_propensities=True, identification="logged propensities (factorized logging)",
              recommend_rank=1),
    Estimator("slate_pi_beta", "slate",
              "mean(r G) - sum_k beta_k mean(Y_k - 1), beta fitted by cross-fitting (control variates)",
              aliases=("pi_beta", "beta"), checks=_SLATE_CHECKS, tables=_SLATE_TABLES, needs_propensities=True,
              identification="logged propensities (factorized logging)", recommend_rank=10),
]}
ADC = Estimator("adc", "adc", "C_i = sum_a alpha_a CTR(a,i) / sum_a alpha_a CTR(a,1) (seed 001 sec. 4.3)",
                checks=_SCAV, tables=("ad_position", "log_summary"), needs_decisions=False,
                identification="some ad shown at position 1 and at position i")
GROUPS = {"scavenging": ("scavenging_slate", "scavenging_base"),
          "slate": tuple(n for n, e in ESTIMATORS.items() if e.family == "slate"),
          "all": tuple(ESTIMATORS)}
_ALIASES = {a: e.name for e in ESTIMATORS.values() for a in (e.name, *e.aliases)}


_OUTPUT_OF = {o: e.name for e in ESTIMATORS.values() for o in (e.name, *e.outputs)}


def output_names() -> list[str]:
    """Every value the estimates table's ``estimator`` column may hold (schemas/estimates.schema.json)."""
    return sorted(_OUTPUT_OF)


def base_of(output: str) -> str:
    """The estimator that wrote a row named ``output`` (e.g. reorder_lift -> reorder)."""
    try:
        return _OUTPUT_OF[output]
    except KeyError:
        raise ValueError(f"no estimator writes rows named {output!r}") from None


def names() -> list[str]:
    """Every name the CLI accepts (estimators, aliases, groups), for --help and messages."""
    return sorted(set(_ALIASES) | set(GROUPS))


def get(name: str) -> Estimator:
    if name == "adc":
        return ADC
    try:
        return ESTIMATORS[_ALIASES[name]]
    except KeyError:
        raise UsageError(f"unknown estimator {name!r}; choose from {', '.join(names())}") from None


def resolve(requested) -> list[str]:
    """Canonical names of ``requested`` (None or empty: the default set), groups expanded, order kept."""
    if not requested:
        return [n for n, e in ESTIMATORS.items() if e.default]
    if isinstance(requested, str):
        requested = [t for t in requested.split(",")]
    out = []
    for item in requested:
        item = item.strip()
        if not item:
            continue
        out += list(GROUPS[item]) if item in GROUPS else [get(item).name]
    if not out:
        raise UsageError(f"--estimators {','.join(requested)!r} names no estimator; choose from {', '.join(names())}, "
                         f"or leave the flag out for the default set")
    return list(dict.fromkeys(out))


def checks_for(estimators) -> tuple:
    """The assumption checks the given estimators rely on (sorted letters)."""
    return tuple(sorted({c for n in estimators for c in get(n).checks}))


def estimators_relying_on(check: str, estimators) -> list[str]:
    return [n for n in estimators if check in get(n).checks]


def plan_for(estimators, checks=(), adcs_given: bool = True) -> "ScanPlan":
    """The optional statistics tables a scan must compute for these estimators and checks. ``adcs_given``: False
    when the ADCs are estimated from the same logs, whose re-ordering variance is per impression
    (estimators/adc_family._reorder_rows): reorder_pairs is then read by nothing, and the ADC-based tables only where the
    logs can identify the ADCs (ScanPlan.adc_tables)."""
    from .statistics.scan import ScanPlan

    tables = {t for n in estimators for t in get(n).tables}
    adc_based = "factored" in tables
    return ScanPlan(slate_targets="slate_targets" in tables,
                    context_cells="a" in checks, pair_strata="d" in checks,
                    reorder_pairs="reorder_pairs" in tables and adcs_given,
                    adc_tables="never" if not adc_based else "always" if adcs_given else "identifiable")
