"""Coverage and width of each estimator's interval on Open-Bandit-Dataset-shaped logs with known truth, beside
obp's bootstrap interval on the same rows.

OBD's shape (docs/obd.md): one slot per row at a uniform position 1-3, 80 items that can be shown at any position,
uniform logging (propensity 1/80), a click rate of about 0.4%, 10,000 rows a week. The project's generator makes
it: ranked layout, 3 positions, 80 ads, every event logged as one slot (``partial_slates`` 1), uniform logging,
the click model's centre and effects turned down to OBD's rate. One data set of WEEKS weeks from one world, so the
truth is one number per (target, estimand): the population value of the slots the rows hold (IPS, SNIPS, PI, wPI,
PI++, pi_beta, IIPS, factored: a third of the full slate's value, held_slots in ground_truth.json) and of position 1
alone (RIPS, Cascade-DR: a row without position 1 has no cascade prefix and adds 0), from the generator's click
rates and each target's per-context distribution. Each week is one ``evaluate`` (API, DuckDB); an estimate
without an interval counts in ``none``, not in the coverage. Beside them, obp's interval on the same rows: its
``estimate_interval`` (IPW) is the percentile bootstrap of the mean of the per-row terms r pi(a|x)/mu (obp's
estimate_confidence_interval_by_bootstrap: 10,000 draws of ``random_.choice(x, size=n)``, percentiles 2.5 and
97.5). The draw's mean depends on the rows with a non-zero term only, whose counts in a draw are multinomial, so
the bootstrap is drawn that way (the same distribution; ``--obp-exact`` draws obp's own ``choice`` stream, equal
to obp's numbers for the same random_state).

    .venv/bin/python benchmarks/obd_coverage.py                     # 100 weeks, seed 0, /tmp/scavenger-obd-coverage
    .venv/bin/python benchmarks/obd_coverage.py --weeks 200 --seed 3 --workdir /tmp/obdcov

Prints, per estimator (interval kind) and target: weeks with an interval, coverage, mean width, and the mean width
over obp's bootstrap width on the same weeks; writes WORKDIR/obd_coverage.csv (one row per week, target and
estimator).
"""
from __future__ import annotations

import argparse
import datetime as dt
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

DAYS_A_WEEK, ROWS_A_DAY = 7, 1429          # 10,003 rows a week
WORLD = dict(layout="ranked", n_positions=3, n_ads=80, partial_slates=1.0, logging="uniform", base_ctr=0.005,
             interaction=0.3, ad_effect_sd=0.3, events_per_day=ROWS_A_DAY, start_date="2026-01-05")
ESTIMATORS = ["slate", "factored", "ranking"]
POSITION_1 = ("slate_rips", "slate_snrips", "slate_cascade_dr")


def truths(gen: Path, truth: dict) -> dict:
    """{(target, "held" | "position_1"): value}: sum_c w_c sum_a pi_k(a|c) C_k P(c, a) over the held positions
    (a third each: one slot per row, at a uniform position), the targets' per-context distribution from their
    decisions of the first week (uniform_random: 1/80 for every ad, its decision rows being one draw each)."""
    rates = pd.read_parquet(gen / "truth" / "click_rates")
    adc = pd.read_parquet(gen / "truth" / "adc").set_index("position")["coefficient"]
    logs = pd.read_parquet(gen / "logs", columns=["event_id", "context_id", "dt"])
    first = sorted(logs["dt"].astype(str).unique())[:DAYS_A_WEEK]
    dec = pd.read_parquet(gen / "decisions", filters=[("dt", "in", first)])
    dec = dec.merge(logs[["event_id", "context_id"]], on="event_id").drop_duplicates(["policy_id", "context_id"])
    p = rates.set_index(["context_id", "ad_id"])["p"]
    weight = rates.groupby("context_id")["context_weight"].first()
    out = {}
    for pid in truth["policies"]:
        per_k = np.zeros(3)
        for c, w in weight.items():
            if pid == "uniform_random":
                per_k += w * adc.loc[[1, 2, 3]].to_numpy() * rates.loc[rates["context_id"] == c, "p"].mean()
                continue
            (slots,) = dec.loc[(dec["policy_id"] == pid) & (dec["context_id"] == c), "slots"].to_numpy()[:1]
            for s in slots:
                per_k[s["position"] - 1] += w * s["probability"] * adc.loc[s["position"]] * p.loc[(c, s["ad_id"])]
        out[(pid, "held")], out[(pid, "position_1")] = per_k.sum() / 3.0, per_k[0] / 3.0
        want = truth["held_slots"]["policies"][pid]["value"]
        assert abs(out[(pid, "held")] - want) <= 1e-9 * max(1.0, want), (pid, out[(pid, "held")], want)
    return out


def ipw_terms(gen: Path, days: list) -> dict:
    """{target: per-row r pi(a|x) / mu of the week's rows} (obp's IPW term for a one-slot row)."""
    logs = pd.read_parquet(gen / "logs", columns=["event_id", "slots"], filters=[("dt", "in", days)])
    slot = pd.DataFrame([s[0] for s in logs["slots"]]).assign(event_id=logs["event_id"].to_numpy())
    dec = pd.read_parquet(gen / "decisions", columns=["policy_id", "event_id", "slots"], filters=[("dt", "in", days)])
    ex = dec.explode("slots").dropna(subset=["slots"])
    ex = pd.concat([ex[["policy_id", "event_id"]].reset_index(drop=True),
                    pd.DataFrame(list(ex["slots"]))[["position", "ad_id", "probability"]]], axis=1)
    out = {}
    for pid, g in ex.groupby("policy_id"):
        pi = g.groupby(["event_id", "position", "ad_id"], as_index=False)["probability"].sum()
        m = slot.merge(pi, on=["event_id", "position", "ad_id"], how="left")
        out[pid] = (m["reward"] * m["probability"].fillna(0.0) / m["propensity"]).to_numpy(dtype=float)
    return out


def obp_bootstrap(x: np.ndarray, seed: int, draws: int = 10_000, exact: bool = False) -> tuple[float, float]:
    """obp's percentile bootstrap of mean(x) at 95% (module docstring)."""
    rs = np.random.RandomState(seed)
    n = len(x)
    if exact:
        means = np.array([x[rs.randint(0, n, n)].mean() for _ in range(draws)])
    else:
        nz = x[x != 0]
        probs = np.append(np.full(len(nz), 1.0 / n), 1.0 - len(nz) / n)
        means = rs.multinomial(n, probs, size=draws)[:, :len(nz)] @ nz / n
    return float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))


def run(weeks: int, seed: int, workdir: Path, exact: bool) -> pd.DataFrame:
    from scavenger import api
    from scavenger.simulation.generator import GeneratorConfig, generate

    gen = workdir / f"gen_{weeks}_{seed}"
    t0 = time.time()
    truth = generate("duckdb", GeneratorConfig(**WORLD, days=weeks * DAYS_A_WEEK, seed=seed), str(gen))
    true = truths(gen, truth)
    print(f"generated {weeks} weeks in {time.time() - t0:.0f} s; true value of the held slots: "
          + ", ".join(f"{p} {true[(p, 'held')]:.5f}" for p in truth["policies"]), flush=True)
    start, rows = dt.date.fromisoformat(WORLD["start_date"]), []
    for w in range(weeks):
        days = [(start + dt.timedelta(days=7 * w + i)).isoformat() for i in range(DAYS_A_WEEK)]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            est = api.evaluate(str(gen / "logs"), str(gen / "decisions"), estimators=ESTIMATORS, engine="duckdb",
                               stats_dir=str(workdir / f"stats_{weeks}_{seed}"), gate="off", date_from=days[0],
                               date_to=days[-1]).pandas
        for r in est.to_dict("records"):
            estimand = "position_1" if r["estimator"] in POSITION_1 else "held"
            rows.append({"week": w, "policy_id": r["policy_id"], "estimator": r["estimator"],
                         "kind": r["interval_kind"], "value": r["value"], "ci_low": r["ci_low"],
                         "ci_high": r["ci_high"], "cs_low": r.get("cs_low"), "cs_high": r.get("cs_high"),
                         "truth": true[(r["policy_id"], estimand)]})
        for pid, x in ipw_terms(gen, days).items():
            lo, hi = obp_bootstrap(x, seed * 100_003 + w, exact=exact)
            rows.append({"week": w, "policy_id": pid, "estimator": "obp IPW bootstrap", "kind": "bootstrap",
                         "value": x.mean(), "ci_low": lo, "ci_high": hi, "truth": true[(pid, "held")]})
        if (w + 1) % 10 == 0:
            print(f"  {w + 1} weeks ({time.time() - t0:.0f} s)", flush=True)
    return pd.DataFrame(rows)


def table(df: pd.DataFrame) -> pd.DataFrame:
    """Per (estimator, target): weeks with an interval, coverage, mean width, and that over obp's mean width on the
    same weeks (a week without a click on a matching row gives obp a bootstrap of width 0)."""
    df = df.assign(finite=np.isfinite(df["ci_low"].astype(float)) & np.isfinite(df["ci_high"].astype(float)))
    df = df.assign(width=df["ci_high"].astype(float) - df["ci_low"].astype(float),
                   covered=(df["ci_low"] <= df["truth"]) & (df["truth"] <= df["ci_high"]))
    obp = df[df["estimator"] == "obp IPW bootstrap"].set_index(["week", "policy_id"])["width"]
    out = []
    for (e, p), g in df.groupby(["estimator", "policy_id"], sort=False):
        f = g[g["finite"]]
        kinds = "/".join(sorted(set(f["kind"].astype(str)))) or "none"
        base = obp.loc[list(zip(f["week"], f["policy_id"]))].to_numpy() if len(f) else np.array([])
        out.append({"estimator": e, "kind": kinds, "target": p, "weeks": len(g), "with interval": len(f),
                    "coverage": f["covered"].mean() if len(f) else np.nan, "mean width": f["width"].mean(),
                    "x obp width": f["width"].mean() / base.mean() if len(f) and base.mean() > 0 else np.nan,
                    "truth": g["truth"].iloc[0], "mean estimate": g["value"].astype(float).mean()})
    return pd.DataFrame(out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--weeks", type=int, default=100)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--workdir", default="/tmp/scavenger-obd-coverage")
    ap.add_argument("--obp-exact", action="store_true", help="draw obp's own choice() stream (slower)")
    args = ap.parse_args(argv)
    work = Path(args.workdir)
    work.mkdir(parents=True, exist_ok=True)
    df = run(args.weeks, args.seed, work, args.obp_exact)
    df.to_csv(work / "obd_coverage.csv", index=False)
    with pd.option_context("display.width", 200, "display.max_rows", 200):
        print(table(df).to_string(index=False, float_format=lambda v: f"{v:.4g}"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
