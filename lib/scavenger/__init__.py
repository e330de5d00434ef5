"""scavenger: off-policy evaluation of ad/recommendation slates from impression logs, on Spark.

Seeds: exploration scavenging and attention-decay coefficients (Langford, Strehl, Wortman, ICML 2008),
slate OPE under Bayes risk (Vlassis, Amat Gil, Chandrashekar), choosing m ads from n candidates (Langford 2010).
"""
__version__ = "0.1.0"
