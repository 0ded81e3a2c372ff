/* DEFLATE (RFC 1951) and zlib (RFC 1950) decompression into a buffer of known size, for PNG and TIFF.
 *
 * Stored, fixed-Huffman and dynamic-Huffman blocks. Huffman symbols are decoded through a 9-bit
 * lookup table with a canonical-code walk for longer codes. Input is read through a 64-bit bit
 * buffer that pads with zero bytes past the end; consuming a padded bit is reported as truncation.
 * Included by onnxc_image.c only (needs its oimg_* helpers).
 */
#ifndef ONNXC_IMAGE_INFLATE_H
#define ONNXC_IMAGE_INFLATE_H

#define OINF_FAST 9

typedef struct {
    uint16_t fast[1 << OINF_FAST]; /* 0, or symbol | length << 12 for codes of <= OINF_FAST bits */
    uint16_t count[16];            /* number of codes of each length */
    uint16_t sym[320];             /* symbols in canonical order */
} oinf_huff;

typedef struct {
    const uint8_t *in;
    size_t n, pos;      /* pos may run past n: those bytes read as zero */
    uint64_t buf;
    int cnt;            /* valid bits in buf */
    uint8_t *out;
    size_t cap, len;
    const char *err;
} oinf;

static inline void oinf_fill(oinf *s) {
    while (s->cnt <= 56) {
        uint64_t b = s->pos < s->n ? s->in[s->pos] : 0;
        s->pos++;
        s->buf |= b << s->cnt;
        s->cnt += 8;
    }
}

/* Were padding bits (past the end of the input) consumed? */
static inline int oinf_overrun(const oinf *s) {
    return s->pos > s->n && (int64_t)(s->pos - s->n) * 8 > s->cnt;
}

static inline uint32_t oinf_bits(oinf *s, int k) {
    if (s->cnt < k) oinf_fill(s);
    uint32_t v = (uint32_t)(s->buf & ((1ull << k) - 1));
    s->buf >>= k;
    s->cnt -= k;
    return v;
}

/* Build a canonical Huffman decoder from code lengths; -1 when the lengths over-subscribe the code. */
static int oinf_build(oinf_huff *h, const uint8_t *lens, int n) {
    uint16_t offs[16];
    memset(h->count, 0, sizeof h->count);
    memset(h->fast, 0, sizeof h->fast);
    for (int i = 0; i < n; i++) h->count[lens[i]]++;
    h->count[0] = 0;
    int left = 1;
    for (int l = 1; l < 16; l++) {
        left = (left << 1) - h->count[l];
        if (left < 0) return -1;
    }
    offs[1] = 0;
    for (int l = 1; l < 15; l++) offs[l + 1] = (uint16_t)(offs[l] + h->count[l]);
    for (int i = 0; i < n; i++)
        if (lens[i]) h->sym[offs[lens[i]]++] = (uint16_t)i;
    /* Fast table: walk codes in canonical order; deflate sends Huffman codes MSB first. */
    uint32_t code = 0;
    int k = 0;
    for (int l = 1; l <= OINF_FAST; l++) {
        for (int j = 0; j < h->count[l]; j++, k++, code++) {
            uint32_t rev = 0;
            for (int b = 0; b < l; b++) rev |= ((code >> b) & 1u) << (l - 1 - b);
            for (uint32_t r = rev; r < (1u << OINF_FAST); r += 1u << l)
                h->fast[r] = (uint16_t)(h->sym[k] | l << 12);
        }
        code <<= 1;
    }
    return 0;
}

/* Decode one symbol; -1 on an unused code. */
static inline int oinf_decode(oinf *s, const oinf_huff *h) {
    if (s->cnt < 16) oinf_fill(s);
    uint16_t e = h->fast[s->buf & ((1u << OINF_FAST) - 1)];
    if (e) {
        int l = e >> 12;
        s->buf >>= l;
        s->cnt -= l;
        return e & 0xFFF;
    }
    int code = 0, first = 0, index = 0;
    for (int l = 1; l < 16; l++) {
        code |= (int)(s->buf & 1);
        s->buf >>= 1;
        s->cnt--;
        int c = h->count[l];
        if (code - first < c) return h->sym[index + code - first];
        index += c;
        first = (first + c) << 1;
        code <<= 1;
    }
    return -1;
}

static const uint16_t oinf_lbase[29] = {3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 15, 17, 19, 23, 27, 31,
                                        35, 43, 51, 59, 67, 83, 99, 115, 131, 163, 195, 227, 258};
static const uint8_t oinf_lext[29] = {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0};
static const uint16_t oinf_dbase[30] = {1, 2, 3, 4, 5, 7, 9, 13, 17, 25, 33, 49, 65, 97, 129, 193, 257, 385,
                                        513, 769, 1025, 1537, 2049, 3073, 4097, 6145, 8193, 12289, 16385, 24577};
static const uint8_t oinf_dext[30] = {0, 0, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7, 8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13};

/* Inflate one Huffman block. 1: the output buffer is full; 0: end of block; -1: error. */
static int oinf_codes(oinf *s, const oinf_huff *lit, const oinf_huff *dist) {
    for (;;) {
        int sym = oinf_decode(s, lit);
        if (sym < 0) return s->err = "invalid literal/length code", -1;
        if (oinf_overrun(s)) return s->err = "truncated data", -1;
        if (sym < 256) {
            if (s->len >= s->cap) return 1;
            s->out[s->len++] = (uint8_t)sym;
            continue;
        }
        if (sym == 256) return 0;
        sym -= 257;
        if (sym >= 29) return s->err = "invalid length symbol", -1;
        size_t len = oinf_lbase[sym] + oinf_bits(s, oinf_lext[sym]);
        int ds = oinf_decode(s, dist);
        if (ds < 0 || ds >= 30) return s->err = "invalid distance code", -1;
        size_t d = oinf_dbase[ds] + oinf_bits(s, oinf_dext[ds]);
        if (oinf_overrun(s)) return s->err = "truncated data", -1;
        if (d > s->len) return s->err = "distance too far back", -1;
        int full = 0;
        if (len > s->cap - s->len) {
            len = s->cap - s->len;
            full = 1;
        }
        uint8_t *o = s->out + s->len;
        const uint8_t *from = o - d;
        for (size_t i = 0; i < len; i++) o[i] = from[i];
        s->len += len;
        if (full) return 1;
    }
}

static int oinf_dynamic(oinf *s, oinf_huff *lit, oinf_huff *dist) {
    static const uint8_t order[19] = {16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1, 15};
    uint8_t lens[320];
    int nlen = (int)oinf_bits(s, 5) + 257, ndist = (int)oinf_bits(s, 5) + 1, ncode = (int)oinf_bits(s, 4) + 4;
    if (nlen > 286 || ndist > 30) return s->err = "bad dynamic block counts", -1;
    memset(lens, 0, sizeof lens);
    for (int i = 0; i < ncode; i++) lens[order[i]] = (uint8_t)oinf_bits(s, 3);
    if (oinf_build(lit, lens, 19)) return s->err = "bad code-length code", -1;
    int i = 0;
    while (i < nlen + ndist) {
        int sym = oinf_decode(s, lit);
        if (sym < 0) return s->err = "invalid code-length code", -1;
        if (oinf_overrun(s)) return s->err = "truncated data", -1;
        if (sym < 16) {
            lens[i++] = (uint8_t)sym;
            continue;
        }
        int rep, val = 0;
        if (sym == 16) {
            if (i == 0) return s->err = "repeat with no previous length", -1;
            val = lens[i - 1];
            rep = 3 + (int)oinf_bits(s, 2);
        } else if (sym == 17) {
            rep = 3 + (int)oinf_bits(s, 3);
        } else {
            rep = 11 + (int)oinf_bits(s, 7);
        }
        if (i + rep > nlen + ndist) return s->err = "too many code lengths", -1;
        while (rep--) lens[i++] = (uint8_t)val;
    }
    if (lens[256] == 0) return s->err = "no end-of-block code", -1;
    if (oinf_build(lit, lens, nlen) || oinf_build(dist, lens + nlen, ndist))
        return s->err = "over-subscribed Huffman code", -1;
    return 0;
}

/* Raw DEFLATE into out[0..cap). *used: input bytes consumed; *ended: the final block ended (else the
 * buffer filled first). 0 on success, -1 with *err on bad or truncated data. */
static int oinf_raw(const uint8_t *in, size_t n, uint8_t *out, size_t cap, size_t *outlen, size_t *used,
                    int *ended, const char **err) {
    oinf s;
    oinf_huff *lit = (oinf_huff *)malloc(2 * sizeof(oinf_huff)), *dist = lit + 1;
    memset(&s, 0, sizeof s);
    s.in = in;
    s.n = n;
    s.out = out;
    s.cap = cap;
    int r = 0, last = 0;
    if (!lit) {
        *err = "out of memory";
        return -1;
    }
    while (!last && r == 0) {
        last = (int)oinf_bits(&s, 1);
        int type = (int)oinf_bits(&s, 2);
        if (oinf_overrun(&s)) {
            s.err = "truncated data";
            r = -1;
        } else if (type == 0) {
            int drop = s.cnt & 7; /* to a byte boundary, then give back the whole bytes buffered */
            s.buf >>= drop;
            s.cnt -= drop;
            s.pos -= (size_t)(s.cnt / 8);
            s.buf = 0;
            s.cnt = 0;
            if (s.pos + 4 > s.n) { s.err = "truncated data"; r = -1; break; }
            uint32_t len = oimg_le16(in + s.pos), nlen = oimg_le16(in + s.pos + 2);
            s.pos += 4;
            if ((len ^ 0xFFFF) != nlen) { s.err = "corrupt stored block length"; r = -1; break; }
            if (len > s.n - s.pos) { s.err = "truncated data"; r = -1; break; }
            size_t k = len < s.cap - s.len ? len : s.cap - s.len;
            memcpy(s.out + s.len, in + s.pos, k);
            s.len += k;
            s.pos += len;
            if (k < len) r = 1;
        } else if (type == 1) {
            uint8_t lens[320];
            int i = 0;
            for (; i < 144; i++) lens[i] = 8;
            for (; i < 256; i++) lens[i] = 9;
            for (; i < 280; i++) lens[i] = 7;
            for (; i < 288; i++) lens[i] = 8;
            for (; i < 318; i++) lens[i] = 5;
            oinf_build(lit, lens, 288);
            oinf_build(dist, lens + 288, 30);
            r = oinf_codes(&s, lit, dist);
        } else if (type == 2) {
            r = oinf_dynamic(&s, lit, dist);
            if (r == 0) r = oinf_codes(&s, lit, dist);
        } else {
            s.err = "invalid block type";
            r = -1;
        }
        if (r == 0 && s.len == s.cap && !last) r = 1;
    }
    free(lit);
    *ended = r == 0 && last;
    *outlen = s.len;
    /* bytes consumed: the read position less whole bytes still buffered */
    size_t back = (size_t)(s.cnt / 8);
    *used = s.pos >= back ? s.pos - back : 0;
    if (*used > n) *used = n;
    *err = s.err;
    return r < 0 ? -1 : 0;
}

static uint32_t oinf_adler32(const uint8_t *p, size_t n) {
    uint32_t a = 1, b = 0;
    while (n) {
        size_t k = n < 5552 ? n : 5552;
        n -= k;
        while (k--) {
            a += *p++;
            b += a;
        }
        a %= 65521;
        b %= 65521;
    }
    return b << 16 | a;
}

/* zlib stream into exactly cap bytes; "truncated data" when it holds fewer. The Adler-32 trailer is
 * checked when the stream ends at cap bytes and the trailer is present (data past cap is ignored). */
static int oinf_zlib(const uint8_t *in, size_t n, uint8_t *out, size_t cap, const char **err) {
    size_t len = 0, used = 0;
    int ended = 0;
    if (n < 2) return *err = "truncated zlib header", -1;
    if ((in[0] & 15) != 8 || (in[0] >> 4) > 7 || ((uint32_t)in[0] << 8 | in[1]) % 31 != 0 || (in[1] & 32))
        return *err = "bad zlib header", -1;
    if (oinf_raw(in + 2, n - 2, out, cap, &len, &used, &ended, err)) return -1;
    if (len < cap) return *err = "truncated data", -1;
    size_t at = 2 + used;
    if (ended && at + 4 <= n && oimg_be32(in + at) != oinf_adler32(out, cap))
        return *err = "zlib checksum mismatch", -1;
    return 0;
}

#endif /* ONNXC_IMAGE_INFLATE_H */
