/* One step of strict UTF-8 decoding, shared by the C core (simhash_core.c, decode_utf8) and the SQLite
 * extension (sqlite_extension.c: texts' shingles, short texts, simhash_from_hex), so that both accept
 * exactly what Python's strict UTF-8 decoder accepts, from one piece of code. */
#ifndef UTF8_STEP_H
#define UTF8_STEP_H

#include <stddef.h>
#include <stdint.h>

#define UTF8_INVALID (-1)   /* a bad lead or continuation byte, truncated, overlong, beyond U+10FFFF */
#define UTF8_SURROGATE (-2) /* an encoded surrogate (U+D800..U+DFFF) */

#if defined(__GNUC__)
#define UTF8_INLINE static inline __attribute__((always_inline))
#else
#define UTF8_INLINE static inline
#endif

/* The code point at s[*i] (len bytes in all, *i < len), *i moved past it; UTF8_INVALID or UTF8_SURROGATE
 * with *i unmoved. Never reads at or past s[len]. */
UTF8_INLINE int32_t utf8_step(const unsigned char *s, size_t len, size_t *i)
{
    unsigned c = s[*i];
    if (c < 0x80) {
        (*i)++;
        return (int32_t)c;
    }
    uint32_t cp;
    size_t extra;
    if (c >= 0xC2 && c <= 0xDF) {
        cp = c & 0x1F;
        extra = 1;
    } else if (c >= 0xE0 && c <= 0xEF) {
        cp = c & 0x0F;
        extra = 2;
    } else if (c >= 0xF0 && c <= 0xF4) {
        cp = c & 0x07;
        extra = 3;
    } else {
        return UTF8_INVALID; /* a continuation byte, C0/C1 (always overlong), F5 and above */
    }
    if (len - *i <= extra)
        return UTF8_INVALID; /* truncated */
    for (size_t k = 1; k <= extra; k++) {
        unsigned t = s[*i + k];
        if ((t & 0xC0) != 0x80)
            return UTF8_INVALID;
        cp = (cp << 6) | (t & 0x3F);
    }
    if ((extra == 2 && cp < 0x800) || (extra == 3 && (cp < 0x10000 || cp > 0x10FFFF)))
        return UTF8_INVALID; /* overlong or beyond Unicode */
    if (cp >= 0xD800 && cp <= 0xDFFF)
        return UTF8_SURROGATE;
    *i += extra + 1;
    return (int32_t)cp;
}

#endif
