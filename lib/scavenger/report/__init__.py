"""``scavenger report``: one self-contained static HTML page of an evaluation (issue 9).

    from scavenger.report import load_inputs, write_report
    inputs = load_inputs(adc="out/adc_run", estimates="out/eval_run", validation="out/validate_run",
                         history="airflow-out/evaluate", ground_truth="gen/ground_truth.json")
    write_report(inputs, "out/report")          # -> out/report/report.html

Plots are matplotlib (Agg) PNGs embedded as base64; every number is also in a table cell with its exact value.
"""
from .build import SECTIONS, render_html, truth_for_window, variance_reduction, write_report
from .inputs import ReportInputs, load_inputs

__all__ = ["SECTIONS", "ReportInputs", "load_inputs", "render_html", "write_report", "truth_for_window",
           "variance_reduction"]
