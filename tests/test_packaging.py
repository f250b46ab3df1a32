"""The distribution: its name (``memos`` on PyPI is another project) and a wheel that holds
every file the package reads at run time (the classifiers' weights, py.typed)."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from importlib import metadata
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_the_distribution_is_memos_tiered_and_imports_as_memos():
    import memos

    assert metadata.version("memos-tiered") == memos.__version__
    assert "memos" in (metadata.distribution("memos-tiered").read_text("top_level.txt") or "memos").split()


def test_the_wheel_holds_every_data_file_of_the_package(tmp_path):
    if not (ROOT / ".git").exists():
        pytest.skip("the package's files are listed by git: not a git checkout")
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", str(ROOT), "-w", str(tmp_path)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    (wheel,) = tmp_path.glob("memos_tiered-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    tracked = subprocess.run(["git", "ls-files", "memos"], cwd=ROOT, capture_output=True, text=True).stdout.split()
    data = {f for f in tracked if not f.endswith(".py")}
    assert data and "memos/py.typed" in data
    assert data <= names, sorted(data - names)
    assert {f for f in tracked if f.endswith(".py")} <= names
