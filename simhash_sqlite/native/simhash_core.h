/* simhash_core: the fingerprint and sketch core of simhash-sqlite in plain C (C99, libc and libm only).
 *
 * It computes exactly what the Python reference (simhash_sqlite core: features.char_units, fingerprint.py,
 * sketch.py) computes for character n-gram fingerprints: the same 64-bit fingerprints, the same sketch
 * bytes, the same Jaccard estimates (bit-identical doubles). What it cannot compute exactly it DECLINES,
 * per text, with a status the caller acts on (the Python face computes such a text with the reference;
 * another host reports an error or NULL). It never declines silently and never guesses.
 *
 * Text is UTF-8. A text is declined (SHC_DECLINED | reason) when it holds invalid UTF-8, an encoded
 * surrogate (Python's 'surrogatepass' encoding of a lone surrogate). Compatibility characters (full-width
 * forms, no-break space, ligatures, ...), multi-character case folds (sharp s) and full NFKC (marks that
 * compose, marks out of canonical order, conjoining jamo, U+00B4: nfkc.h; see docs/native.md) are
 * computed. The Unicode
 * tables are generated at build time from the build interpreter's unicodedata; shc_unidata_version()
 * says which Unicode version.
 *
 * Thread safety: every function is reentrant; a shc_work holds one thread's scratch memory (one per
 * thread, never shared at the same time). Nothing here reads past the lengths it is given.
 *
 * Building: see simhash_sqlite/native/BUILD.md (one list of targets in hatch_build.py; the SQLite
 * extension compiles simhash_core.c into itself).
 */
#ifndef SIMHASH_CORE_H
#define SIMHASH_CORE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32)
#define SHC_API __declspec(dllexport)
#elif defined(__GNUC__)
#define SHC_API __attribute__((visibility("default")))
#else
#define SHC_API
#endif

/* A hint to fetch an address's cache line ahead of a read (the core's C files; nothing where the compiler has none). */
#if defined(__GNUC__)
#define SHC_PREFETCH(address) __builtin_prefetch((address), 0, 3)
#else
#define SHC_PREFETCH(address) ((void)0)
#endif

/* Bumped when a signature or a meaning below changes (the Python face checks it at load). */
#define SHC_ABI_VERSION 2

/* Feature weights, as FingerprintSettings.weights names them. */
#define SHC_WEIGHTS_BINARY 0
#define SHC_WEIGHTS_COUNT 1
#define SHC_WEIGHTS_LOG 2

/* Per-text status (one byte per text in the batch calls). */
#define SHC_NO_FEATURES 0x00   /* no letter or digit: fingerprint None and sketch None (outputs zeroed) */
#define SHC_HAS_FINGERPRINT 0x01 /* the fingerprint output is valid */
#define SHC_HAS_SKETCH 0x02      /* the sketch output is valid (else zero bytes: the reference's None) */
#define SHC_DECLINED 0x80        /* not computed: the low bits say why (outputs zeroed) */
#define SHC_WHY_UTF8 1           /*   invalid UTF-8 (overlong, truncated, beyond U+10FFFF, ...) */
#define SHC_WHY_SURROGATE 2      /*   an encoded surrogate (U+D800..U+DFFF) */
#define SHC_WHY_NORMALIZE 3      /*   (reserved: full NFKC is computed now, nfkc.h) */
#define SHC_WHY_FOLD 4           /*   (reserved: multi-character case folds are computed now) */
#define SHC_WHY_ROUNDING 5       /*   a log weight or size code too near a rounding tie to be sure */
#define SHC_WHY_MEMORY 6         /*   out of memory for this text */

/* Call-level errors (negative returns). */
#define SHC_ERR_ARGUMENT (-1) /* a setting or scheme not supported, a NULL where data is needed, bad offsets */
#define SHC_ERR_MEMORY (-2)

/* A sketch scheme (sketch.SketchScheme): bins 1..65536, bits 1/2/4/8/16 with bins*bits % 8 == 0,
 * size_bits 0 (version 1) or 16 (version 2). Its ngram and version fields do not change the bytes
 * (the reference always sketches character 5-grams), so they are not here. */
typedef struct shc_scheme {
    int32_t bins;
    int32_t bits;
    int32_t size_bits;
} shc_scheme;

SHC_API int shc_abi_version(void);
/* The Unicode version of the tables (unicodedata.unidata_version of the interpreter that built them). */
SHC_API const char *shc_unidata_version(void);
/* "portable", "avx2" or "avx512": the kernels in use (by default the best this CPU runs). */
SHC_API const char *shc_kernel(void);
/* Use the named kernels ("portable", "avx2", "avx512"; NULL or "" for the best) for every later call
 * in this process, for tests and benches: all give the same results. SHC_ERR_ARGUMENT (nothing
 * changed) for a name this CPU or build cannot run. */
SHC_API int shc_set_kernel(const char *name);

/* 0 when the core computes fingerprints of character `ngram`-grams (1..16) with these weights, else
 * SHC_ERR_ARGUMENT (features="words" is never supported: the caller must not ask). */
SHC_API int shc_check_settings(int32_t ngram, int32_t weights);
/* 0 when the scheme is supported, else SHC_ERR_ARGUMENT. */
SHC_API int shc_check_scheme(const shc_scheme *scheme);
/* Bytes of one sketch of the scheme (bins*bits/8 + size_bits/8), or 0 when it is not supported. */
SHC_API size_t shc_sketch_bytes(const shc_scheme *scheme);

/* Scratch memory of one thread; grows to the largest text seen, reused across calls. */
typedef struct shc_work shc_work;
SHC_API shc_work *shc_work_new(void);
SHC_API void shc_work_free(shc_work *work);

/* Fingerprints and/or sketches of n texts. Text i is the UTF-8 bytes buf[offsets[i] .. offsets[i+1]),
 * offsets nondecreasing, n + 1 of them (offsets[0] need not be 0). Outputs (each may be NULL to skip it):
 *   fingerprints: n uint64 (the unsigned fingerprint; 0 where there is none),
 *   sketches: n * shc_sketch_bytes(scheme) bytes (zeros where there is none); needs scheme,
 *   status: n bytes (SHC_* above); required.
 * With sketches, the fingerprint's ngram/weights do not change the sketch (always 5-grams, as the
 * reference). Returns 0, or a negative SHC_ERR_* (nothing written is meaningful then). */
SHC_API int shc_batch(shc_work *work, const char *buf, const int64_t *offsets, size_t n, int32_t ngram,
                      int32_t weights, const shc_scheme *scheme, uint64_t *fingerprints, uint8_t *sketches,
                      uint8_t *status);

/* One text: *status as above; returns 0 or a negative SHC_ERR_*. fingerprint/sketch may be NULL. */
SHC_API int shc_text(shc_work *work, const char *text, size_t len, int32_t ngram, int32_t weights,
                     const shc_scheme *scheme, uint64_t *fingerprint, uint8_t *sketch, uint8_t *status);

/* features.normalize(text) as code points: NFKC, case folded, whitespace runs folded to one space and
 * none at either end (what the exact check shingles; unlike the fingerprint's units, also for a text
 * without a letter or digit). *units points into work's memory, valid until work's next use; *count of
 * them. *status: 0, or SHC_DECLINED | why (invalid UTF-8, an encoded surrogate, memory; never
 * SHC_WHY_NORMALIZE: full NFKC is computed). Returns 0 or SHC_ERR_ARGUMENT. */
SHC_API int shc_normalize(shc_work *work, const char *text, size_t len, const uint32_t **units, size_t *count,
                          uint8_t *status);

/* Sorts h[0..n) ascending in place and moves each value once to its front: returns how many distinct
 * values there are (no memory is allocated; the extension's exact check uses it for shingle sets). */
SHC_API size_t shc_sorted_distinct(uint64_t *h, size_t n);

/* core/shingles.shingle_set of normalized code points units[0..count): the sorted distinct hashes of their
 * n-unit shingles (features.ngram_hashes; fewer than n units make one shorter shingle) written to out, which
 * has room for count values (at most that many are written); returns how many. */
SHC_API size_t shc_shingle_set(const uint32_t *units, size_t count, int32_t n, uint64_t *out);

/* Bits that differ (fingerprint.hamming). */
SHC_API int shc_hamming(uint64_t a, uint64_t b);
/* The four 16-bit blocks, most significant first (fingerprint.blocks: b0 = bits 63..48). */
SHC_API void shc_blocks(uint64_t fingerprint, uint16_t out[4]);

/* Estimated Jaccard of n pairs of sketches (sketch.estimate_many): rows a[i], b[i] of
 * shc_sketch_bytes(scheme) bytes each, laid end to end. out: n doubles, bit-identical to numpy's.
 * Returns 0 or SHC_ERR_ARGUMENT. */
SHC_API int shc_estimate_many(const uint8_t *a, const uint8_t *b, size_t n, const shc_scheme *scheme, double *out);
/* One pair with its byte lengths checked: SHC_ERR_ARGUMENT (nothing written) unless both are
 * shc_sketch_bytes(scheme) long. */
SHC_API int shc_estimate(const uint8_t *a, size_t a_len, const uint8_t *b, size_t b_len, const shc_scheme *scheme,
                         double *out);
/* The distinct-shingle count a version 2 sketch records (sketch.sizes_of); NaN where unknown (code 0)
 * or where the scheme records none. Returns 0 or SHC_ERR_ARGUMENT (length checked as above). */
SHC_API int shc_sketch_size(const uint8_t *sketch, size_t len, const shc_scheme *scheme, double *out);

/* Where shc_window_pairs stopped: the pair (packed[i], packed[j]) comes next. Start at {0, 0}. */
typedef struct shc_window_cursor {
    int64_t i;
    int64_t j;
} shc_window_cursor;

/* The pairs of one LSH table of sketch_pairs, checked and deduplicated as they are found. packed: n words
 * (key << position_bits | row), sorted ascending with no row twice, the key being bits
 * [table * step, table * step + width) of the row's bins (bit i = bit i % 8 of byte i / 8); rows holds nrows
 * sketches of shc_sketch_bytes(scheme) bytes end to end. Every pair of rows p < q of equal keys whose bits
 * agree on no earlier window of the table list (table t' < table, starting at t' * step) and whose
 * estimate (shc_estimate_many, bit for bit) is >= threshold is written to left, right, estimate (capacity
 * entries at most; *count says how many). Returns 0 when the table is done, 1 when capacity was reached
 * and pairs remain (call again with the same cursor and fresh outputs), SHC_ERR_ARGUMENT for arguments
 * out of range or words out of order (a row beyond nrows is an error, never a read), SHC_ERR_MEMORY. */
SHC_API int shc_window_pairs(const uint8_t *rows, size_t nrows, const shc_scheme *scheme, const uint64_t *packed,
                             size_t n, int32_t position_bits, int32_t width, int32_t step, int32_t table,
                             double threshold, shc_window_cursor *cursor, int64_t *left, int64_t *right,
                             double *estimate, size_t capacity, size_t *count);

/* Sorts h[0..n) ascending, as a sort of whole words does (sketch_pairs' LSH tables: key << low | row). With
 * scratch (room for n words) the words are first dealt out stably by the bits from `low` up, which sorts them
 * wholly where the bits below `low` ascend within each key (rows in order: 6x numpy's sort at 1M words);
 * otherwise, or where they do not, an in-place radix sort finishes the job. Returns 0, or SHC_ERR_ARGUMENT
 * (low outside 0..63, h NULL with n > 0). Allocates 2 MB at most, and sorts in place where it cannot. */
SHC_API int shc_sort_packed(uint64_t *h, size_t n, int32_t low, uint64_t *scratch);

/* An LSH table's words before the sort (sketch_pairs._packed_table): out[i] = key << low | low_words[i], the key
 * being bits [shift, shift + width) of the 128-bit lo[i] | hi[i] << 64 (hi NULL: zeros), one pass where numpy
 * makes six. Returns 0, or SHC_ERR_ARGUMENT (shift outside 0..63, width outside 1..64 - low, NULL arrays). */
SHC_API int shc_pack_window(const uint64_t *lo, const uint64_t *hi, const uint64_t *low_words, size_t n,
                            int32_t shift, int32_t width, int32_t low, uint64_t *out);

#ifdef __cplusplus
}
#endif
#endif
