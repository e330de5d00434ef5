"""The Airflow install keeps ONE consistent pyspark (issue 6, item 4).

apache-airflow-providers-apache-spark pulls ``pyspark-client``, which writes its own (older) copies of files into
the same ``pyspark/`` directory. airflow_dags/install_airflow.sh reinstalls pyspark last; these tests prove the
result in whatever environment runs the suite (with or without Airflow), and that the check itself catches a
shadowed install.
"""
from __future__ import annotations

import base64
import hashlib
import importlib.util
import re
import subprocess
import sys
import textwrap
from importlib import metadata
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PIN = re.search(r'"pyspark==([0-9.]+)"', (REPO / "pyproject.toml").read_text()).group(1)


def _load_verify():
    spec = importlib.util.spec_from_file_location("verify_pyspark", REPO / "airflow_dags" / "verify_pyspark.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _sha(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def test_pyspark_is_the_pinned_release():
    import pyspark

    assert PIN == "4.3.0"
    assert pyspark.__version__ == "4.3.0"
    assert metadata.version("pyspark") == "4.3.0"


def test_every_pyspark_file_is_pysparks_own():
    """Each file in pyspark's RECORD has its recorded sha256 on disk; pyspark-client (if any) shadows nothing."""
    problems = _load_verify().check(PIN)
    assert problems == []


def test_pyspark_client_if_installed_does_not_shadow_pyspark():
    try:
        client = metadata.distribution("pyspark-client")
    except metadata.PackageNotFoundError:
        pytest.skip("pyspark-client is not installed (Airflow's Spark provider absent)")
    pyspark_dist = metadata.distribution("pyspark")
    own = {str(f): f for f in pyspark_dist.files}
    root = Path(pyspark_dist.locate_file(""))
    shared = [str(f) for f in client.files if str(f).startswith("pyspark/")]
    assert shared, "pyspark-client installs files under pyspark/"
    for rel in shared:
        assert rel in own, f"{rel} of pyspark-client is not a pyspark {pyspark_dist.version} file"
        if own[rel].hash is not None:
            data = (root / rel).read_bytes()
            assert _sha(data) == f"sha256={own[rel].hash.value}", f"{rel} is pyspark-client's copy, not pyspark's"
    import pyspark

    assert Path(pyspark.__file__).resolve() == (root / "pyspark" / "__init__.py").resolve()


def _fake_site(tmp_path: Path, version_in_init: str, extra_client_file: bool) -> Path:
    """A site dir with a fake pyspark 4.3.0 whose __init__ was overwritten, plus a fake pyspark-client."""
    site = tmp_path / "site"
    (site / "pyspark").mkdir(parents=True)
    original = b'__version__ = "4.3.0"\n'
    (site / "pyspark" / "__init__.py").write_text(f'__version__ = "{version_in_init}"\n')
    info = site / "pyspark-4.3.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: pyspark\nVersion: 4.3.0\n")
    (info / "RECORD").write_text(f"pyspark/__init__.py,{_sha(original)},{len(original)}\n"
                                 "pyspark-4.3.0.dist-info/METADATA,,\npyspark-4.3.0.dist-info/RECORD,,\n")
    cinfo = site / "pyspark_client-4.2.0.dist-info"
    cinfo.mkdir()
    (cinfo / "METADATA").write_text("Metadata-Version: 2.1\nName: pyspark-client\nVersion: 4.2.0\n")
    lines = ["pyspark/__init__.py,,"]
    if extra_client_file:
        (site / "pyspark" / "connect_only.py").write_text("x = 1\n")
        lines.append("pyspark/connect_only.py,,")
    (cinfo / "RECORD").write_text("\n".join(lines) + "\n")
    return site


@pytest.mark.parametrize("version_in_init, extra, expected", [
    ("4.3.0", False, []),
    ("4.2.0", False, ["pyspark.__version__ is 4.2.0", "1 pyspark file(s) differ"]),
    ("4.3.0", True, ["pyspark-client 4.2.0 installed 1 file(s) that pyspark does not own"]),
])
def test_verify_catches_a_shadowed_pyspark(tmp_path, version_in_init, extra, expected):
    """The check is not vacuous: on a fake site dir it reports exactly the planted problems."""
    site = _fake_site(tmp_path, version_in_init, extra)
    code = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(site)!r})
        sys.path.insert(0, {str(REPO / 'airflow_dags')!r})
        import verify_pyspark
        for p in verify_pyspark.check("4.3.0"):
            print(p)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    lines = [l for l in out.stdout.splitlines() if l.strip()]
    assert len(lines) == len(expected), lines
    for line, prefix in zip(lines, expected):
        assert line.startswith(prefix), (line, prefix)
