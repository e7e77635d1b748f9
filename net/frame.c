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
    case PHX_FT_APP: case PHX_FT_SPAWN: case PHX_FT_CTRL:
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

static void put_hdr(uint8_t o[PHX_FRAME_HDR], const phx_frame_hdr_t *h)
{
    phx_put_le32(o + 0, h->magic);
    o[4] = h->version;
    o[5] = h->type;
    phx_put_le16(o + 6, h->flags);
    phx_put_le32(o + 8, h->len);
    phx_put_le32(o + 12, h->crc);
    phx_put_le64(o + 16, h->src);
    phx_put_le64(o + 24, h->dst);
    phx_put_le64(o + 32, h->ssn);
    phx_put_le32(o + 40, h->inc);
    phx_put_le32(o + 44, h->tag);
    phx_put_le64(o + 48, h->lseq);
    phx_put_le64(o + 56, h->lack);
}

static void get_hdr(const uint8_t *b, phx_frame_hdr_t *h)
{
    h->magic = phx_get_le32(b + 0);
    h->version = b[4];
    h->type = b[5];
    h->flags = phx_get_le16(b + 6);
    h->len = phx_get_le32(b + 8);
    h->crc = phx_get_le32(b + 12);
    h->src = phx_get_le64(b + 16);
    h->dst = phx_get_le64(b + 24);
    h->ssn = phx_get_le64(b + 32);
    h->inc = phx_get_le32(b + 40);
    h->tag = phx_get_le32(b + 44);
    h->lseq = phx_get_le64(b + 48);
    h->lack = phx_get_le64(b + 56);
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

#define LINK_OFF 48   /* lseq, lack: the header's last 16 bytes */

void phx_frame_put_hdr(uint8_t out[PHX_FRAME_HDR], phx_frame_hdr_t *h, const void *payload)
{
    phx_frame_put_hdr2(out, h, payload, h->len, NULL, 0);
}

void phx_frame_put_hdr2(uint8_t out[PHX_FRAME_HDR], phx_frame_hdr_t *h, const void *a, size_t na,
                        const void *b, size_t nb)
{
    h->magic = PHX_FRAME_MAGIC;
    h->version = PHX_WIRE_VERSION;
    uint32_t c = na ? phx_crc32c(0, a, na) : 0;
    if (nb)
        c = phx_crc32c(c, b, nb);
    h->crc = 0;
    put_hdr(out, h);
    h->crc = phx_crc32c(c, out, LINK_OFF);
    phx_put_le32(out + 12, h->crc);
}

void phx_frame_seal(uint8_t *frame, uint64_t lseq, uint64_t lack)
{
    phx_put_le64(frame + 48, lseq);
    phx_put_le64(frame + 56, lack);
    phx_put_le32(frame + 12, phx_crc32c(phx_get_le32(frame + 12), frame + LINK_OFF,
                                        PHX_FRAME_HDR - LINK_OFF));
}

void phx_frame_encode(uint8_t out[PHX_FRAME_HDR], phx_frame_hdr_t *h, const void *payload)
{
    phx_frame_put_hdr(out, h, payload);
    phx_frame_seal(out, h->lseq, h->lack);
    h->crc = phx_get_le32(out + 12);
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
    if (avail >= 4) {
        uint32_t m = phx_get_le32(buf);
        if (m != PHX_FRAME_MAGIC)
            return fail(why, PHX_EPROTO, "bad magic 0x%08x", (unsigned)m);
    }
    if (avail >= 5 && buf[4] != PHX_WIRE_VERSION)
        return fail(why, PHX_EVERSION, "unsupported version %u (want %u)",
                    (unsigned)buf[4], (unsigned)PHX_WIRE_VERSION);
    if (avail >= 6 && !phx_frame_type_valid(buf[5]))
        return fail(why, PHX_EPROTO, "unknown frame type %u", (unsigned)buf[5]);
    if (avail >= 8) {
        uint16_t f = phx_get_le16(buf + 6);
        if (f & ~PHX_FRAME_F_MASK)
            return fail(why, PHX_EPROTO, "undefined flag bits 0x%04x", (unsigned)f);
    }
    if (avail >= 12) {
        uint32_t len = phx_get_le32(buf + 8);
        uint32_t lim = max_payload < PHX_FRAME_LEN_HARDMAX ? max_payload : PHX_FRAME_LEN_HARDMAX;
        if (len > lim)
            return fail(why, PHX_EPROTO, "payload length %u exceeds limit %u",
                        (unsigned)len, (unsigned)lim);
    }
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
