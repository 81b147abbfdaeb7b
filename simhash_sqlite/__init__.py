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
from .find.check import ConfirmReport, DuplicatePairs
from .find.clusters import Cluster, ClusterReport
from .find.queries import Query, QueryError
from .find.search import Match, SearchResult
from .index import AddReport, Document, FingerprintedDocument, SimhashIndex, Stats, StoredDocument
from .pipeline.dedup import Decision, Deduplicator, DedupReport, dedup
from .pipeline.shards import near_in_shards
from .store.integrity import CheckReport, check_index
from .version import __version__

_moved.install()

__all__ = [
    "AddReport",
    "CheckReport",
    "Cluster",
    "ClusterReport",
    "ConfirmReport",
    "Decision",
    "DedupReport",
    "Deduplicator",
    "Document",
    "DuplicatePair",
    "DuplicatePairs",
    "FingerprintSettings",
    "FingerprintedDocument",
    "ForeignSchema",
    "IndexNotFound",
    "InvalidInput",
    "Match",
    "NotAnIndex",
    "Query",
    "QueryError",
    "SchemaTooNew",
    "SearchResult",
    "SettingsMismatch",
    "SimhashError",
    "SimhashIndex",
    "Stats",
    "StoredDocument",
    "__version__",
    "check_index",
    "dedup",
    "from_hex",
    "hamming",
    "near_in_shards",
    "simhash",
    "to_hex",
    "to_signed",
    "to_unsigned",
]
