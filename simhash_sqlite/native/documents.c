/* documents.c: the whole per-document path of `simq add` in one call per chunk of JSONL lines (documents.h).
 *
 * A chunk's lines become finished rows: the text and id fields found and unescaped, UTF-8 checked, the content
 * hash (BLAKE2b-128, store/texts.content_hash_of_utf8), fingerprint and sketch (shc_text), the length in
 * characters and a short text's exact data (core/short_texts.py, format 1: zlib's raw deflate at level 9).
 * It only says yes where Python's json.loads and the Python path would give exactly these values: any line it
 * is not sure of (an escape in a field name, NaN, a number of more than 64 characters, nesting deeper than
 * 100, a lone surrogate, a text the core declines, anything that is not plain JSON) is marked for the Python
 * path, which reads it as it always has (pipeline/jsonl.py). Nothing here reads past the lengths it is given;
 * every allocation failure comes back as SHC_ERR_MEMORY (the caller then reads the chunk in Python).
 */
#include "documents.h"

#include <stdlib.h>
#include <string.h>

#include "utf8_step.h"

#ifdef SIMHASH_HAVE_ZLIB
#include <zlib.h>
#endif

#define MAX_DEPTH 100      /* deeper nesting: the Python path (json's RecursionError, or not) */
#define MAX_NUMBER 64      /* a longer number: the Python path (int's 4300-digit limit is its business) */

/* ---------------------------------------------------------------- BLAKE2b (RFC 7693), 16-byte digests */

static const uint64_t B2_IV[8] = {0x6A09E667F3BCC908ull, 0xBB67AE8584CAA73Bull, 0x3C6EF372FE94F82Bull,
                                  0xA54FF53A5F1D36F1ull, 0x510E527FADE682D1ull, 0x9B05688C2B3E6C1Full,
                                  0x1F83D9ABFB41BD6Bull, 0x5BE0CD19137E2179ull};
static const uint8_t B2_SIGMA[12][16] = {
    {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}, {14, 10, 4, 8, 9, 15, 13, 6, 1, 12, 0, 2, 11, 7, 5, 3},
    {11, 8, 12, 0, 5, 2, 15, 13, 10, 14, 3, 6, 7, 1, 9, 4}, {7, 9, 3, 1, 13, 12, 11, 14, 2, 6, 5, 10, 4, 0, 15, 8},
    {9, 0, 5, 7, 2, 4, 10, 15, 14, 1, 11, 12, 6, 8, 3, 13}, {2, 12, 6, 10, 0, 11, 8, 3, 4, 13, 7, 5, 15, 14, 1, 9},
    {12, 5, 1, 15, 14, 13, 4, 10, 0, 7, 6, 3, 9, 2, 8, 11}, {13, 11, 7, 14, 12, 1, 3, 9, 5, 0, 15, 4, 8, 6, 2, 10},
    {6, 15, 14, 9, 11, 3, 0, 8, 12, 2, 13, 7, 1, 4, 10, 5}, {10, 2, 8, 4, 7, 6, 1, 5, 15, 11, 9, 14, 3, 12, 13, 0},
    {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}, {14, 10, 4, 8, 9, 15, 13, 6, 1, 12, 0, 2, 11, 7, 5, 3},
};

static inline uint64_t rotr64(uint64_t x, unsigned n) { return (x >> n) | (x << (64 - n)); }

static inline uint64_t load_le64(const unsigned char *p)
{
    uint64_t x = 0;
    for (int i = 7; i >= 0; i--)
        x = (x << 8) | p[i];
    return x;
}

#define B2_G(a, b, c, d, x, y)                                                                                       \
    do {                                                                                                             \
        v[a] = v[a] + v[b] + (x);                                                                                    \
        v[d] = rotr64(v[d] ^ v[a], 32);                                                                              \
        v[c] = v[c] + v[d];                                                                                          \
        v[b] = rotr64(v[b] ^ v[c], 24);                                                                              \
        v[a] = v[a] + v[b] + (y);                                                                                    \
        v[d] = rotr64(v[d] ^ v[a], 16);                                                                              \
        v[c] = v[c] + v[d];                                                                                          \
        v[b] = rotr64(v[b] ^ v[c], 63);                                                                              \
    } while (0)

static void b2_compress(uint64_t h[8], const unsigned char block[128], uint64_t counted, int last)
{
    uint64_t m[16], v[16];
    for (int i = 0; i < 16; i++)
        m[i] = load_le64(block + 8 * i);
    for (int i = 0; i < 8; i++) {
        v[i] = h[i];
        v[i + 8] = B2_IV[i];
    }
    v[12] ^= counted; /* the high word of the counter stays 0: texts are far below 2^64 bytes */
    if (last)
        v[14] = ~v[14];
    /* The 12 rounds written out, so that each message word's index is a constant (in a loop, read from
     * B2_SIGMA at each step: the message words stayed in memory, a third more instructions a block). */
#define B2_ROUND(r)                                                                                                  \
    do {                                                                                                             \
        B2_G(0, 4, 8, 12, m[B2_SIGMA[r][0]], m[B2_SIGMA[r][1]]);                                                     \
        B2_G(1, 5, 9, 13, m[B2_SIGMA[r][2]], m[B2_SIGMA[r][3]]);                                                     \
        B2_G(2, 6, 10, 14, m[B2_SIGMA[r][4]], m[B2_SIGMA[r][5]]);                                                    \
        B2_G(3, 7, 11, 15, m[B2_SIGMA[r][6]], m[B2_SIGMA[r][7]]);                                                    \
        B2_G(0, 5, 10, 15, m[B2_SIGMA[r][8]], m[B2_SIGMA[r][9]]);                                                    \
        B2_G(1, 6, 11, 12, m[B2_SIGMA[r][10]], m[B2_SIGMA[r][11]]);                                                  \
        B2_G(2, 7, 8, 13, m[B2_SIGMA[r][12]], m[B2_SIGMA[r][13]]);                                                   \
        B2_G(3, 4, 9, 14, m[B2_SIGMA[r][14]], m[B2_SIGMA[r][15]]);                                                   \
    } while (0)
    B2_ROUND(0);
    B2_ROUND(1);
    B2_ROUND(2);
    B2_ROUND(3);
    B2_ROUND(4);
    B2_ROUND(5);
    B2_ROUND(6);
    B2_ROUND(7);
    B2_ROUND(8);
    B2_ROUND(9);
    B2_ROUND(10);
    B2_ROUND(11);
#undef B2_ROUND
    for (int i = 0; i < 8; i++)
        h[i] ^= v[i] ^ v[i + 8];
}

void shc_blake2b_128(const unsigned char *data, size_t len, unsigned char out[16])
{
    uint64_t h[8];
    memcpy(h, B2_IV, sizeof h);
    h[0] ^= 0x01010000ull ^ 16u; /* no key, 16-byte digest */
    size_t done = 0;
    while (len - done > 128) {
        b2_compress(h, data + done, (uint64_t)(done + 128), 0);
        done += 128;
    }
    unsigned char last[128] = {0};
    if (len > done)
        memcpy(last, data + done, len - done);
    b2_compress(h, last, (uint64_t)len, 1);
    for (int i = 0; i < 16; i++)
        out[i] = (unsigned char)(h[i / 8] >> (8 * (i % 8)));
}

/* ---------------------------------------------------------------- whitespace (str.isspace) */

int shc_is_space(uint32_t cp)
{
    if (cp < 0x80)
        return (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x20);
    return cp == 0x85 || cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 ||
           cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

/* ---------------------------------------------------------------- the state of one thread */

struct shc_docs {
    shc_work *work;
    unsigned char *text; /* the unescaped text of the line at hand */
    size_t text_cap;
    unsigned char *plain; /* a short text folded (UTF-8), then its UTF-16-LE */
    size_t plain_cap;
    unsigned char *wide;
    size_t wide_cap;
    unsigned char *packed; /* a short text's stored form, before it is known to fit */
    size_t packed_cap;
    unsigned char *key; /* shc_docs_shingle_sets: the id of the line at hand (not kept) */
    size_t key_cap;
    uint64_t *sets; /* shc_docs_shingle_sets: the sets of its last call, end to end */
    size_t sets_cap; /* (values) */
#ifdef SIMHASH_HAVE_ZLIB
    z_stream zs; /* one raw deflate stream at level 9, reset for each text */
    int zs_ready;
#endif
};

static int grow(unsigned char **p, size_t *cap, size_t need)
{
    if (need <= *cap)
        return 0;
    size_t size = need < 4096 ? 4096 : need + need / 2;
    unsigned char *q = realloc(*p, size);
    if (!q)
        return SHC_ERR_MEMORY;
    *p = q;
    *cap = size;
    return 0;
}

shc_docs *shc_docs_new(void)
{
    shc_docs *d = calloc(1, sizeof *d);
    if (!d)
        return NULL;
    d->work = shc_work_new();
    if (!d->work) {
        free(d);
        return NULL;
    }
#ifdef SIMHASH_HAVE_ZLIB
    if (deflateInit2(&d->zs, 9, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
        shc_work_free(d->work);
        free(d);
        return NULL;
    }
    d->zs_ready = 1;
#endif
    return d;
}

void shc_docs_free(shc_docs *d)
{
    if (!d)
        return;
#ifdef SIMHASH_HAVE_ZLIB
    if (d->zs_ready)
        deflateEnd(&d->zs);
#endif
    shc_work_free(d->work);
    free(d->text);
    free(d->plain);
    free(d->wide);
    free(d->packed);
    free(d->key);
    free(d->sets);
    free(d);
}

const char *shc_docs_zlib_version(void)
{
#ifdef SIMHASH_HAVE_ZLIB
    return zlibVersion();
#else
    return "";
#endif
}

/* ---------------------------------------------------------------- JSON, as json.loads reads it */

typedef struct {
    const unsigned char *s;
    size_t n;
    size_t i;
} scan;

static inline void skip_ws(scan *c)
{
    while (c->i < c->n && (c->s[c->i] == ' ' || c->s[c->i] == '\t' || c->s[c->i] == '\n' || c->s[c->i] == '\r'))
        c->i++;
}

static inline int hex4(const unsigned char *p, uint32_t *out)
{
    uint32_t v = 0;
    for (int k = 0; k < 4; k++) {
        unsigned ch = p[k], d;
        if (ch >= '0' && ch <= '9')
            d = ch - '0';
        else if (ch >= 'a' && ch <= 'f')
            d = ch - 'a' + 10;
        else if (ch >= 'A' && ch <= 'F')
            d = ch - 'A' + 10;
        else
            return -1;
        v = (v << 4) | d;
    }
    *out = v;
    return 0;
}

static inline size_t put_utf8(unsigned char *o, uint32_t cp)
{
    if (cp < 0x80) {
        o[0] = (unsigned char)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (unsigned char)(0xC0 | (cp >> 6));
        o[1] = (unsigned char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (unsigned char)(0xE0 | (cp >> 12));
        o[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (unsigned char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (unsigned char)(0xF0 | (cp >> 18));
    o[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
    o[3] = (unsigned char)(0x80 | (cp & 0x3F));
    return 4;
}

/* A JSON string at c->s[c->i] == '"', c->i moved past its closing quote. out (NULL: only checked) gets its
 * UTF-8, at most as many bytes as the string's source (every escape is at least as long as what it
 * writes); *written how many, *escaped whether it had an escape, *nul whether it holds U+0000. -1 where
 * json.loads would refuse it or it holds a lone surrogate (the Python path says which). */
static int scan_string(scan *c, unsigned char *out, size_t *written, int *escaped, int *nul)
{
    const unsigned char *s = c->s;
    size_t n = c->n, i = c->i + 1, w = 0;
    *escaped = 0;
    *nul = 0;
    for (;;) {
        /* a run of bytes that stand for themselves (ASCII and valid UTF-8 sequences), copied at once at its
         * end: a copy for each multibyte character was a tenth of the scan of a Chinese page */
        size_t run = i;
        for (;;) {
            while (i < n && s[i] >= 0x20 && s[i] < 0x80 && s[i] != '"' && s[i] != '\\')
                i++;
            if (i >= n || s[i] < 0x80)
                break;
            if (utf8_step(s, n, &i) < 0)
                return -1;
        }
        if (out && i > run)
            memcpy(out + w, s + run, i - run);
        w += i - run;
        if (i >= n)
            return -1;
        unsigned ch = s[i];
        if (ch == '"') {
            c->i = i + 1;
            *written = w;
            return 0;
        }
        if (ch < 0x20)
            return -1; /* a control character: json's strict mode refuses it */
        /* a backslash */
        *escaped = 1;
        if (i + 1 >= n)
            return -1;
        unsigned e = s[i + 1];
        uint32_t cp;
        switch (e) {
        case '"': cp = '"'; break;
        case '\\': cp = '\\'; break;
        case '/': cp = '/'; break;
        case 'b': cp = '\b'; break;
        case 'f': cp = '\f'; break;
        case 'n': cp = '\n'; break;
        case 'r': cp = '\r'; break;
        case 't': cp = '\t'; break;
        case 'u':
            if (n - i < 6 || hex4(s + i + 2, &cp))
                return -1;
            if (cp >= 0xD800 && cp <= 0xDBFF) {
                uint32_t low;
                if (n - i < 12 || s[i + 6] != '\\' || s[i + 7] != 'u' || hex4(s + i + 8, &low) || low < 0xDC00 ||
                    low > 0xDFFF)
                    return -1; /* a lone high surrogate */
                cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
                i += 6;
            } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
                return -1; /* a lone low surrogate */
            }
            i += 4;
            break;
        default:
            return -1;
        }
        i += 2;
        if (cp == 0)
            *nul = 1;
        if (out)
            w += put_utf8(out + w, cp);
        else
            w += cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
    }
}

/* A JSON number as json's scanner matches it: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][-+]?[0-9]+)?. *integer: no
 * fraction or exponent. -1 where it does not match (or is longer than MAX_NUMBER). */
static int scan_number(scan *c, int *integer)
{
    const unsigned char *s = c->s;
    size_t n = c->n, i = c->i, start = i;
    if (i < n && s[i] == '-')
        i++;
    if (i >= n || s[i] < '0' || s[i] > '9')
        return -1; /* -Infinity, or not a number */
    if (s[i] == '0')
        i++;
    else
        while (i < n && s[i] >= '0' && s[i] <= '9')
            i++;
    *integer = 1;
    if (i < n && s[i] == '.') {
        if (i + 1 >= n || s[i + 1] < '0' || s[i + 1] > '9')
            return -1;
        i++;
        while (i < n && s[i] >= '0' && s[i] <= '9')
            i++;
        *integer = 0;
    }
    if (i < n && (s[i] == 'e' || s[i] == 'E')) {
        size_t j = i + 1;
        if (j < n && (s[j] == '+' || s[j] == '-'))
            j++;
        if (j >= n || s[j] < '0' || s[j] > '9')
            return -1;
        while (j < n && s[j] >= '0' && s[j] <= '9')
            j++;
        i = j;
        *integer = 0;
    }
    if (i - start > MAX_NUMBER)
        return -1;
    c->i = i;
    return 0;
}

static int skip_value(scan *c, int depth);

static int skip_container(scan *c, int depth, unsigned close)
{
    if (depth >= MAX_DEPTH)
        return -1;
    c->i++;
    skip_ws(c);
    if (c->i < c->n && c->s[c->i] == close) {
        c->i++;
        return 0;
    }
    for (;;) {
        if (close == '}') {
            size_t w;
            int escaped, nul;
            if (c->i >= c->n || c->s[c->i] != '"' || scan_string(c, NULL, &w, &escaped, &nul))
                return -1;
            skip_ws(c);
            if (c->i >= c->n || c->s[c->i] != ':')
                return -1;
            c->i++;
            skip_ws(c);
        }
        if (skip_value(c, depth + 1))
            return -1;
        skip_ws(c);
        if (c->i >= c->n)
            return -1;
        if (c->s[c->i] == close) {
            c->i++;
            return 0;
        }
        if (c->s[c->i] != ',')
            return -1;
        c->i++;
        skip_ws(c);
    }
}

static int literal(scan *c, const char *word, size_t len)
{
    if (c->n - c->i < len || memcmp(c->s + c->i, word, len))
        return -1;
    c->i += len;
    return 0;
}

static int skip_value(scan *c, int depth)
{
    if (c->i >= c->n)
        return -1;
    size_t w;
    int a, b;
    switch (c->s[c->i]) {
    case '"': return scan_string(c, NULL, &w, &a, &b);
    case '{': return skip_container(c, depth, '}');
    case '[': return skip_container(c, depth, ']');
    case 't': return literal(c, "true", 4);
    case 'f': return literal(c, "false", 5);
    case 'n': return literal(c, "null", 4);
    default: return scan_number(c, &a); /* NaN and Infinity too: -1, the Python path */
    }
}

/* ---------------------------------------------------------------- one record */

enum { FIELD_NONE, FIELD_TEXT, FIELD_ID };

/* The line's record: its text unescaped into d->text (*text_len bytes), its id into key (*key_len; *has_id 0
 * where it has none). -1: the Python path reads the line. */
static int parse_record(shc_docs *d, const unsigned char *s, size_t n, const shc_doc_rules *r, unsigned char *key,
                        size_t *key_len, int *has_id, size_t *text_len)
{
    scan c = {s, n, 0};
    int has_text = 0;
    *has_id = 0;
    skip_ws(&c);
    if (c.i >= n || s[c.i] != '{')
        return -1;
    c.i++;
    skip_ws(&c);
    if (c.i < n && s[c.i] == '}')
        return -1; /* no text field: the Python path names the fields */
    for (;;) {
        if (c.i >= n || s[c.i] != '"')
            return -1;
        size_t name_start = c.i + 1, w;
        int escaped, nul;
        if (scan_string(&c, NULL, &w, &escaped, &nul) || escaped)
            return -1; /* an escaped field name might spell a field: the Python path compares it */
        size_t name_len = c.i - 1 - name_start;
        int field = FIELD_NONE;
        if (name_len == (size_t)r->text_field_len && !memcmp(s + name_start, r->text_field, name_len))
            field = FIELD_TEXT;
        else if (name_len == (size_t)r->id_field_len && !memcmp(s + name_start, r->id_field, name_len))
            field = FIELD_ID;
        skip_ws(&c);
        if (c.i >= n || s[c.i] != ':')
            return -1;
        c.i++;
        skip_ws(&c);
        if (c.i >= n)
            return -1;
        if (field == FIELD_TEXT) {
            if (has_text || s[c.i] != '"')
                return -1; /* twice (the last would win) or not a string: the Python path */
            if (scan_string(&c, d->text, text_len, &escaped, &nul))
                return -1;
            has_text = 1;
        } else if (field == FIELD_ID) {
            if (*has_id)
                return -1;
            if (s[c.i] == '"') {
                if (scan_string(&c, key, key_len, &escaped, &nul) || nul)
                    return -1; /* NUL in an id: the Python path's message */
            } else {
                size_t start = c.i;
                int integer;
                if (scan_number(&c, &integer) || !integer)
                    return -1; /* null, a float, a bool, ...: the Python path */
                size_t len = c.i - start;
                if (len == 2 && s[start] == '-' && s[start + 1] == '0')
                    return -1; /* str(int("-0")) is "0" */
                memcpy(key, s + start, len);
                *key_len = len;
            }
            *has_id = 1;
        } else if (skip_value(&c, 1)) {
            return -1;
        }
        skip_ws(&c);
        if (c.i >= n)
            return -1;
        if (s[c.i] == '}') {
            c.i++;
            break;
        }
        if (s[c.i] != ',')
            return -1;
        c.i++;
        skip_ws(&c);
    }
    skip_ws(&c);
    if (c.i != n || !has_text)
        return -1;
    if (!*has_id && r->require_id)
        return -1;
    return 0;
}

/* core/short_texts.short_text_data of a text of `chars` characters: into out (limit + 1 bytes of room);
 * returns its length, 0 for None, or SHC_ERR_MEMORY. */
static long short_text(shc_docs *d, const unsigned char *text, size_t len, const shc_doc_rules *r, uint8_t *out)
{
#ifdef SIMHASH_HAVE_ZLIB
    if (grow(&d->plain, &d->plain_cap, len + 1))
        return SHC_ERR_MEMORY;
    /* fold_space: " ".join(text.split()) */
    size_t w = 0, chars = 0, astral = 0, i = 0;
    int pending = 0;
    while (i < len) {
        unsigned ch = text[i];
        if (ch < 0x80) { /* (most characters of an English page: no decoding, no call) */
            i++;
            if ((ch >= 0x09 && ch <= 0x0D) || (ch >= 0x1C && ch <= 0x20)) {
                pending = w > 0;
                continue;
            }
            if (pending) {
                d->plain[w++] = ' ';
                chars++;
                pending = 0;
            }
            d->plain[w++] = (unsigned char)ch;
            chars++;
            continue;
        }
        size_t at = i;
        int32_t cp = utf8_step(text, len, &i);
        if (cp < 0)
            return 0; /* cannot happen: the text was checked */
        if (shc_is_space((uint32_t)cp)) {
            pending = w > 0;
            continue;
        }
        if (pending) {
            d->plain[w++] = ' ';
            chars++;
            pending = 0;
        }
        memcpy(d->plain + w, text + at, i - at);
        w += i - at;
        chars++;
        astral += cp >= 0x10000;
    }
    if (w == 0 || w > (size_t)r->short_most)
        return 0;
    const unsigned char *plain = d->plain;
    size_t plain_len = w;
    uint8_t form = 0;
    if (w > 2 * chars) { /* mostly 3-byte characters: UTF-16-LE */
        form = 1;
        plain_len = 2 * (chars + astral);
        if (plain_len > (size_t)r->deflated_most)
            return 0;
        if (grow(&d->wide, &d->wide_cap, plain_len))
            return SHC_ERR_MEMORY;
        size_t k = 0, o = 0;
        while (k < w) {
            uint32_t cp = (uint32_t)utf8_step(d->plain, w, &k);
            if (cp >= 0x10000) {
                uint32_t v = cp - 0x10000, hi = 0xD800 + (v >> 10), lo = 0xDC00 + (v & 0x3FF);
                d->wide[o++] = (unsigned char)hi;
                d->wide[o++] = (unsigned char)(hi >> 8);
                d->wide[o++] = (unsigned char)lo;
                d->wide[o++] = (unsigned char)(lo >> 8);
            } else {
                d->wide[o++] = (unsigned char)cp;
                d->wide[o++] = (unsigned char)(cp >> 8);
            }
        }
        plain = d->wide;
    } else if (plain_len > (size_t)r->deflated_most) {
        return 0;
    }
    /* As zlib.compressobj(9, DEFLATED, -15): compress() (Z_NO_FLUSH) then flush() (Z_FINISH). The output
     * room ends at the limit, yet that saves no work: a text this short is one block, which zlib writes only at
     * Z_FINISH, after all its matching. Nor does the length bound the deflated size (a run deflates about
     * 1000:1): of a scaleset crawl's texts tried, the 31% too long to keep took 47% of deflate's time, and no
     * cheap test proves one too long before deflate has run (BENCHMARKS.md, "Where add's CPU goes"). */
    if (deflateReset(&d->zs) != Z_OK)
        return SHC_ERR_MEMORY;
    out[0] = form;
    d->zs.next_in = (Bytef *)plain;
    d->zs.avail_in = (uInt)plain_len;
    d->zs.next_out = out + 1;
    d->zs.avail_out = (uInt)r->short_limit; /* one byte more than may be kept: longer is None */
    int z = deflate(&d->zs, Z_NO_FLUSH);
    if (z != Z_OK && z != Z_BUF_ERROR)
        return SHC_ERR_MEMORY;
    if (d->zs.avail_out == 0)
        return 0;
    z = deflate(&d->zs, Z_FINISH);
    if (z != Z_STREAM_END)
        return z == Z_OK || z == Z_BUF_ERROR ? 0 : SHC_ERR_MEMORY; /* out of room: longer than the limit */
    size_t total = 1 + (size_t)r->short_limit - d->zs.avail_out;
    return total <= (size_t)r->short_limit ? (long)total : 0;
#else
    (void)d, (void)text, (void)len, (void)r, (void)out;
    return 0;
#endif
}

static int is_blank(const unsigned char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        unsigned ch = s[i];
        if (!(ch == ' ' || (ch >= '\t' && ch <= '\r')))
            return 0;
    }
    return 1;
}

size_t shc_docs_lines(const char *data, size_t len)
{
    size_t lines = 0;
    const char *p = data, *end = data + len;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        lines++;
        if (!nl)
            break;
        p = nl + 1;
    }
    return lines;
}

int shc_docs_chunk(shc_docs *d, const char *data, size_t len, const shc_doc_rules *r, shc_doc_out *o, size_t *lines)
{
    *lines = 0;
    if (!d || !r || !o || (len && !data) || !r->text_field || !r->id_field || r->text_field_len < 0 ||
        r->id_field_len < 0)
        return SHC_ERR_ARGUMENT;
    size_t nbytes = 0;
    if (r->scheme) {
        nbytes = shc_sketch_bytes(r->scheme);
        if (!nbytes)
            return SHC_ERR_ARGUMENT;
    }
    if (shc_check_settings(r->ngram, r->weights))
        return SHC_ERR_ARGUMENT;
#ifndef SIMHASH_HAVE_ZLIB
    if (r->short_texts)
        return SHC_ERR_ARGUMENT;
#endif
    if (r->short_texts && (r->short_limit < 1 || r->short_most < 1 || r->deflated_most < 1))
        return SHC_ERR_ARGUMENT;
    const unsigned char *s = (const unsigned char *)data;
    size_t position = 0, line = 0, keys_used = 0, shorts_used = 0;
    while (position < len) {
        if (line >= o->capacity)
            return SHC_ERR_ARGUMENT;
        const unsigned char *nl = memchr(s + position, '\n', len - position);
        size_t end = nl ? (size_t)(nl - s) + 1 : len;
        size_t body = end - position - (nl != NULL); /* without its newline */
        o->start[line] = (int64_t)position;
        o->end[line] = (int64_t)end;
        o->kind[line] = SHC_LINE_PYTHON;
        const unsigned char *p = s + position;
        if ((int64_t)body > r->max_record_bytes) {
            /* overlong: the Python path says so */
        } else if (is_blank(p, end - position)) {
            o->kind[line] = SHC_LINE_BLANK;
        } else if (!grow(&d->text, &d->text_cap, body + 1) && keys_used + body + 1 <= o->keys_capacity) {
            size_t key_len = 0, text_len = 0;
            int has_id;
            if (!parse_record(d, p, end - position, r, (unsigned char *)o->keys + keys_used, &key_len, &has_id,
                              &text_len)) {
                size_t chars = 0;
                for (size_t k = 0; k < text_len; k++)
                    chars += (d->text[k] & 0xC0) != 0x80;
                uint8_t status = 0;
                uint8_t *sketch = r->scheme ? o->sketches + line * nbytes : NULL;
                if ((int64_t)chars <= r->whole_most &&
                    shc_text(d->work, (const char *)d->text, text_len, r->ngram, r->weights, r->scheme,
                             &o->fingerprints[line], sketch, &status) == 0 &&
                    !(status & SHC_DECLINED)) {
                    long short_len = 0;
                    if (r->short_texts && (status & SHC_HAS_FINGERPRINT) && chars <= (size_t)r->short_most) {
                        if (grow(&d->packed, &d->packed_cap, (size_t)r->short_limit + 1))
                            return SHC_ERR_MEMORY;
                        short_len = short_text(d, d->text, text_len, r, d->packed);
                        if (short_len < 0)
                            return (int)short_len;
                        if (shorts_used + (size_t)short_len > o->shorts_capacity)
                            return SHC_ERR_ARGUMENT;
                        memcpy(o->shorts + shorts_used, d->packed, (size_t)short_len);
                    }
                    if (r->content_hashes)
                        shc_blake2b_128(d->text, text_len, o->hashes + 16 * line);
                    o->kind[line] = SHC_LINE_RECORD;
                    o->status[line] = status;
                    o->has_id[line] = (uint8_t)has_id;
                    o->key_start[line] = (int64_t)keys_used;
                    o->key_end[line] = (int64_t)(keys_used + key_len);
                    o->keys[keys_used + key_len] = '\0'; /* keys end to end, each ended by a NUL (none holds one) */
                    o->lengths[line] = (int64_t)chars;
                    o->short_start[line] = (int64_t)shorts_used;
                    o->short_end[line] = (int64_t)(shorts_used + (size_t)short_len);
                    keys_used += key_len + 1;
                    shorts_used += (size_t)short_len;
                }
            }
        } else if (d->text_cap < body + 1) {
            return SHC_ERR_MEMORY;
        }
        position = end;
        line++;
    }
    *lines = line;
    return 0;
}

/* ---------------------------------------------------------------- the exact check's shingle sets */

static int shingle_sets(shc_docs *d, const char *buf, size_t len, const int64_t *offsets, const uint8_t *kinds,
                        size_t n, const shc_doc_rules *r, int32_t ngram, const uint8_t *digests, int64_t *ends,
                        uint8_t *status)
{
    if (!d || !r || !ends || !status || (n && (!offsets || !kinds)) || (len && !buf) || ngram < 1 ||
        !r->text_field || !r->id_field || r->text_field_len < 0 || r->id_field_len < 0 || r->whole_most < 0)
        return SHC_ERR_ARGUMENT;
    for (size_t i = 0; i < n; i++) /* every text within buf, in order: checked before anything is read */
        if (offsets[i] < 0 || offsets[i + 1] < offsets[i] || (uint64_t)offsets[i + 1] > (uint64_t)len)
            return SHC_ERR_ARGUMENT;
    const unsigned char *s = (const unsigned char *)buf;
    size_t used = 0;
    for (size_t i = 0; i < n; i++) {
        const unsigned char *p = s + offsets[i], *text = p;
        size_t size = (size_t)(offsets[i + 1] - offsets[i]), text_len = size;
        status[i] = SHC_SET_PYTHON;
        ends[i] = (int64_t)used;
        if (kinds[i] == SHC_SET_LINE) {
            size_t body = size - (size && p[size - 1] == '\n');
            if ((int64_t)body > r->max_record_bytes)
                continue;
            if (grow(&d->text, &d->text_cap, size + 1) || grow(&d->key, &d->key_cap, size + 1))
                return SHC_ERR_MEMORY;
            size_t key_len = 0;
            int has_id;
            if (parse_record(d, p, size, r, d->key, &key_len, &has_id, &text_len))
                continue; /* not sure: the Python path reads the line */
            text = d->text;
        } else if (kinds[i] != SHC_SET_TEXT) {
            return SHC_ERR_ARGUMENT;
        }
        size_t chars = 0;
        for (size_t k = 0; k < text_len; k++)
            chars += (text[k] & 0xC0) != 0x80;
        if ((int64_t)chars > r->whole_most) { /* (characters: the UTF-8's lead bytes) */
            status[i] = SHC_SET_LONG;
            continue;
        }
        if (digests) { /* (the text is valid UTF-8 here: a lone surrogate's escape left the line to Python) */
            unsigned char digest[16];
            shc_blake2b_128(text, text_len, digest);
            if (memcmp(digest, digests + 16 * i, 16)) {
                status[i] = SHC_SET_CHANGED;
                continue;
            }
        }
        const uint32_t *units;
        size_t count;
        uint8_t why;
        if (shc_normalize(d->work, (const char *)text, text_len, &units, &count, &why))
            return SHC_ERR_ARGUMENT;
        if (why)
            continue; /* invalid UTF-8, a surrogate, memory: the Python path */
        if (count) {
            if (count > ((size_t)-1) / sizeof(uint64_t) - used)
                return SHC_ERR_MEMORY;
            size_t need = used + count;
            if (need > d->sets_cap) {
                size_t cap = need < 4096 ? 4096 : need + need / 2;
                if (cap > ((size_t)-1) / sizeof(uint64_t))
                    cap = need;
                uint64_t *q = realloc(d->sets, cap * sizeof(uint64_t));
                if (!q)
                    return SHC_ERR_MEMORY;
                d->sets = q;
                d->sets_cap = cap;
            }
            used += shc_shingle_set(units, count, ngram, d->sets + used);
        }
        status[i] = SHC_SET_MADE;
        ends[i] = (int64_t)used;
    }
    return 0;
}

int shc_docs_shingle_sets(shc_docs *d, const char *buf, size_t len, const int64_t *offsets, const uint8_t *kinds,
                          size_t n, const shc_doc_rules *r, int32_t ngram, int64_t *ends, uint8_t *status)
{
    return shingle_sets(d, buf, len, offsets, kinds, n, r, ngram, NULL, ends, status);
}

int shc_docs_checked_sets(shc_docs *d, const char *buf, size_t len, const int64_t *offsets, const uint8_t *kinds,
                          size_t n, const shc_doc_rules *r, int32_t ngram, const uint8_t *digests, int64_t *ends,
                          uint8_t *status)
{
    if (n && !digests)
        return SHC_ERR_ARGUMENT;
    return shingle_sets(d, buf, len, offsets, kinds, n, r, ngram, digests, ends, status);
}

const uint64_t *shc_docs_sets(const shc_docs *d) { return d ? d->sets : NULL; }

int shc_docs_jaccards(const uint64_t *sets, size_t len, const int64_t *ends, size_t nsets, const int64_t *a,
                      const int64_t *b, size_t n, double *out)
{
    if ((len && !sets) || (nsets && !ends) || (n && (!a || !b || !out)))
        return SHC_ERR_ARGUMENT;
    for (size_t k = 0; k < nsets; k++) /* every set within the values, in order: checked before anything is read */
        if (ends[k] < (k ? ends[k - 1] : 0) || (uint64_t)ends[k] > (uint64_t)len)
            return SHC_ERR_ARGUMENT;
    for (size_t i = 0; i < n; i++)
        if (a[i] < 0 || b[i] < 0 || (uint64_t)a[i] >= (uint64_t)nsets || (uint64_t)b[i] >= (uint64_t)nsets)
            return SHC_ERR_ARGUMENT;
    for (size_t i = 0; i < n; i++) {
        const uint64_t *x = sets + (a[i] ? ends[a[i] - 1] : 0), *y = sets + (b[i] ? ends[b[i] - 1] : 0);
        size_t nx = (size_t)(sets + ends[a[i]] - x), ny = (size_t)(sets + ends[b[i]] - y);
        if (!nx && !ny) {
            out[i] = 1.0;
            continue;
        }
        size_t p = 0, q = 0, shared = 0;
        while (p < nx && q < ny) {
            uint64_t u = x[p], v = y[q];
            shared += u == v;
            p += u <= v;
            q += v <= u;
        }
        out[i] = (double)shared / (double)(nx + ny - shared); /* (exact integers: Python's int / int) */
    }
    return 0;
}

/* -- dedup's kept sketches: runs of sorted window codes ------------------------------------------------------ */

int shc_codes_merge(const uint64_t *a, size_t na, const uint64_t *b, size_t nb, uint64_t add, uint64_t *out)
{
    if ((na && !a) || (nb && !b) || ((na || nb) && !out))
        return SHC_ERR_ARGUMENT;
    /* From the back: out may be a itself, whose values then move only up to where the merge has written. */
    size_t i = na, j = nb, k = na + nb;
    while (j > 0) {
        uint64_t y = b[j - 1] + add;
        if (i > 0 && a[i - 1] > y)
            out[--k] = a[--i];
        else
            out[--k] = y, j--; /* (b's after a's where equal) */
    }
    if (out != a)
        while (i > 0)
            out[--k] = a[--i];
    return 0;
}

/* The run is searched for CODES_AT_ONCE queries in lockstep, each step's next two probes prefetched: a run of
 * millions of codes is out of cache, and one search at a time waits for memory at every step (numpy's searchsorted
 * and a search like it here took 3-4x as long on a run of 30M codes). */
#define CODES_AT_ONCE 16

int shc_codes_find(const uint64_t *run, size_t nrun, const uint64_t *queries, size_t nq, int low_bits, int64_t *q,
                   int64_t *position, size_t room, size_t *found)
{
    if (low_bits < 0 || low_bits > 63 || !found || (nrun && !run) || (nq && !queries) || (room && (!q || !position)))
        return SHC_ERR_ARGUMENT;
    const uint64_t low = (UINT64_C(1) << low_bits) - 1;
    size_t count = 0;
    for (size_t from = 0; from < nq; from += CODES_AT_ONCE) {
        size_t m = nq - from < CODES_AT_ONCE ? nq - from : CODES_AT_ONCE, base[CODES_AT_ONCE], len = nrun;
        uint64_t key[CODES_AT_ONCE];
        for (size_t t = 0; t < m; t++) {
            base[t] = 0;
            key[t] = queries[from + t] & ~low;
        }
        /* The first code >= key lies in [base, base + len] (a search without branches: each halves len). */
        while (len > 1) {
            size_t half = len / 2;
            for (size_t t = 0; t < m; t++) {
                SHC_PREFETCH(run + base[t] + half / 2);
                SHC_PREFETCH(run + base[t] + half + half / 2);
            }
            for (size_t t = 0; t < m; t++)
                base[t] = run[base[t] + half - 1] < key[t] ? base[t] + half : base[t];
            len -= half;
        }
        for (size_t t = 0; t < m; t++) {
            size_t lo = base[t] + (nrun && run[base[t]] < key[t]), hi = lo;
            while (hi < nrun && (run[hi] & ~low) == key[t])
                hi++;
            size_t take = hi - lo, write = count >= room ? 0 : room - count < take ? room - count : take;
            for (size_t k = 0; k < write; k++) {
                q[count + k] = (int64_t)(queries[from + t] & low);
                position[count + k] = (int64_t)(run[lo + k] & low);
            }
            count += take; /* (past the room: counted only) */
        }
    }
    *found = count;
    return 0;
}

int shc_codes_mark(uint8_t *seen, size_t nbytes, const uint64_t *codes, size_t n, int bits)
{
    if (bits < 3 || bits > 63 || (n && (!codes || !seen)))
        return SHC_ERR_ARGUMENT;
    for (size_t i = 0; i < n; i++) /* every bit within the map: checked before anything is written */
        if ((codes[i] >> (63 - bits)) >> 3 >= nbytes)
            return SHC_ERR_ARGUMENT;
    for (size_t i = 0; i < n; i++) {
        uint64_t slot = codes[i] >> (63 - bits);
        seen[slot >> 3] |= (uint8_t)(1u << (slot & 7));
    }
    return 0;
}
