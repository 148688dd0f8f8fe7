"""The attack index (tests/attacks/README.md) and the attack tests agree: every test a row
names exists in tests/attacks/, and every tests/attacks/test_*.py file is named by a row, so
a new way in (a launcher, a file read on a repository's say) cannot land without its entry.
Every row says which requirements it covers and where its positive control is. Control: the
same checks find each fault in a made-up row and a made-up file."""

from __future__ import annotations

import ast
import re
from pathlib import Path

HERE = Path(__file__).resolve().parent
README = HERE / "README.md"
THIS = Path(__file__).name
NAMED_TEST = re.compile(r"`(test_\w+\.py)::(test_\w+)`")
REQUIREMENT = re.compile(r"\b[A-Z]{1,2}-\d+\b")


def index_rows(text: str) -> list[list[str]]:
    """The cells of each row of the index table (its header and rule left out)."""
    table = text.split("## The index", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in table.splitlines() if line.startswith("|")]
    assert len(rows) > 2, "the index table is missing"
    return [[cell.strip() for cell in row.strip().strip("|").split("|")] for row in rows[2:]]


def functions_named_test(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    return {
        node.name
        for node in tree.body
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("test_")
    }


def row_problems(rows: list[list[str]], folder: Path) -> list[str]:
    problems = []
    for cells in rows:
        if len(cells) != 4:
            problems.append(f"a row needs 4 cells (class, requirements, tests, control): {cells}")
            continue
        attack, requirements, tests, control = cells
        named = NAMED_TEST.findall(tests)
        if not attack or not control:
            problems.append(f"{attack or cells}: says no attack class or no control")
        if not REQUIREMENT.search(requirements):
            problems.append(f"{attack}: names no requirement id")
        if not named:
            problems.append(f"{attack}: names no test as `file.py::test_name`")
        for file, function in named:
            path = folder / file
            if not path.is_file():
                problems.append(f"{attack}: {file} is not in tests/attacks/")
            elif function not in functions_named_test(path):
                problems.append(f"{attack}: {file} has no test {function}")
    return problems


def files_without_a_row(rows: list[list[str]], folder: Path) -> list[str]:
    named = {file for cells in rows for file, _ in NAMED_TEST.findall(" ".join(cells))}
    return sorted({path.name for path in folder.glob("test_*.py")} - {THIS} - named)


def test_every_row_names_tests_that_exist_its_requirements_and_its_control():
    problems = row_problems(index_rows(README.read_text(encoding="utf-8")), HERE)
    assert not problems, "\n".join(problems)


def test_every_attack_test_file_has_its_row():
    missing = files_without_a_row(index_rows(README.read_text(encoding="utf-8")), HERE)
    assert not missing, f"tests/attacks/README.md has no row naming {missing}: add each one's attack class"


def test_the_checks_find_a_missing_test_a_missing_row_and_an_empty_cell(tmp_path):
    (tmp_path / "test_known.py").write_text("def test_there():\n    pass\n")
    (tmp_path / "test_new_launcher.py").write_text("def test_it():\n    pass\n")
    made_up = (
        "## The index\n\n| class | reqs | tests | control |\n|---|---|---|---|\n"
        "| Links | H-1 | `test_known.py::test_there`, `test_known.py::test_gone` | same test |\n"
        "| Racers | none | `test_elsewhere.py::test_x` |  |\n"
    )
    rows = index_rows(made_up)
    assert row_problems(rows, tmp_path) == [
        "Links: test_known.py has no test test_gone",
        "Racers: says no attack class or no control",
        "Racers: names no requirement id",
        "Racers: test_elsewhere.py is not in tests/attacks/",
    ]
    assert files_without_a_row(rows, tmp_path) == ["test_new_launcher.py"]
    assert row_problems(rows[:1], tmp_path) != [] and row_problems([rows[0][:2] + ["`test_known.py::test_there`", "x"]], tmp_path) == []
