#include "frame.h"

#include "crc32c.h"
#include "base/phx_err.h"

#include <stdarg.h>
#include <string.h>
#include <stdio.h>

int phx_frame_type_valid(unsigned t)
{
    switch (t) {
    case PHX_FT_HELLO: case PHX_FT_AUTH: case PHX_FT_AUTH_OK: case PHX_FT_ACK:
    case PHX_FT_BATCH: case PHX_FT_APP: case PHX_FT_SPAWN: case PHX_FT_CTRL:
    case PHX_FT_HB: case PHX_FT_BCAST: case PHX_FT_ERA: case PHX_FT_TD:
        return 1;
    default:
        return 0;
    }
}

const char *phx_frame_type_name(unsigned t)
{
    switch (t) {
    case PHX_FT_HELLO:   return "HELLO";
    case PHX_FT_AUTH:    return "AUTH";
    case PHX_FT_AUTH_OK: return "AUTH_OK";
    case PHX_FT_ACK:     return "ACK";
    case PHX_FT_BATCH:   return "BATCH";
    case PHX_FT_APP:     return "APP";
    case PHX_FT_SPAWN:   return "SPAWN";
    case PHX_FT_CTRL:    return "CTRL";
    case PHX_FT_HB:      return "HB";
    case PHX_FT_BCAST:   return "BCAST";
    case PHX_FT_ERA:     return "ERA";
    case PHX_FT_TD:      return "TD";
    default:             return "UNKNOWN";
    }
}

/* The header's one encoder and decoder; the fields in wire order (layout:
 * net/README.md). Two of them are rewritten in place once the frame is
 * written: the crc (CRC_OFF) and the link fields (LINK_OFF, lseq then
 * lack: the header's last 16 bytes); the length (LEN_OFF) is peeked at
 * before a frame is whole. */
#define LEN_OFF 8
#define CRC_OFF 12
#define LINK_OFF 48

static void put_hdr(uint8_t *o, const phx_frame_hdr_t *h)
{
    phx_wenc_t e;
    phx_wenc_init(&e, o, PHX_FRAME_HDR);
    phx_wenc_u32(&e, h->magic);
    phx_wenc_u8(&e, h->version);
    phx_wenc_u8(&e, h->type);
    phx_wenc_u16(&e, h->flags);
    phx_wenc_u32(&e, h->len);
    phx_wenc_u32(&e, h->crc);
    phx_wenc_u64(&e, h->src);
    phx_wenc_u64(&e, h->dst);
    phx_wenc_u64(&e, h->ssn);
    phx_wenc_u32(&e, h->inc);
    phx_wenc_u32(&e, h->tag);
    phx_wenc_u64(&e, h->lseq);
    phx_wenc_u64(&e, h->lack);
}

static void get_hdr(const uint8_t *b, phx_frame_hdr_t *h)
{
    phx_wdec_t d;
    phx_wdec_init(&d, b, PHX_FRAME_HDR);
    h->magic = phx_wdec_u32(&d);
    h->version = phx_wdec_u8(&d);
    h->type = phx_wdec_u8(&d);
    h->flags = phx_wdec_u16(&d);
    h->len = phx_wdec_u32(&d);
    h->crc = phx_wdec_u32(&d);
    h->src = phx_wdec_u64(&d);
    h->dst = phx_wdec_u64(&d);
    h->ssn = phx_wdec_u64(&d);
    h->inc = phx_wdec_u32(&d);
    h->tag = phx_wdec_u32(&d);
    h->lseq = phx_wdec_u64(&d);
    h->lack = phx_wdec_u64(&d);
}

static uint32_t get_crc(const uint8_t *hdr)
{
    phx_wdec_t d;
    phx_wdec_init(&d, hdr + CRC_OFF, 4);
    return phx_wdec_u32(&d);
}

uint32_t phx_frame_peek_len(const uint8_t *hdr)
{
    phx_wdec_t d;
    phx_wdec_init(&d, hdr + LEN_OFF, 4);
    return phx_wdec_u32(&d);
}

uint64_t phx_frame_peek_lseq(const uint8_t *hdr)
{
    phx_wdec_t d;
    phx_wdec_init(&d, hdr + LINK_OFF, 8);
    return phx_wdec_u64(&d);
}

/* CRC32C over the payload, then the header with the crc field counted as
 * zero ([0,12) 0000 [16,64)). Payload first: the transport checksums the
 * payload while it copies it in, together with header bytes [0,48), and
 * only the 16 link bytes once they are known (phx_frame_seal), reading
 * neither the payload nor the rest of the header twice. */
static uint32_t hdr_crc(uint32_t c, const uint8_t *hdr)
{
    uint8_t h[PHX_FRAME_HDR];   /* one pass over a copy beats three short ones */
    memcpy(h, hdr, sizeof h);
    memset(h + 12, 0, 4);
    return phx_crc32c(c, h, sizeof h);
}

static uint32_t payload_crc(const void *payload, uint32_t len)
{
    return len ? phx_crc32c(0, payload, len) : 0;
}

void phx_frame_put_hdr(uint8_t out[PHX_FRAME_HDR], phx_frame_hdr_t *h, const void *payload)
{
    phx_frame_put_hdr2(out, h, payload, h->len, NULL, 0);
}

void phx_frame_put_hdr2(uint8_t out[PHX_FRAME_HDR], phx_frame_hdr_t *h, const void *a, size_t na,
                        const void *b, size_t nb)
{
    uint32_t c = na ? phx_crc32c(0, a, na) : 0;
    if (nb)
        c = phx_crc32c(c, b, nb);
    phx_frame_put_hdr_crc(out, h, c);
}

void phx_frame_put_hdr_crc(uint8_t out[PHX_FRAME_HDR], phx_frame_hdr_t *h, uint32_t c)
{
    h->magic = PHX_FRAME_MAGIC;
    h->version = PHX_WIRE_VERSION;
    h->crc = 0;
    put_hdr(out, h);
    h->crc = phx_crc32c(c, out, LINK_OFF);
    phx_wenc_patch_u32(out + CRC_OFF, h->crc);
}

void phx_frame_seal(uint8_t *frame, uint64_t lseq, uint64_t lack)
{
    phx_wenc_t e;
    phx_wenc_init(&e, frame + LINK_OFF, PHX_FRAME_HDR - LINK_OFF);
    phx_wenc_u64(&e, lseq);
    phx_wenc_u64(&e, lack);
    phx_wenc_patch_u32(frame + CRC_OFF, phx_crc32c(get_crc(frame), frame + LINK_OFF, PHX_FRAME_HDR - LINK_OFF));
}

void phx_frame_encode(uint8_t out[PHX_FRAME_HDR], phx_frame_hdr_t *h, const void *payload)
{
    phx_frame_put_hdr(out, h, payload);
    phx_frame_seal(out, h->lseq, h->lack);
    h->crc = get_crc(out);
}

static _Thread_local char why_buf[128];

static int fail(const char **why, int rc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int fail(const char **why, int rc, const char *fmt, ...)
{
    if (why) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(why_buf, sizeof why_buf, fmt, ap);
        va_end(ap);
        *why = why_buf;
    }
    return rc;
}

int phx_frame_decode(const uint8_t *buf, size_t avail, uint32_t max_payload,
                     phx_frame_hdr_t *h, const char **why)
{
    if (why)
        *why = "";
    /* Check each field the moment its bytes are in, so a peer speaking some
     * other protocol is cut off after a few bytes, not after 48+len. */
    /* The same fields get_hdr reads, each checked if its bytes are in (a
     * read past avail sets the cursor's sticky error, and skips the rest). */
    phx_wdec_t d;
    phx_wdec_init(&d, buf, avail < PHX_FRAME_HDR ? avail : PHX_FRAME_HDR);
    uint32_t m = phx_wdec_u32(&d);
    if (!d.err && m != PHX_FRAME_MAGIC)
        return fail(why, PHX_EPROTO, "bad magic 0x%08x", (unsigned)m);
    uint8_t ver = phx_wdec_u8(&d);
    if (!d.err && ver != PHX_WIRE_VERSION)
        return fail(why, PHX_EVERSION, "unsupported version %u (want %u)",
                    (unsigned)ver, (unsigned)PHX_WIRE_VERSION);
    uint8_t type = phx_wdec_u8(&d);
    if (!d.err && !phx_frame_type_valid(type))
        return fail(why, PHX_EPROTO, "unknown frame type %u", (unsigned)type);
    uint16_t f = phx_wdec_u16(&d);
    if (!d.err && (f & ~PHX_FRAME_F_MASK))
        return fail(why, PHX_EPROTO, "undefined flag bits 0x%04x", (unsigned)f);
    uint32_t len = phx_wdec_u32(&d);
    uint32_t lim = max_payload < PHX_FRAME_LEN_HARDMAX ? max_payload : PHX_FRAME_LEN_HARDMAX;
    if (!d.err && len > lim)
        return fail(why, PHX_EPROTO, "payload length %u exceeds limit %u", (unsigned)len, (unsigned)lim);
    if (avail < PHX_FRAME_HDR)
        return PHX_ETRUNC;
    get_hdr(buf, h);
    size_t total = PHX_FRAME_HDR + (size_t)h->len;
    if (avail < total)
        return PHX_ETRUNC;
    uint32_t c = hdr_crc(payload_crc(buf + PHX_FRAME_HDR, h->len), buf);
    if (c != h->crc)
        return fail(why, PHX_ECHECKSUM, "crc mismatch: got 0x%08x, computed 0x%08x (%s len %u)",
                    (unsigned)h->crc, (unsigned)c, phx_frame_type_name(h->type), (unsigned)h->len);
    return (int)total;
}

int phx_frame_verify_crc(const uint8_t hdr[PHX_FRAME_HDR], uint32_t payload_crc, const char **why)
{
    if (why)
        *why = "";
    phx_frame_hdr_t h;
    get_hdr(hdr, &h);
    uint32_t c = hdr_crc(payload_crc, hdr);
    if (c != h.crc)
        return fail(why, PHX_ECHECKSUM, "crc mismatch: got 0x%08x, computed 0x%08x (%s len %u, received in place)",
                    (unsigned)h.crc, (unsigned)c, phx_frame_type_name(h.type), (unsigned)h.len);
    return 0;
}

/* ---- batch entries: the sub-header's one encoder and decoder ---- */

void phx_batch_put(uint8_t out[PHX_BATCH_SUB], const phx_frame_hdr_t *h)
{
    phx_wenc_t e;
    phx_wenc_init(&e, out, PHX_BATCH_SUB);
    /* The type through phx_wenc_bytes: a second phx_wenc_u8 in this file
     * makes gcc 12 -O2 report a bogus stringop-overflow in put_hdr. */
    uint8_t type = h->type;
    phx_wenc_bytes(&e, &type, 1);
    phx_wenc_u32(&e, h->tag);
    phx_wenc_u32(&e, h->len);
    phx_wenc_u64(&e, h->src);
    phx_wenc_u64(&e, h->dst);
    phx_wenc_u64(&e, h->ssn);
}

int phx_batch_next(const uint8_t *p, size_t avail, phx_frame_hdr_t *h, const char **why)
{
    if (avail < PHX_BATCH_SUB)
        return fail(why, PHX_EPROTO, "batch entry header cut short (%zu bytes left)", avail);
    phx_wdec_t d;   /* sized to the sub-header: every bound is known here */
    phx_wdec_init(&d, p, PHX_BATCH_SUB);
    uint8_t type = phx_wdec_u8(&d);
    uint32_t tag = phx_wdec_u32(&d);
    uint32_t len = phx_wdec_u32(&d);
    uint64_t src = phx_wdec_u64(&d);
    uint64_t dst = phx_wdec_u64(&d);
    uint64_t ssn = phx_wdec_u64(&d);
    if (type != PHX_FT_APP && type != PHX_FT_SPAWN)
        return fail(why, PHX_EPROTO, "batch entry of type %u", (unsigned)type);
    if (len > avail - PHX_BATCH_SUB)
        return fail(why, PHX_EPROTO, "batch entry of %u bytes with %zu left", (unsigned)len,
                    avail - PHX_BATCH_SUB);
    h->type = type;
    h->tag = tag;
    h->len = len;
    h->src = src;
    h->dst = dst;
    h->ssn = ssn;
    return PHX_BATCH_SUB + (int)len;
}

void phx_batch_begin(phx_frame_hdr_t *h, const phx_frame_hdr_t *outer)
{
    *h = *outer;
    h->flags = 0;
}

int phx_batch_check(const uint8_t *p, size_t len, const char **why)
{
    if (why)
        *why = "";
    phx_frame_hdr_t h;
    int n = 0;
    for (size_t off = 0; off < len; n++) {
        int r = phx_batch_next(p + off, len - off, &h, why);
        if (r < 0)
            return r;
        off += (size_t)r;
    }
    if (n < 2)
        return fail(why, PHX_EPROTO, "batch of %d entries", n);
    return n;
}
