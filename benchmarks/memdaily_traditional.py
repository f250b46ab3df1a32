"""MemDaily as a user in Taiwan would write it: the same replay, in Traditional characters.

    python -m benchmarks.memdaily_traditional --out benchmarks/results/memdaily_traditional.json

Every message and question of ``../shared/data/memdaily`` is converted with OpenCC's ``s2twp``
table (Traditional characters and Taiwan's words) into a temporary folder, and
``memos bench memdaily`` runs on it, trajectories 0-39 and 40-79 (``--starts``), every strategy.
The converted text is never written into the repository. Traditional text costs about 15 % more
tokens than the same Simplified text (cl100k_base), so a prompt of the same budget holds fewer
messages whatever the strategy.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import opencc

from benchmarks.rules import _commit
from memos.bench.memdaily import STRATEGIES, run_memdaily
from memos.cli.bench import write_results

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "memdaily"


def converted(data: Path, into: Path, table: str = "s2twp") -> Path:
    """``data``'s MemDaily files with every string converted by OpenCC's ``table``, in ``into``."""
    conv = opencc.OpenCC(table)

    def walk(x: Any) -> Any:
        if isinstance(x, str):
            return conv.convert(x)
        if isinstance(x, list):
            return [walk(i) for i in x]
        if isinstance(x, dict):
            return {k: walk(v) for k, v in x.items()}
        return x

    paths = sorted(data.glob("*.json"))
    if not paths:
        raise SystemExit(f"no MemDaily files (*.json) in {data}")
    for path in paths:
        (into / path.name).write_text(json.dumps(walk(json.loads(path.read_text(encoding="utf-8"))), ensure_ascii=False),
                                      encoding="utf-8")
    return into


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.memdaily_traditional", description=__doc__.split("\n")[0])
    parser.add_argument("--data", default=str(DATA), help="the MemDaily folder (default ../shared/data/memdaily)")
    parser.add_argument("--budget", type=int, default=1024)
    parser.add_argument("--starts", default="0,40", help="first trajectories, comma-separated (default 0,40)")
    parser.add_argument("--strategies", default=",".join(STRATEGIES))
    parser.add_argument("--out", default=None, help="write the results as JSON here (default: a new file in ./memos-bench/)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        folder = converted(Path(args.data), Path(tmp))
        runs = {s: run_memdaily(folder, budget=args.budget, start=int(s), strategies=args.strategies.split(","))
                for s in args.starts.split(",")}
    first = next(iter(runs.values()))
    doc = {"benchmark": "memdaily_traditional", "recorded_at": _commit(),
           "params": {**first["params"], "data": args.data, "script": "OpenCC s2twp", "first_trajectory": None,
                      "starts": [int(s) for s in runs]},
           "results": {s: r["results"] for s, r in runs.items()}}
    print(json.dumps({s: {r["strategy"]: r["metrics"]["target_recall"] for r in res} for s, res in doc["results"].items()}))
    write_results(doc, "memdaily_traditional", args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
