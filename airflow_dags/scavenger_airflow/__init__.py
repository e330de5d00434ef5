"""Helpers shared by the scavenger DAGs (airflow_dags/scavenger_*.py).

``config`` is pure Python (settings, validation, argv building); ``operators`` holds the spark-submit operator.
Neither imports pyspark or touches the filesystem at import time.
"""
