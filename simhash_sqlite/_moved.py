"""The module paths that docs/python-api.md named before the package was split into layers keep
working until 1.0: `import simhash_sqlite.fingerprint` gives simhash_sqlite.core.fingerprint, with a
DeprecationWarning naming the new path (CHANGELOG.md)."""

from __future__ import annotations

import importlib
import importlib.util
import sys
import warnings

MOVED = {
    "fingerprint": "core.fingerprint",
    "confirm": "find.verdict",
    "pairs": "find.pairs",
    "explain": "analysis.explain",
    "calibrate": "analysis.calibrate",
    "checks": "store.integrity",
    "shards": "pipeline.shards",
}


class _Alias:
    """A meta path finder and loader (the import system's protocols; importlib.abc's base classes would
    cost every process, pool workers too, 10 ms of imports)."""

    def find_spec(self, name, path=None, target=None):
        package, _, old = name.partition(".")
        if package != __package__ or old not in MOVED:
            return None
        return importlib.util.spec_from_loader(name, self)

    def create_module(self, spec):
        new = f"{__package__}.{MOVED[spec.name.partition('.')[2]]}"
        warnings.warn(f"{spec.name} moved to {new}", DeprecationWarning, stacklevel=2)
        module = importlib.import_module(new)
        sys.modules[spec.name] = module
        return module

    def exec_module(self, module):
        pass  # the real module ran when it was imported under its own name


def install() -> None:
    if not any(isinstance(finder, _Alias) for finder in sys.meta_path):
        sys.meta_path.append(_Alias())
