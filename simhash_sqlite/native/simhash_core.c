/* simhash_core: see simhash_core.h for the contract and docs/native.md for the design.
 *
 * Every step restates a piece of the Python reference; the comments name it. Floating point is used
 * only where the reference uses it (log weights, size codes, the estimate), with the same operations in
 * the same order, compiled without contraction (-ffp-contract=off), and a rounding that lands too near
 * a tie to be sure of is declined rather than guessed.
 */
#include "simhash_core.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "_unicode_tables.h" /* generated at build time: gen_unicode_tables.py */
#include "utf8_step.h"

#define SHC_SPACE (1u << 17)
#define SHC_ALNUM (1u << 18)
#define SHC_MULTI (1u << 19)
#define SHC_UNSAFE (1u << 20)
#define SHC_MAPPED (1u << 28)
#define SHC_EXPANDS (1u << 29)
#define SHC_AFTER (1u << 30)
#define SHC_DECOMP (1u << 31)
#define SHC_DELTA_MASK ((1u << 17) - 1)

static const uint64_t SEED = 0x9E3779B97F4A7C15ull; /* features.SEED */
static const uint64_t M1 = 0xBF58476D1CE4E5B9ull;
static const uint64_t M2 = 0x94D049BB133111EBull;
static const uint64_t PROBE_ATTEMPT = 0x632BE59BD9B4E019ull; /* sketch._probe */
static const uint32_t FIELD_MULTIPLIER = 0x9E3779B1u;          /* sketch.sketch_from_minima */
static const uint32_t EMPTY_BIN = 0xFFFFFFFFu;                 /* sketch._EMPTY */
#define SKETCH_NGRAM 5                                         /* shingles.TRUTH_NGRAM */
#define SIZE_STEPS 2048.0                                      /* sketch.SIZE_STEPS */
#define WEIGHT_SCALE 1000.0                                    /* features.WEIGHT_SCALE */
#define CONTAINMENT_SDS 2.0                                    /* sketch.CONTAINMENT_SDS */
#define MAX_BINS 65536
/* Kernels chosen at run time: the per-text function is compiled for the baseline and for x86-64-v3
 * (AVX2) and v4 (AVX-512), and the first call picks the best this CPU runs (shc_set_kernel may pick
 * another it runs, for tests and benches), so a portable build never faults on an older x86-64 and
 * still uses the wide vectors where they are. SHC_NO_KERNELS builds the baseline alone. */
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 12 && defined(__x86_64__) && defined(__linux__) && \
    !defined(SHC_NO_KERNELS)
#define SHC_HAVE_KERNELS 1
/* Functions of the estimates are cloned for the same targets and the loader picks (GCC's target_clones,
 * an ifunc): they are short and give the same doubles everywhere, so no switch chooses them. */
#define SHC_CLONES __attribute__((target_clones("default", "arch=x86-64-v3", "arch=x86-64-v4")))
#else
#define SHC_CLONES
#endif
#if defined(__GNUC__)
#define SHC_INLINE static inline __attribute__((always_inline))
#else
#define SHC_INLINE static inline
#endif

/* A rounding whose argument lies within this of a tie (x.5) is declined: numpy's log/log2 may be
 * another implementation than this libm's (SIMD kernels), a few ulps apart (an ulp of 65536 is 1.5e-11,
 * so this is over 60 ulps); no count below 2**20 comes this near (tests/test_native.py checks). */
#define TIE_MARGIN 1e-9

/* ---------------------------------------------------------------- small pieces */

SHC_INLINE uint64_t mix64(uint64_t h) /* features.mix: the splitmix64 finalizer */
{
    h ^= h >> 30;
    h *= M1;
    h ^= h >> 27;
    h *= M2;
    h ^= h >> 31;
    return h;
}

SHC_INLINE uint32_t unicode_record(uint32_t cp)
{
    return shc_stage2[((uint32_t)shc_stage1[cp >> 8] << 8) | (cp & 0xFF)];
}

SHC_INLINE uint32_t record_fold(uint32_t cp, uint32_t rec)
{
    uint32_t delta = rec & SHC_DELTA_MASK;
    int32_t signed_delta = (delta & (1u << 16)) ? (int32_t)delta - (int32_t)(1u << 17) : (int32_t)delta;
    return (uint32_t)((int32_t)cp + signed_delta);
}

SHC_INLINE unsigned record_class(uint32_t rec) { return (rec >> 21) & 0x7F; }

/* Is the rounding of x (round half to even, as numpy.rint) certain whatever libm computed x with? */
static inline int near_tie(double x)
{
    double f = x - floor(x);
    return fabs(f - 0.5) < TIE_MARGIN;
}

int shc_abi_version(void) { return SHC_ABI_VERSION; }
const char *shc_unidata_version(void) { return SHC_UNIDATA_VERSION; }
/* The kernels, in order: each runs where the CPU runs the one after it (best_kernel). */
enum { KERNEL_PORTABLE, KERNEL_AVX2, KERNEL_AVX512, KERNEL_COUNT };
static const char *const KERNEL_NAMES[KERNEL_COUNT] = {"portable", "avx2", "avx512"};

static int best_kernel(void)
{
#ifdef SHC_HAVE_KERNELS
    __builtin_cpu_init();
    if (__builtin_cpu_supports("x86-64-v4"))
        return KERNEL_AVX512;
    if (__builtin_cpu_supports("x86-64-v3"))
        return KERNEL_AVX2;
#endif
    return KERNEL_PORTABLE;
}

/* The kernel in use: -1 until the first call picks one (threads racing there pick the same). */
#ifdef SHC_HAVE_KERNELS
static int kernel_in_use = -1;
static int current_kernel(void)
{
    int k = __atomic_load_n(&kernel_in_use, __ATOMIC_RELAXED);
    if (k < 0) {
        k = best_kernel();
        __atomic_store_n(&kernel_in_use, k, __ATOMIC_RELAXED);
    }
    return k;
}
#else
static int current_kernel(void) { return KERNEL_PORTABLE; }
#endif

const char *shc_kernel(void) { return KERNEL_NAMES[current_kernel()]; }

int shc_set_kernel(const char *name)
{
    int k = best_kernel();
    if (name && *name) {
        int wanted = 0;
        while (wanted < KERNEL_COUNT && strcmp(name, KERNEL_NAMES[wanted]) != 0)
            wanted++;
        if (wanted > k) /* unknown, or more than this CPU (or build) runs */
            return SHC_ERR_ARGUMENT;
        k = wanted;
    }
#ifdef SHC_HAVE_KERNELS
    __atomic_store_n(&kernel_in_use, k, __ATOMIC_RELAXED);
#endif
    return 0;
}

SHC_INLINE int popcount64(uint64_t x)
{
#if defined(__GNUC__)
    return __builtin_popcountll(x);
#else
    int n = 0;
    for (; x; x &= x - 1)
        n++;
    return n;
#endif
}

int shc_hamming(uint64_t a, uint64_t b) { return popcount64(a ^ b); }

void shc_blocks(uint64_t fingerprint, uint16_t out[4])
{
    for (int i = 0; i < 4; i++)
        out[i] = (uint16_t)(fingerprint >> (16 * (3 - i)));
}

int shc_check_settings(int32_t ngram, int32_t weights)
{
    if (ngram < 1 || ngram > 16)
        return SHC_ERR_ARGUMENT;
    if (weights != SHC_WEIGHTS_BINARY && weights != SHC_WEIGHTS_COUNT && weights != SHC_WEIGHTS_LOG)
        return SHC_ERR_ARGUMENT;
    return 0;
}

int shc_check_scheme(const shc_scheme *s)
{
    if (!s)
        return SHC_ERR_ARGUMENT;
    if (s->bits != 1 && s->bits != 2 && s->bits != 4 && s->bits != 8 && s->bits != 16)
        return SHC_ERR_ARGUMENT;
    if (s->bins < 1 || s->bins > MAX_BINS || ((int64_t)s->bins * s->bits) % 8)
        return SHC_ERR_ARGUMENT;
    if (s->size_bits != 0 && s->size_bits != 16)
        return SHC_ERR_ARGUMENT;
    return 0;
}

size_t shc_sketch_bytes(const shc_scheme *s)
{
    if (shc_check_scheme(s))
        return 0;
    return (size_t)s->bins * (size_t)s->bits / 8 + (size_t)s->size_bits / 8;
}

/* ---------------------------------------------------------------- scratch memory */

struct shc_work {
    uint32_t *units; /* the text's code points, then its units (normalised, folded) */
    size_t units_cap;
    uint32_t *spare; /* the text after NFKC, where that changes it (then swapped with units) */
    size_t spare_cap;
    uint64_t *hashes; /* n-gram hashes; then the distinct ones (log weights) */
    size_t hashes_cap;
    uint64_t *slots;  /* open-addressing set of hashes (0: empty; the key 0 is kept apart, in has_zero) */
    uint32_t *counts; /* a count per slot, for log weights */
    size_t set_cap;   /* a power of two */
    size_t set_used;  /* slots cleared before the next use: the first set_used */
    int has_zero;
    int use_counts;
    uint32_t zero_count;
    uint32_t *minima; /* sketch bin minima, MAX_BINS */
    uint32_t *fields;
    uint8_t *occupied;
    uint16_t *probe_table; /* the first PROBE_CACHED attempts of every bin, for probe_bins bins */
    int32_t probe_bins;
    uint64_t *pairs; /* ascii_pairs */
};
#define PROBE_CACHED 32

shc_work *shc_work_new(void)
{
    shc_work *w = calloc(1, sizeof *w);
    if (!w)
        return NULL;
    w->minima = malloc(sizeof(uint32_t) * MAX_BINS);
    w->fields = malloc(sizeof(uint32_t) * MAX_BINS);
    w->occupied = malloc(MAX_BINS);
    if (!w->minima || !w->fields || !w->occupied) {
        shc_work_free(w);
        return NULL;
    }
    return w;
}

void shc_work_free(shc_work *w)
{
    if (!w)
        return;
    free(w->units);
    free(w->spare);
    free(w->hashes);
    free(w->slots);
    free(w->counts);
    free(w->minima);
    free(w->fields);
    free(w->occupied);
    free(w->probe_table);
    free(w->pairs);
    free(w);
}

static int reserve(void **p, size_t *cap, size_t need, size_t item)
{
    if (need <= *cap)
        return 0;
    size_t n = *cap ? *cap : 1024;
    while (n < need) {
        if (n > ((size_t)-1 / 2) / item)
            return -1;
        n *= 2;
    }
    void *q = realloc(*p, n * item);
    if (!q)
        return -1;
    *p = q;
    *cap = n;
    return 0;
}

/* A set of at least 4 * items slots (2 * items where that would pass SET_ROOMY_SLOTS), emptied (with
 * counts where asked). At most a quarter full, a probe rarely meets another key (each such meeting is
 * a mispredicted branch); a larger set would fall out of the caches instead. Up to 1 MB (a core's L2
 * cache on current x86-64): with 256 KB, the n-grams of pages of 8,193-32,768 n-grams (a quarter of the
 * Chinese man pages', a third of the Python docs') met another key twice as often (11% against 5% of
 * them, Chinese), and the corpora ran 1-3% slower (docs/native.md, "Speed"). */
#define SET_ROOMY_SLOTS (1u << 17)
static int set_reset(shc_work *w, size_t items, int with_counts)
{
    size_t need = 64, load = items <= SET_ROOMY_SLOTS / 4 ? 4 : 2;
    while (need < load * items) {
        if (need > ((size_t)-1 / 4) / sizeof(uint64_t))
            return -1;
        need *= 2;
    }
    if (need > w->set_cap || (with_counts && !w->counts)) {
        size_t cap = need > w->set_cap ? need : w->set_cap;
        free(w->slots);
        free(w->counts);
        w->counts = NULL;
        w->slots = calloc(cap, sizeof(uint64_t));
        if (with_counts)
            w->counts = malloc(cap * sizeof(uint32_t));
        if (!w->slots || (with_counts && !w->counts)) {
            free(w->slots);
            free(w->counts);
            w->slots = NULL, w->counts = NULL;
            w->set_cap = 0;
            return -1;
        }
        w->set_cap = cap;
    } else {
        memset(w->slots, 0, need * sizeof(uint64_t)); /* only the part this text uses */
    }
    w->set_used = need;
    w->use_counts = with_counts;
    w->has_zero = 0;
    w->zero_count = 0;
    return 0;
}

/* Insert key (a hash, or its low 32 bits: random either way, so its low bits pick the slot); returns
 * its count's address (log weights; NULL without counts), and whether it is new through *fresh. */
SHC_INLINE uint32_t *set_insert(shc_work *w, uint64_t key, int *fresh)
{
    if (key == 0) {
        *fresh = !w->has_zero;
        w->has_zero = 1;
        return &w->zero_count;
    }
    size_t mask = w->set_used - 1;
    size_t i = (size_t)key & mask;
    for (;;) {
        uint64_t k = w->slots[i];
        if (k == 0) {
            w->slots[i] = key;
            *fresh = 1;
            if (!w->use_counts)
                return NULL;
            w->counts[i] = 0;
            return &w->counts[i];
        }
        if (k == key) {
            *fresh = 0;
            return w->use_counts ? &w->counts[i] : NULL;
        }
        i = (i + 1) & mask;
    }
}

/* Fetch the slot of a key inserted a few steps later (a large text's set does not fit the caches). */
#define SET_PREFETCH_DISTANCE 32
SHC_INLINE void set_prefetch(const shc_work *w, uint64_t key)
{
#if defined(__GNUC__)
    __builtin_prefetch(&w->slots[(size_t)key & (w->set_used - 1)], 1);
#else
    (void)w, (void)key;
#endif
}

/* Compacts h[0..n) to its distinct values, first occurrences in order, at its front; returns their
 * count. Into the emptied set (set_reset), with no branch on whether a value is new: the slot is
 * written either way and the output advances by (slot was empty). A function of its own, called once a
 * text (the same scalar code for every kernel): inlined into the large per-text body, its loop had its
 * pointers spilled to the stack and reloaded at every step (4 more memory accesses a hash, a sixth more
 * instructions in the loop). */
#if defined(__GNUC__)
__attribute__((noinline))
#endif
static size_t set_distinct(shc_work *w, uint64_t *h, size_t n)
{
    /* (the mask and the zero key's flag held in locals: the stores into the uint64_t slots could
     * otherwise alias w->set_used, reloaded on every step) */
    uint64_t *slots = w->slots;
    const size_t mask = w->set_used - 1;
    size_t d = 0, i = 0;
    int has_zero = w->has_zero;
#define SHC_DISTINCT_STEP                                                                                            \
    do {                                                                                                             \
        uint64_t key = h[i];                                                                                         \
        if (key == 0) { /* (the empty slot's mark: kept apart) */                                                    \
            h[d] = 0;                                                                                                \
            d += !has_zero;                                                                                          \
            has_zero = 1;                                                                                            \
            break;                                                                                                   \
        }                                                                                                            \
        size_t j = (size_t)key & mask;                                                                               \
        uint64_t k = slots[j];                                                                                       \
        /* on while the slot holds another key; one test for (empty or equal), which compilers                     \
         * otherwise split into two branches whose choice (new or repeated) is unpredictable */                      \
        while ((k < (k ^ key) ? k : k ^ key) != 0) {                                                                 \
            j = (j + 1) & mask;                                                                                      \
            k = slots[j];                                                                                            \
        }                                                                                                            \
        slots[j] = key;                                                                                              \
        h[d] = key;                                                                                                  \
        d += k == 0;                                                                                                 \
    } while (0)
    /* the slot of a key a few steps later is fetched first (a large text's set does not fit the caches);
     * its hash is read before this step may overwrite it (d <= i) */
    size_t ahead = n > SET_PREFETCH_DISTANCE ? n - SET_PREFETCH_DISTANCE : 0;
    for (; i < ahead; i++) {
#if defined(__GNUC__)
        __builtin_prefetch(&slots[(size_t)h[i + SET_PREFETCH_DISTANCE] & mask], 1);
#endif
        SHC_DISTINCT_STEP;
    }
    for (; i < n; i++)
        SHC_DISTINCT_STEP;
#undef SHC_DISTINCT_STEP
    w->has_zero = has_zero;
    return d;
}

/* Sorted, then each value once: an in-place radix sort (most significant byte first, 256 buckets a pass,
 * American flag style), insertion sort below 32 values. No memory beyond the array and a small stack:
 * what a huge text's distinct n-grams need (a set would take 16-32 bytes an n-gram; issue 36 item 8). */
static void radix_sort_u64(uint64_t *h, size_t n, int shift)
{
    if (n < 32) {
        for (size_t i = 1; i < n; i++) {
            uint64_t v = h[i];
            size_t j = i;
            while (j > 0 && h[j - 1] > v) {
                h[j] = h[j - 1];
                j--;
            }
            h[j] = v;
        }
        return;
    }
    size_t count[256] = {0}, start[257], next[256];
    for (size_t i = 0; i < n; i++)
        count[(h[i] >> shift) & 0xFF]++;
    start[0] = 0;
    for (int b = 0; b < 256; b++)
        start[b + 1] = start[b] + count[b], next[b] = start[b];
    for (int b = 0; b < 256; b++) {
        while (next[b] < start[b + 1]) { /* put each value of this bucket's range where it belongs */
            uint64_t v = h[next[b]];
            int d = (int)((v >> shift) & 0xFF);
            if (d == b) {
                next[b]++;
                continue;
            }
            h[next[b]] = h[next[d]];
            h[next[d]++] = v;
        }
    }
    if (shift == 0)
        return;
    for (int b = 0; b < 256; b++)
        radix_sort_u64(h + start[b], start[b + 1] - start[b], shift - 8);
}

size_t shc_sorted_distinct(uint64_t *h, size_t n)
{
    if (!h || n == 0)
        return 0;
    radix_sort_u64(h, n, 56);
    size_t d = 1;
    for (size_t i = 1; i < n; i++)
        if (h[i] != h[d - 1])
            h[d++] = h[i];
    return d;
}

/* Above this many n-grams (a text over fingerprint.LONG_TEXT, which Python fingerprints in pieces: only
 * the loadable extension passes one whole) a text's distinct hashes are found by sorting them in place
 * rather than by the set, whose 2-4 slots an n-gram took 22-37 bytes a character in all: memory stays
 * about 12 bytes an ASCII character (the units and the hashes), at 2.5 times the time (10 MB of words:
 * 1.77 s against 0.71 s, bench/extension_memory.py's text). */
#define SORT_DISTINCT_ABOVE (1u << 22)

/* ---------------------------------------------------------------- text to units (features.char_units) */

/* Strict UTF-8 to code points (utf8_step.h, the extension's decoder too). 0, or SHC_DECLINED | why. */
static int decode_utf8(const unsigned char *s, size_t len, uint32_t *out, size_t *count)
{
    size_t i = 0, n = 0;
    while (i < len) {
        int32_t c = utf8_step(s, len, &i);
        if (c < 0)
            return SHC_DECLINED | (c == UTF8_SURROGATE ? SHC_WHY_SURROGATE : SHC_WHY_UTF8);
        out[n++] = (uint32_t)c;
    }
    *count = n;
    return 0;
}

/* Certainly NFKC-normalized (unicodedata.is_normalized would say True): every code point one that NFKC
 * leaves alone and that composes with nothing before it, the combining classes in canonical order. */
static int surely_nfkc(const uint32_t *cp, size_t n)
{
    unsigned previous = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t rec = unicode_record(cp[i]);
        unsigned cls = record_class(rec);
        if (rec & SHC_UNSAFE)
            return 0;
        if (cls && previous > cls)
            return 0;
        previous = cls;
    }
    return 1;
}

#include "nfkc.h" /* full NFKC, where the replacement below is not enough */

/* NFKC(cp) where NFKC changes cp: its replacement and length, else NULL. */
static const uint32_t *nfkc_of(uint32_t cp, size_t *len)
{
    size_t lo = 0, hi = SHC_NFKC_COUNT;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (shc_nfkc_cp[mid] < cp)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == SHC_NFKC_COUNT || shc_nfkc_cp[lo] != cp)
        return NULL;
    *len = shc_nfkc_at[lo + 1] - shc_nfkc_at[lo];
    return shc_nfkc_data + shc_nfkc_at[lo];
}

/* The case fold of cp where it is several characters: them and their count, else NULL. */
static const uint32_t *fold_of(uint32_t cp, size_t *len)
{
    size_t lo = 0, hi = SHC_FOLD_COUNT;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (shc_fold_cp[mid] < cp)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == SHC_FOLD_COUNT || shc_fold_cp[lo] != cp)
        return NULL;
    *len = shc_fold_at[lo + 1] - shc_fold_at[lo];
    return shc_fold_data + shc_fold_at[lo];
}

/* features.char_units over w->units[0..*n) (the decoded code points): the normalized, case-folded code
 * points with whitespace runs folded to one space and none at either end, left in w->units. *n becomes
 * the count of units, 0 for a text without a letter or digit (unless featureless_too: features.normalize
 * of any text). 0, or SHC_DECLINED | why.
 *
 * normalize() leaves a normalized text alone and otherwise makes NFKC of it (the full-width fold it
 * tries first is NFKC of those characters). Replacing every character NFKC changes by NFKC of it
 * leaves NFKD, hence NFKC, of the text as it was; where the result is certainly normalized it IS
 * NFKC of the text (and, for a text that was normalized already, the text itself). Where it is not
 * certainly normalized, full NFKC (nfkc.h) of the text as it was. */
static int normalize_units(shc_work *w, size_t *n, int featureless_too)
{
    size_t count = *n;
    uint32_t *u = w->units;
    if (!surely_nfkc(u, count)) {
        size_t total = 0, len;
        for (size_t i = 0; i < count; i++)
            total += (unicode_record(u[i]) & (SHC_UNSAFE | SHC_MAPPED)) && nfkc_of(u[i], &len) ? len : 1;
        if (reserve((void **)&w->spare, &w->spare_cap, total + 1, sizeof(uint32_t)))
            return SHC_DECLINED | SHC_WHY_MEMORY;
        uint32_t *v = w->spare;
        size_t k = 0;
        for (size_t i = 0; i < count; i++) {
            const uint32_t *r = (unicode_record(u[i]) & (SHC_UNSAFE | SHC_MAPPED)) ? nfkc_of(u[i], &len) : NULL;
            if (r) {
                memcpy(v + k, r, len * sizeof(uint32_t));
                k += len;
            } else {
                v[k++] = u[i];
            }
        }
        if (!surely_nfkc(v, k)) {
            size_t room = nfkd_room(u, count);
            if (reserve((void **)&w->spare, &w->spare_cap, room + 1, sizeof(uint32_t)))
                return SHC_DECLINED | SHC_WHY_MEMORY;
            v = w->spare;
            k = full_nfkc(u, count, v);
            if (k == (size_t)-1)
                return SHC_DECLINED | SHC_WHY_MEMORY;
        }
        /* the buffers change places: the units are now in w->units */
        w->spare = w->units, w->units = v;
        size_t cap = w->spare_cap;
        w->spare_cap = w->units_cap, w->units_cap = cap;
        u = v;
        count = k;
    }
    /* str.casefold, then " ".join(text.split()): per character (casefold has no context). Several
     * characters of a fold (sharp s to ss) need room: then the units are written to the spare buffer. */
    size_t total = 0, len;
    for (size_t i = 0; i < count; i++)
        total += (unicode_record(u[i]) & SHC_MULTI) && fold_of(u[i], &len) ? len : 1;
    uint32_t *d = u;
    if (total > count) {
        if (reserve((void **)&w->spare, &w->spare_cap, total + 1, sizeof(uint32_t)))
            return SHC_DECLINED | SHC_WHY_MEMORY;
        d = w->spare;
    }
    size_t out = 0;
    int alnum = 0, space_before = 1; /* (a space at the start goes) */
    for (size_t i = 0; i < count; i++) {
        uint32_t cp = u[i];
        uint32_t rec = unicode_record(cp);
        if (rec & SHC_MULTI) {
            const uint32_t *f = fold_of(cp, &len);
            if (!f)
                return SHC_DECLINED | SHC_WHY_FOLD; /* (the tables say otherwise: never) */
            for (size_t k = 0; k < len; k++) { /* each folds to itself (gen_unicode_tables.py) */
                uint32_t r = unicode_record(f[k]);
                if (r & SHC_SPACE) {
                    if (!space_before)
                        d[out++] = 0x20;
                    space_before = 1;
                    continue;
                }
                space_before = 0;
                if (r & SHC_ALNUM)
                    alnum = 1;
                d[out++] = f[k];
            }
            continue;
        }
        if (rec & SHC_SPACE) {
            if (!space_before)
                d[out++] = 0x20;
            space_before = 1;
            continue;
        }
        space_before = 0;
        if (rec & SHC_ALNUM)
            alnum = 1;
        d[out++] = record_fold(cp, rec);
    }
    if (out && d[out - 1] == 0x20)
        out--;
    if (d != u) { /* the buffers change places: the units are now in w->units */
        w->spare = w->units, w->units = d;
        size_t cap = w->spare_cap;
        w->spare_cap = w->units_cap, w->units_cap = cap;
    }
    *n = alnum || featureless_too ? out : 0;
    return 0;
}

/* Whether (first, second) compose to a primary composite (second an AFTER character). */
static int composes(uint32_t first, uint32_t second)
{
    uint64_t key = ((uint64_t)first << 21) | second;
    size_t lo = 0, hi = SHC_PAIR_COUNT;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (shc_pairs[mid] < key)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < SHC_PAIR_COUNT && shc_pairs[lo] == key;
}

#define NEEDS_GENERAL_PATH 1
/* Flags that send a character past the common case below: a starter that is just itself (class 0,
 * NFKC leaves it alone and it composes with nothing before it, one fold, not whitespace). */
#define SHC_NOT_PLAIN (SHC_SPACE | SHC_MULTI | SHC_UNSAFE | SHC_MAPPED | SHC_EXPANDS | SHC_AFTER | (0x7Fu << 21))

/* 8 bytes as one word (the all-ASCII test, the sketches' words). */
SHC_INLINE uint64_t load64(const uint8_t *p) /* little-endian, any alignment */
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    uint64_t x;
    memcpy(&x, p, sizeof x); /* one load */
    return x;
#else
    uint64_t x = 0;
    for (int i = 7; i >= 0; i--)
        x = (x << 8) | p[i];
    return x;
#endif
}

/* Several code points that one character becomes (its case fold, or its NFKC expansion, then folded
 * when fold is set) appended to the one-pass normalisation's units at out: a whitespace run as one
 * space, as the loop writes single characters. The new out. */
SHC_INLINE size_t append_units(uint32_t *d, size_t out, const uint32_t *units, size_t n, int fold,
                               unsigned *space_before, unsigned *alnum)
{
    for (size_t k = 0; k < n; k++) {
        uint32_t r = unicode_record(units[k]);
        if (r & SHC_SPACE) {
            if (!*space_before)
                d[out++] = 0x20;
            *space_before = 1;
            continue;
        }
        *space_before = 0;
        *alnum |= (r & SHC_ALNUM) != 0;
        d[out++] = fold ? record_fold(units[k], r) : units[k];
    }
    return out;
}

#if defined(__SSE2__)
#include <emmintrin.h>
/* 16 bytes' units as the ASCII loop makes them (SSE2, which every x86-64 has): whitespace becomes a space,
 * A-Z fold to a-z; the bits of the whitespace characters and of the letters and digits through *spaces and
 * *letters. The rules of shc_ascii written out (gen_unicode_tables.py checks they agree): whitespace is
 * 9-13, 0x1C-0x20, letters and digits are ALNUM. (Compares are signed: a non-ASCII byte is below every
 * bound, and neither whitespace nor a letter.) */
SHC_INLINE __m128i ascii16_units(__m128i v, unsigned *spaces, unsigned *letters)
{
#define SHC_IN(x, lo, hi)                                                                                            \
    _mm_and_si128(_mm_cmpgt_epi8(x, _mm_set1_epi8((lo) - 1)), _mm_cmplt_epi8(x, _mm_set1_epi8((hi) + 1)))
    __m128i space = _mm_or_si128(SHC_IN(v, 9, 13), SHC_IN(v, 0x1C, 0x20));
    __m128i u = _mm_add_epi8(v, _mm_and_si128(SHC_IN(v, 'A', 'Z'), _mm_set1_epi8(0x20)));
    u = _mm_or_si128(_mm_andnot_si128(space, u), _mm_and_si128(space, _mm_set1_epi8(0x20)));
    *spaces = (unsigned)_mm_movemask_epi8(space);
    *letters = (unsigned)_mm_movemask_epi8(_mm_or_si128(SHC_IN(u, 'a', 'z'), SHC_IN(u, '0', '9')));
#undef SHC_IN
    return u;
}

/* The ASCII loop 16 bytes at once, up to the first non-ASCII byte, where no whitespace character follows
 * another (or the one before the block): then no write is undone. Returns how many bytes it took, 0 at
 * such a run (their units are at d; it writes 16 all the same). A short ASCII run between others (a
 * space, an option name between Chinese words) takes one such step, not a step a byte. */
SHC_INLINE unsigned ascii16(const unsigned char *s, uint32_t *d, unsigned *space_before, unsigned *alnum)
{
    __m128i v = _mm_loadu_si128((const __m128i *)(const void *)s);
    unsigned spaces, letters;
    __m128i u = ascii16_units(v, &spaces, &letters);
    unsigned k = (unsigned)__builtin_ctz((unsigned)_mm_movemask_epi8(v) | 0x10000u);
    if (k == 0 || (spaces & ((spaces << 1) | *space_before) & ((1u << k) - 1)))
        return 0;
    *alnum |= (letters & ((1u << k) - 1)) != 0;
    __m128i zero = _mm_setzero_si128(), low = _mm_unpacklo_epi8(u, zero), high = _mm_unpackhi_epi8(u, zero);
    _mm_storeu_si128((__m128i *)(void *)d, _mm_unpacklo_epi16(low, zero));
    _mm_storeu_si128((__m128i *)(void *)(d + 4), _mm_unpackhi_epi16(low, zero));
    _mm_storeu_si128((__m128i *)(void *)(d + 8), _mm_unpacklo_epi16(high, zero));
    _mm_storeu_si128((__m128i *)(void *)(d + 12), _mm_unpackhi_epi16(high, zero));
    *space_before = (spaces >> (k - 1)) & 1;
    return k;
}

#ifdef SHC_HAVE_KERNELS
#include <immintrin.h>
/* ascii16 with AVX-512, whitespace runs included: a whitespace character after another is left out of the
 * units by one compress of the 16 (AVX-512F), so that indented and spaced-out text (man pages, code) stays
 * on this path. Returns the bytes taken (up to the first non-ASCII one; 0 when s[0] is one) and through
 * *written the units written at d (16 written all the same). */
__attribute__((target("arch=x86-64-v4"))) static inline unsigned ascii16_wide(const unsigned char *s, uint32_t *d,
                                                                               unsigned *space_before, unsigned *alnum,
                                                                               unsigned *written)
{
    __m128i v = _mm_loadu_si128((const __m128i *)(const void *)s);
    unsigned spaces, letters;
    __m128i u = ascii16_units(v, &spaces, &letters);
    unsigned k = (unsigned)__builtin_ctz((unsigned)_mm_movemask_epi8(v) | 0x10000u);
    unsigned live = (1u << k) - 1;
    unsigned keep = live & ~(spaces & ((spaces << 1) | *space_before));
    _mm512_storeu_si512((void *)d, _mm512_maskz_compress_epi32((__mmask16)keep, _mm512_cvtepu8_epi32(u)));
    *alnum |= (letters & live) != 0;
    *space_before = k ? (spaces >> (k - 1)) & 1 : *space_before;
    *written = (unsigned)__builtin_popcount(keep);
    return k;
}
#endif
#endif

/* The common case in one pass: decode, NFKC (characters NFKC maps to one plain character are taken as
 * that character: MAPPED records), case fold, whitespace, in w->units. Returns 0 (*n units, 0 for a text
 * without a letter or digit), 1 where the text needs the general path (a character NFKC changes
 * otherwise, a multi-character fold, marks out of order), or SHC_DECLINED | why. */
SHC_INLINE int fast_units(shc_work *w, const unsigned char *s, size_t len, size_t *n, int kernel)
{
    uint32_t *d = w->units;
    size_t i = 0, out = 0;
    unsigned alnum = 0, space_before = 1;
    unsigned previous = 0;
    /* the last starter (combining class 0), as NFKC has it: none yet (0), starter_cp with its record
     * (1), or one that NFKC replaced (2: not known here) */
    int starter = 0;
    uint32_t starter_cp = 0; /* (its record is looked up where it is needed, rarely) */
    while (i < len) {
        uint32_t cp = s[i];
        if (cp < 0x80) {
            /* A run of ASCII without a branch per byte (shc_ascii: the unit, SPACE and ALNUM bits): a
             * whitespace character is written as a space, and the write is undone (out not advanced)
             * after another one. ascii16 where it can, else 8 bytes at a time while they are ASCII. */
#define SHC_ASCII_STEP(c)                                                                                            \
    do {                                                                                                             \
        unsigned t_ = shc_ascii[(c)];                                                                                \
        unsigned sp_ = (t_ >> 8) & 1;                                                                                \
        d[out] = t_ & 0xFF;                                                                                          \
        out += 1 - (sp_ & space_before);                                                                             \
        space_before = sp_;                                                                                          \
        alnum |= t_ >> 9;                                                                                            \
    } while (0)
            for (;;) {
#ifdef SHC_HAVE_KERNELS
                if (kernel == KERNEL_AVX512) { /* (i advances by a constant in the loop, as below) */
                    unsigned k = 0, wrote = 0;
                    while (len - i >= 16 && (k = ascii16_wide(s + i, d + out, &space_before, &alnum, &wrote)) == 16)
                        i += 16, out += wrote, k = 0;
                    i += k, out += wrote * (k != 0);
                    if (len - i >= 16)
                        break; /* (at a non-ASCII byte) */
                } /* (else the last 15 bytes or fewer: the steps below take them) */
#else
                (void)kernel;
#endif
#if defined(__SSE2__)
                /* (i advances by a constant in this loop: the next block's load need not wait for
                 * this one's count) */
                unsigned k = 0;
                while (len - i >= 16 && (k = ascii16(s + i, d + out, &space_before, &alnum)) == 16)
                    i += 16, out += 16, k = 0;
                if (k) { /* up to a non-ASCII byte */
                    i += k, out += k;
                    break;
                } /* (else at a whitespace run, or near the end: the steps below take it) */
#endif
                if (len - i < 8 || (load64(s + i) & 0x8080808080808080ull))
                    break;
                for (int k = 0; k < 8; k++)
                    SHC_ASCII_STEP(s[i + k]);
                i += 8;
            }
            while (i < len && s[i] < 0x80) {
                SHC_ASCII_STEP(s[i]);
                i++;
            }
#undef SHC_ASCII_STEP
            previous = 0;
            starter = 1;
            starter_cp = s[i - 1];
            continue;
        }
        if ((cp & 0xF0) == 0xE0 && len - i >= 3) { /* three bytes (CJK): fewer tests, same verdicts */
            unsigned t1 = s[i + 1], t2 = s[i + 2];
            cp = ((cp & 0x0F) << 12) | ((t1 & 0x3F) << 6) | (t2 & 0x3F);
            if (((t1 & 0xC0) ^ 0x80) | ((t2 & 0xC0) ^ 0x80) | (cp < 0x800))
                return SHC_DECLINED | SHC_WHY_UTF8;
            if (cp - 0xD800 < 0x800)
                return SHC_DECLINED | SHC_WHY_SURROGATE;
            i += 3;
        } else {
            size_t extra;
            if (cp >= 0xC2 && cp <= 0xDF) {
                cp &= 0x1F;
                extra = 1;
            } else if (cp >= 0xE0 && cp <= 0xEF) {
                cp &= 0x0F;
                extra = 2;
            } else if (cp >= 0xF0 && cp <= 0xF4) {
                cp &= 0x07;
                extra = 3;
            } else {
                return SHC_DECLINED | SHC_WHY_UTF8;
            }
            if (len - i <= extra)
                return SHC_DECLINED | SHC_WHY_UTF8;
            for (size_t k = 1; k <= extra; k++) {
                unsigned t = s[i + k];
                if ((t & 0xC0) != 0x80)
                    return SHC_DECLINED | SHC_WHY_UTF8;
                cp = (cp << 6) | (t & 0x3F);
            }
            if ((extra == 2 && cp < 0x800) || (extra == 3 && (cp < 0x10000 || cp > 0x10FFFF)))
                return SHC_DECLINED | SHC_WHY_UTF8;
            if (cp >= 0xD800 && cp <= 0xDFFF)
                return SHC_DECLINED | SHC_WHY_SURROGATE;
            i += extra + 1;
        }
        uint32_t rec = unicode_record(cp);
        if (!(rec & SHC_NOT_PLAIN)) { /* most letters, CJK ideographs */
            previous = 0;
            starter = 1;
            starter_cp = cp;
            space_before = 0;
            alnum |= (rec & SHC_ALNUM) != 0;
            d[out++] = record_fold(cp, rec);
            continue;
        }
        if ((rec & (SHC_AFTER | SHC_MULTI)) == SHC_AFTER) {
            /* A character that composes with some starters (a vowel sign, an accent): it changes
             * nothing where there is no starter before it, where a character between blocks it (class
             * 0, or not below its own: in canonical order, the one just before), or after a starter
             * with no decomposition with which it forms no composite. Else the general path (which
             * declines). */
            unsigned mine = record_class(rec);
            int blocked = previous != 0 && (mine == 0 || previous >= mine);
            int plain = starter == 0 || blocked ||
                        (starter == 1 && !(unicode_record(starter_cp) & SHC_DECOMP) && !composes(starter_cp, cp));
            if (!plain)
                return NEEDS_GENERAL_PATH;
            rec &= ~SHC_UNSAFE;
        }
        if ((rec & (SHC_UNSAFE | SHC_MULTI)) == SHC_MULTI) {
            /* A case fold to several characters (sharp s to ss, dotted capital I) of a character NFKC
             * leaves alone and that composes with nothing before it: its class and starter as any
             * character's below, then the fold's characters (each folds to itself: normalize_units),
             * where there is room for them and for a unit per byte still to read. */
            size_t n_fold = 0;
            const uint32_t *f = fold_of(cp, &n_fold);
            if (!f || out + n_fold + (len - i) > w->units_cap)
                return NEEDS_GENERAL_PATH;
            unsigned cls = record_class(rec);
            if (cls && previous > cls)
                return NEEDS_GENERAL_PATH;
            previous = cls;
            if (cls == 0) {
                starter = 1;
                starter_cp = cp;
            }
            out = append_units(d, out, f, n_fold, 0, &space_before, &alnum);
            continue;
        }
        if (rec & (SHC_UNSAFE | SHC_MULTI)) {
            /* NFKC to several plain starters (an ellipsis): them, where there is room for them and
             * for a unit per byte still to read */
            size_t n_exp = 0;
            const uint32_t *exp = (rec & SHC_EXPANDS) ? nfkc_of(cp, &n_exp) : NULL;
            if (!exp || out + n_exp + (len - i) > w->units_cap)
                return NEEDS_GENERAL_PATH;
            out = append_units(d, out, exp, n_exp, 1, &space_before, &alnum);
            previous = 0; /* (class 0) */
            starter = 2;
            continue;
        }
        unsigned cls = record_class(rec);
        if (cls && previous > cls)
            return NEEDS_GENERAL_PATH;
        previous = cls;
        if (cls == 0) {
            starter = (rec & SHC_MAPPED) ? 2 : 1;
            starter_cp = cp;
        }
        if (rec & SHC_SPACE) {
            if (!space_before)
                d[out++] = 0x20;
            space_before = 1;
            continue;
        }
        space_before = 0;
        alnum |= (rec & SHC_ALNUM) != 0;
        d[out++] = record_fold(cp, rec);
    }
    if (out && d[out - 1] == 0x20)
        out--;
    *n = alnum ? out : 0;
    return 0;
}

/* ---------------------------------------------------------------- n-gram hashes (features.ngram_hashes) */

/* mix64(mix64(SEED ^ a) ^ b) for ASCII a and b, at [a << 7 | b]: the first two of the five rounds of
 * an n-gram's hash, which in English text come from a few hundred pairs (made on first use, 128 KB;
 * NULL where memory is short, and then they are computed). */
static const uint64_t *ascii_pairs(shc_work *w)
{
    if (!w->pairs && (w->pairs = malloc(sizeof(uint64_t) << 14)) != NULL)
        for (uint32_t a = 0; a < 128; a++)
            for (uint32_t b = 0; b < 128; b++)
                w->pairs[a << 7 | b] = mix64(mix64(SEED ^ a) ^ b);
    return w->pairs;
}

/* The hashes of every n-gram of the units; fewer than n units make one shorter n-gram. Returns their
 * count. pairs: ascii_pairs, or NULL (the AVX-512 kernel: its 5-gram loop is one vector loop). */
SHC_INLINE size_t ngram_hashes(const uint32_t *u, size_t m, int n, uint64_t *out, const uint64_t *pairs)
{
    if (m == 0)
        return 0;
    if (m < (size_t)n)
        n = (int)m;
    size_t count = m - (size_t)n + 1;
    if (n == 5 && pairs) {
        for (size_t i = 0; i < count; i++) {
            uint64_t h;
            if ((u[i] | u[i + 1]) < 128)
                h = pairs[u[i] << 7 | u[i + 1]];
            else
                h = mix64(mix64(SEED ^ u[i]) ^ u[i + 1]);
            h = mix64(h ^ u[i + 2]);
            h = mix64(h ^ u[i + 3]);
            out[i] = mix64(h ^ u[i + 4]);
        }
        return count;
    }
    if (n == 5) {
        for (size_t i = 0; i < count; i++) {
            uint64_t h = mix64(SEED ^ u[i]);
            h = mix64(h ^ u[i + 1]);
            h = mix64(h ^ u[i + 2]);
            h = mix64(h ^ u[i + 3]);
            out[i] = mix64(h ^ u[i + 4]);
        }
        return count;
    }
    for (size_t i = 0; i < count; i++) {
        uint64_t h = mix64(SEED ^ u[i]);
        for (int j = 1; j < n; j++)
            h = mix64(h ^ u[i + j]);
        out[i] = h;
    }
    return count;
}

/* ---------------------------------------------------------------- bit sums (fingerprint.simhash_of_batch) */

typedef struct {
    uint64_t lanes[8]; /* lanes[k] byte L counts bit 8L+k, for up to 255 additions */
    unsigned pending;  /* the most any byte of lanes has grown since the last flush */
    int64_t ones[64];
    int64_t total;
} bitsum;

static void bitsum_init(bitsum *b) { memset(b, 0, sizeof *b); }

static void bitsum_flush(bitsum *b)
{
    for (int k = 0; k < 8; k++) {
        uint64_t v = b->lanes[k];
        for (int lane = 0; lane < 8; lane++)
            b->ones[8 * lane + k] += (int64_t)((v >> (8 * lane)) & 0xFF);
        b->lanes[k] = 0;
    }
    b->pending = 0;
}

/* Bits of h, each counted 2**shift times (shift 0..2); the total is the caller's. */
SHC_INLINE void bitsum_add_bits(bitsum *b, uint64_t h, unsigned shift)
{
    const uint64_t low = 0x0101010101010101ull;
    if (b->pending + (1u << shift) > 255)
        bitsum_flush(b);
    for (int k = 0; k < 8; k++)
        b->lanes[k] += ((h >> k) & low) << shift;
    b->pending += 1u << shift;
}

/* Vectors of 4 words for the carry-save sums below: GCC's vector extensions give SSE2 pairs on the
 * baseline and one AVX2/AVX-512 register in those kernels from the same code; elsewhere one word. */
#if defined(__GNUC__)
typedef uint64_t vec4 __attribute__((vector_size(32)));
#define VEC_WORDS 4
#else
typedef uint64_t vec4;
#define VEC_WORDS 1
#endif
#define CSA(high, low, a, b, c)                                                                                      \
    do {                                                                                                             \
        vec4 u_ = (a) ^ (b);                                                                                         \
        high = ((a) & (b)) | (u_ & (c));                                                                             \
        low = u_ ^ (c);                                                                                              \
    } while (0)

/* Eights counted in bytes (byte L of word j of eights[k] counts bit 8L+k), each times 8, into ones. */
static void bitsum_add_eights(bitsum *b, const vec4 eights[8])
{
    for (int k = 0; k < 8; k++) {
        uint64_t words[VEC_WORDS];
        memcpy(words, &eights[k], sizeof words);
        for (int j = 0; j < VEC_WORDS; j++)
            for (int lane = 0; lane < 8; lane++)
                b->ones[8 * lane + k] += 8 * (int64_t)((words[j] >> (8 * lane)) & 0xFF);
    }
}

/* Adds the bits of h[0..n) (fingerprint.simhash_of_batch's sums, weight 1 each). Bit-sliced (Harley
 * and Seal's carry-save adders): a block of 8 vectors costs 7 adders of 5 logic operations, and only
 * its eights go to byte counters; the ones, twos and fours left over are added at the end. */
SHC_INLINE void bitsum_add_all(bitsum *b, const uint64_t *h, size_t n)
{
    const size_t block = 8 * VEC_WORDS;
    size_t i = 0;
    b->total += (int64_t)n;
    if (n >= 4 * block) { /* (a short text pays less for the word at a time below) */
        const uint64_t low = 0x0101010101010101ull;
        vec4 ones = {0}, twos = {0}, fours = {0}, eights[8];
        memset(eights, 0, sizeof eights);
        unsigned pending = 0;
        for (; i + block <= n; i += block) {
            vec4 v[8], twos_a, twos_b, fours_a, fours_b, eight;
            memcpy(v, h + i, sizeof v);
            CSA(twos_a, ones, ones, v[0], v[1]);
            CSA(twos_b, ones, ones, v[2], v[3]);
            CSA(fours_a, twos, twos, twos_a, twos_b);
            CSA(twos_a, ones, ones, v[4], v[5]);
            CSA(twos_b, ones, ones, v[6], v[7]);
            CSA(fours_b, twos, twos, twos_a, twos_b);
            CSA(eight, fours, fours, fours_a, fours_b);
            for (int k = 0; k < 8; k++)
                eights[k] += (eight >> k) & low;
            if (++pending == 255) {
                bitsum_add_eights(b, eights);
                memset(eights, 0, sizeof eights);
                pending = 0;
            }
        }
        bitsum_add_eights(b, eights);
        uint64_t words[3][VEC_WORDS];
        memcpy(words[0], &ones, sizeof words[0]);
        memcpy(words[1], &twos, sizeof words[1]);
        memcpy(words[2], &fours, sizeof words[2]);
        for (unsigned shift = 0; shift < 3; shift++)
            for (int j = 0; j < VEC_WORDS; j++)
                bitsum_add_bits(b, words[shift][j], shift);
    }
    for (; i < n; i++)
        bitsum_add_bits(b, h[i], 0);
}

static inline void bitsum_add_weighted(bitsum *b, uint64_t h, int64_t weight)
{
    for (int i = 0; i < 64; i++)
        if ((h >> i) & 1)
            b->ones[i] += weight;
    b->total += weight;
}

/* Bit i is 1 iff its votes (+w where the hash has it, -w where not) sum to more than 0. */
static uint64_t bitsum_fingerprint(bitsum *b)
{
    bitsum_flush(b);
    uint64_t f = 0;
    for (int i = 0; i < 64; i++)
        if (2 * b->ones[i] - b->total > 0)
            f |= 1ull << i;
    return f;
}

/* round(1000 * (1 + ln count)) as numpy.rint; -1 where too near a tie to be certain. */
static int64_t log_weight(uint32_t count)
{
    double x = WEIGHT_SCALE * (1.0 + log((double)count));
    if (near_tie(x))
        return -1;
    return (int64_t)rint(x);
}

/* ---------------------------------------------------------------- sketches (sketch.py) */

static inline uint32_t probe(uint32_t bins, uint64_t j, uint64_t attempt) /* sketch._probe */
{
    uint64_t h = mix64((j * 0x9E3779B97F4A7C15ull) ^ (attempt * PROBE_ATTEMPT));
    return (uint32_t)(((h >> 32) * (uint64_t)bins) >> 32);
}

SHC_INLINE uint32_t bin_of(uint64_t h, uint32_t bins) /* sketch.add_to_minima's slot */
{
    return (uint32_t)(((h >> 32) * (uint64_t)bins) >> 32);
}

static void sketch_begin(shc_work *w, const shc_scheme *s)
{
    uint32_t *minima = w->minima, bins = (uint32_t)s->bins; /* (locals: the stores cannot change them) */
    for (uint32_t i = 0; i < bins; i++)
        minima[i] = EMPTY_BIN;
}

SHC_INLINE void sketch_add(shc_work *w, uint32_t bins, uint64_t h)
{
    uint32_t slot = bin_of(h, bins);
    uint32_t v = (uint32_t)h;
    if (v < w->minima[slot])
        w->minima[slot] = v;
}

SHC_INLINE void sketch_add_all(shc_work *w, uint32_t bins, const uint64_t *h, size_t n)
{
    uint32_t *minima = w->minima;
    for (size_t i = 0; i < n; i++) {
        uint32_t slot = bin_of(h[i], bins), v = (uint32_t)h[i], m = minima[slot];
        minima[slot] = v < m ? v : m;
    }
}

static void ensure_probe_table(shc_work *w, int32_t bins)
{
    if (w->probe_bins == bins)
        return;
    uint16_t *t = realloc(w->probe_table, sizeof(uint16_t) * (size_t)bins * PROBE_CACHED);
    if (!t) {
        w->probe_bins = 0;
        return; /* probes are computed instead */
    }
    w->probe_table = t;
    for (int32_t j = 0; j < bins; j++)
        for (int a = 1; a <= PROBE_CACHED; a++)
            t[(size_t)j * PROBE_CACHED + (size_t)(a - 1)] = (uint16_t)probe((uint32_t)bins, (uint64_t)j, (uint64_t)a);
    w->probe_bins = bins;
}

/* 1 + rint(2048 log2 size), at most 0xFFFF (sketch.size_codes); -1 where too near a tie. */
static int32_t size_code(uint64_t size)
{
    if (size < 1)
        return 0;
    double x = SIZE_STEPS * log2((double)size);
    if (near_tie(x))
        return -1;
    double code = 1.0 + rint(x);
    return code > 65535.0 ? 65535 : (int32_t)code;
}

#ifdef SHC_HAVE_KERNELS
#include <immintrin.h>
/* Densification (below) with AVX-512, for at most DENSIFY_WIDE_BINS bins: the filled bins as a bitmap of
 * 64 words of 16 bits (two vectors that one permutation picks words from), so that the 32 cached probes
 * of an empty bin are tested at once (word t >> 4, bit t & 15) and the first filled one found without a
 * branch per probe; the probes past them are computed 8 at a time, tested the same way. The same first
 * filled bin of the same probe sequence as the scalar loop: the same fields. */
#define DENSIFY_WIDE_BINS 1024
__attribute__((target("arch=x86-64-v4"))) static void densify_avx512(const uint8_t *occupied, uint32_t bins,
                                                                      const uint16_t *table, uint32_t *fields)
{
    uint64_t words[16];
    for (uint32_t k = 0; k < 16; k++) { /* 64 occupied bytes to 64 bits (none past the bins) */
        uint32_t start = k * 64;
        __mmask64 live = start >= bins ? 0 : bins - start >= 64 ? ~(__mmask64)0 : ((__mmask64)1 << (bins - start)) - 1;
        __m512i bytes = _mm512_maskz_loadu_epi8(live, occupied + (start < bins ? start : 0));
        words[k] = (uint64_t)_mm512_test_epi8_mask(bytes, bytes);
    }
    const __m512i low = _mm512_loadu_si512((const void *)words), high = _mm512_loadu_si512((const void *)(words + 8));
    const __m512i fifteen = _mm512_set1_epi16(15), one = _mm512_set1_epi16(1);
    const __m512i lanes = _mm512_set_epi64(7, 6, 5, 4, 3, 2, 1, 0);
    const __m512i attempt_mul = _mm512_set1_epi64((long long)PROBE_ATTEMPT);
    const __m512i m1 = _mm512_set1_epi64((long long)M1), m2 = _mm512_set1_epi64((long long)M2);
    const __m512i n_bins = _mm512_set1_epi64(bins);
    for (uint32_t k = 0; k * 64 < bins; k++) {
        uint32_t start = k * 64;
        uint64_t empty = ~words[k];
        if (bins - start < 64)
            empty &= ((uint64_t)1 << (bins - start)) - 1;
        for (; empty; empty &= empty - 1) { /* each empty bin j of these 64 */
            uint32_t j = start + (uint32_t)__builtin_ctzll(empty);
            const uint16_t *row = table + (size_t)j * PROBE_CACHED;
            __m512i t = _mm512_loadu_si512((const void *)row); /* (PROBE_CACHED == 32 words) */
            __m512i word = _mm512_permutex2var_epi16(low, _mm512_srli_epi16(t, 4), high);
            __mmask32 hit = _mm512_test_epi16_mask(_mm512_srlv_epi16(word, _mm512_and_si512(t, fifteen)), one);
            if (hit) {
                fields[j] = fields[row[__builtin_ctz(hit)]];
                continue;
            }
            const __m512i base = _mm512_set1_epi64((long long)(j * 0x9E3779B97F4A7C15ull));
            for (uint64_t a = PROBE_CACHED + 1;; a += 8) { /* probe(bins, j, a .. a + 7) */
                __m512i x = _mm512_add_epi64(_mm512_set1_epi64((long long)a), lanes);
                x = _mm512_xor_si512(base, _mm512_mullo_epi64(x, attempt_mul));
                x = _mm512_xor_si512(x, _mm512_srli_epi64(x, 30));
                x = _mm512_mullo_epi64(x, m1);
                x = _mm512_xor_si512(x, _mm512_srli_epi64(x, 27));
                x = _mm512_mullo_epi64(x, m2);
                x = _mm512_xor_si512(x, _mm512_srli_epi64(x, 31));
                x = _mm512_srli_epi64(_mm512_mul_epu32(_mm512_srli_epi64(x, 32), n_bins), 32);
                __m128i t8 = _mm512_cvtepi64_epi16(x); /* the 8 bins as words */
                __m512i t8w = _mm512_zextsi128_si512(t8);
                __m512i w8 = _mm512_permutex2var_epi16(low, _mm512_srli_epi16(t8w, 4), high);
                __mmask32 hit8 = _mm512_test_epi16_mask(_mm512_srlv_epi16(w8, _mm512_and_si512(t8w, fifteen)), one);
                hit8 &= 0xFF;
                if (hit8) {
                    uint16_t found[8];
                    _mm_storeu_si128((__m128i *)(void *)found, t8);
                    fields[j] = fields[found[__builtin_ctz(hit8)]];
                    break;
                }
            }
        }
    }
}
#endif

/* The sketch bytes from the minima (sketch.sketch_from_minima); returns whether any bin was filled.
 * size: the distinct-shingle count (for size_bits 16). -1 where the size code is too near a tie. */
SHC_INLINE int sketch_finish(shc_work *w, const shc_scheme *s, uint64_t size, uint8_t *out, int kernel)
{
    const uint32_t bins = (uint32_t)s->bins, bits = (uint32_t)s->bits, shift = 32u - bits;
    uint32_t *minima = w->minima, *fields = w->fields;
    uint8_t *occupied = w->occupied;
    uint32_t filled = 0;
    for (uint32_t i = 0; i < bins; i++) { /* (no branch: a vector loop) */
        uint32_t m = minima[i];
        occupied[i] = m != EMPTY_BIN;
        filled += m != EMPTY_BIN;
        fields[i] = (uint32_t)(m * FIELD_MULTIPLIER) >> shift;
    }
    if (filled == 0)
        return 0;
    int32_t code = 0;
    if (s->size_bits) {
        code = size_code(size);
        if (code < 0)
            return -1;
    }
    if (filled == 1) {
        uint32_t last = 0;
        while (!occupied[last])
            last++;
        uint32_t v = fields[last];
        for (uint32_t i = 0; i < bins; i++)
            fields[i] = v;
    } else if (filled < bins) {
        /* Optimal densification: an empty bin takes the field of the first filled bin its probe
         * sequence hits (reads only from bins filled from the start, so the order does not matter).
         * The empty bins are listed first (in the minima's array, read by now), so the loop below
         * runs once per empty bin instead of testing every bin. */
        ensure_probe_table(w, s->bins);
        const uint16_t *table = w->probe_bins == s->bins ? w->probe_table : NULL;
        uint32_t *empty = minima, n_empty = 0;
#ifdef SHC_HAVE_KERNELS
        if (kernel == KERNEL_AVX512 && table && bins <= DENSIFY_WIDE_BINS)
            densify_avx512(occupied, bins, table, fields);
        else
#else
        (void)kernel;
#endif
            for (uint32_t i = 0; i < bins; i++) {
                empty[n_empty] = i;
                n_empty += !occupied[i];
            }
        for (uint32_t e = 0; e < n_empty; e++) {
            uint32_t j = empty[e], t = 0;
            uint64_t a = 1;
            int found = 0;
            if (table) {
                /* the first four probes without a branch each (most empty bins stop there) */
                const uint16_t *row = table + (size_t)j * PROBE_CACHED;
                uint32_t t0 = row[0], t1 = row[1], t2 = row[2], t3 = row[3];
                if (occupied[t0] | occupied[t1] | occupied[t2] | occupied[t3]) {
                    t = occupied[t2] ? t2 : t3;
                    t = occupied[t1] ? t1 : t;
                    t = occupied[t0] ? t0 : t;
                    fields[j] = fields[t];
                    continue;
                }
                for (a = 5; a <= PROBE_CACHED; a++) {
                    t = row[a - 1];
                    if (occupied[t]) {
                        found = 1;
                        break;
                    }
                }
            }
            while (!found) {
                t = probe(bins, j, a);
                if (occupied[t])
                    found = 1;
                else
                    a++;
            }
            fields[j] = fields[t];
        }
    }
    size_t bin_bytes = (size_t)bins * bits / 8;
    if (bits == 16) {
        for (uint32_t i = 0; i < bins; i++) {
            out[2 * i] = (uint8_t)fields[i];
            out[2 * i + 1] = (uint8_t)(fields[i] >> 8);
        }
    } else if (bits == 1) { /* (the default scheme's: a loop of its own, which vectorizes) */
        for (size_t j = 0; j < bin_bytes; j++) {
            const uint32_t *f = fields + 8 * j;
            out[j] = (uint8_t)(f[0] | f[1] << 1 | f[2] << 2 | f[3] << 3 | f[4] << 4 | f[5] << 5 | f[6] << 6 |
                               f[7] << 7);
        }
    } else { /* 2, 4 or 8 bits: 8 / bits fields a byte, the first in the low bits */
        uint32_t per = 8 / bits;
        for (size_t j = 0; j < bin_bytes; j++) {
            uint32_t v = 0;
            for (uint32_t k = 0; k < per; k++)
                v |= fields[j * per + k] << (k * bits);
            out[j] = (uint8_t)v;
        }
    }
    if (s->size_bits) {
        out[bin_bytes] = (uint8_t)code;
        out[bin_bytes + 1] = (uint8_t)(code >> 8);
    }
    return 1;
}

/* ---------------------------------------------------------------- one text */

/* One text; kernel is a constant in each of the compiled copies below. */
SHC_INLINE int one_text_body(shc_work *w, const unsigned char *text, size_t len, int32_t ngram, int32_t weights,
                             const shc_scheme *scheme, uint64_t *fingerprint, uint8_t *sketch, size_t nbytes,
                             int kernel)
{
    /* Kernels without a 64-bit vector multiply take the first two rounds of an ASCII n-gram's hash
     * from a table; the AVX-512 loop hashes 8 n-grams at once (and NULL: the table is not there). */
    const uint64_t *pairs = kernel == KERNEL_AVX512 ? NULL : ascii_pairs(w);
    if (fingerprint)
        *fingerprint = 0;
    if (sketch)
        memset(sketch, 0, nbytes);
    if (reserve((void **)&w->units, &w->units_cap, len + 1, sizeof(uint32_t)))
        return SHC_DECLINED | SHC_WHY_MEMORY;
    size_t m = 0;
    int r = fast_units(w, text, len, &m, kernel);
    if (r == NEEDS_GENERAL_PATH) {
        r = decode_utf8(text, len, w->units, &m);
        if (r)
            return r;
        r = normalize_units(w, &m, 0);
    }
    if (r)
        return r;
    if (m == 0)
        return SHC_NO_FEATURES;
    if (reserve((void **)&w->hashes, &w->hashes_cap, m + 1, sizeof(uint64_t)))
        return SHC_DECLINED | SHC_WHY_MEMORY;
    int status = 0;
    int want_fp = fingerprint != NULL;
    int want_sketch = sketch != NULL;
    /* The sketch shares the fingerprint's hashes when they are character 5-grams (fingerprint.
     * simhash_and_sketch_many); its size then counts distinct 64-bit hashes where the weights made them
     * distinct (binary, log), else distinct low 32 bits (sketch.distinct_counts). */
    int shared = want_sketch && ngram == SKETCH_NGRAM;
    int size_low32 = !shared || weights == SHC_WEIGHTS_COUNT || !want_fp;
    uint64_t distinct64 = 0;
    if (want_fp || shared) {
        int n = want_fp ? ngram : SKETCH_NGRAM;
        size_t count = ngram_hashes(w->units, m, n, w->hashes, pairs);
        if (want_fp && weights != SHC_WEIGHTS_COUNT && !(weights == SHC_WEIGHTS_BINARY && count > SORT_DISTINCT_ABOVE) &&
            set_reset(w, count, weights == SHC_WEIGHTS_LOG))
            return SHC_DECLINED | SHC_WHY_MEMORY;
        bitsum sums;
        bitsum_init(&sums);
        if (shared)
            sketch_begin(w, scheme);
        uint32_t bins = shared ? (uint32_t)scheme->bins : 0;
        if (!want_fp || weights == SHC_WEIGHTS_COUNT) {
            if (want_fp)
                bitsum_add_all(&sums, w->hashes, count);
            if (shared)
                sketch_add_all(w, bins, w->hashes, count);
        } else if (weights == SHC_WEIGHTS_BINARY) {
            size_t distinct = count > SORT_DISTINCT_ABOVE ? shc_sorted_distinct(w->hashes, count)
                                                          : set_distinct(w, w->hashes, count);
            bitsum_add_all(&sums, w->hashes, distinct);
            if (shared)
                sketch_add_all(w, bins, w->hashes, distinct);
            distinct64 = distinct;
        } else { /* log: counts first, then each distinct hash once with its weight */
            size_t distinct = 0;
            for (size_t i = 0; i < count; i++) {
                uint64_t h = w->hashes[i];
                int fresh;
                if (i + SET_PREFETCH_DISTANCE < count)
                    set_prefetch(w, w->hashes[i + SET_PREFETCH_DISTANCE]);
                uint32_t *slot = set_insert(w, h, &fresh);
                if (fresh) {
                    w->hashes[distinct++] = h; /* (i >= distinct: no hash is lost) */
                    if (shared)
                        sketch_add(w, bins, h);
                }
                (*slot)++;
            }
            for (size_t i = 0; i < distinct; i++) {
                int fresh;
                uint32_t *slot = set_insert(w, w->hashes[i], &fresh);
                int64_t weight = log_weight(*slot);
                if (weight < 0)
                    return SHC_DECLINED | SHC_WHY_ROUNDING;
                bitsum_add_weighted(&sums, w->hashes[i], weight);
            }
            distinct64 = distinct;
        }
        if (want_fp) {
            *fingerprint = bitsum_fingerprint(&sums);
            status |= SHC_HAS_FINGERPRINT;
        }
        if (shared && size_low32 && scheme->size_bits) {
            /* distinct low 32 bits of all shingle hashes (the hashes array holds them unless log
             * weights compacted it: then the distinct 64-bit hashes, whose low 32 bits are as many) */
            size_t k = weights == SHC_WEIGHTS_LOG && want_fp ? (size_t)distinct64 : count;
            if (set_reset(w, k, 0))
                return SHC_DECLINED | SHC_WHY_MEMORY;
            distinct64 = 0;
            for (size_t i = 0; i < k; i++) {
                int fresh;
                if (i + SET_PREFETCH_DISTANCE < k)
                    set_prefetch(w, w->hashes[i + SET_PREFETCH_DISTANCE] & 0xFFFFFFFFull);
                set_insert(w, w->hashes[i] & 0xFFFFFFFFull, &fresh);
                distinct64 += (uint64_t)fresh;
            }
        }
    }
    if (want_sketch && !shared) { /* sketch.sketch_many: its own 5-gram pass, sizes by low 32 bits */
        size_t count = ngram_hashes(w->units, m, SKETCH_NGRAM, w->hashes, pairs);
        sketch_begin(w, scheme);
        uint32_t bins = (uint32_t)scheme->bins;
        sketch_add_all(w, bins, w->hashes, count);
        distinct64 = 0;
        if (scheme->size_bits) {
            if (set_reset(w, count, 0))
                return SHC_DECLINED | SHC_WHY_MEMORY;
            for (size_t i = 0; i < count; i++) {
                int fresh;
                if (i + SET_PREFETCH_DISTANCE < count)
                    set_prefetch(w, w->hashes[i + SET_PREFETCH_DISTANCE] & 0xFFFFFFFFull);
                set_insert(w, w->hashes[i] & 0xFFFFFFFFull, &fresh);
                distinct64 += (uint64_t)fresh;
            }
        }
    }
    if (want_sketch) {
        int present = sketch_finish(w, scheme, distinct64, sketch, kernel);
        if (present < 0) {
            if (fingerprint)
                *fingerprint = 0;
            memset(sketch, 0, nbytes);
            return SHC_DECLINED | SHC_WHY_ROUNDING;
        }
        if (present)
            status |= SHC_HAS_SKETCH;
    }
    return status;
}

typedef int (*one_text_fn)(shc_work *, const unsigned char *, size_t, int32_t, int32_t, const shc_scheme *,
                           uint64_t *, uint8_t *, size_t);
#define ONE_TEXT_PARAMS                                                                                              \
    shc_work *w, const unsigned char *text, size_t len, int32_t ngram, int32_t weights, const shc_scheme *scheme,    \
        uint64_t *fingerprint, uint8_t *sketch, size_t nbytes
#define ONE_TEXT_ARGS w, text, len, ngram, weights, scheme, fingerprint, sketch, nbytes
static int one_text_portable(ONE_TEXT_PARAMS) { return one_text_body(ONE_TEXT_ARGS, KERNEL_PORTABLE); }
#ifdef SHC_HAVE_KERNELS
__attribute__((target("arch=x86-64-v3"))) static int one_text_avx2(ONE_TEXT_PARAMS)
{
    return one_text_body(ONE_TEXT_ARGS, KERNEL_AVX2);
}
__attribute__((target("arch=x86-64-v4"))) static int one_text_avx512(ONE_TEXT_PARAMS)
{
    return one_text_body(ONE_TEXT_ARGS, KERNEL_AVX512);
}
static const one_text_fn ONE_TEXT[KERNEL_COUNT] = {one_text_portable, one_text_avx2, one_text_avx512};
#else
static const one_text_fn ONE_TEXT[KERNEL_COUNT] = {one_text_portable, one_text_portable, one_text_portable};
#endif

int shc_text(shc_work *w, const char *text, size_t len, int32_t ngram, int32_t weights, const shc_scheme *scheme,
             uint64_t *fingerprint, uint8_t *sketch, uint8_t *status)
{
    if (!w || !status || (!text && len) || (fingerprint && shc_check_settings(ngram, weights)))
        return SHC_ERR_ARGUMENT;
    size_t nbytes = 0;
    if (sketch) {
        nbytes = shc_sketch_bytes(scheme);
        if (!nbytes)
            return SHC_ERR_ARGUMENT;
    }
    int r = ONE_TEXT[current_kernel()](w, (const unsigned char *)(text ? text : ""), len, ngram, weights, scheme,
                                       fingerprint, sketch, nbytes);
    if (r & SHC_DECLINED) {
        if (fingerprint)
            *fingerprint = 0;
        if (sketch)
            memset(sketch, 0, nbytes);
    }
    *status = (uint8_t)r;
    return 0;
}

int shc_normalize(shc_work *w, const char *text, size_t len, const uint32_t **units, size_t *count, uint8_t *status)
{
    if (!w || !units || !count || !status || (!text && len))
        return SHC_ERR_ARGUMENT;
    const unsigned char *s = (const unsigned char *)(text ? text : "");
    *units = NULL;
    *count = 0;
    *status = 0;
    if (reserve((void **)&w->units, &w->units_cap, len + 1, sizeof(uint32_t))) {
        *status = SHC_DECLINED | SHC_WHY_MEMORY;
        return 0;
    }
    size_t m = 0;
    int r = fast_units(w, s, len, &m, KERNEL_PORTABLE);
    if (r == NEEDS_GENERAL_PATH || (r == 0 && m == 0)) { /* (the one pass gives none for a featureless text) */
        r = decode_utf8(s, len, w->units, &m);
        if (r == 0)
            r = normalize_units(w, &m, 1);
    }
    if (r) {
        *status = (uint8_t)r;
        return 0;
    }
    *units = w->units;
    *count = m;
    return 0;
}

size_t shc_shingle_set(const uint32_t *units, size_t count, int32_t n, uint64_t *out)
{
    if (!units || !out || count == 0 || n < 1)
        return 0;
    return shc_sorted_distinct(out, ngram_hashes(units, count, n, out, NULL)); /* (count - n + 1, or 1) */
}

int shc_batch(shc_work *w, const char *buf, const int64_t *offsets, size_t n, int32_t ngram, int32_t weights,
              const shc_scheme *scheme, uint64_t *fingerprints, uint8_t *sketches, uint8_t *status)
{
    if (!w || !status || (n && (!offsets || !buf)))
        return SHC_ERR_ARGUMENT;
    if (fingerprints && shc_check_settings(ngram, weights))
        return SHC_ERR_ARGUMENT;
    size_t nbytes = 0;
    if (sketches) {
        nbytes = shc_sketch_bytes(scheme);
        if (!nbytes)
            return SHC_ERR_ARGUMENT;
    }
    for (size_t i = 0; i < n; i++)
        if (offsets[i] < 0 || offsets[i + 1] < offsets[i])
            return SHC_ERR_ARGUMENT;
    one_text_fn one_text = ONE_TEXT[current_kernel()];
    for (size_t i = 0; i < n; i++) {
        uint64_t *fp = fingerprints ? fingerprints + i : NULL;
        uint8_t *sk = sketches ? sketches + i * nbytes : NULL;
        int r = one_text(w, (const unsigned char *)buf + offsets[i], (size_t)(offsets[i + 1] - offsets[i]), ngram,
                         weights, scheme, fp, sk, nbytes);
        if (r & SHC_DECLINED) {
            if (fp)
                *fp = 0;
            if (sk)
                memset(sk, 0, nbytes);
        }
        status[i] = (uint8_t)r;
    }
    return 0;
}

/* ---------------------------------------------------------------- the estimate (sketch.estimate_many) */

/* sketch.sizes_of: rint(2 ** ((code - 1) / 2048)), NaN for code 0. */
static double size_of_code(unsigned code)
{
    if (code == 0)
        return NAN;
    return rint(pow(2.0, ((double)code - 1.0) / SIZE_STEPS));
}

/* a ^ b over the first `bytes` bytes as little-endian words (the last zero-padded): bit i of the bins is
 * bit i % 64 of word i / 64, as sketch_pairs._words lays them out. Returns the number of words. */
SHC_INLINE size_t xor_words(const uint8_t *a, const uint8_t *b, size_t bytes, uint64_t *out)
{
    size_t whole = bytes / 8, w = 0;
    for (; w < whole; w++)
        out[w] = load64(a + 8 * w) ^ load64(b + 8 * w);
    if (bytes % 8) {
        uint64_t x = 0;
        for (size_t i = bytes; i-- > 8 * whole;)
            x = (x << 8) | (uint64_t)(a[i] ^ b[i]);
        out[w++] = x;
    }
    return w;
}

/* Inlined into its callers, so that a kernel built for x86-64-v3/v4 counts with popcnt. */
SHC_INLINE int64_t agreeing_bins(const uint8_t *a, const uint8_t *b, const shc_scheme *s)
{
    size_t bin_bytes = (size_t)s->bins * (size_t)s->bits / 8;
    int64_t agree = 0;
    if (s->bits == 1) { /* one bit a bin: the bins minus the differing bits */
        size_t whole = bin_bytes / 8;
        for (size_t w = 0; w < whole; w++)
            agree += popcount64(load64(a + 8 * w) ^ load64(b + 8 * w));
        for (size_t i = 8 * whole; i < bin_bytes; i++)
            agree += popcount64((uint64_t)(a[i] ^ b[i]));
        return (int64_t)s->bins - agree;
    }
    if (s->bits == 16) {
        for (size_t i = 0; i < bin_bytes; i += 2)
            agree += (a[i] == b[i] && a[i + 1] == b[i + 1]);
        return agree;
    }
    unsigned bits = (unsigned)s->bits, mask = (1u << bits) - 1;
    for (size_t i = 0; i < bin_bytes; i++) {
        unsigned x = (unsigned)(a[i] ^ b[i]);
        for (unsigned shift = 0; shift < 8; shift += bits)
            agree += ((x >> shift) & mask) == 0;
    }
    return agree;
}

/* How often two unrelated bins agree: 2 ** -bits (ldexp: exact, as the reference's 2.0 ** -bits). */
SHC_INLINE double chance_of(const shc_scheme *s) { return ldexp(1.0, -s->bits); }

/* The bins' estimate (sketch.estimate_from_agreeing), before the size rule. */
SHC_INLINE double bins_estimate(const uint8_t *a, const uint8_t *b, const shc_scheme *s)
{
    double chance = chance_of(s);
    double share = (double)agreeing_bins(a, b, s) / (double)s->bins;
    double e = (share - chance) / (1.0 - chance);
    return e < 0.0 ? 0.0 : (e > 1.0 ? 1.0 : e); /* np.clip */
}

SHC_INLINE double estimate_pair(const uint8_t *a, const uint8_t *b, const shc_scheme *s)
{
    double chance = chance_of(s), e = bins_estimate(a, b, s);
    if (!s->size_bits)
        return e;
    size_t at = (size_t)s->bins * (size_t)s->bits / 8;
    double x = size_of_code((unsigned)a[at] | ((unsigned)a[at + 1] << 8));
    double y = size_of_code((unsigned)b[at] | ((unsigned)b[at + 1] << 8));
    if (isnan(x) || isnan(y))
        return e; /* sharpened(): an unknown ratio leaves the estimate */
    double r = (x < y ? x : y) / (x > y ? x : y);
    /* estimate_spread(r) */
    double p = r + (1.0 - r) * chance;
    double v = p * (1.0 - p);
    v = v < 0.0 ? 0.0 : v;
    double spread = sqrt(v / (double)s->bins) / (1.0 - chance);
    int contained = fabs(e - r) <= CONTAINMENT_SDS * spread + 1e-12;
    if (contained)
        return r;
    return e < r ? e : r;
}

SHC_CLONES int shc_estimate_many(const uint8_t *a, const uint8_t *b, size_t n, const shc_scheme *s, double *out)
{
    size_t nbytes = shc_sketch_bytes(s);
    if (!nbytes || (n && (!a || !b || !out)))
        return SHC_ERR_ARGUMENT;
    for (size_t i = 0; i < n; i++)
        out[i] = estimate_pair(a + i * nbytes, b + i * nbytes, s);
    return 0;
}

int shc_estimate(const uint8_t *a, size_t a_len, const uint8_t *b, size_t b_len, const shc_scheme *s, double *out)
{
    size_t nbytes = shc_sketch_bytes(s);
    if (!nbytes || !a || !b || !out || a_len != nbytes || b_len != nbytes)
        return SHC_ERR_ARGUMENT;
    *out = estimate_pair(a, b, s);
    return 0;
}

int shc_sketch_size(const uint8_t *sketch, size_t len, const shc_scheme *s, double *out)
{
    size_t nbytes = shc_sketch_bytes(s);
    if (!nbytes || !sketch || !out || len != nbytes)
        return SHC_ERR_ARGUMENT;
    if (!s->size_bits) {
        *out = NAN;
        return 0;
    }
    size_t at = (size_t)s->bins * (size_t)s->bits / 8;
    *out = size_of_code((unsigned)sketch[at] | ((unsigned)sketch[at + 1] << 8));
    return 0;
}

/* ---------------------------------------------------------------- pairs of one LSH table (sketch_pairs) */

/* Bits [start, start + width) of the words (width <= 64; start + width within them). */
SHC_INLINE uint64_t window_bits(const uint64_t *x, unsigned start, unsigned width)
{
    unsigned word = start / 64, shift = start % 64;
    uint64_t v = x[word] >> shift;
    if (shift + width > 64)
        v |= x[word + 1] << (64 - shift);
    return width == 64 ? v : v & ((UINT64_C(1) << width) - 1);
}

/* The most sharpened() can raise an estimate: to a size ratio within CONTAINMENT_SDS spreads of it, and a
 * spread is largest at p = 1/2 (the margin covers rounding many times over). */
static double most_raise(const shc_scheme *s)
{
    if (!s->size_bits)
        return 0.0;
    return CONTAINMENT_SDS * sqrt(0.25 / (double)s->bins) / (1.0 - chance_of(s)) + 1e-9;
}

/* How many group members ahead of use a member's row is fetched. */
#define FETCH_AHEAD 16

SHC_CLONES int shc_window_pairs(const uint8_t *rows, size_t nrows, const shc_scheme *s, const uint64_t *packed,
                                size_t n, int32_t position_bits, int32_t width, int32_t step, int32_t table,
                                double threshold, shc_window_cursor *cursor, int64_t *left, int64_t *right,
                                double *estimate, size_t capacity, size_t *count)
{
    size_t nbytes = shc_sketch_bytes(s);
    if (!nbytes || !count || !cursor || (n && (!rows || !packed)) || (capacity && (!left || !right || !estimate)))
        return SHC_ERR_ARGUMENT;
    *count = 0;
    size_t nbits = (size_t)s->bins * (size_t)s->bits, bin_bytes = nbits / 8;
    if (position_bits < 1 || position_bits > 63 || width < 1 || width > 64 || width + position_bits > 64 ||
        step < 1 || table < 0 || (size_t)table * (size_t)step + (size_t)width > nbits ||
        cursor->i < 0 || cursor->j < 0)
        return SHC_ERR_ARGUMENT;
    if ((size_t)cursor->i >= n)
        return 0;
    int shift = position_bits;
    uint64_t mask = (UINT64_C(1) << shift) - 1;
    double raise = most_raise(s);
    /* The members of groups (entries that share their key with a neighbour) from the cursor on: a few
     * percent of the entries. Only they are visited, and their rows are fetched ahead of use: the rows
     * are read at random (1.2 GB at 10M documents), two cache misses a pair otherwise. */
    size_t from = (size_t)cursor->i, members = 0, room = 1024;
    size_t *member = malloc(room * sizeof(size_t));
    /* The earlier windows lie within the first `seen` bytes of the bins: their XOR, as words. */
    size_t seen = table ? ((size_t)(table - 1) * (size_t)step + (size_t)width + 7) / 8 : 0;
    uint64_t *x = table ? malloc((seen + 7) / 8 * sizeof(uint64_t)) : NULL;
    int status = 0;
    if (!member || (table && !x)) {
        status = SHC_ERR_MEMORY;
        goto done;
    }
    for (size_t k = from; k + 1 < n; k++) {
        if (packed[k] >> shift != packed[k + 1] >> shift)
            continue;
        if (members + 2 > room) {
            size_t *grown = realloc(member, 2 * room * sizeof(size_t));
            if (!grown) {
                status = SHC_ERR_MEMORY;
                goto done;
            }
            member = grown;
            room *= 2;
        }
        if (!members || member[members - 1] != k)
            member[members++] = k;
        member[members++] = k + 1;
    }
    for (size_t m = 0; m < members; m++) {
        if (m + FETCH_AHEAD < members) {
            size_t later = (size_t)(packed[member[m + FETCH_AHEAD]] & mask);
            if (later < nrows) {
                SHC_PREFETCH(rows + later * nbytes);
                SHC_PREFETCH(rows + later * nbytes + nbytes - 1);
            }
        }
        size_t i = member[m];
        uint64_t key = packed[i] >> shift;
        size_t j = i == from && (size_t)cursor->j > i ? (size_t)cursor->j : i + 1;
        if (j >= n || packed[j] >> shift != key)
            continue;
        size_t p = (size_t)(packed[i] & mask);
        if (p >= nrows) {
            status = SHC_ERR_ARGUMENT;
            goto done;
        }
        const uint8_t *a = rows + p * nbytes;
        for (; j < n && packed[j] >> shift == key; j++) {
            if (*count == capacity) {
                cursor->i = (int64_t)i;
                cursor->j = (int64_t)j;
                status = 1;
                goto done;
            }
            size_t q = (size_t)(packed[j] & mask);
            if (q >= nrows || q <= p) { /* q <= p: the words were not sorted, or a row repeats */
                status = SHC_ERR_ARGUMENT;
                goto done;
            }
            const uint8_t *b = rows + q * nbytes;
            /* Most candidates are chance agreements on a window: the bins' estimate rules them out
             * before anything else is computed (the size rule raises it by `raise` at most). */
            if (bins_estimate(a, b, s) + raise < threshold)
                continue;
            /* A pair whose bits agree on an earlier window was that table's: each pair once, no dedup. */
            if (table)
                xor_words(a, b, seen < bin_bytes ? seen : bin_bytes, x);
            int earlier = 0;
            for (int32_t t = 0; t < table && !earlier; t++)
                earlier = window_bits(x, (unsigned)(t * step), (unsigned)width) == 0;
            if (earlier)
                continue;
            double value = estimate_pair(a, b, s);
            if (!(value >= threshold))
                continue;
            left[*count] = (int64_t)p;
            right[*count] = (int64_t)q;
            estimate[*count] = value;
            (*count)++;
        }
    }
    cursor->i = (int64_t)n;
    cursor->j = 0;
done:
    free(member);
    free(x);
    return status;
}

/* ---------------------------------------------------------------- sorted LSH tables (sketch_pairs) */

/* The radix digits of shc_sort_packed's stable pass: a table's key (24-27 bits) in two passes of at most
 * 16 bits, whose counts (512 KB) stay in cache while the words are dealt out. */
#define SORT_DIGIT_MOST 16

/* Stable LSD radix sort of h[0..n) by bits [low, low + bits), through scratch; 0, or -1 where the counts could
 * not be allocated (nothing moved). */
static int sort_by_key(uint64_t *h, size_t n, int low, int bits, uint64_t *scratch)
{
    int passes = (bits + SORT_DIGIT_MOST - 1) / SORT_DIGIT_MOST;
    int digit = (bits + passes - 1) / passes;
    size_t buckets = (size_t)1 << digit;
    uint64_t mask = buckets - 1;
    size_t *counts = calloc(buckets * (size_t)passes, sizeof(size_t));
    if (!counts)
        return -1;
    for (size_t i = 0; i < n; i++) {
        uint64_t key = h[i] >> low;
        for (int p = 0; p < passes; p++)
            counts[(size_t)p * buckets + ((key >> (p * digit)) & mask)]++;
    }
    uint64_t *from = h, *to = scratch;
    for (int p = 0; p < passes; p++) {
        size_t *next = counts + (size_t)p * buckets, sum = 0;
        for (size_t b = 0; b < buckets; b++) {
            size_t c = next[b];
            next[b] = sum;
            sum += c;
        }
        int shift = low + p * digit;
        for (size_t i = 0; i < n; i++) {
            uint64_t v = from[i];
            to[next[(v >> shift) & mask]++] = v;
        }
        uint64_t *t = from;
        from = to;
        to = t;
    }
    if (from != h)
        memcpy(h, from, n * sizeof(uint64_t));
    free(counts);
    return 0;
}

SHC_API int shc_sort_packed(uint64_t *h, size_t n, int32_t low, uint64_t *scratch)
{
    if ((n && !h) || low < 0 || low > 63)
        return SHC_ERR_ARGUMENT;
    if (n < 2)
        return 0;
    uint64_t any = 0;
    for (size_t i = 0; i < n; i++)
        any |= h[i];
    int top = 0; /* bits the values span */
    while (top < 64 && any >> top)
        top++;
    if (scratch && top > low && sort_by_key(h, n, low, top - low, scratch) == 0) {
        size_t i = 1;
        while (i < n && h[i - 1] <= h[i])
            i++;
        if (i == n)
            return 0;
        /* Equal keys whose low bits were out of order: the stable pass left the keys sorted; the in-place
         * sort below finishes them. */
    }
    if (top > 0)
        radix_sort_u64(h, n, (top - 1) / 8 * 8);
    return 0;
}

SHC_API int shc_pack_window(const uint64_t *lo, const uint64_t *hi, const uint64_t *low_words, size_t n, int32_t shift,
                            int32_t width, int32_t low, uint64_t *out)
{
    if ((n && (!lo || !low_words || !out)) || shift < 0 || shift > 63 || width < 1 || low < 0 || width + low > 64)
        return SHC_ERR_ARGUMENT;
    uint64_t mask = width == 64 ? ~UINT64_C(0) : (UINT64_C(1) << width) - 1;
    if (hi && shift + width > 64) {
        for (size_t i = 0; i < n; i++)
            out[i] = (((lo[i] >> shift) | (hi[i] << (64 - shift))) & mask) << low | low_words[i];
    } else {
        for (size_t i = 0; i < n; i++)
            out[i] = ((lo[i] >> shift) & mask) << low | low_words[i];
    }
    return 0;
}
