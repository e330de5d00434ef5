"""Learning which m ads to show (seed 000; MATH.md "Choosing m ads from n candidates"), issue 7.

- ``features``: training rows from the logs (Spark SQL: explode slots, context tokens, ADC offset) and the
  position-correction (ADC) vector.
- ``regression``: the regression reduction, a Poisson GLM of clicks with offset log C_i; h_g(x) = the m best
  eligible ads by g.
- ``cost_sensitive``: Set Select Train/Test, m rounds of an importance-weighted cost-sensitive multiclass learner.
- ``eligibility``: candidate ads per event (dt- or event-level eligibility table) and the per-event argmax / dedup.
- ``judge``: on generator logs, true value, regret against the best-m oracle, the regression bound, and the
  factored estimator's value of each learned policy.
- ``train``: orchestration used by ``scavenger train`` and notebooks.
"""
