/* The per-document path of `simq add` in C: a chunk of JSONL lines to finished rows in one call
 * (documents.c). Built into the core's library (_simhash_core); the Python face is native/documents.py.
 * Thread safety: a shc_docs is one thread's state (never shared at the same time); everything else is
 * reentrant. */
#ifndef SIMHASH_DOCUMENTS_H
#define SIMHASH_DOCUMENTS_H

#include "simhash_core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What each line of a chunk is. */
#define SHC_LINE_BLANK 0  /* nothing but whitespace: neither a record nor a skip */
#define SHC_LINE_RECORD 1 /* a record, its row written */
#define SHC_LINE_PYTHON 2 /* not sure: the Python path reads it (a skip, an escape in a field name, ...) */

/* How a line becomes a row (pipeline/jsonl.py RecordRules). */
typedef struct shc_doc_rules {
    const char *text_field; /* UTF-8, text_field_len bytes; must differ from id_field */
    int64_t text_field_len;
    const char *id_field;
    int64_t id_field_len;
    int64_t max_record_bytes; /* a longer line (without its newline) goes to the Python path */
    int64_t whole_most;       /* a text of more characters goes to the Python path (fingerprinted in pieces) */
    int32_t require_id;       /* a record without the id field goes to the Python path (its skip) */
    int32_t ngram;            /* the fingerprint's settings (shc_check_settings) */
    int32_t weights;
    int32_t content_hashes;   /* BLAKE2b-128 of each text's UTF-8 */
    int32_t short_texts;      /* core/short_texts.short_text_data of each text with a fingerprint */
    int32_t short_limit;      /* SHORT_TEXT_BYTES */
    int32_t short_most;       /* SHORT_TEXT_MOST */
    int32_t deflated_most;    /* SHORT_TEXT_DEFLATED_MOST */
    const shc_scheme *scheme; /* the sketches' scheme; NULL: no sketches */
} shc_doc_rules;

/* Where the rows go: arrays of `capacity` lines each (the caller counts the chunk's lines). Line i's bytes
 * are data[start[i], end[i]) (its newline included); a record's key is keys[key_start[i], key_end[i]) (UTF-8,
 * has_id[i] 0: none), its short text's data shorts[short_start[i], short_end[i]) (empty: None), its
 * fingerprint fingerprints[i] and sketch sketches[i * bytes] valid as status[i] says (shc_text). Every record's
 * key is followed by a NUL in keys (an empty one where it has none; no key holds a NUL), so that the keys can
 * be split at once. */
typedef struct shc_doc_out {
    size_t capacity;
    uint8_t *kind;
    int64_t *start;
    int64_t *end;
    uint8_t *has_id;
    int64_t *key_start;
    int64_t *key_end;
    char *keys;
    size_t keys_capacity; /* the chunk's length + its lines is always enough */
    int64_t *lengths;     /* characters */
    uint8_t *hashes;      /* 16 bytes a line */
    uint64_t *fingerprints;
    uint8_t *status;
    uint8_t *sketches;
    int64_t *short_start;
    int64_t *short_end;
    uint8_t *shorts;
    size_t shorts_capacity; /* the chunk's length + 16 a line is always enough */
} shc_doc_out;

typedef struct shc_docs shc_docs;
SHC_API shc_docs *shc_docs_new(void);
SHC_API void shc_docs_free(shc_docs *docs);

/* The zlib the short texts are deflated with (zlibVersion()), "" where the library was built without it
 * (then short_texts is refused): its bytes equal Python's zlib module's only with the same zlib. */
SHC_API const char *shc_docs_zlib_version(void);

/* The rows of the chunk's lines (data, len bytes; the last line may lack its newline). *lines: how many lines
 * were written. Returns 0, SHC_ERR_ARGUMENT (rules or capacities that do not fit), SHC_ERR_MEMORY (the
 * caller reads the chunk in Python). */
SHC_API int shc_docs_chunk(shc_docs *docs, const char *data, size_t len, const shc_doc_rules *rules,
                           shc_doc_out *out, size_t *lines);

/* What shc_docs_shingle_sets makes of each text. */
#define SHC_SET_TEXT 0 /* kinds[i]: the text's UTF-8 */
#define SHC_SET_LINE 1 /* kinds[i]: a JSONL line, whose record's text field is the text */
#define SHC_SET_PYTHON 0 /* status[i]: not sure (a line parse_record leaves, invalid UTF-8, a surrogate): Python's */
#define SHC_SET_MADE 1   /* status[i]: its set is made (empty for a text that normalizes to nothing) */
#define SHC_SET_LONG 2   /* status[i]: more than rules->whole_most characters: out of reach, no set */
#define SHC_SET_CHANGED 3 /* status[i] (shc_docs_checked_sets): not the text of the digest given, no set */

/* The exact check's shingle sets (core/shingles.shingle_set: the sorted distinct hashes of the ngram-character
 * shingles of the normalized text) of n texts: text i is buf[offsets[i], offsets[i + 1]) (n + 1 offsets, each
 * within len bytes, nondecreasing), read as kinds[i] says. A line is read as shc_docs_chunk reads it under the
 * same rules (only the text field and id field names, max_record_bytes and whole_most are used; require_id should
 * be 0: the id is not wanted). The sets are written end to end into the state's own memory, valid until its next
 * call (shc_docs_sets): text i's at [ends[i - 1], ends[i]) (from 0 for the first; empty unless status[i] is
 * SHC_SET_MADE). Returns 0, SHC_ERR_ARGUMENT (nothing meaningful written), SHC_ERR_MEMORY. */
SHC_API int shc_docs_shingle_sets(shc_docs *docs, const char *buf, size_t len, const int64_t *offsets,
                                  const uint8_t *kinds, size_t n, const shc_doc_rules *rules, int32_t ngram,
                                  int64_t *ends, uint8_t *status);
/* shc_docs_shingle_sets of stored documents' texts read back (dupes' exact check): digests holds n BLAKE2b-128
 * content hashes (16 bytes each, store/texts.content_hash), and a text whose own differs is SHC_SET_CHANGED (a
 * JSONL line rewritten since the add) with no set. */
SHC_API int shc_docs_checked_sets(shc_docs *docs, const char *buf, size_t len, const int64_t *offsets,
                                  const uint8_t *kinds, size_t n, const shc_doc_rules *rules, int32_t ngram,
                                  const uint8_t *digests, int64_t *ends, uint8_t *status);
SHC_API const uint64_t *shc_docs_sets(const shc_docs *docs);

/* core/shingles.jaccard_of_sets of n pairs of sets: sets k is sets[ends[k - 1], ends[k]) (from 0 for the first; nsets
 * ends, nondecreasing, within len values), each sorted ascending with no value twice; out[i] = the Jaccard of sets
 * a[i] and b[i] (1.0 for two empty sets, 0.0 for one). Returns 0, or SHC_ERR_ARGUMENT (ends out of order or past the
 * values, a set number out of range: nothing is read then). */
SHC_API int shc_docs_jaccards(const uint64_t *sets, size_t len, const int64_t *ends, size_t nsets, const int64_t *a,
                              const int64_t *b, size_t n, double *out);

/* dedup's kept sketches (pipeline/dedup.py KeptSketches): runs of sorted window codes, each a code << 32 | position
 * (sorted_codes). Sortedness is the caller's promise: input out of order gives some answer, never a read or write
 * outside the arrays. */

/* out (na + nb values) = a and b + add (each sorted ascending) merged, a's first where two are equal: what
 * numpy's stable sort of their concatenation gives. out may be a itself (a run with room after it: merged in place),
 * never b. Returns 0, or SHC_ERR_ARGUMENT (a NULL where values are). */
SHC_API int shc_codes_merge(const uint64_t *a, size_t na, const uint64_t *b, size_t nb, uint64_t add, uint64_t *out);

/* Every (query position, run position) pair of a query code and a run code with the same top 64 - low_bits bits,
 * in the order of the queries, each query's in the run's order: query[i]'s low bits and run[j]'s (the positions).
 * At most room pairs are written to q and position; *found is how many there are (more than room: call again
 * with room for *found). Returns 0, or SHC_ERR_ARGUMENT (low_bits past 63, a NULL where values are). */
SHC_API int shc_codes_find(const uint64_t *run, size_t nrun, const uint64_t *queries, size_t nq, int low_bits,
                           int64_t *q, int64_t *position, size_t room, size_t *found);

/* Sets bit code >> (63 - bits) of the bit map seen (nbytes bytes, bit k in byte k >> 3 at k & 7) for each code.
 * Returns 0, or SHC_ERR_ARGUMENT (bits not within 3..63, a bit past the map: nothing written then). */
SHC_API int shc_codes_mark(uint8_t *seen, size_t nbytes, const uint64_t *codes, size_t n, int bits);

/* The lines of a chunk of len bytes (its newlines, and one more for a last line without its newline). */
SHC_API size_t shc_docs_lines(const char *data, size_t len);

/* BLAKE2b with a 16-byte digest and no key (hashlib.blake2b(data, digest_size=16)). */
SHC_API void shc_blake2b_128(const unsigned char *data, size_t len, unsigned char out[16]);
/* str.isspace of one code point (what fold_space folds). */
SHC_API int shc_is_space(uint32_t cp);

#ifdef __cplusplus
}
#endif
#endif
