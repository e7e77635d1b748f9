/* Tagged receive (core/phalanx.h): a thin layer over phx_send and
 * ft/mlog's duplicate filter. The tag rides in front of the payload, so
 * frames, logs and hand-backs carry it unchanged. Threads: the calling
 * task's worker (a box belongs to one task's state). */
#include <stdlib.h>
#include <string.h>

#include "core/phalanx.h"
#include "ft/mlog/dupf.h"
#include "base/phx_err.h"
#include "base/phx_wire.h"

/* A tagged message's payload: u32 magic, u64 tag, then the body. */
#define TAG_MAGIC 0x47545850u   /* "PXTG": a tagged message, not a plain one */
#define PRE 12

static void tag_enc(uint8_t *m, uint64_t tag)
{
    phx_wenc_t e;
    phx_wenc_init(&e, m, PRE);
    phx_wenc_u32(&e, TAG_MAGIC);
    phx_wenc_u64(&e, tag);
}

static int tag_dec(const void *msg, size_t len, uint64_t *tag)
{
    phx_wdec_t d;
    phx_wdec_init(&d, msg, len);
    uint32_t magic = phx_wdec_u32(&d);
    *tag = phx_wdec_u64(&d);
    return d.err || magic != TAG_MAGIC ? PHX_EPROTO : 0;
}

struct phx_tagbox {
    phx_dupf_t *f;
};

int phx_send_tagged(phx_ctx_t *c, phx_tid_t dst, int type, uint64_t tag, const void *buf, size_t len)
{
    if (len && !buf)
        return PHX_EINVAL;
    uint8_t small[256], *m = len + PRE <= sizeof small ? small : malloc(len + PRE);
    if (!m)
        return PHX_ENOMEM;
    tag_enc(m, tag);
    if (len)
        memcpy(m + PRE, buf, len);
    int rc = phx_send(c, dst, type, m, len + PRE);
    if (m != small)
        free(m);
    return rc;
}

phx_tagbox_t *phx_tagbox_new(void)
{
    phx_tagbox_t *b = calloc(1, sizeof *b);
    if (b && !(b->f = phx_dupf_create())) {
        free(b);
        b = NULL;
    }
    return b;
}

void phx_tagbox_free(phx_tagbox_t *b)
{
    if (b)
        phx_dupf_destroy(b->f);
    free(b);
}

int phx_tagbox_recv(phx_ctx_t *c, phx_tagbox_t *b, phx_tid_t src, int type, const void *msg, size_t len,
                    uint64_t *tag, const void **body, size_t *blen)
{
    if (type < 0 || tag_dec(msg, len, tag))
        return PHX_EPROTO;
    *body = (const uint8_t *)msg + PRE;
    *blen = len - PRE;
    return phx_dupf_admit(b->f, src, phx_self(c), (uint32_t)type, *tag);
}

int phx_tagbox_count(phx_ctx_t *c, const phx_tagbox_t *b, int type, uint64_t tag)
{
    return phx_dupf_count(b->f, phx_self(c), (uint32_t)type, tag);
}

uint64_t phx_tagbox_dups(const phx_tagbox_t *b)
{
    return phx_dupf_dups(b->f);
}

size_t phx_tagbox_size(const phx_tagbox_t *b)
{
    return phx_dupf_packed_size(b->f);
}

int phx_tagbox_pack(const phx_tagbox_t *b, void *buf, size_t cap)
{
    return (int)phx_dupf_pack(b->f, buf, cap);
}

int phx_tagbox_unpack(phx_tagbox_t *b, const void *buf, size_t len)
{
    return phx_dupf_unpack(b->f, buf, len);
}
