"""Run one function of a test module in this process and pickle what it returns (tests/conftest.py,
``background_call``): ``python tests/background_call.py MODULE_FILE FUNCTION WORKDIR``.

The module is imported under a private name (its module-level code runs, its tests do not); the function gets
WORKDIR and may start a Spark session with ``conftest.background_spark()``. The value is written atomically to
WORKDIR/value.pkl; a failure exits non-zero with the traceback on stderr."""
from __future__ import annotations

import importlib.util
import os
import pickle
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parent


def main(argv: list[str]) -> int:
    module_file, fn_name, workdir = Path(argv[0]), argv[1], Path(argv[2])
    sys.path.insert(0, str(TESTS))
    from conftest import VALUE_FILE

    spec = importlib.util.spec_from_file_location(f"_background_{module_file.stem}", module_file)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    value = getattr(module, fn_name)(workdir)
    tmp = workdir / (VALUE_FILE + ".tmp")
    with open(tmp, "wb") as fh:
        pickle.dump(value, fh)
    os.replace(tmp, workdir / VALUE_FILE)
    try:
        from pyspark.sql import SparkSession

        active = SparkSession.getActiveSession()
        if active is not None:
            active.stop()
    except ImportError:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
