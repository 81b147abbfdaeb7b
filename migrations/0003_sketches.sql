-- 0003: a compact sketch of every document's 5-shingles (sketch.py: one-permutation MinHash, 960 one-bit
-- bins, 120 bytes), so that a pair can be checked by its estimated Jaccard when the texts are not at hand.
-- NULL: a document without letters or digits, a bare fingerprint (add_fingerprints), or one indexed
-- before this migration whose text could not be reached to sketch it again. The scheme is recorded in
-- simhash_meta 'sketch'.

ALTER TABLE documents ADD COLUMN sketch BLOB;
