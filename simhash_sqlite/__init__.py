"""simhash-sqlite: near-duplicate search with 64-bit SimHash in a single SQLite file.

The names below are the library's public surface (docs/python-api.md); everything else may change.
"""

from typing import TYPE_CHECKING

from . import _moved
from .errors import (
    ForeignSchema,
    IndexNotFound,
    InvalidInput,
    NotAnIndex,
    SchemaTooNew,
    SettingsMismatch,
    SimhashError,
)
from .version import __version__

if TYPE_CHECKING:
    from .core.fingerprint import from_hex, hamming, simhash, to_hex, to_signed, to_unsigned
    from .core.settings import FingerprintSettings
    from .find.arrays import DuplicatePair
    from .find.check import DuplicateSearch
    from .find.clusters import Cluster, ClusterReport
    from .find.queries import FailedQuery, Query
    from .find.search import Match, SearchResult
    from .find.verdict import CheckSummary
    from .index import AddReport, Document, FingerprintedDocument, SimhashIndex, Stats, StoredDocument
    from .native.extension import ExtensionMissing, load, loadable_path
    from .pipeline.dedup import Decision, Deduplicator, DedupReport, dedup
    from .pipeline.shards import near_in_shards
    from .store.integrity import IntegrityReport, integrity_check

_moved.install()

# The public names are imported on first use (PEP 562), so that a process that needs one layer (a pool
# worker imports pipeline.jsonl and the core: numpy, no SQLite, no CLI) does not import them all: the
# whole package took 0.2 CPU-s to import, paid again by each worker of an add.
_LAZY = {
    "from_hex": ".core.fingerprint",
    "hamming": ".core.fingerprint",
    "simhash": ".core.fingerprint",
    "to_hex": ".core.fingerprint",
    "to_signed": ".core.fingerprint",
    "to_unsigned": ".core.fingerprint",
    "FingerprintSettings": ".core.settings",
    "DuplicatePair": ".find.arrays",
    "DuplicateSearch": ".find.check",
    "Cluster": ".find.clusters",
    "ClusterReport": ".find.clusters",
    "FailedQuery": ".find.queries",
    "Query": ".find.queries",
    "Match": ".find.search",
    "SearchResult": ".find.search",
    "CheckSummary": ".find.verdict",
    "AddReport": ".index",
    "Document": ".index",
    "FingerprintedDocument": ".index",
    "SimhashIndex": ".index",
    "Stats": ".index",
    "StoredDocument": ".index",
    "Decision": ".pipeline.dedup",
    "Deduplicator": ".pipeline.dedup",
    "DedupReport": ".pipeline.dedup",
    "dedup": ".pipeline.dedup",
    "near_in_shards": ".pipeline.shards",
    "IntegrityReport": ".store.integrity",
    "integrity_check": ".store.integrity",
    "ExtensionMissing": ".native.extension",
    "load": ".native.extension",
    "loadable_path": ".native.extension",
}

__all__ = [
    "AddReport",
    "IntegrityReport",
    "Cluster",
    "ClusterReport",
    "CheckSummary",
    "Decision",
    "DedupReport",
    "Deduplicator",
    "Document",
    "DuplicatePair",
    "DuplicateSearch",
    "ExtensionMissing",
    "FingerprintSettings",
    "FingerprintedDocument",
    "ForeignSchema",
    "IndexNotFound",
    "InvalidInput",
    "Match",
    "NotAnIndex",
    "Query",
    "FailedQuery",
    "SchemaTooNew",
    "SearchResult",
    "SettingsMismatch",
    "SimhashError",
    "SimhashIndex",
    "Stats",
    "StoredDocument",
    "__version__",
    "integrity_check",
    "dedup",
    "load",
    "loadable_path",
    "from_hex",
    "hamming",
    "near_in_shards",
    "simhash",
    "to_hex",
    "to_signed",
    "to_unsigned",
]

# Old names (CHANGELOG.md), kept importable until 1.0.
_RENAMED = {
    "CheckReport": "IntegrityReport",
    "check_index": "integrity_check",
    "ConfirmReport": "CheckSummary",
    "DuplicatePairs": "DuplicateSearch",
    "QueryError": "FailedQuery",
}


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(_LAZY[name], __name__), name)
        globals()[name] = value  # once: later lookups find it without this function
        return value
    if name in _RENAMED:
        import warnings

        warnings.warn(f"simhash_sqlite.{name} is now {_RENAMED[name]}", DeprecationWarning, stacklevel=2)
        return __getattr__(_RENAMED[name])
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
