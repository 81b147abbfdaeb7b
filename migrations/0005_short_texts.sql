-- 0005: the exact data of short texts (core/short_texts.py: the whitespace-folded text, deflated, with a
-- one-byte encoding code), kept when it takes at most the cut recorded in simhash_meta 'short_texts', so
-- that a pair of two short texts is checked by its exact Jaccard where the texts are not stored: the
-- sketch's estimate spreads widely for short texts. NULL: a longer text, an index that stores its texts
-- (the check reads them), a bare fingerprint, or a document added before this migration whose text could
-- not be reached again. An index without simhash_meta 'short_texts' was made before, and its short texts
-- are estimated.

ALTER TABLE documents ADD COLUMN short_text BLOB;
