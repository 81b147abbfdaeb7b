"""The text behind a stored key, for exact checks: the copy kept in the index (--store-text), or the
file at the key's path when it still holds what was indexed (same content hash)."""

from __future__ import annotations

import hashlib
import os
from typing import TYPE_CHECKING

# Texts up to READ_WHOLE_BYTES (core/rule.py) are read whole (by add, and here for a check); larger ones are
# fingerprinted in pieces and never held whole, so a check cannot compare them: judged by distance alone.
from ..core.rule import READ_WHOLE_BYTES

if TYPE_CHECKING:  # (a pool worker imports content_hash_of_utf8 without the database layer)
    from .database import IndexFile



def content_hash(text: str) -> bytes:
    """BLAKE2b-128 of the text: stored by add(), so a file still at its key's path can be proved unchanged."""
    return content_hash_of_utf8(text.encode("utf-8", "surrogatepass"))


def content_hash_of_utf8(utf8: bytes) -> bytes:
    """content_hash() of a text given as its UTF-8 ('surrogatepass'), where the caller has the bytes."""
    return hashlib.blake2b(utf8, digest_size=16).digest()


def stored_text(index: IndexFile, key: str) -> str | None:
    """The indexed text of `key`, or None when neither a stored copy nor the unchanged file exists."""
    row = index.conn.execute("SELECT text, content_hash FROM documents WHERE key = ?", (key,)).get
    if row is None:
        return None
    text, digest = row
    return text_of(key, text, digest, index.key_root)


def key_path(key: str, root: str | None) -> str:
    """The file a key names: a relative key is taken from `root`, the folder the index records for its
    keys (simhash_meta 'key_root'), so that it names the same file from any working folder; from the
    working folder when None (an index made before the root was recorded)."""
    return key if root is None or os.path.isabs(key) else os.path.join(root, key)


def text_of(key: str, text: str | None, digest: bytes | None, root: str | None = None) -> str | None:
    """A document's text from its row: the stored copy, else the file at `key` (key_path: from `root`)
    if its content hash is still `digest` (a file edited, moved or gone since the add gives None). None
    too for a text over READ_WHOLE_BYTES (characters, for a stored one): it is not read whole."""
    if text is not None:
        return text if len(text) <= READ_WHOLE_BYTES else None
    path = key_path(key, root)
    if digest is None or not os.path.isfile(path):
        return None
    try:
        if os.path.getsize(path) > READ_WHOLE_BYTES:
            return None
        with open(path, "rb") as f:  # bytes, as sources.Reader read them (no newline translation)
            on_disk = f.read().decode("utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    return on_disk if content_hash(on_disk) == digest else None
