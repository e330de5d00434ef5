"""The jobs as short lists of steps: plan, scan (new days only), merge, judge, estimate, write.

``common.run_window`` is shared by validate, adc and evaluate; a notebook calls the same functions
(``scavenger.api``) and gets the same gate.
"""
