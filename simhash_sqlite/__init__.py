"""simhash-sqlite: near-duplicate search with 64-bit SimHash in a single SQLite file.

The names below are the library's public surface (docs/python-api.md); everything else may change.
"""

from . import _moved
from .core.fingerprint import from_hex, hamming, simhash, to_hex, to_signed, to_unsigned
from .core.settings import FingerprintSettings
from .errors import (
    ForeignSchema,
    IndexNotFound,
    InvalidInput,
    NotAnIndex,
    SchemaTooNew,
    SettingsMismatch,
    SimhashError,
)
from .find.arrays import DuplicatePair
from .find.check import DuplicateSearch
from .find.clusters import Cluster, ClusterReport
from .find.queries import FailedQuery, Query
from .find.search import Match, SearchResult
from .find.verdict import CheckSummary
from .index import AddReport, Document, FingerprintedDocument, SimhashIndex, Stats, StoredDocument
from .pipeline.dedup import Decision, Deduplicator, DedupReport, dedup
from .pipeline.shards import near_in_shards
from .store.integrity import IntegrityReport, integrity_check
from .version import __version__

_moved.install()

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
    if name in _RENAMED:
        import warnings

        warnings.warn(f"simhash_sqlite.{name} is now {_RENAMED[name]}", DeprecationWarning, stacklevel=2)
        return globals()[_RENAMED[name]]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
