#!/usr/bin/env bash
# Install scavenger + Airflow 3 + the Apache Spark provider into VENV and end with ONE consistent pyspark.
#
#   airflow_dags/install_airflow.sh VENV        (VENV is created if missing; default .venv)
#
# Why the last steps exist: apache-airflow-providers-apache-spark depends on `pyspark-client`, the Spark
# Connect client, which ships the same `pyspark/` package directory as `pyspark` but at its own version
# (PyPI has no pyspark-client 4.3.0). pip installs it after pyspark and silently overwrites pyspark 4.3.0's
# Python files with 4.2.0 ones (pyspark.__version__ then says 4.2.0 while the jars are 4.3.0). Reinstalling
# pyspark==4.3.0 with --no-deps --force-reinstall as the LAST step puts every file of pyspark 4.3.0 back;
# pyspark-client stays registered (so `pip check` is clean) but owns no file pyspark does not also own.
# verify_pyspark.py then checks every installed pyspark file against pyspark's RECORD hashes.
set -euo pipefail

VENV="${1:-.venv}"
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PYTHON="${PYTHON:-python3}"
PYSPARK_VERSION="$(sed -n 's/^ *"pyspark==\([0-9.]*\)".*/\1/p' "$REPO/pyproject.toml" | head -1)"
: "${PYSPARK_VERSION:?cannot read the pyspark pin from pyproject.toml}"

[ -x "$VENV/bin/python" ] || "$PYTHON" -m venv "$VENV"
"$VENV/bin/pip" install --quiet --upgrade pip
# 1. scavenger with its test extras and the airflow extra (apache-airflow 3.x + the Spark provider).
"$VENV/bin/pip" install --quiet -e "$REPO[test,airflow]"
# 2. LAST: put pyspark's own files back over whatever pyspark-client wrote into pyspark/.
"$VENV/bin/pip" install --quiet --no-deps --force-reinstall "pyspark==$PYSPARK_VERSION"
# 3. Prove it: dependency metadata consistent, every pyspark file is pyspark's, a local session works.
"$VENV/bin/pip" check
"$VENV/bin/python" "$REPO/airflow_dags/verify_pyspark.py" --expect "$PYSPARK_VERSION" --session
