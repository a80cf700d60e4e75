"""dse/report formats results and imports nothing from dse/studies (docs/architecture.md)."""

import ast
from pathlib import Path

REPORT = Path(__file__).resolve().parents[2] / "dse" / "report"


def test_report_imports_nothing_from_studies():
    bad = []
    for f in sorted(REPORT.glob("*.py")):
        for node in ast.walk(ast.parse(f.read_text())):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            bad += [f"{f.name}: {n}" for n in names if n == "dse.studies" or n.startswith("dse.studies.")
                    or n == "dse.study"]
    assert not bad, bad
