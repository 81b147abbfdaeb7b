-- 0001: the document table with its four 16-bit block columns, and the settings table.
-- Fingerprints are stored as signed int64 (two's complement of the unsigned 64-bit value);
-- b0..b3 are the unsigned 16-bit blocks, b0 holding bits 63..48.
-- A document with no features has NULL fingerprint and blocks, so no equality lookup ever finds it.

CREATE TABLE simhash_meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
) STRICT, WITHOUT ROWID;

CREATE TABLE documents (
    id           INTEGER PRIMARY KEY,
    key          TEXT NOT NULL UNIQUE,
    fingerprint  INTEGER,
    b0           INTEGER,
    b1           INTEGER,
    b2           INTEGER,
    b3           INTEGER,
    length       INTEGER,                   -- characters (NULL when added as a bare fingerprint)
    content_hash BLOB,                      -- BLAKE2b-128 of the UTF-8 text: exact duplicates, unchanged files
    text         TEXT,                      -- only when the index was created with store_text
    added_at     TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%SZ', 'now'))
) STRICT;

-- Covering indexes: a block lookup and its hamming() filter read only the index, not the table.
CREATE INDEX documents_b0 ON documents (b0, fingerprint);
CREATE INDEX documents_b1 ON documents (b1, fingerprint);
CREATE INDEX documents_b2 ON documents (b2, fingerprint);
CREATE INDEX documents_b3 ON documents (b3, fingerprint);
CREATE INDEX documents_content_hash ON documents (content_hash);
