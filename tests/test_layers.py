"""The layers of the package (written in pyproject.toml) and no import cycles, checked by
import-linter; and that the same check fails on an upward import and on a cycle."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

tomllib = pytest.importorskip("tomllib")  # Python 3.11+

ROOT = Path(__file__).resolve().parents[1]


def _lint(config: Path, where: Path) -> subprocess.CompletedProcess[str]:
    # in a process of its own: import-linter sets up logging as a command line does, which
    # would leave the memos loggers that later tests read silenced
    code = ("import sys; from importlinter.cli import lint_imports; "
            "sys.exit(lint_imports(config_filename=sys.argv[1], no_cache=True, no_logo=True))")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(where), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, "-c", code, str(config)], cwd=where, env=env, capture_output=True, text=True,
                          timeout=300)


def test_every_package_is_in_a_layer_and_the_contracts_hold():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    layers = next(c for c in config["contracts"] if c["type"] == "layers")["layers"]
    named = {name.strip() for layer in layers for name in layer.split("|")}
    packages = {f"memos.{p.name}" for p in (ROOT / "memos").iterdir() if (p / "__init__.py").is_file()}
    assert packages == named, f"packages not in a layer: {packages - named}; layers naming nothing: {named - packages}"
    proc = _lint(ROOT / "pyproject.toml", ROOT)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]


def _package(tmp_path: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = tmp_path / "demo_layers" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    config = tmp_path / "lint.toml"
    config.write_text('[tool.importlinter]\nroot_package = "demo_layers"\n\n'
                      '[[tool.importlinter.contracts]]\nname = "layers"\ntype = "layers"\n'
                      'layers = ["demo_layers.high", "demo_layers.low"]\n\n'
                      '[[tool.importlinter.contracts]]\nname = "cycles"\ntype = "acyclic_siblings"\n'
                      'ancestors = ["demo_layers"]\n')
    return config


@pytest.mark.parametrize("files", [
    {"__init__.py": "", "high/__init__.py": "", "low/__init__.py": "", "low/a.py": "from ..high import b\n",
     "high/b.py": ""},
    {"__init__.py": "", "high/__init__.py": "", "low/__init__.py": "", "low/a.py": "from . import c\n",
     "low/c.py": "from . import a\n"},
], ids=["upward import", "cycle within a layer"])
def test_the_check_fails_on_an_upward_import_or_a_cycle(tmp_path, files):
    proc = _lint(_package(tmp_path, files), tmp_path)
    assert proc.returncode == 1 and "BROKEN" in proc.stdout, proc.stdout[-3000:] + proc.stderr[-2000:]


def test_only_the_config_module_reads_the_environment():
    readers = []
    for path in sorted((ROOT / "memos").rglob("*.py")):
        if path == ROOT / "memos" / "core" / "config.py":
            continue
        text = path.read_text(encoding="utf-8")
        if "os.environ" in text or "getenv(" in text:
            readers.append(str(path.relative_to(ROOT)))
    assert readers == []
