/* A C harness for simhash_core.c, meant to run under AddressSanitizer and UndefinedBehaviorSanitizer
 * (bench/native_sanitize.sh builds and runs it). Fixed hostile cases, then random ones for a bounded
 * time: random bytes, mutated UTF-8 of every length class, every scheme (and bad ones), estimates of
 * random rows of every length. It checks what must hold whatever the input:
 *   - a status is 0, a combination of HAS_FINGERPRINT/HAS_SKETCH, or DECLINED with a known reason;
 *   - outputs of a declined or featureless text are zeros;
 *   - a text gives the same result alone (shc_text) as inside a batch (shc_batch), and twice, each time
 *     with kernels drawn from those this CPU runs (so the kernels are checked against each other);
 *   - bad arguments give SHC_ERR_ARGUMENT and write nothing out of bounds.
 * Usage: core_harness [seconds] [seed]. Exit 0 when every check held. */
#include "simhash_core.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "harness.h"

/* The seed of the random cases unless argv[2] gives one. */
#define DEFAULT_SEED 0x853c49e6748fea9bull

static const shc_scheme SCHEMES[] = {{944, 1, 16}, {960, 1, 0}, {240, 2, 0}, {120, 4, 16}, {60, 8, 0},
                                     {30, 16, 16}, {3, 8, 0},   {8, 1, 0},   {1, 8, 16},   {65536, 1, 16}};
#define NSCHEMES (sizeof SCHEMES / sizeof SCHEMES[0])

static int status_ok(uint8_t s)
{
    if (s & SHC_DECLINED)
        return (s & 0x7F) >= SHC_WHY_UTF8 && (s & 0x7F) <= SHC_WHY_MEMORY;
    return (s & ~(SHC_HAS_FINGERPRINT | SHC_HAS_SKETCH)) == 0;
}

static int all_zero(const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i])
            return 0;
    return 1;
}

/* Random text: raw bytes, or UTF-8 of code points drawn from interesting ranges, sometimes mutated. */
static size_t make_text(unsigned char *buf, size_t cap)
{
    size_t len = 0, want;
    uint64_t r = rnd();
    switch (r % 5) {
    case 0: want = 0; break;
    case 1: want = rnd() % 8; break;
    case 2: want = rnd() % 64; break;
    case 3: want = rnd() % 2048; break;
    default: want = rnd() % cap; break;
    }
    if (want > cap)
        want = cap;
    if ((r >> 8) % 4 == 0) { /* raw bytes */
        for (; len < want; len++)
            buf[len] = (unsigned char)rnd();
        return len;
    }
    static const uint32_t ranges[][2] = {{0x20, 0x7E},       {0, 0x20},         {0x300, 0x36F},   {0x4E00, 0x9FFF},
                                         {0xFF00, 0xFFEF},   {0x3000, 0x303F},  {0xAC00, 0xD7A3}, {0x1100, 0x11FF},
                                         {0x1F300, 0x1FAFF}, {0xD800, 0xDFFF},  {0x80, 0x24F},    {0x2000, 0x206F},
                                         {0xFB00, 0xFDFF},   {0x1D400, 0x1D7FF}, {0, 0x10FFFF}};
    size_t nranges = sizeof ranges / sizeof ranges[0];
    while (len + 4 <= want) {
        const uint32_t *rg = ranges[rnd() % nranges];
        uint32_t cp = rg[0] + (uint32_t)(rnd() % (rg[1] - rg[0] + 1));
        if (cp < 0x80) {
            buf[len++] = (unsigned char)cp;
        } else if (cp < 0x800) {
            buf[len++] = (unsigned char)(0xC0 | (cp >> 6));
            buf[len++] = (unsigned char)(0x80 | (cp & 0x3F));
        } else if (cp < 0x10000) {
            buf[len++] = (unsigned char)(0xE0 | (cp >> 12));
            buf[len++] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
            buf[len++] = (unsigned char)(0x80 | (cp & 0x3F));
        } else {
            buf[len++] = (unsigned char)(0xF0 | (cp >> 18));
            buf[len++] = (unsigned char)(0x80 | ((cp >> 12) & 0x3F));
            buf[len++] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
            buf[len++] = (unsigned char)(0x80 | (cp & 0x3F));
        }
    }
    if (len && (r >> 16) % 6 == 0) /* mutate a byte */
        buf[rnd() % len] ^= (unsigned char)(1u << (rnd() % 8));
    if (len && (r >> 24) % 6 == 0) /* truncate */
        len -= rnd() % (len < 4 ? len : 4);
    return len;
}

/* The kernels this CPU runs (main fills it). */
static const char *kernels[3];
static size_t n_kernels;

static void pick_kernel(void)
{
    const char *name = kernels[rnd() % n_kernels];
    CHECK(shc_set_kernel(name) == 0 && strcmp(shc_kernel(), name) == 0, "kernel %s refused", name);
}

static void check_texts(shc_work *w, shc_work *w2, const unsigned char *buf, const int64_t *offsets, size_t n,
                        int32_t ngram, int32_t weights, const shc_scheme *s)
{
    pick_kernel();
    size_t nbytes = shc_sketch_bytes(s);
    uint64_t *fps = malloc(sizeof(uint64_t) * (n ? n : 1));
    uint8_t *sk = malloc(nbytes * (n ? n : 1));
    uint8_t *st = malloc(n ? n : 1);
    uint8_t *one = malloc(nbytes);
    int r = shc_batch(w, (const char *)buf, offsets, n, ngram, weights, s, fps, sk, st);
    CHECK(r == 0, "shc_batch returned %d", r);
    pick_kernel();
    for (size_t i = 0; r == 0 && i < n; i++) {
        CHECK(status_ok(st[i]), "bad status %u", st[i]);
        if (!(st[i] & SHC_HAS_FINGERPRINT))
            CHECK(fps[i] == 0, "fingerprint without HAS_FINGERPRINT");
        if (!(st[i] & SHC_HAS_SKETCH))
            CHECK(all_zero(sk + i * nbytes, nbytes), "sketch bytes without HAS_SKETCH");
        if ((st[i] & SHC_HAS_SKETCH) && !(st[i] & SHC_DECLINED))
            CHECK(st[i] & SHC_HAS_FINGERPRINT, "a sketch without a fingerprint");
        uint64_t fp = 1;
        uint8_t s1 = 0xFF;
        int r1 = shc_text(w2, (const char *)buf + offsets[i], (size_t)(offsets[i + 1] - offsets[i]), ngram, weights,
                          s, &fp, one, &s1);
        CHECK(r1 == 0 && s1 == st[i] && fp == fps[i] && memcmp(one, sk + i * nbytes, nbytes) == 0,
              "text %zu alone differs from the batch (status %u vs %u)", i, s1, st[i]);
        /* features.normalize of it: never declined where the fingerprint was not (full NFKC, nfkc.h) */
        const uint32_t *units = NULL;
        size_t count = 0;
        uint8_t ns = 0xFF;
        size_t len = (size_t)(offsets[i + 1] - offsets[i]);
        CHECK(shc_normalize(w2, (const char *)buf + offsets[i], len, &units, &count, &ns) == 0, "normalize failed");
        CHECK(ns == 0 || (ns & SHC_DECLINED && (ns & 0x7F) != SHC_WHY_NORMALIZE), "normalize status %u", ns);
        if (!(st[i] & SHC_DECLINED))
            CHECK(ns == 0 && (count == 0 || units != NULL), "normalize declined a text the core fingerprinted");
        for (size_t k = 0; ns == 0 && k < count; k++)
            CHECK(units[k] <= 0x10FFFF && (units[k] < 0xD800 || units[k] > 0xDFFF), "a unit out of range");
    }
    /* fingerprints only, sketches only: the same values */
    uint64_t *fps2 = malloc(sizeof(uint64_t) * (n ? n : 1));
    uint8_t *st2 = malloc(n ? n : 1);
    r = shc_batch(w2, (const char *)buf, offsets, n, ngram, weights, NULL, fps2, NULL, st2);
    CHECK(r == 0, "fingerprints only: %d", r);
    for (size_t i = 0; r == 0 && i < n; i++)
        if (!(st[i] & SHC_DECLINED) && !(st2[i] & SHC_DECLINED))
            CHECK(fps2[i] == fps[i], "fingerprint alone differs");
    free(fps2);
    free(st2);
    free(fps);
    free(sk);
    free(st);
    free(one);
}

/* shc_sorted_distinct on random values, with repeats: ascending, each once, the same set. */
static void check_sorted_distinct(void)
{
    size_t n = rnd() % 5000;
    uint64_t *h = malloc(sizeof(uint64_t) * (n ? n : 1)), *copy = malloc(sizeof(uint64_t) * (n ? n : 1));
    for (size_t i = 0; i < n; i++)
        h[i] = (rnd() % 3 == 0 && i) ? h[rnd() % i] : (rnd() % 2 ? rnd() : rnd() % 300);
    memcpy(copy, h, sizeof(uint64_t) * n);
    size_t d = shc_sorted_distinct(h, n);
    CHECK(d <= n && (n == 0 || d >= 1), "distinct count %zu of %zu", d, n);
    for (size_t i = 1; i < d; i++)
        CHECK(h[i - 1] < h[i], "not ascending at %zu", i);
    for (size_t i = 0; i < n; i++) { /* every value is still there */
        size_t lo = 0, hi = d;
        while (lo < hi) {
            size_t mid = lo + (hi - lo) / 2;
            if (h[mid] < copy[i]) lo = mid + 1;
            else hi = mid;
        }
        CHECK(lo < d && h[lo] == copy[i], "value %zu lost", i);
    }
    free(h);
    free(copy);
}

/* shc_shingle_set on random code points into exactly count slots (the sanitizer catches a write past them):
 * ascending, each once, at most one a shingle (count - n + 1, or 1 for fewer units than n). */
static void check_shingle_set(void)
{
    size_t count = rnd() % 300;
    int32_t n = 1 + (int32_t)(rnd() % 8);
    uint32_t *units = malloc(sizeof(uint32_t) * (count ? count : 1));
    uint64_t *out = malloc(sizeof(uint64_t) * (count ? count : 1));
    for (size_t i = 0; i < count; i++)
        units[i] = rnd() % 2 ? (uint32_t)(rnd() % 4) : (uint32_t)(rnd() % 0x110000); /* repeats, and any */
    size_t d = shc_shingle_set(count ? units : NULL, count, n, count ? out : NULL);
    size_t most = count == 0 ? 0 : count < (size_t)n ? 1 : count - (size_t)n + 1;
    CHECK(d <= most && (count == 0 || d >= 1), "shingle set of %zu from %zu units (n %d)", d, count, n);
    for (size_t i = 1; i < d; i++)
        CHECK(out[i - 1] < out[i], "shingle set not ascending at %zu", i);
    free(units);
    free(out);
}

static void check_estimates(const shc_scheme *s)
{
    size_t nbytes = shc_sketch_bytes(s);
    size_t n = 1 + rnd() % 16;
    uint8_t *a = malloc(nbytes * n), *b = malloc(nbytes * n);
    double *out = malloc(sizeof(double) * n);
    for (size_t i = 0; i < nbytes * n; i++) {
        a[i] = (uint8_t)rnd();
        b[i] = rnd() % 3 ? a[i] : (uint8_t)rnd();
    }
    CHECK(shc_estimate_many(a, b, n, s, out) == 0, "estimate_many failed");
    for (size_t i = 0; i < n; i++) {
        CHECK(out[i] >= 0.0 && out[i] <= 1.0, "estimate %g out of [0, 1]", out[i]);
        double one;
        CHECK(shc_estimate(a + i * nbytes, nbytes, b + i * nbytes, nbytes, s, &one) == 0 && one == out[i],
              "one estimate differs");
        double size;
        CHECK(shc_sketch_size(a + i * nbytes, nbytes, s, &size) == 0, "sketch_size failed");
        CHECK(isnan(size) || size >= 1.0, "size %g", size);
    }
    double x;
    CHECK(shc_estimate(a, nbytes - 1, b, nbytes, s, &x) == SHC_ERR_ARGUMENT, "short sketch accepted");
    CHECK(shc_estimate(a, nbytes, b, nbytes + 1, s, &x) == SHC_ERR_ARGUMENT, "long sketch accepted");
    CHECK(shc_sketch_size(a, 0, s, &x) == SHC_ERR_ARGUMENT, "empty sketch accepted");
    free(a);
    free(b);
    free(out);
}

/* shc_window_pairs on random rows and random sorted words, hostile positions and windows among them:
 * never a read past the rows (ASan), every pair written is p < q with its estimate and >= the threshold,
 * and resuming after a full output gives the same pairs as one call. */
static int compare_u64(const void *x, const void *y)
{
    uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
    return a < b ? -1 : a > b;
}

static void check_window_pairs(const shc_scheme *s)
{
    size_t nbytes = shc_sketch_bytes(s), nbits = (size_t)s->bins * (size_t)s->bits;
    size_t nrows = 1 + rnd() % 40, n = rnd() % 60;
    uint8_t *rows = malloc(nbytes * nrows);
    uint64_t *packed = malloc(sizeof(uint64_t) * (n + 1));
    for (size_t i = 0; i < nbytes * nrows; i++)
        rows[i] = rnd() % 4 ? rows[i % nbytes] : (uint8_t)rnd(); /* rows much like the first */
    int32_t bits = 1 + (int32_t)(rnd() % 8);
    for (size_t i = 0; i < n; i++) /* rows now and then past nrows, repeated, or out of order */
        packed[i] = ((rnd() % 4) << bits) | (rnd() % ((uint64_t)1 << bits));
    if (rnd() % 4)
        qsort(packed, n, sizeof(uint64_t), compare_u64);
    int32_t width = 1 + (int32_t)(rnd() % 30), step = 1 + (int32_t)(rnd() % 9);
    int32_t table = (int32_t)(rnd() % (nbits / (size_t)step + 2));
    double threshold = (double)(rnd() % 12) / 10.0 - 0.1;
    size_t cap = 1 + rnd() % 50, total = 0, count = 0;
    int64_t left[64], right[64];
    double est[64];
    shc_window_cursor cursor = {0, 0};
    int r;
    do {
        r = shc_window_pairs(rows, nrows, s, packed, n, bits, width, step, table, threshold, &cursor, left, right,
                             est, cap, &count);
        CHECK(r == 0 || r == 1 || r == SHC_ERR_ARGUMENT, "window_pairs returned %d", r);
        CHECK(count <= cap, "window_pairs wrote %zu of %zu", count, cap);
        for (size_t k = 0; r >= 0 && k < count; k++) {
            CHECK(left[k] < right[k] && (size_t)right[k] < nrows, "pair %lld, %lld", (long long)left[k],
                  (long long)right[k]);
            double e;
            if (left[k] < 0 || left[k] >= right[k] || (size_t)right[k] >= nrows)
                continue; /* counted above; never read out of bounds here */
            CHECK(shc_estimate(rows + left[k] * nbytes, nbytes, rows + right[k] * nbytes, nbytes, s, &e) == 0 &&
                      e == est[k] && e >= threshold,
                  "pair estimate %g", est[k]);
        }
        total += count;
    } while (r == 1 && total < 100000);
    free(rows);
    free(packed);
}

/* shc_sort_packed on an LSH table's words (keys over ascending rows), with rows out of order, and on any
 * words, with scratch (guarded on both sides) and without: qsort's order, and nothing written past the words. */
static void check_sort_packed(void)
{
    size_t n = rnd() % 4 ? rnd() % 300 : rnd() % 20000;
    int32_t low = (int32_t)(rnd() % 64), width = 1 + (int32_t)(rnd() % 64);
    if (width > 64 - low)
        width = 64 - low;
    uint64_t *words = malloc(sizeof(uint64_t) * (n + 2)), *want = malloc(sizeof(uint64_t) * (n + 1));
    uint64_t *scratch = malloc(sizeof(uint64_t) * (n + 2));
    for (size_t i = 0; i < n + 2; i++)
        scratch[i] = rnd(); /* (pack_window reads it below as the high words) */
    int layout = (int)(rnd() % 3), few = rnd() % 2;
    for (size_t i = 0; i < n; i++) {
        uint64_t key = width ? rnd() >> (64 - width) : 0;
        if (few)
            key &= 7;
        uint64_t below = low ? (layout == 1 ? rnd() : (uint64_t)i) & ((UINT64_C(1) << low) - 1) : 0;
        words[i + 1] = layout == 2 ? rnd() >> (rnd() % 64) : (low < 64 ? key << low : 0) | below;
    }
    words[0] = words[n + 1] = scratch[0] = scratch[n + 1] = 0x5A5A5A5A5A5A5A5Aull; /* guards */
    if (n)
        memcpy(want, words + 1, n * sizeof(uint64_t));
    qsort(want, n, sizeof(uint64_t), compare_u64);
    int with_scratch = (int)(rnd() % 2);
    int r = shc_sort_packed(words + 1, n, low, with_scratch ? scratch + 1 : NULL);
    CHECK(r == 0, "sort_packed returned %d (n %zu, low %d)", r, n, low);
    CHECK(n == 0 || memcmp(words + 1, want, n * sizeof(uint64_t)) == 0, "sort_packed order (n %zu, low %d, layout %d)",
          n, low, layout);
    CHECK(words[0] == 0x5A5A5A5A5A5A5A5Aull && words[n + 1] == 0x5A5A5A5A5A5A5A5Aull &&
              scratch[0] == 0x5A5A5A5A5A5A5A5Aull && scratch[n + 1] == 0x5A5A5A5A5A5A5A5Aull,
          "sort_packed wrote past its words");
    /* shc_pack_window over the same words as two 64-bit halves of a row's bits: each value computed bit by bit */
    int32_t shift = (int32_t)(rnd() % 64), bits = 1 + (int32_t)(rnd() % 64), below = (int32_t)(rnd() % 64);
    if (bits + below > 64)
        below = 64 - bits;
    int with_hi = (int)(rnd() % 2);
    uint64_t *packed = malloc(sizeof(uint64_t) * (n + 1)), *under = malloc(sizeof(uint64_t) * (n + 1));
    for (size_t i = 0; i < n; i++)
        under[i] = below ? rnd() & ((UINT64_C(1) << below) - 1) : 0;
    packed[n] = 0x5A5A5A5A5A5A5A5Aull;
    CHECK(shc_pack_window(want, with_hi ? scratch + 1 : NULL, under, n, shift, bits, below, packed) == 0,
          "pack_window refused");
    for (size_t i = 0; i < n; i++) {
        uint64_t key = 0;
        for (int32_t b = 0; b < bits; b++) {
            int32_t at = shift + b;
            uint64_t bit = at < 64 ? want[i] >> at & 1 : with_hi ? scratch[1 + i] >> (at - 64) & 1 : 0;
            key |= bit << b;
        }
        CHECK(packed[i] == (key << below | under[i]), "pack_window word %zu", i);
    }
    CHECK(packed[n] == 0x5A5A5A5A5A5A5A5Aull, "pack_window wrote past its words");
    CHECK(shc_pack_window(want, NULL, under, n, 64, bits, below, packed) == SHC_ERR_ARGUMENT, "shift 64 accepted");
    CHECK(shc_pack_window(want, NULL, under, n, shift, 65 - below, below, packed) == SHC_ERR_ARGUMENT,
          "a key past 64 bits accepted");
    free(packed);
    free(under);
    CHECK(shc_sort_packed(NULL, 3, 0, NULL) == SHC_ERR_ARGUMENT, "sort_packed took NULL words");
    CHECK(shc_sort_packed(words, 0, 64, NULL) == SHC_ERR_ARGUMENT, "sort_packed took low 64");
    CHECK(shc_sort_packed(words, 0, -1, NULL) == SHC_ERR_ARGUMENT, "sort_packed took low -1");
    free(words);
    free(want);
    free(scratch);
}

static void fixed_cases(shc_work *w)
{
    shc_scheme bad[] = {{0, 1, 0}, {7, 1, 0}, {8, 3, 0}, {8, 1, 8}, {65537, 8, 0}, {-8, 1, 0}, {8, 32, 0}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        CHECK(shc_check_scheme(&bad[i]) == SHC_ERR_ARGUMENT, "bad scheme %zu accepted", i);
        CHECK(shc_sketch_bytes(&bad[i]) == 0, "bad scheme %zu has bytes", i);
        uint8_t st, sk[16];
        uint64_t fp;
        CHECK(shc_text(w, "abc", 3, 5, 0, &bad[i], &fp, sk, &st) == SHC_ERR_ARGUMENT, "bad scheme used");
        double e;
        CHECK(shc_estimate(sk, 1, sk, 1, &bad[i], &e) == SHC_ERR_ARGUMENT, "estimate with a bad scheme");
    }
    CHECK(shc_check_scheme(NULL) == SHC_ERR_ARGUMENT, "NULL scheme");
    uint8_t st;
    uint64_t fp;
    CHECK(shc_text(w, "abc", 3, 0, 0, NULL, &fp, NULL, &st) == SHC_ERR_ARGUMENT, "ngram 0");
    CHECK(shc_text(w, "abc", 3, 17, 0, NULL, &fp, NULL, &st) == SHC_ERR_ARGUMENT, "ngram 17");
    CHECK(shc_text(w, "abc", 3, 5, 3, NULL, &fp, NULL, &st) == SHC_ERR_ARGUMENT, "weights 3");
    CHECK(shc_text(w, NULL, 3, 5, 0, NULL, &fp, NULL, &st) == SHC_ERR_ARGUMENT, "NULL text with a length");
    CHECK(shc_text(w, NULL, 0, 5, 0, NULL, &fp, NULL, &st) == 0 && st == 0, "NULL empty text");
    CHECK(shc_text(w, "abc", 3, 5, 0, NULL, &fp, NULL, NULL) == SHC_ERR_ARGUMENT, "NULL status");
    CHECK(shc_text(NULL, "abc", 3, 5, 0, NULL, &fp, NULL, &st) == SHC_ERR_ARGUMENT, "NULL work");
    int64_t back[] = {0, 3, 1};
    uint8_t sts[2];
    CHECK(shc_batch(w, "abc", back, 2, 5, 0, NULL, NULL, NULL, sts) == SHC_ERR_ARGUMENT, "offsets backwards");
    int64_t neg[] = {-1, 2};
    CHECK(shc_batch(w, "abc", neg, 1, 5, 0, NULL, NULL, NULL, sts) == SHC_ERR_ARGUMENT, "negative offset");
    CHECK(shc_batch(w, NULL, NULL, 0, 5, 0, NULL, NULL, NULL, sts) == 0, "empty batch");
    CHECK(shc_hamming(0, ~0ull) == 64 && shc_hamming(5, 5) == 0, "hamming");
    uint16_t blocks[4];
    shc_blocks(0x0123456789ABCDEFull, blocks);
    CHECK(blocks[0] == 0x0123 && blocks[3] == 0xCDEF, "blocks");
    /* a huge text of one repeated character, and one of many distinct shingles */
    size_t big = 1 << 22;
    char *t = malloc(big);
    memset(t, 'a', big);
    uint8_t sk[120];
    shc_scheme s = {944, 1, 16};
    CHECK(shc_text(w, t, big, 5, 2, &s, &fp, sk, &st) == 0 && st == 3, "huge repeated text");
    for (size_t i = 0; i < big; i++)
        t[i] = (char)('a' + rnd() % 26);
    CHECK(shc_text(w, t, big, 5, 1, &s, &fp, sk, &st) == 0 && st == 3, "huge random text");
    free(t);
}

int main(int argc, char **argv)
{
    double seconds = argc > 1 ? atof(argv[1]) : 10.0;
    rng_state = argc > 2 ? strtoull(argv[2], NULL, 10) : DEFAULT_SEED;
    shc_work *w = shc_work_new(), *w2 = shc_work_new();
    if (!w || !w2)
        return 2;
    static const char *const names[] = {"portable", "avx2", "avx512"};
    for (size_t i = 0; i < 3; i++)
        if (shc_set_kernel(names[i]) == 0)
            kernels[n_kernels++] = names[i];
    CHECK(n_kernels >= 1 && strcmp(kernels[0], "portable") == 0, "no portable kernels");
    CHECK(shc_set_kernel("avx9") == SHC_ERR_ARGUMENT, "unknown kernels accepted");
    CHECK(shc_set_kernel(NULL) == 0 && strcmp(shc_kernel(), kernels[n_kernels - 1]) == 0, "not the best kernels");
    fixed_cases(w);
    size_t cap = 1 << 16;
    unsigned char *buf = malloc(cap * 8);
    int64_t offsets[9];
    clock_t start = clock();
    long rounds = 0, texts = 0;
    while ((double)(clock() - start) / CLOCKS_PER_SEC < seconds) {
        size_t n = rnd() % 9;
        offsets[0] = (int64_t)(rnd() % 3); /* offsets need not start at 0 */
        for (size_t i = 0; i < offsets[0]; i++)
            buf[i] = 'x';
        for (size_t i = 0; i < n; i++)
            offsets[i + 1] = offsets[i] + (int64_t)make_text(buf + offsets[i], cap);
        const shc_scheme *s = &SCHEMES[rnd() % NSCHEMES];
        int32_t ngram = 1 + (int32_t)(rnd() % 16), weights = (int32_t)(rnd() % 3);
        if (rnd() % 2)
            ngram = 5;
        check_texts(w, w2, buf, offsets, n, ngram, weights, s);
        check_estimates(s);
        check_window_pairs(s);
        check_sorted_distinct();
        check_sort_packed();
        check_shingle_set();
        rounds++;
        texts += (long)n;
    }
    shc_work_free(w);
    shc_work_free(w2);
    free(buf);
    printf("%ld rounds, %ld texts, %ld failures, kernels", rounds, texts, failures);
    for (size_t i = 0; i < n_kernels; i++)
        printf(" %s", kernels[i]);
    printf("\n");
    return failures ? 1 : 0;
}
