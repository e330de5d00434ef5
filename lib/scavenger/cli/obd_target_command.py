"""`scavenger obd-target`: the Bernoulli Thompson Sampling (BTS) policy of the Open Bandit Dataset as a target
policy's decisions for the uniform-random logs, so that ``evaluate`` estimates BTS's click rate off-policy and the BTS
logs' own click rate is the on-policy truth beside it (docs/obd.md).

Per campaign, BTS's action distribution pi_p(a) per (position, item) is estimated from the BTS logs' own propensities
(``obd.bts_action_distribution``: the harmonic mean of the logged propensities, a ratio estimate of BTS's
time-averaged probability; or the plain frequency). Each random-log row is a one-slot impression at its position p
(as ``ingest-obd`` writes it), so its decision is pi_p(.). No Spark: pandas and pyarrow, local paths.

Writes OUT/decisions (contract ``decisions``, Parquet by dt, event ids as ``ingest-obd`` writes them),
OUT/action_distribution (campaign, position, item_id, ad_id, probability, raw, n_logged, mean_propensity) and
OUT/on_policy (BTS's own click rate per campaign with its standard error), and result.json.
"""
from __future__ import annotations

import os

from ..errors import UsageError

NAME = "obd-target"
HELP = ("Build the BTS policy's decisions for the OBD random logs (per-position action distribution from the BTS "
        "logs' propensities) and BTS's on-policy click rate")


def add_arguments(parser):
    from .. import obd

    parser.add_argument("--obd-dir", required=True, help="root of the OBD data (<policy>/<campaign>/<campaign>.csv)")
    parser.add_argument("--out", required=True, help="output directory: OUT/decisions, OUT/action_distribution, "
                                                     "OUT/on_policy, OUT/result.json")
    parser.add_argument("--campaigns", default=",".join(obd.CAMPAIGNS), help="comma list of all,men,women "
                                                                             "(default: every campaign present)")
    parser.add_argument("--estimate", default="harmonic", choices=obd.ESTIMATES,
                        help="how pi_p(a) is estimated from the BTS logs: harmonic (default; n / sum 1/propensity "
                             "per position and item, BTS's time-averaged probability) or frequency (share of BTS's "
                             "rows at the position showing the item)")
    parser.add_argument("--policy-id", default="bts", help="policy_id of the decisions (default bts)")
    parser.add_argument("--json", action="store_true", help="print result.json on stdout instead of the summary")


def prepare(args, ctx):
    from .. import obd
    from ..io import fs
    from .ingest_obd_command import _choices

    campaigns = _choices(args.campaigns, obd.CAMPAIGNS, "--campaigns")
    if not args.policy_id.strip():
        raise UsageError("--policy-id must not be empty")
    if not fs.is_local(args.out):
        raise UsageError(f"--out must be a local path for obd-target; got {args.out}")
    fs.check_writable(args.out, "--out")
    found = {}
    for policy, campaign, path in obd.obd_files(args.obd_dir, obd.POLICIES, campaigns):
        found.setdefault(campaign, {})[policy] = path
    pairs = [(c, found[c]["random"], found[c]["bts"]) for c in campaigns
             if "random" in found.get(c, {}) and "bts" in found.get(c, {})]
    if not pairs:
        raise UsageError(f"no campaign of {', '.join(campaigns)} has both random/ and bts/ files under "
                         f"{args.obd_dir}")
    for _, random_path, bts_path in pairs:      # header (exit 2), rows and values (exit 3), before --out is touched
        obd.check_obd_csv(random_path)
        obd.check_obd_csv(bts_path)
    return pairs


def run(args, ctx, pairs):
    import pandas as pd
    import pyarrow as pa
    import pyarrow.compute as pc

    from .. import obd
    from ..io import fs, outputs

    result = ctx.result
    result.inputs = {"obd_dir": os.path.abspath(args.obd_dir), "estimate": args.estimate,
                     "policy_id": args.policy_id,
                     "files": {c: {"random": str(r), "bts": str(b)} for c, r, b in pairs}}
    decisions, dists, on_policy = [], [], []
    with result.timed("build"):
        for campaign, random_path, bts_path in pairs:
            bts = obd.read_obd_csv(bts_path)
            dist = obd.bts_action_distribution(bts, campaign, args.estimate)
            events = obd.read_obd_csv(random_path)
            decisions.append(obd.target_decisions(events, campaign, dist, args.policy_id))
            dists.append(dist)
            on_policy.append(obd.on_policy_rate(bts, campaign))
    out = os.path.abspath(args.out)
    paths = {"decisions": os.path.join(out, "decisions"), "action_distribution": os.path.join(out,
                                                                                              "action_distribution"),
             "on_policy": os.path.join(out, "on_policy")}
    with result.timed("write"):
        table = pa.concat_tables(decisions)
        obd.write_by_dt(table, paths["decisions"])
        outputs.write_table(pd.concat(dists, ignore_index=True), paths["action_distribution"])
        outputs.write_table(pd.DataFrame(on_policy), paths["on_policy"])
    result.outputs = paths
    entries = sum(len(d) for d in dists)
    result.counts = {"decision_rows": table.num_rows, "decision_entries": int(pc.sum(
        pc.list_value_length(table.column("slots"))).as_py() or 0), "action_distribution_rows": entries}
    result.summary = {"on_policy": on_policy,
                      "raw_sums": {f"{d['campaign'].iloc[0]}/{int(p)}": float(s)
                                   for d in dists for p, s in d.groupby("position")["raw"].sum().items()}}
    fs.makedirs(out)
    print(f"obd-target: {table.num_rows} decisions of policy {args.policy_id!r} for the random logs of "
          f"{', '.join(c for c, _, _ in pairs)} -> {paths['decisions']}")
    for r in on_policy:
        print(f"  on-policy click rate of bts/{r['campaign']}: {r['rate']:.6f} (+- {r['std_error']:.6f}, "
              f"{int(r['clicks'])} clicks in {r['rows']} rows)")
