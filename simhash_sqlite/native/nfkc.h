/* Full NFKC in C (Unicode's algorithm, UAX #15: compatibility decomposition, canonical order, canonical
 * composition), for the texts the core's one pass cannot be sure of: a mark after a letter it composes
 * with, marks out of canonical order, conjoining jamo, a compatibility character whose NFKC holds a mark
 * (U+00B4 ACUTE ACCENT: a space and U+0301). Included by simhash_core.c after the Unicode tables
 * (gen_unicode_tables.py: shc_nfkd_*, shc_compose_*) and unicode_record/record_class. Rarely run: it
 * favours plainness over speed, but every step is linear or n log n in the text, whatever the text. */
#ifndef SIMHASH_NFKC_H
#define SIMHASH_NFKC_H

/* Hangul syllables decompose and compose by arithmetic (Unicode 3.12). */
#define HANGUL_S 0xAC00u
#define HANGUL_L 0x1100u
#define HANGUL_V 0x1161u
#define HANGUL_T 0x11A7u
#define HANGUL_L_COUNT 19u
#define HANGUL_V_COUNT 21u
#define HANGUL_T_COUNT 28u
#define HANGUL_N_COUNT (HANGUL_V_COUNT * HANGUL_T_COUNT)
#define HANGUL_S_COUNT (HANGUL_L_COUNT * HANGUL_N_COUNT)

/* NFKD(cp) where it is not cp (Hangul syllables apart): its code points and their count, else NULL. */
static const uint32_t *nfkd_of(uint32_t cp, size_t *len)
{
    size_t lo = 0, hi = SHC_NFKD_COUNT;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (shc_nfkd_cp[mid] < cp)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == SHC_NFKD_COUNT || shc_nfkd_cp[lo] != cp)
        return NULL;
    *len = shc_nfkd_at[lo + 1] - shc_nfkd_at[lo];
    return shc_nfkd_data + shc_nfkd_at[lo];
}

/* Code points NFKD of in[0..n) takes (room for full_nfkc's output). */
static size_t nfkd_room(const uint32_t *in, size_t n)
{
    size_t total = 0, len;
    for (size_t i = 0; i < n; i++) {
        uint32_t cp = in[i];
        if (cp - HANGUL_S < HANGUL_S_COUNT)
            total += 3;
        else
            total += nfkd_of(cp, &len) ? len : 1;
    }
    return total;
}

/* The canonical combining class's rank (orders as the class does; 0 for class 0). */
static unsigned combining_rank(uint32_t cp) { return record_class(unicode_record(cp)); }

/* Runs of non-starters stably sorted by class (the canonical ordering algorithm): a counting sort of each
 * run longer than a few, so a hostile text of many marks costs linear time. 0, or -1 out of memory. */
static int canonical_order(uint32_t *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        if (combining_rank(s[i]) == 0) {
            i++;
            continue;
        }
        size_t start = i;
        while (i < n && combining_rank(s[i]) != 0)
            i++;
        size_t run = i - start;
        if (run < 2)
            continue;
        if (run <= 16) { /* insertion sort: stable */
            for (size_t a = start + 1; a < i; a++) {
                uint32_t cp = s[a];
                unsigned rank = combining_rank(cp);
                size_t b = a;
                while (b > start && combining_rank(s[b - 1]) > rank) {
                    s[b] = s[b - 1];
                    b--;
                }
                s[b] = cp;
            }
            continue;
        }
        size_t counts[129] = {0};
        for (size_t a = start; a < i; a++)
            counts[combining_rank(s[a]) + 1]++;
        for (size_t r = 1; r < 129; r++)
            counts[r] += counts[r - 1];
        uint32_t *sorted = malloc(run * sizeof(uint32_t));
        if (!sorted)
            return -1;
        for (size_t a = start; a < i; a++)
            sorted[counts[combining_rank(s[a])]++] = s[a];
        memcpy(s + start, sorted, run * sizeof(uint32_t));
        free(sorted);
    }
    return 0;
}

/* The primary composite of (first, second), or 0 where they do not compose. */
static uint32_t compose_pair(uint32_t first, uint32_t second)
{
    if (first - HANGUL_L < HANGUL_L_COUNT && second - HANGUL_V < HANGUL_V_COUNT)
        return HANGUL_S + ((first - HANGUL_L) * HANGUL_V_COUNT + (second - HANGUL_V)) * HANGUL_T_COUNT;
    if (first - HANGUL_S < HANGUL_S_COUNT && (first - HANGUL_S) % HANGUL_T_COUNT == 0 &&
        second - HANGUL_T - 1 < HANGUL_T_COUNT - 1)
        return first + (second - HANGUL_T);
    uint64_t key = ((uint64_t)first << 21) | second;
    size_t lo = 0, hi = SHC_COMPOSE_COUNT;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (shc_compose_key[mid] < key)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < SHC_COMPOSE_COUNT && shc_compose_key[lo] == key ? shc_compose_to[lo] : 0;
}

/* NFKC of in[0..n) into out (room for nfkd_room(in, n) code points; out and in apart). Returns the count,
 * or (size_t)-1 out of memory. */
static size_t full_nfkc(const uint32_t *in, size_t n, uint32_t *out)
{
    size_t m = 0, len;
    for (size_t i = 0; i < n; i++) { /* NFKD */
        uint32_t cp = in[i];
        const uint32_t *d;
        if (cp - HANGUL_S < HANGUL_S_COUNT) {
            uint32_t index = cp - HANGUL_S, t = index % HANGUL_T_COUNT;
            out[m++] = HANGUL_L + index / HANGUL_N_COUNT;
            out[m++] = HANGUL_V + (index % HANGUL_N_COUNT) / HANGUL_T_COUNT;
            if (t)
                out[m++] = HANGUL_T + t;
        } else if ((d = nfkd_of(cp, &len)) != NULL) {
            memcpy(out + m, d, len * sizeof(uint32_t));
            m += len;
        } else {
            out[m++] = cp;
        }
    }
    if (canonical_order(out, m))
        return (size_t)-1;
    if (m == 0)
        return 0;
    /* canonical composition, in place (UAX #15's sample): a character joins the last starter where
     * nothing between blocks it (a character of its class or higher, or a starter) */
    size_t starter_at = 0, written = 1;
    uint32_t starter = out[0];
    unsigned last = combining_rank(starter) ? 1000u : 0u; /* a text that starts with a mark: nothing composes */
    for (size_t i = 1; i < m; i++) {
        uint32_t cp = out[i];
        unsigned rank = combining_rank(cp);
        uint32_t composite = compose_pair(starter, cp);
        if (composite && (last < rank || last == 0)) {
            out[starter_at] = composite;
            starter = composite;
            continue;
        }
        if (rank == 0) {
            starter_at = written;
            starter = cp;
        }
        last = rank;
        out[written++] = cp;
    }
    return written;
}

#endif
