"""No module imports a private name from another (issue 46): a name with a leading underscore is
its module's own business, so what another module needs is made public under a name that says
what it is, or reached through the public function that uses it.

Read from the source (every Python file of the repository but the migrations, which Django
writes): `from <project module> import _name` and `import <project module>._private` are refused,
tests included.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PROJECT = ("config", "audit", "moderation", "callbacks", "lab", "bench", "tests")


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def private_imports(source: str) -> list[str]:
    """`module: name` for each private name the source imports from a project module."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module.split(".")[0] in PROJECT:
                found += [f"{node.module}: {alias.name}" for alias in node.names if _private(alias.name)]
                found += [f"{node.module}: (module)" for part in node.module.split(".") if _private(part)]
        elif isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                if parts[0] in PROJECT and any(_private(part) for part in parts):
                    found.append(f"{alias.name}: (module)")
    return found


def _python_files() -> list[Path]:
    return [path for package in PROJECT for path in (ROOT / package).rglob("*.py") if "migrations" not in path.parts]


def test_no_module_imports_a_private_name_from_another():
    files = _python_files()
    assert len(files) > 300  # the walk found the repository
    offenders = {str(path.relative_to(ROOT)): found for path in files if (found := private_imports(path.read_text()))}
    assert offenders == {}


def test_the_check_sees_each_form_of_a_private_import():
    source = (
        "from moderation.services.dispatch import attempt_begin, _attempt_refused_locked\n"
        "import moderation._hidden\n"
        "from moderation._hidden import thing\n"
        "from json import _default_decoder\n"  # not a project module: not ours to judge
        "from moderation import __version__\n"
    )
    assert private_imports(source) == [
        "moderation.services.dispatch: _attempt_refused_locked",
        "moderation._hidden: (module)",
        "moderation._hidden: (module)",
    ]
