"""spark-submit entry point for `scavenger obd-target`: same flags, no logic.

    spark-submit jobs/obd_target.py --help
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lib"))

from scavenger.cli import run_job  # noqa: E402

if __name__ == "__main__":
    sys.exit(run_job("obd-target", sys.argv[1:]))
