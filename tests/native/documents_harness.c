/* A C harness for documents.c (add's document path), meant to run under AddressSanitizer and
 * UndefinedBehaviorSanitizer (bench/native_sanitize.sh builds and runs it). Random chunks of JSONL lines:
 * plain records, records with every escape, lone and paired surrogates, raw control bytes, nesting, numbers,
 * then mutated byte by byte, cut short, in buffers of exactly their length (so that a read past the end is
 * caught). It checks what must hold whatever the input:
 *   - every line is counted once, its bounds are the chunk's newlines, its kind is one of the three;
 *   - a record's key and short-text ranges lie within what was written, in order, its length is at most its
 *     line's bytes, its status is a valid shc_text status;
 *   - outputs too small give SHC_ERR_ARGUMENT, never a write out of bounds; the same chunk twice gives the
 *     same rows (the state carries nothing over from one chunk to the next);
 *   - the exact check's shingle sets (shc_docs_shingle_sets, and shc_docs_checked_sets with content hashes) of the
 *     chunk's lines or random pieces: check_sets;
 *   - dedup's kept-set codes (shc_codes_merge, shc_codes_find, shc_codes_mark) on sorted runs and on runs out of
 *     order: check_codes.
 * Usage: documents_harness [seconds] [seed]. Exit 0 when every check held. */
#include "documents.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "harness.h"

/* The seed of the random cases unless argv[2] gives one. */
#define DEFAULT_SEED 0x2545F4914F6CDD1Dull

static const char *const PIECES[] = {
    "hello", " ", "\\n", "\\t", "\\\"", "\\\\", "\\/", "\\u00e9", "\\ud83d\\ude00", "\\ud800", "\\udc00", "\\u0000",
    "\xe4\xb8\xad\xe6\x96\x87", "\xf0\x9f\x98\x80", "\xc3\xa9", "\xff", "\xed\xa0\x80", "\x01", "\\x", "\\u12",
    "\xe3\x80\x80", "\xc2\xa0", "word ", "e\xcc\x81",
};
#define NPIECES (sizeof PIECES / sizeof PIECES[0])
static const char *const VALUES[] = {
    "1", "-0", "0.5e-3", "01", "1.", "NaN", "-Infinity", "true", "false", "null", "[]", "{}", "[1,[2,{\"a\":3}]]",
    "\"str\"", "12345678901234567890", "{\"text\":1}", "[[[[[[[[[[[[]]]]]]]]]]]]",
};
#define NVALUES (sizeof VALUES / sizeof VALUES[0])

static size_t put(char *buf, size_t at, size_t cap, const char *s)
{
    size_t n = strlen(s);
    if (at + n > cap)
        return at;
    memcpy(buf + at, s, n);
    return at + n;
}

static size_t make_string(char *buf, size_t at, size_t cap)
{
    at = put(buf, at, cap, "\"");
    size_t pieces = rnd() % 40;
    if (rnd() % 8 == 0)
        pieces = 200 + rnd() % 600;
    for (size_t i = 0; i < pieces; i++)
        at = put(buf, at, cap, rnd() % 3 ? PIECES[rnd() % 3 == 0 ? rnd() % NPIECES : 22] : PIECES[rnd() % NPIECES]);
    return put(buf, at, cap, "\"");
}

static size_t make_line(char *buf, size_t at, size_t cap)
{
    if (rnd() % 20 == 0)
        return put(buf, at, cap, rnd() % 2 ? "   " : "\x0b");
    at = put(buf, at, cap, rnd() % 10 == 0 ? " {" : "{");
    size_t fields = rnd() % 5;
    for (size_t f = 0; f < fields; f++) {
        if (f)
            at = put(buf, at, cap, rnd() % 2 ? ", " : ",");
        static const char *const names[] = {"\"text\"", "\"id\"", "\"url\"", "\"te\\u0078t\"", "\"x\""};
        at = put(buf, at, cap, names[rnd() % 5]);
        at = put(buf, at, cap, rnd() % 2 ? ": " : ":");
        if (rnd() % 3)
            at = make_string(buf, at, cap);
        else
            at = put(buf, at, cap, VALUES[rnd() % NVALUES]);
    }
    return put(buf, at, cap, rnd() % 10 == 0 ? "} " : "}");
}

static size_t make_chunk(char *buf, size_t cap)
{
    size_t at = 0, lines = rnd() % 12;
    for (size_t i = 0; i < lines; i++) {
        at = make_line(buf, at, cap);
        if (i + 1 < lines || rnd() % 2)
            at = put(buf, at, cap, rnd() % 5 ? "\n" : "\r\n");
    }
    size_t mutations = rnd() % 4;
    for (size_t i = 0; i < mutations && at; i++)
        buf[rnd() % at] = (char)(rnd() % 256);
    if (at && rnd() % 5 == 0)
        at = rnd() % at;
    return at;
}

typedef struct {
    shc_doc_out out;
    void *blocks[16];
} outputs;

static void outputs_new(outputs *o, size_t capacity, size_t keys, size_t shorts, size_t nbytes)
{
    memset(o, 0, sizeof *o);
    o->out.capacity = capacity;
    size_t n = capacity ? capacity : 1;
    o->blocks[0] = o->out.kind = malloc(n);
    o->blocks[1] = o->out.start = malloc(n * 8);
    o->blocks[2] = o->out.end = malloc(n * 8);
    o->blocks[3] = o->out.has_id = malloc(n);
    o->blocks[4] = o->out.key_start = malloc(n * 8);
    o->blocks[5] = o->out.key_end = malloc(n * 8);
    o->blocks[6] = o->out.keys = malloc(keys ? keys : 1);
    o->out.keys_capacity = keys;
    o->blocks[7] = o->out.lengths = malloc(n * 8);
    o->blocks[8] = o->out.hashes = malloc(n * 16);
    o->blocks[9] = o->out.fingerprints = malloc(n * 8);
    o->blocks[10] = o->out.status = malloc(n);
    o->blocks[11] = o->out.sketches = malloc(n * nbytes);
    o->blocks[12] = o->out.short_start = malloc(n * 8);
    o->blocks[13] = o->out.short_end = malloc(n * 8);
    o->blocks[14] = o->out.shorts = malloc(shorts ? shorts : 1);
    o->out.shorts_capacity = shorts;
}

static void outputs_free(outputs *o)
{
    for (size_t i = 0; i < 16; i++)
        free(o->blocks[i]);
}

static void check_chunk(shc_docs *d, const char *data, size_t len, const shc_doc_rules *r, size_t nbytes)
{
    size_t newlines = 0;
    for (size_t i = 0; i < len; i++)
        newlines += data[i] == '\n';
    size_t lines_expected = newlines + (len && data[len - 1] != '\n');
    size_t capacity = newlines + 1;
    outputs a, b;
    outputs_new(&a, capacity, len + capacity, len + 16 * capacity + 1, nbytes);
    outputs_new(&b, capacity, len + capacity, len + 16 * capacity + 1, nbytes);
    size_t lines = 0, lines_b = 0;
    int rc = shc_docs_chunk(d, data, len, r, &a.out, &lines);
    CHECK(rc == 0, "chunk refused (%d)", rc);
    if (rc == 0) {
        CHECK(lines == lines_expected, "%zu lines, expected %zu", lines, lines_expected);
        size_t keys = 0, shorts = 0;
        for (size_t i = 0; i < lines; i++) {
            CHECK(a.out.start[i] == (i ? a.out.end[i - 1] : 0), "line %zu starts elsewhere", i);
            CHECK(a.out.end[i] > a.out.start[i] && (size_t)a.out.end[i] <= len, "line %zu ends elsewhere", i);
            CHECK(a.out.kind[i] <= SHC_LINE_PYTHON, "kind %d", a.out.kind[i]);
            if (a.out.kind[i] != SHC_LINE_RECORD)
                continue;
            CHECK((size_t)a.out.key_start[i] == keys && a.out.key_end[i] >= a.out.key_start[i], "key range");
            CHECK((size_t)a.out.short_start[i] == shorts && a.out.short_end[i] >= a.out.short_start[i], "short range");
            CHECK(a.out.keys[a.out.key_end[i]] == 0, "a key not ended by a NUL");
            keys = (size_t)a.out.key_end[i] + 1;
            shorts = (size_t)a.out.short_end[i];
            CHECK(a.out.lengths[i] <= a.out.end[i] - a.out.start[i], "length beyond the line");
            CHECK((a.out.status[i] & ~3u) == 0, "status %d", a.out.status[i]);
        }
        CHECK(keys <= len + lines, "keys beyond their buffer");
        rc = shc_docs_chunk(d, data, len, r, &b.out, &lines_b);
        CHECK(rc == 0 && lines_b == lines && !memcmp(a.out.kind, b.out.kind, lines), "not the same twice");
        for (size_t i = 0; rc == 0 && i < lines; i++) {
            if (a.out.kind[i] != SHC_LINE_RECORD)
                continue;
            CHECK(a.out.fingerprints[i] == b.out.fingerprints[i] && !memcmp(a.out.hashes + 16 * i, b.out.hashes + 16 * i, 16),
                  "a record differs the second time");
            CHECK(a.out.short_end[i] - a.out.short_start[i] == b.out.short_end[i] - b.out.short_start[i] &&
                      !memcmp(a.out.shorts + a.out.short_start[i], b.out.shorts + b.out.short_start[i],
                              (size_t)(a.out.short_end[i] - a.out.short_start[i])),
                  "a short text differs the second time");
        }
    }
    outputs_free(&a);
    outputs_free(&b);
    if (lines_expected > 0) { /* too few lines of room: refused, nothing written out of bounds (ASan) */
        outputs small;
        outputs_new(&small, lines_expected - 1, len + capacity, len + 16 * capacity + 1, nbytes);
        rc = shc_docs_chunk(d, data, len, r, &small.out, &lines);
        CHECK(rc == SHC_ERR_ARGUMENT, "a chunk of too many lines accepted (%d)", rc);
        outputs_free(&small);
    }
}

/* The exact check's sets of the chunk cut into pieces (its lines, or random cuts; each read as a line or as a text)
 * in a buffer of exactly the chunk's length: a status of the three, sets in order, each sorted with no value twice
 * and no longer than its text's bytes allow (n-grams of normalized characters: at most a few a byte); offsets out of
 * order or past the buffer refused; the same sets twice. */
static void check_sets(shc_docs *d, const char *data, size_t len, const shc_doc_rules *r)
{
    size_t n = 0, cap = len + 2;
    int64_t *offsets = malloc(sizeof(int64_t) * (cap + 1)), *ends = malloc(sizeof(int64_t) * cap);
    uint8_t *kinds = malloc(cap), *status = malloc(cap);
    offsets[0] = 0;
    int by_lines = rnd() % 2;
    for (size_t i = 0; i < len && n + 1 < cap; i++)
        if (by_lines ? data[i] == '\n' : rnd() % 64 == 0)
            offsets[++n] = (int64_t)i + 1;
    if ((size_t)offsets[n] < len || n == 0)
        offsets[++n] = (int64_t)len;
    for (size_t i = 0; i < n; i++)
        kinds[i] = rnd() % 3 ? SHC_SET_LINE : SHC_SET_TEXT;
    int rc = shc_docs_shingle_sets(d, data, len, offsets, kinds, n, r, 5, ends, status);
    CHECK(rc == 0, "sets refused (%d)", rc);
    if (rc == 0) {
        const uint64_t *sets = shc_docs_sets(d);
        int64_t at = 0;
        for (size_t i = 0; i < n; i++) {
            CHECK(status[i] <= SHC_SET_LONG, "set status %d", status[i]);
            CHECK(ends[i] >= at, "sets out of order");
            CHECK(status[i] == SHC_SET_MADE || ends[i] == at, "a set where none is made");
            CHECK(ends[i] - at <= 18 * (offsets[i + 1] - offsets[i]) + 1, "a set longer than its text allows");
            for (int64_t k = at + 1; k < ends[i]; k++)
                CHECK(sets[k - 1] < sets[k], "a set not sorted and distinct");
            at = ends[i];
        }
        /* the Jaccards of random pairs of these sets: within [0, 1], a set with itself 1; a set number past them,
         * or ends past the values, refused */
        size_t pairs = 1 + rnd() % 16;
        int64_t *left = malloc(sizeof(int64_t) * pairs), *right = malloc(sizeof(int64_t) * pairs);
        double *jac = malloc(sizeof(double) * pairs);
        for (size_t k = 0; k < pairs; k++)
            left[k] = (int64_t)(rnd() % n), right[k] = rnd() % 4 ? (int64_t)(rnd() % n) : left[k];
        rc = shc_docs_jaccards(sets, (size_t)at, ends, n, left, right, pairs, jac);
        CHECK(rc == 0, "jaccards refused (%d)", rc);
        for (size_t k = 0; rc == 0 && k < pairs; k++)
            CHECK(jac[k] >= 0.0 && jac[k] <= 1.0 && (left[k] != right[k] || jac[k] == 1.0), "a Jaccard of %g", jac[k]);
        right[0] = (int64_t)n;
        CHECK(shc_docs_jaccards(sets, (size_t)at, ends, n, left, right, pairs, jac) == SHC_ERR_ARGUMENT,
              "a set number past the sets accepted");
        right[0] = 0;
        if (at > 0)
            CHECK(shc_docs_jaccards(sets, (size_t)at - 1, ends, n, left, right, pairs, jac) == SHC_ERR_ARGUMENT,
                  "ends past the values accepted");
        free(left);
        free(right);
        free(jac);
        uint64_t *first = malloc(sizeof(uint64_t) * (size_t)(at ? at : 1));
        if (at)
            memcpy(first, sets, sizeof(uint64_t) * (size_t)at);
        int64_t *again = malloc(sizeof(int64_t) * cap);
        rc = shc_docs_shingle_sets(d, data, len, offsets, kinds, n, r, 5, again, status);
        CHECK(rc == 0 && !memcmp(again, ends, sizeof(int64_t) * n) &&
                  (at == 0 || !memcmp(first, shc_docs_sets(d), sizeof(uint64_t) * (size_t)at)),
              "sets differ the second time");
        /* the same texts with content hashes (shc_docs_checked_sets): a text given its own hash (a SET_TEXT's is
         * its bytes') keeps its status and set, any other made set is SHC_SET_CHANGED; no hashes is refused */
        uint8_t *digests = malloc(16 * n), *plain = malloc(n), *checked = malloc(n);
        int *own = malloc(sizeof(int) * n);
        memcpy(plain, status, n);
        for (size_t i = 0; i < n; i++) {
            own[i] = kinds[i] == SHC_SET_TEXT && rnd() % 2;
            if (own[i])
                shc_blake2b_128((const unsigned char *)data + offsets[i], (size_t)(offsets[i + 1] - offsets[i]),
                                digests + 16 * i);
            else
                for (int b = 0; b < 16; b++)
                    digests[16 * i + b] = (uint8_t)rnd();
        }
        rc = shc_docs_checked_sets(d, data, len, offsets, kinds, n, r, 5, digests, again, checked);
        CHECK(rc == 0, "checked sets refused (%d)", rc);
        for (size_t i = 0, from = 0; rc == 0 && i < n; from = (size_t)again[i], i++) {
            uint8_t want = plain[i] == SHC_SET_LONG || own[i] ? plain[i] : SHC_SET_CHANGED;
            CHECK(checked[i] == want || (plain[i] == SHC_SET_PYTHON && checked[i] <= SHC_SET_CHANGED &&
                                         checked[i] != SHC_SET_MADE && checked[i] != SHC_SET_LONG),
                  "checked status %d of %d (own hash %d)", checked[i], plain[i], own[i]);
            if (checked[i] == SHC_SET_MADE) {
                size_t was = i ? (size_t)ends[i - 1] : 0;
                CHECK(again[i] - (int64_t)from == ends[i] - (int64_t)was &&
                          !memcmp(shc_docs_sets(d) + from, first + was, sizeof(uint64_t) * (size_t)(ends[i] - (int64_t)was)),
                      "a checked set differs");
            } else {
                CHECK(again[i] == (int64_t)from, "a checked set where none is made");
            }
        }
        CHECK(shc_docs_checked_sets(d, data, len, offsets, kinds, n, r, 5, NULL, again, checked) == SHC_ERR_ARGUMENT,
              "checked sets without hashes accepted");
        free(digests);
        free(plain);
        free(checked);
        free(own);
        free(first);
        free(again);
    }
    if (n > 0) { /* an offset past the buffer, and offsets out of order: refused before anything is read */
        int64_t last = offsets[n];
        offsets[n] = (int64_t)len + 1;
        CHECK(shc_docs_shingle_sets(d, data, len, offsets, kinds, n, r, 5, ends, status) == SHC_ERR_ARGUMENT,
              "an offset past the buffer accepted");
        offsets[n] = last;
        if (n > 1 && offsets[1] > 0) {
            int64_t second = offsets[1];
            offsets[1] = offsets[0] - 1;
            CHECK(shc_docs_shingle_sets(d, data, len, offsets, kinds, n, r, 5, ends, status) == SHC_ERR_ARGUMENT,
                  "offsets out of order accepted");
            offsets[1] = second;
        }
    }
    free(offsets);
    free(ends);
    free(kinds);
    free(status);
}

/* A random run of n codes (exactly n values: a read past it is caught), sorted unless `shuffled`. */
static uint64_t *make_codes(size_t n, int shuffled)
{
    uint64_t *v = malloc(sizeof(uint64_t) * (n ? n : 1));
    for (size_t i = 0; i < n; i++)
        v[i] = rnd() % 3 ? (uint64_t)(rnd() % 8) << 61 | rnd() % 64 : rnd() | (uint64_t)rnd() << 32;
    if (!shuffled)
        for (size_t i = 1; i < n; i++) /* (insertion sort: n is small) */
            for (size_t j = i; j > 0 && v[j - 1] > v[j]; j--) {
                uint64_t t = v[j];
                v[j] = v[j - 1];
                v[j - 1] = t;
            }
    return v;
}

static int by_value(const void *x, const void *y)
{
    uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
    return (a > b) - (a < b);
}

static void check_codes(void)
{
    size_t na = rnd() % 40, nb = rnd() % 40;
    int shuffled = rnd() % 4 == 0;
    uint64_t *a = make_codes(na, shuffled), *b = make_codes(nb, shuffled), add = rnd() % 4 ? rnd() % 100 : rnd();
    uint64_t *out = malloc(sizeof(uint64_t) * (na + nb ? na + nb : 1));
    CHECK(shc_codes_merge(a, na, b, nb, add, out) == 0, "a merge refused");
    uint64_t *in_place = malloc(sizeof(uint64_t) * (na + nb ? na + nb : 1)); /* a at its start, merged where it is */
    if (na)
        memcpy(in_place, a, sizeof(uint64_t) * na);
    CHECK(shc_codes_merge(in_place, na, b, nb, add, in_place) == 0, "a merge in place refused");
    CHECK(!(na + nb) || !memcmp(in_place, out, sizeof(uint64_t) * (na + nb)), "a merge in place differs");
    free(in_place);
    if (!shuffled) { /* the merge is the sorted union, a's values and b's plus add */
        uint64_t *want = malloc(sizeof(uint64_t) * (na + nb ? na + nb : 1));
        for (size_t i = 0; i < na; i++)
            want[i] = a[i];
        for (size_t i = 0; i < nb; i++)
            want[na + i] = b[i] + add;
        qsort(want, na + nb, sizeof(uint64_t), by_value);
        int sorted_b = 1; /* (b + add is sorted unless the addition wrapped) */
        for (size_t i = 1; i < nb; i++)
            sorted_b &= b[i - 1] + add <= b[i] + add;
        CHECK(!sorted_b || !memcmp(out, want, sizeof(uint64_t) * (na + nb)), "a merge that is not the sorted union");
        free(want);
    }
    /* the pairs of a and b codes sharing their top bits: every one, in order, where both are sorted (a brute force);
     * some count within the na * nb pairs there can be where not; a room too small counts them all */
    int low_bits = rnd() % 4 ? 32 : (int)(rnd() % 64);
    uint64_t low = (UINT64_C(1) << low_bits) - 1;
    size_t room = rnd() % 4 ? na * nb : rnd() % (na * nb + 1), found = 0, expected = 0;
    int64_t *q = malloc(sizeof(int64_t) * (room ? room : 1)), *position = malloc(sizeof(int64_t) * (room ? room : 1));
    CHECK(shc_codes_find(a, na, b, nb, low_bits, q, position, room, &found) == 0, "a search refused");
    CHECK(found <= na * nb, "%zu pairs of %zu codes", found, na * nb);
    for (size_t i = 0; !shuffled && i < nb; i++)
        for (size_t j = 0; j < na; j++)
            if ((a[j] & ~low) == (b[i] & ~low)) {
                CHECK(expected >= room || (q[expected] == (int64_t)(b[i] & low) && position[expected] == (int64_t)(a[j] & low)),
                      "pair %zu is not the brute force's", expected);
                expected++;
            }
    CHECK(shuffled || found == expected, "%zu pairs found where the brute force finds %zu", found, expected);
    CHECK(shc_codes_find(a, na, b, nb, 64, q, position, room, &found) == SHC_ERR_ARGUMENT, "64 low bits accepted");
    free(q);
    free(position);
    size_t nbytes = 1 + rnd() % 64;
    int bits = 3 + (int)(rnd() % 61);
    uint8_t *seen = calloc(nbytes, 1), *before = malloc(nbytes);
    memcpy(before, seen, nbytes);
    int rc = shc_codes_mark(seen, nbytes, a, na, bits);
    int within = 1;
    for (size_t i = 0; i < na; i++)
        within &= (a[i] >> (63 - bits)) >> 3 < nbytes;
    CHECK(rc == (within ? 0 : SHC_ERR_ARGUMENT), "a bit map marked %d where its bits are %s", rc,
          within ? "within" : "past it");
    if (rc)
        CHECK(!memcmp(seen, before, nbytes), "a refused mark wrote");
    for (size_t i = 0; rc == 0 && i < na; i++) {
        uint64_t slot = a[i] >> (63 - bits);
        CHECK(seen[slot >> 3] >> (slot & 7) & 1, "a code's bit not set");
    }
    CHECK(shc_codes_mark(seen, nbytes, a, na, 2) == SHC_ERR_ARGUMENT, "bits 2 accepted");
    CHECK(shc_codes_mark(seen, nbytes, a, na, 64) == SHC_ERR_ARGUMENT, "bits 64 accepted");
    free(a);
    free(b);
    free(out);
    free(seen);
    free(before);
}

int main(int argc, char **argv)
{
    double seconds = argc > 1 ? atof(argv[1]) : 10.0;
    rng_state = argc > 2 ? strtoull(argv[2], NULL, 10) : DEFAULT_SEED;
    static const unsigned char empty_digest[16] = {0xca, 0xe6, 0x69, 0x41, 0xd9, 0xef, 0xbd, 0x40,
                                                   0x4e, 0x4d, 0x88, 0x75, 0x8e, 0xa6, 0x76, 0x70};
    unsigned char digest[16];
    shc_blake2b_128((const unsigned char *)"", 0, digest);
    CHECK(!memcmp(digest, empty_digest, 16), "BLAKE2b-128 of nothing");
    shc_docs *d = shc_docs_new();
    if (!d)
        return 2;
    shc_scheme scheme = {944, 1, 16};
    size_t nbytes = shc_sketch_bytes(&scheme);
    int zlib = shc_docs_zlib_version()[0] != 0;
    shc_doc_rules rules = {"text", 4, "id", 2, 1 << 20, 1 << 22, 0, 5, 0, 1, zlib, 352, 1024, 768, &scheme};
    shc_doc_out none;
    memset(&none, 0, sizeof none);
    size_t lines;
    CHECK(shc_docs_chunk(d, "x", 1, NULL, &none, &lines) == SHC_ERR_ARGUMENT, "no rules accepted");
    shc_doc_rules bad = rules;
    bad.ngram = 0;
    CHECK(shc_docs_chunk(d, "x", 1, &bad, &none, &lines) == SHC_ERR_ARGUMENT, "bad settings accepted");
    int64_t one[2] = {0, 1}, end;
    uint8_t kind = SHC_SET_LINE, made, odd = 7;
    CHECK(shc_docs_shingle_sets(d, "x", 1, one, &kind, 1, NULL, 5, &end, &made) == SHC_ERR_ARGUMENT, "no rules accepted");
    CHECK(shc_docs_shingle_sets(d, "x", 1, one, &kind, 1, &rules, 0, &end, &made) == SHC_ERR_ARGUMENT, "n-gram 0 accepted");
    CHECK(shc_docs_shingle_sets(d, "x", 1, one, &odd, 1, &rules, 5, &end, &made) == SHC_ERR_ARGUMENT, "kind 7 accepted");
    CHECK(shc_docs_shingle_sets(d, NULL, 0, NULL, NULL, 0, &rules, 5, &end, &made) == 0, "no texts refused");
    clock_t start = clock();
    long rounds = 0;
    size_t cap = 1 << 16;
    char *scratch = malloc(cap);
    while ((double)(clock() - start) / CLOCKS_PER_SEC < seconds) {
        size_t len = make_chunk(scratch, cap);
        char *data = malloc(len ? len : 1); /* exactly its length: a read past it is caught */
        memcpy(data, scratch, len);
        rules.require_id = (int32_t)(rnd() % 4 == 0);
        rules.max_record_bytes = rnd() % 4 == 0 ? (int64_t)(rnd() % 200) : 1 << 20;
        rules.whole_most = rnd() % 4 == 0 ? (int64_t)(rnd() % 100) : 1 << 22;
        rules.weights = (int32_t)(rnd() % 3);
        rules.scheme = rnd() % 4 == 0 ? NULL : &scheme;
        check_chunk(d, data, len, &rules, rules.scheme ? nbytes : 1);
        check_sets(d, data, len, &rules);
        check_codes();
        free(data);
        rounds++;
    }
    free(scratch);
    shc_docs_free(d);
    printf("%ld chunks, %ld failures, zlib %s\n", rounds, failures, zlib ? shc_docs_zlib_version() : "none");
    return failures ? 1 : 0;
}
