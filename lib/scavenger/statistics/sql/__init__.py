"""The one source: every per-day statement of the statistics layer, written once in Spark's SQL dialect.

Spark runs them as they are; DuckDB runs them as sqlglot writes them (``engines/dialect.py``). The statements are
built by small Python functions because their column lists depend on K (the slate size) and on the checks asked
for; the SQL text itself is here and nowhere else. Relations they read and write (names prefixed ``scv_``):

    scv_logs      the day's logs as read, conformed to the contract (engine.read)       -- the one read
    scv_ev        + every row rule as a flag, sorted slots, id hash           (materialized, logs.py)
    scv_dup_ids   id hashes that repeat (event_ids that repeat)                (materialized, small)
    scv_dups      rows whose event_id repeats, ranked                          (materialized, small)
    scv_prior     event-id hashes of other days (statistics/copies.py)          (stored, optional)
    scv_events    + DUPLICATE_EVENT_ID and ``clean``                           (view)
    scv_flat      clean events with slot k as columns a_k, mu_k, w_k; xs       (materialized)
    scv_dec       the day's decisions as read, conformed                       -- the one read
    scv_qkeys     (event_id, dt) of quarantined log rows                       (materialized, small)
    scv_dup_dec_hashes  hashes of decision keys that repeat                    (materialized, small)
    scv_dup_dec   decision keys read more than once                            (materialized, small)
    scv_joined    decisions joined once to scv_flat, flags, Y_k                (materialized, decisions.py)
    tables        one aggregation each over scv_flat or scv_joined             (tables.py, decision_tables.py,
                                                                                 slate_tables.py)
"""
