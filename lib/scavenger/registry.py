"""Every estimator the pipeline can run: the built-in families' declarations and the plugins' (entry-point group
``scavenger.estimators``, each entry point an :class:`Estimator`), collected on first use. The command line's
choices, the gate's estimator-to-check mapping, the scan plan, the Airflow estimator list, the report and the
estimates table all read this module; the pipeline runs each declaration's ``estimate`` function.

    spec = registry.get("pi")                 # aliases resolve to slate_pi
    registry.resolve(["scavenging", "pi"])    # groups expand, names are checked (UsageError, exit 2)
    registry.checks_for(["slate_pi"])         # ("b", "c", "d", "e", "f")
    registry.plan_for([...])                  # the statistics tables the scan must compute

Importing this module opens no file and imports no estimator: ``scavenger --help`` and flag errors stay fast.
"""
from __future__ import annotations

import difflib
import importlib
import sys
from importlib import metadata

from .errors import UsageError
from .estimators.declaration import EstimateOptions, Estimator  # noqa: F401 - the plugin API

ENTRY_POINT_GROUP = "scavenger.estimators"
# the built-in families, in the order of the default set and of the estimates table
BUILTIN = ("scavenger.estimators.scavenging_family", "scavenger.estimators.adc_family",
           "scavenger.estimators.slate_family", "scavenger.estimators.ranking_family")
_OUTPUT_TABLES = {"ESTIMATE_COLUMNS": "estimates", "DIAGNOSTIC_COLUMNS": "diagnostics", "ADC_COLUMNS": "adc"}
_STATE: dict = {}


def _columns(name: str) -> dict:
    """{column: Spark type name} of an output contract (schemas/<name>.schema.json, the single source)."""
    from .contract import load_contract

    return {f["name"]: f["type"] for f in load_contract(name).fields}


def __getattr__(name: str):
    if name in _OUTPUT_TABLES:
        value = _columns(_OUTPUT_TABLES[name])
        globals()[name] = value
        return value
    if name == "ESTIMATORS":
        return _load()["estimators"]
    if name == "ADC":
        return _load()["adc"]
    if name == "GROUPS":
        return _load()["groups"]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _plugins() -> list:
    """(Estimator, where) of every entry point of the group; one that fails to load is skipped with a warning on
    stderr (a broken plugin must not stop the built-in estimators)."""
    out = []
    for ep in metadata.entry_points(group=ENTRY_POINT_GROUP):
        try:
            spec = ep.load()
        except Exception as exc:   # noqa: BLE001 - any failure of third-party code
            print(f"warning: estimator plugin {ep.name!r} ({ep.value}) failed to load and is left out: "
                  f"{type(exc).__name__}: {exc}", file=sys.stderr)
            continue
        specs = spec if isinstance(spec, (list, tuple)) else [spec]
        for s in specs:
            if not isinstance(s, Estimator):
                print(f"warning: estimator plugin {ep.name!r} ({ep.value}) is not a scavenger.registry.Estimator "
                      f"and is left out", file=sys.stderr)
                continue
            out.append((s, f"plugin {ep.value}"))
    return out


def _load() -> dict:
    if _STATE:
        return _STATE
    found = []
    for module in BUILTIN:
        mod = importlib.import_module(module)
        found += [(s, module) for s in mod.ESTIMATORS]
        if getattr(mod, "ADC", None) is not None:
            _STATE["adc"] = mod.ADC
    found += _plugins()
    estimators, names = {}, {}
    for spec, where in found:
        clash = [n for n in (spec.name, *spec.aliases, *spec.outputs) if n in names]
        if clash:
            print(f"warning: estimator {spec.name!r} ({where}) is left out: the name(s) {clash} are taken by "
                  f"{names[clash[0]]}", file=sys.stderr)
            continue
        estimators[spec.name] = spec
        names.update({n: where for n in (spec.name, *spec.aliases, *spec.outputs)})
    groups = {}
    for spec in estimators.values():
        if spec.family:
            groups.setdefault(spec.family, []).append(spec.name)
    groups = {g: tuple(v) for g, v in groups.items() if g not in estimators}
    groups["all"] = tuple(estimators)
    _STATE.update(estimators=estimators, groups=groups,
                  aliases={a: e.name for e in estimators.values() for a in (e.name, *e.aliases)},
                  output_of={o: e.name for e in estimators.values() for o in e.names()})
    return _STATE


def reload() -> None:
    """Forget the collected declarations (a test that installs a plugin, then looks again)."""
    _STATE.clear()


def output_names() -> list[str]:
    """Every value the estimates table's ``estimator`` column may hold (schemas/estimates.schema.json)."""
    return sorted(_load()["output_of"])


def base_of(output: str) -> str:
    """The estimator that wrote a row named ``output`` (e.g. scavenging_ad -> scavenging_slate)."""
    try:
        return _load()["output_of"][output]
    except KeyError:
        raise ValueError(f"no estimator writes rows named {output!r}") from None


def names() -> list[str]:
    """Every name the CLI accepts (estimators, aliases, groups), for --help and messages."""
    state = _load()
    return sorted(set(state["aliases"]) | set(state["groups"]))


def _unknown(name: str) -> UsageError:
    close = difflib.get_close_matches(name, names(), n=3, cutoff=0.6)
    hint = f" (did you mean {' or '.join(repr(c) for c in close)}?)" if close else ""
    return UsageError(f"unknown estimator {name!r}{hint}; choose from {', '.join(names())}")


def get(name: str) -> Estimator:
    state = _load()
    if name == "adc" and "adc" in state:
        return state["adc"]
    try:
        return state["estimators"][state["aliases"][name]]
    except KeyError:
        raise _unknown(name) from None


def resolve(requested) -> list[str]:
    """Canonical names of ``requested`` (None or empty: the default set), groups expanded, order kept."""
    state = _load()
    if not requested:
        return [n for n, e in state["estimators"].items() if e.default]
    if isinstance(requested, str):
        requested = [t for t in requested.split(",")]
    out = []
    for item in requested:
        item = item.strip()
        if not item:
            continue
        out += list(state["groups"][item]) if item in state["groups"] else [get(item).name]
    if not out:
        raise UsageError(f"--estimators {','.join(requested)!r} names no estimator; choose from {', '.join(names())}, "
                         f"or leave the flag out for the default set")
    return list(dict.fromkeys(out))


def is_group(name: str) -> bool:
    return name in _load()["groups"]


def checks_for(estimators) -> tuple:
    """The assumption checks the given estimators rely on (sorted letters)."""
    return tuple(sorted({c for n in estimators for c in get(n).checks}))


def estimators_relying_on(check: str, estimators) -> list[str]:
    return [n for n in estimators if check in get(n).checks]


def help_lines() -> list[str]:
    """One line per estimator for ``evaluate --help``: name (aliases): summary."""
    out = []
    for e in _load()["estimators"].values():
        alias = f" ({', '.join(e.aliases)})" if e.aliases else ""
        out.append(f"{e.name}{alias}: {e.summary}")
    return out


def plan_for(estimators, checks=(), adcs_given: bool = True):
    """The statistics tables a scan must compute for these estimators (their declared ``tables``) and checks (the
    tables each check reads: checks/assumptions.CHECK_TABLES), from the tables' declarations
    (statistics/plan.plan_for). ``adcs_given``: False when the ADCs are estimated from the same logs."""
    from .statistics.plan import plan_for as statistics_plan

    return statistics_plan({t for n in estimators for t in get(n).tables}, checks, adcs_given)
