"""A set of index files (shards) written by a Spark job, searched one file at a time.

SQLite attaches at most ten databases to a connection by default, so a search over many shards
opens each shard in turn with its own SimhashIndex and merges the matches: any number of shards
works, and each shard is an ordinary index that `simq near --db` opens too. A key's shard is a
stable hash of the key, so a lookup by key opens one file.
"""

from __future__ import annotations

import glob
import hashlib
import os
from collections.abc import Iterable

from ..core.fingerprint import simhash, to_signed
from ..core.settings import DEFAULT_THRESHOLD, FingerprintSettings
from ..errors import InvalidInput, SettingsMismatch
from ..find.search import Match
from ..index import SimhashIndex

SHARD_PATTERN = "shard-{:05d}.db"


def shard_of(key: str, shards: int) -> int:
    """The shard a key belongs to: BLAKE2b-64 of its UTF-8 bytes modulo the shard count (stable everywhere)."""
    digest = hashlib.blake2b(key.encode("utf-8", "surrogatepass"), digest_size=8).digest()
    return int.from_bytes(digest, "big") % shards


def shard_paths(folder: str | os.PathLike) -> list[str]:
    """The shard files in a folder, in shard order."""
    paths = sorted(glob.glob(os.path.join(os.fspath(folder), SHARD_PATTERN.replace("{:05d}", "[0-9]" * 5))))
    if not paths:
        raise InvalidInput(f"no shard files ({SHARD_PATTERN.format(0)}, ...) in {folder}")
    return paths


def near_in_shards(
    paths: Iterable[str | os.PathLike],
    text: str | None = None,
    *,
    fingerprint: int | None = None,
    k: int | None = None,
    limit: int | None = None,
    check: bool = True,
    threshold: float = DEFAULT_THRESHOLD,
) -> list[Match]:
    """SimhashIndex.near over every shard (the same check and defaults), closest first (then by key):
    one open file at a time.

    All shards must record the same fingerprint settings; a text is fingerprinted with them.
    """
    if (text is None) == (fingerprint is None):
        raise InvalidInput("give exactly one of a text or a fingerprint to search for")
    matches: list[Match] = []
    settings: FingerprintSettings | None = None
    for path in paths:
        with SimhashIndex(path) as index:
            if settings is None:
                settings = index.settings
                if fingerprint is None:
                    assert text is not None  # exactly one of them, checked above
                    fingerprint = simhash(text, settings)
                    if fingerprint is None:
                        raise InvalidInput("the query text has no features (no letters or digits) to search with")
                to_signed(fingerprint)
            elif index.settings != settings:
                raise SettingsMismatch(f"{path} was built with other fingerprint settings than the first shard")
            query = {"fingerprint": fingerprint} if text is None else {"text": text}
            matches.extend(index.near(**query, k=k, limit=limit, check=check, threshold=threshold))
    matches.sort(key=lambda m: (m.distance, m.key))
    return matches if limit is None else matches[:limit]
