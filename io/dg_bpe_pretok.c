/* dg_bpe_pretok.c — the GPT-2 pre-tokenizer, by hand over UTF-8 (see dg_bpe.h).
 *
 * At each position the alternatives of the GPT-2 pattern are tried in order:
 *   1. a contraction 's 't 're 've 'm 'll 'd
 *   2. an optional single space followed by a run of letters, of numbers, or
 *      of symbols (neither space, letter nor number)
 *   3. a run of whitespace: all of it at the end of the text, or all but its
 *      last character when a non-space follows (\s+(?!\S)); a single
 *      whitespace character otherwise (\s+)
 */
#include "dg_bpe.h"

enum { C_OTHER, C_LETTER, C_NUMBER, C_SPACE };

static int in_ranges(const dg_cp_range *r, int n, uint32_t cp) {
    int lo = 0, hi = n - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        if (cp < r[mid].lo) hi = mid - 1;
        else if (cp > r[mid].hi) lo = mid + 1;
        else return 1;
    }
    return 0;
}

static int is_space(uint32_t cp) {
    if (cp < 0x80) return cp == ' ' || (cp >= 0x09 && cp <= 0x0d);
    return cp == 0x85 || cp == 0xa0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200a) || cp == 0x2028 ||
           cp == 0x2029 || cp == 0x202f || cp == 0x205f || cp == 0x3000;
}

static int classify(uint32_t cp) {
    if (cp < 0x80) {
        if ((cp | 0x20) >= 'a' && (cp | 0x20) <= 'z') return C_LETTER;
        if (cp >= '0' && cp <= '9') return C_NUMBER;
        return is_space(cp) ? C_SPACE : C_OTHER;
    }
    if (is_space(cp)) return C_SPACE;
    if (in_ranges(dg_unicode_letters, dg_unicode_letters_len, cp)) return C_LETTER;
    if (in_ranges(dg_unicode_numbers, dg_unicode_numbers_len, cp)) return C_NUMBER;
    return C_OTHER;
}

/* Decode one code point at s[i]; *len gets its byte length (1 for an
 * invalid byte, which decodes to 0xFFFFFFFF, classified C_OTHER). */
static uint32_t decode(const uint8_t *s, size_t n, size_t i, size_t *len) {
    uint8_t c = s[i];
    if (c < 0x80) {
        *len = 1;
        return c;
    }
    size_t k;
    uint32_t cp;
    if ((c & 0xe0) == 0xc0) k = 2, cp = c & 0x1f;
    else if ((c & 0xf0) == 0xe0) k = 3, cp = c & 0x0f;
    else if ((c & 0xf8) == 0xf0) k = 4, cp = c & 0x07;
    else {
        *len = 1;
        return 0xffffffffu;
    }
    if (i + k > n) {
        *len = 1;
        return 0xffffffffu;
    }
    for (size_t j = 1; j < k; j++) {
        if ((s[i + j] & 0xc0) != 0x80) {
            *len = 1;
            return 0xffffffffu;
        }
        cp = (cp << 6) | (s[i + j] & 0x3f);
    }
    *len = k;
    return cp;
}

static int class_at(const uint8_t *s, size_t n, size_t i, size_t *len) {
    uint32_t cp = decode(s, n, i, len);
    return cp == 0xffffffffu ? C_OTHER : classify(cp);
}

/* End of the run of class `cls` starting at i. */
static size_t run_end(const uint8_t *s, size_t n, size_t i, int cls) {
    while (i < n) {
        size_t len;
        if (class_at(s, n, i, &len) != cls) break;
        i += len;
    }
    return i;
}

size_t dg_bpe_pretok_next(const uint8_t *s, size_t n, size_t i) {
    if (s[i] == '\'' && i + 1 < n) {
        uint8_t a = s[i + 1];
        if (a == 's' || a == 't' || a == 'm' || a == 'd') return i + 2;
        if (i + 2 < n) {
            uint8_t b = s[i + 2];
            if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return i + 3;
        }
    }
    size_t len;
    int cls = class_at(s, n, i, &len);
    size_t j = i;
    if (s[i] == ' ' && i + 1 < n) {
        size_t len2;
        int next = class_at(s, n, i + 1, &len2);
        if (next != C_SPACE) {
            j = i + 1;
            cls = next;
            len = len2;
        }
    }
    if (cls != C_SPACE) return run_end(s, n, j + len, cls);
    /* Whitespace run [i, k). */
    size_t k = i, last = i;
    while (k < n) {
        size_t l;
        if (class_at(s, n, k, &l) != C_SPACE) break;
        last = k;
        k += l;
    }
    if (k == n) return k;     /* \s+(?!\S) up to the end */
    if (last > i) return last; /* leave the last space to the next piece */
    return k;                  /* \s+: one whitespace character */
}

uint32_t dg_bpe_byte_char(uint8_t b) {
    if ((b >= '!' && b <= '~') || (b >= 0xa1 && b <= 0xac) || b >= 0xae) return b;
    /* The other bytes, in order, take U+0100 onwards. */
    uint32_t k = 0;
    for (uint32_t x = 0; x < b; x++)
        if (!((x >= '!' && x <= '~') || (x >= 0xa1 && x <= 0xac) || x >= 0xae)) k++;
    return 256 + k;
}
