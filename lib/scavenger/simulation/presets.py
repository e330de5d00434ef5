"""The presets of ``scavenger simulate``: the figures of seed 002 section 6 (no imports, so the CLI can list them)."""

PRESETS = ("fig1", "fig2", "fig3", "fig4")
