"""Compare a mutmut run's surviving mutants with the explained and the open ones (issue #39).

After `mutmut run` (.ci/mutation), reads every mutant of components/analysis/ the run did not
detect (survived, or no test reached it) from mutants/ and names each one by what it changes —
`<module>.<function>: <original line> => <mutated line>` — rather than by mutmut's number, which
shifts whenever a function is edited. Then compares them with

- tests/analysis/mutation-survivors.md, the explained ones: an equivalent mutant (the code means
  the same) or one no test can observe, each with why (a table row: `| <change> | <why> |`);
- tests/analysis/mutation-open.txt, the open ones: survivors nobody has triaged yet, each owed
  a test or an explanation (one change per line, written by `--write-open`).

Exit 1 on a survivor in neither (a new one: kill it with a test, or explain it), and on an
explanation whose mutant no longer survives (remove it by hand). An open one that no longer
survives is reported, not fatal: the open list only shrinks (`--write-open` rewrites it after a
run). Prints the run's figures. Stdlib only.
"""

from __future__ import annotations

import argparse
import ast
import difflib
import json
import re
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MUTANTS = ROOT / "mutants"
EXPLAINED = ROOT / "tests" / "analysis" / "mutation-survivors.md"
OPEN = ROOT / "tests" / "analysis" / "mutation-open.txt"
#: mutmut's exit codes (mutmut/stats.py): 1 and 3 killed; timeouts (a loop that never ends) are
#: detected too. 0 survived, 5 and 33 no test reached the function.
DETECTED = frozenset({1, 3, 24, -24, 36, 152, 255})
STATUS = {0: "survived", 5: "no tests", 33: "no tests", None: "not run"}


def _functions(path: Path) -> tuple[list[str], dict[str, tuple[int, int]]]:
    lines = path.read_text().splitlines()
    spans = {
        node.name: (node.lineno, node.end_lineno or node.lineno)
        for node in ast.walk(ast.parse("\n".join(lines)))
        if isinstance(node, ast.FunctionDef) and "__mutmut_" in node.name
    }
    return lines, spans


def describe(module: str, mutant: str, lines: list[str], spans: dict[str, tuple[int, int]]) -> str:
    """`<module>.<function>: <original> => <mutated>`, the changed lines stripped and joined."""
    base = mutant.rsplit("__mutmut_", 1)[0]
    a, b = spans[f"{base}__mutmut_orig"]
    c, d = spans[mutant]
    # The def line carries each variant's own name: compare it without.
    old_lines, new_lines = lines[a - 1 : b], lines[c - 1 : d]
    old_lines[0] = old_lines[0].replace(f"{base}__mutmut_orig", base)
    new_lines[0] = new_lines[0].replace(mutant, base)
    changed = [x for x in difflib.ndiff(old_lines, new_lines) if x[:1] in "+-"]
    old = " ".join(x[1:].strip() for x in changed if x[0] == "-")
    new = " ".join(x[1:].strip() for x in changed if x[0] == "+")
    function = base.removeprefix("x_").replace("xǁ", "").replace("ǁ", ".")
    return f"{module}.{function}: {old} => {new}"


def undetected() -> tuple[Counter[str], Counter[str], dict[str, str]]:
    """(change -> how many undetected mutants make it, status -> count over every mutant,
    change -> its status)."""
    changes: Counter[str] = Counter()
    statuses: Counter[str] = Counter()
    status_of: dict[str, str] = {}
    for meta in sorted((MUTANTS / "components" / "analysis").glob("*.py.meta")):
        source = meta.with_suffix("")
        module = ".".join(source.relative_to(MUTANTS).with_suffix("").parts)
        lines, spans = _functions(source)
        for name, code in json.loads(meta.read_text())["exit_code_by_key"].items():
            status = "detected" if code in DETECTED else STATUS.get(code, f"exit {code}")
            statuses[status] += 1
            if code not in DETECTED:
                change = describe(module, name.rsplit(".", 1)[1], lines, spans)
                changes[change] += 1
                status_of[change] = status
    return changes, statuses, status_of


def explained() -> Counter[str]:
    """The first column of the table rows in mutation-survivors.md (backquotes stripped)."""
    rows: Counter[str] = Counter()
    for line in EXPLAINED.read_text().splitlines():
        # A `|` of the code itself is escaped (`\|`) in its cell.
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", line.strip().strip("|"))]
        if line.startswith("| `components.analysis.") and len(cells) >= 2:
            rows[cells[0].strip("`").replace("\\|", "|")] += 1
    return rows


def listed_open() -> Counter[str]:
    if not OPEN.exists():
        return Counter()
    return Counter(
        line for line in OPEN.read_text().splitlines() if line and not line.startswith("#")
    )


OPEN_HEADER = """\
# Mutants of components/analysis/ that survive the mutation run and nobody has triaged yet
# (issue #39): each is owed a test that kills it, or an explanation in mutation-survivors.md.
# One change per line, as .ci/mutation_survivors.py names it; rewritten by
# `python3 .ci/mutation_survivors.py --write-open` after a run (bash .ci/mutation). Grouped by
# status: survived (a test reached it and passed), no tests (no selected test reaches the
# function), not run (the run that wrote this list stopped before it).
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write-open", action="store_true", help="rewrite mutation-open.txt")
    args = parser.parse_args()
    alive, statuses, status_of = undetected()
    known = explained()
    print("mutation run:", ", ".join(f"{v} {k}" for k, v in sorted(statuses.items())))
    if args.write_open:
        rest = alive - known
        parts = [OPEN_HEADER]
        for status in sorted({status_of[c] for c in rest}):
            parts.append(f"\n# {status}\n")
            parts += [f"{c}\n" for c in sorted(rest.elements()) if status_of[c] == status]
        OPEN.write_text("".join(parts))
        print(f"wrote {sum(rest.values())} open survivors to {OPEN.relative_to(ROOT)}")
    opened = listed_open()
    new = alive - known - opened
    stale = known - alive
    closed = opened - (alive - known)
    for change in sorted(new):
        print(f"unexplained survivor: {change}")
    for change in sorted(stale):
        print(f"explained but not surviving (remove it from {EXPLAINED.name}): {change}")
    for change in sorted(closed):
        print(f"open but no longer surviving (--write-open drops it): {change}")
    print(
        f"{sum(alive.values())} undetected: {sum(known.values())} explained, "
        f"{sum(opened.values())} open ({sum(closed.values())} of them now detected), "
        f"{sum(new.values())} new, {sum(stale.values())} stale explanations"
    )
    return 1 if new or stale else 0


if __name__ == "__main__":
    sys.exit(main())
