"""The import layers (.importlinter, docs/design.md "Layers") cover every module of the product.

import-linter checks the imports of the modules a layer names; a new module that no layer names
would escape the check. This test makes that impossible: every module of the product apps sits
in a layer (or under one) or in the short list of modules that are outside the layering.
"""

from __future__ import annotations

import configparser
import pkgutil
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = ("audit", "moderation", "callbacks", "config")
# Not part of the application's layering: settings and process bootstrap, package roots.
OUTSIDE = {"config", "config.settings", "config.settings_test", "config.wsgi", "config.embedded_db", "audit", "moderation", "callbacks"}
# Packages of one concept whose modules sit in different layers (the image invariant and the
# transparency report are read side, the rest domain primitives): the package itself must hold
# nothing but its docstring, or it would be a module outside every layer.
SPLIT = {"moderation.media", "moderation.transparency"}


def _layered_modules() -> set[str]:
    parser = configparser.ConfigParser()
    parser.read(ROOT / ".importlinter")
    layers = parser["importlinter:contract:layers"]["layers"]
    return {name.strip() for line in layers.splitlines() for name in line.replace("|", ":").split(":") if name.strip()}


def _product_modules() -> set[str]:
    found = set()
    for package in PRODUCT:
        found.add(package)
        for info in pkgutil.walk_packages([str(ROOT / package)], prefix=f"{package}."):
            if ".migrations" not in info.name:
                found.add(info.name)
    return found


def _covered(module: str, layered: set[str]) -> bool:
    return module in OUTSIDE | SPLIT or any(module == name or module.startswith(name + ".") for name in layered)


def test_every_product_module_is_in_a_layer():
    layered = _layered_modules()
    assert not sorted(m for m in _product_modules() if not _covered(m, layered))


def test_the_check_notices_a_module_outside_every_layer():
    assert not _covered("moderation.brand_new_module", _layered_modules())
    assert _covered("moderation.services.pipeline", _layered_modules())


def test_a_package_split_across_layers_holds_nothing_but_its_docstring():
    import ast

    for package in SPLIT:
        tree = ast.parse((ROOT / package.replace(".", "/") / "__init__.py").read_text())
        assert len(tree.body) == 1 and isinstance(tree.body[0], ast.Expr), f"{package}/__init__.py holds code"
        layered = _layered_modules()
        assert package not in layered and any(name.startswith(package + ".") for name in layered)
