"""Learning which m ads to show (seed 000; MATH.md "Choosing m ads from n candidates"), issues 7 and 27.

Row-level work is Spark SQL run by either engine (DuckDB through sqlglot); the learners are numpy/scipy over the
aggregated statistics, so DuckDB and Spark give the same models and decisions.

- ``statements``: the training rows, their exact sufficient statistics, contexts, events, the decisions' union.
- ``features``: context tokens, one-hot design matrices, the position correction (ADC) vector.
- ``learning``: the Newton solver both learners use, the model files (model.json, coefficients.npz).
- ``regression``: the regression reduction, a Poisson GLM of clicks with offset log C_i; h_g(x) = the m best
  eligible ads by g.
- ``cost_sensitive``: Set Select Train, m rounds of an importance-weighted multinomial logistic regression.
- ``eligibility``: candidate ads per event (dt- or event-level eligibility table), top-m and Set Select Test (SQL).
- ``judge``: the evaluate pipeline's estimate of each learned policy; on generator logs the true value, regret
  against the best-m oracle and the regression bound.
- ``steps`` and ``train``: orchestration used by ``scavenger train`` and ``scavenger.train``.
"""
