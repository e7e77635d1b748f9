/* The one wire codec: fixed-width little-endian fields through a bounds-
 * checked cursor. Every message that crosses a socket (frames, control
 * messages, protocol payloads) is written and read with it.
 *
 * Errors are sticky, as in a stream: once a write runs past the buffer or a
 * read past the data, every later call is a no-op (reads return 0) and
 * phx_wenc_end/phx_wdec_end report PHX_EPROTO (reads) or PHX_ENOSPC (writes).
 * So a decoder reads all its fields, then checks once.
 *
 * Threads: a cursor belongs to the thread that made it; no shared state. */
#ifndef PHX_WIRE_H
#define PHX_WIRE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "base/phx_err.h"

/* Raw little-endian stores and loads; unaligned-safe. */
/* memcpy + byte swap on big-endian hosts: one load or store each (byte-wise
 * loops cost ~290 instructions per 64-byte frame header; the transport's
 * message rate is bound by them). */
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
#define PHX_LE16(v) __builtin_bswap16(v)
#define PHX_LE32(v) __builtin_bswap32(v)
#define PHX_LE64(v) __builtin_bswap64(v)
#else
#define PHX_LE16(v) (v)
#define PHX_LE32(v) (v)
#define PHX_LE64(v) (v)
#endif
static inline void phx_put_le16(uint8_t *p, uint16_t v) { v = PHX_LE16(v); memcpy(p, &v, 2); }
static inline void phx_put_le32(uint8_t *p, uint32_t v) { v = PHX_LE32(v); memcpy(p, &v, 4); }
static inline void phx_put_le64(uint8_t *p, uint64_t v) { v = PHX_LE64(v); memcpy(p, &v, 8); }
static inline uint16_t phx_get_le16(const uint8_t *p) { uint16_t v; memcpy(&v, p, 2); return PHX_LE16(v); }
static inline uint32_t phx_get_le32(const uint8_t *p) { uint32_t v; memcpy(&v, p, 4); return PHX_LE32(v); }
static inline uint64_t phx_get_le64(const uint8_t *p) { uint64_t v; memcpy(&v, p, 8); return PHX_LE64(v); }

typedef struct phx_wenc {
    uint8_t *start, *p, *end;
    int err;
} phx_wenc_t;

typedef struct phx_wdec {
    const uint8_t *start, *p, *end;
    int err;
} phx_wdec_t;

static inline void phx_wenc_init(phx_wenc_t *e, void *buf, size_t cap)
{
    e->start = e->p = (uint8_t *)buf;
    e->end = e->start + cap;
    e->err = 0;
}

/* Reserves n bytes; NULL (and the sticky error) if they do not fit. */
static inline uint8_t *phx_wenc_reserve(phx_wenc_t *e, size_t n)
{
    if (e->err || (size_t)(e->end - e->p) < n) {
        e->err = PHX_ENOSPC;
        return NULL;
    }
    uint8_t *q = e->p;
    e->p += n;
    return q;
}

static inline void phx_wenc_u8(phx_wenc_t *e, uint8_t v)
{
    uint8_t *q = phx_wenc_reserve(e, 1);
    if (q) *q = v;
}
static inline void phx_wenc_u16(phx_wenc_t *e, uint16_t v)
{
    uint8_t *q = phx_wenc_reserve(e, 2);
    if (q) phx_put_le16(q, v);
}
static inline void phx_wenc_u32(phx_wenc_t *e, uint32_t v)
{
    uint8_t *q = phx_wenc_reserve(e, 4);
    if (q) phx_put_le32(q, v);
}
static inline void phx_wenc_u64(phx_wenc_t *e, uint64_t v)
{
    uint8_t *q = phx_wenc_reserve(e, 8);
    if (q) phx_put_le64(q, v);
}
static inline void phx_wenc_i32(phx_wenc_t *e, int32_t v) { phx_wenc_u32(e, (uint32_t)v); }
static inline void phx_wenc_bytes(phx_wenc_t *e, const void *src, size_t n)
{
    uint8_t *q = phx_wenc_reserve(e, n);
    if (q && n) memcpy(q, src, n);
}

/* Back-patches a field reserved earlier (phx_wenc_reserve), for a section
 * led by a count known only once the section is written. NULL (the
 * reserve failed): nothing, the sticky error already says so. */
static inline void phx_wenc_patch_u16(uint8_t *slot, uint16_t v)
{
    if (slot) phx_put_le16(slot, v);
}
static inline void phx_wenc_patch_u32(uint8_t *slot, uint32_t v)
{
    if (slot) phx_put_le32(slot, v);
}

/* The one varint: LEB128, 7 bits a byte, low group first, high bit set on
 * every byte but the last; 1 to 10 bytes for a u64. Written straight into
 * the buffer when 10 bytes are free (the hot path: a det trailer is four
 * of them per det), else through a scratch copy so a short tail still
 * takes a short value. */
#define PHX_WIRE_UV_MAX 10
static inline void phx_wenc_uv(phx_wenc_t *e, uint64_t v)
{
    uint8_t tmp[PHX_WIRE_UV_MAX];
    int direct = !e->err && e->end - e->p >= PHX_WIRE_UV_MAX;
    uint8_t *b = direct ? e->p : tmp;
    size_t k = 0;
    while (v >= 0x80) {
        b[k++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    b[k++] = (uint8_t)v;
    if (direct)
        e->p += k;
    else
        phx_wenc_bytes(e, tmp, k);
}

/* n ints as little-endian i32 (v NULL: n times fill). */
static inline void phx_wenc_i32s(phx_wenc_t *e, const int *v, size_t n, int32_t fill)
{
    uint8_t *q = phx_wenc_reserve(e, 4 * n);
    for (size_t i = 0; q && i < n; i++)
        phx_put_le32(q + 4 * i, (uint32_t)(v ? v[i] : fill));
}

/* Bytes written so far, or the sticky error (negative). */
static inline ptrdiff_t phx_wenc_end(const phx_wenc_t *e)
{
    return e->err ? e->err : e->p - e->start;
}

static inline void phx_wdec_init(phx_wdec_t *d, const void *buf, size_t len)
{
    d->start = d->p = (const uint8_t *)buf;
    d->end = d->start + len;
    d->err = 0;
}

/* Points at the next n bytes and skips them; NULL (and the sticky error) if
 * fewer remain. The pointer aliases the input buffer. */
static inline const uint8_t *phx_wdec_take(phx_wdec_t *d, size_t n)
{
    if (d->err || (size_t)(d->end - d->p) < n) {
        d->err = PHX_EPROTO;
        return NULL;
    }
    const uint8_t *q = d->p;
    d->p += n;
    return q;
}

static inline uint8_t phx_wdec_u8(phx_wdec_t *d)
{
    const uint8_t *q = phx_wdec_take(d, 1);
    return q ? *q : 0;
}
static inline uint16_t phx_wdec_u16(phx_wdec_t *d)
{
    const uint8_t *q = phx_wdec_take(d, 2);
    return q ? phx_get_le16(q) : 0;
}
static inline uint32_t phx_wdec_u32(phx_wdec_t *d)
{
    const uint8_t *q = phx_wdec_take(d, 4);
    return q ? phx_get_le32(q) : 0;
}
static inline uint64_t phx_wdec_u64(phx_wdec_t *d)
{
    const uint8_t *q = phx_wdec_take(d, 8);
    return q ? phx_get_le64(q) : 0;
}
static inline int32_t phx_wdec_i32(phx_wdec_t *d) { return (int32_t)phx_wdec_u32(d); }
static inline void phx_wdec_bytes(phx_wdec_t *d, void *dst, size_t n)
{
    const uint8_t *q = phx_wdec_take(d, n);
    if (q && n) memcpy(dst, q, n);
}

/* A varint (phx_wenc_uv): truncated, or longer than 10 bytes, is the
 * sticky error (and 0). */
static inline uint64_t phx_wdec_uv(phx_wdec_t *d)
{
    uint64_t x = 0;
    for (int k = 0; !d->err && k < PHX_WIRE_UV_MAX && d->p + k < d->end; k++) {
        x |= (uint64_t)(d->p[k] & 0x7f) << (7 * k);
        if (!(d->p[k] & 0x80)) {
            d->p += k + 1;
            return x;
        }
    }
    d->err = PHX_EPROTO;
    return 0;
}

/* An array of n little-endian 32-bit values a decoder leaves in place
 * (phx_wdec_a32); read entry i with phx_wire_a32_u32/_i32 (i < n). */
typedef struct phx_wire_a32 {
    const uint8_t *p;
    size_t n;
} phx_wire_a32_t;

static inline phx_wire_a32_t phx_wdec_a32(phx_wdec_t *d, size_t n)
{
    phx_wire_a32_t a = { NULL, 0 };
    if (d->err || (size_t)(d->end - d->p) / 4 < n) {
        d->err = PHX_EPROTO;
        return a;
    }
    a.p = phx_wdec_take(d, 4 * n);
    a.n = n;
    return a;
}
static inline uint32_t phx_wire_a32_u32(phx_wire_a32_t a, size_t i) { return phx_get_le32(a.p + 4 * i); }
static inline int32_t phx_wire_a32_i32(phx_wire_a32_t a, size_t i) { return (int32_t)phx_get_le32(a.p + 4 * i); }

static inline size_t phx_wdec_left(const phx_wdec_t *d) { return d->err ? 0 : (size_t)(d->end - d->p); }

/* 0 when every read fitted, else PHX_EPROTO. exact: trailing bytes are an
 * error too (a message of a fixed layout). */
static inline int phx_wdec_end(const phx_wdec_t *d, int exact)
{
    if (d->err) return d->err;
    return exact && d->p != d->end ? PHX_EPROTO : 0;
}

#endif
