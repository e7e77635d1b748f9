/* recovery=cr's wire and file formats (ckpt_msg.h). */
#include "ft/ckpt/ckpt_msg.h"

#include <stdlib.h>
#include <string.h>

#include "base/phx_err.h"

/* GCC 12 at -O2 reports the cursor's guarded stores into the fixed-size
 * headers below as writes past a region of size 0: a false positive
 * (phx_wenc_reserve checks the room first; clang and the same stores in a
 * smaller file say nothing). The round-trip tests and the fuzzer's ASan
 * build hold the bounds instead. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wstringop-overflow"
#endif

static long enc_end(const phx_wenc_t *e)
{
    ptrdiff_t n = phx_wenc_end(e);
    return n < 0 ? PHX_ENOSPC : (long)n;
}

/* ---- control head ---------------------------------------------------------- */

void phx_ck_ctl_enc(uint8_t *out, uint64_t arg)
{
    phx_wenc_t e;
    phx_wenc_init(&e, out, PHX_CK_CTL_HEAD);
    phx_wenc_u64(&e, arg);
}

int phx_ck_ctl_dec(const void *p, size_t len, phx_ck_ctl_t *m)
{
    phx_wdec_t d;
    phx_wdec_init(&d, p, len);
    m->arg = phx_wdec_u64(&d);
    m->len = phx_wdec_left(&d);
    m->body = d.err ? NULL : d.p;
    return phx_wdec_end(&d, 0);
}

/* ---- bulk transfer ----------------------------------------------------------- */

void phx_ck_chunk_enc(uint8_t *out, const phx_ck_chunk_t *m)
{
    phx_wenc_t e;
    phx_wenc_init(&e, out, PHX_CK_CHUNK_HDR);
    phx_wenc_u8(&e, m->kind);
    phx_wenc_i32(&e, m->key);
    phx_wenc_u64(&e, m->epoch);
    phx_wenc_u64(&e, m->total);
    phx_wenc_u64(&e, m->off);
}

int phx_ck_chunk_dec(const void *p, size_t len, phx_ck_chunk_t *m)
{
    phx_wdec_t d;
    phx_wdec_init(&d, p, len);
    m->kind = phx_wdec_u8(&d);
    m->key = phx_wdec_i32(&d);
    m->epoch = phx_wdec_u64(&d);
    m->total = phx_wdec_u64(&d);
    m->off = phx_wdec_u64(&d);
    if (d.err || m->off > m->total || len - PHX_CK_CHUNK_HDR > m->total - m->off)
        return PHX_EPROTO;
    return 0;
}

void phx_ck_cack_enc(uint8_t *out, const phx_ck_cack_t *m)
{
    phx_wenc_t e;
    phx_wenc_init(&e, out, PHX_CK_CACK_LEN);
    phx_wenc_u8(&e, m->kind);
    phx_wenc_i32(&e, m->key);
    phx_wenc_u64(&e, m->got);
}

int phx_ck_cack_dec(const void *p, size_t len, phx_ck_cack_t *m)
{
    phx_wdec_t d;
    phx_wdec_init(&d, p, len);
    m->kind = phx_wdec_u8(&d);
    m->key = phx_wdec_i32(&d);
    m->got = phx_wdec_u64(&d);
    return phx_wdec_end(&d, 1);
}

/* ---- commit round ------------------------------------------------------------- */

long phx_ck_begin_enc(const phx_ck_begin_t *m, int n, int nloc, void *buf, size_t cap)
{
    phx_wenc_t e;
    phx_wenc_init(&e, buf, cap);
    phx_wenc_i32s(&e, m->buddy, (size_t)n, -1);
    if (m->loc)
        phx_wenc_i32s(&e, m->loc, (size_t)nloc, -1);
    return enc_end(&e);
}

int phx_ck_begin_dec(const void *p, size_t len, int n, int nloc, phx_ck_begin_t *m)
{
    if (n < 0 || nloc < 0 || (len != 4 * (size_t)n && len != 4 * ((size_t)n + (size_t)nloc)))
        return PHX_EPROTO;
    phx_wdec_t d;
    phx_wdec_init(&d, p, len);
    m->buddy = m->loc = NULL;
    m->buddies = phx_wdec_a32(&d, (size_t)n);
    m->table = phx_wdec_a32(&d, phx_wdec_left(&d) ? (size_t)nloc : 0);
    return phx_wdec_end(&d, 1);
}

void phx_ck_ready_enc(uint8_t *out, uint64_t queued)
{
    phx_wenc_t e;
    phx_wenc_init(&e, out, PHX_CK_READY_LEN);
    phx_wenc_u64(&e, queued);
}

int phx_ck_ready_dec(const void *p, size_t len, uint64_t *queued)
{
    phx_wdec_t d;
    phx_wdec_init(&d, p, len);
    *queued = phx_wdec_u64(&d);
    return phx_wdec_end(&d, 1);
}

/* ---- recovery round --------------------------------------------------------- */

static size_t join_len(int n, int nloc)
{
    return 2 + 4 * (size_t)n + 4 * (size_t)nloc + 4 * (size_t)n;
}

size_t phx_ck_eset_len(int n, int nloc, int joins)
{
    return 8 + (size_t)n + 1 + (joins ? join_len(n, nloc) : 0);
}

long phx_ck_eset_enc(const phx_ck_eset_t *m, int n, int nloc, void *buf, size_t cap)
{
    phx_wenc_t e;
    phx_wenc_init(&e, buf, cap);
    phx_wenc_u64(&e, m->epoch);
    phx_wenc_bytes(&e, m->dead, (size_t)n);
    phx_wenc_u8(&e, m->flags);
    if (m->joins) {
        phx_wenc_u16(&e, m->view);
        for (int x = 0; x < n; x++)
            phx_wenc_u32(&e, m->incs[x]);
        phx_wenc_i32s(&e, m->loc, (size_t)nloc, -1);
        phx_wenc_i32s(&e, m->buddy, (size_t)n, -1);
    }
    return enc_end(&e);
}

int phx_ck_eset_dec(const void *p, size_t len, int n, int nloc, phx_ck_eset_t *m)
{
    memset(m, 0, sizeof *m);
    if (n < 0 || nloc < 0)
        return PHX_EPROTO;
    if (len != phx_ck_eset_len(n, nloc, 0) && len != phx_ck_eset_len(n, nloc, 1))
        return PHX_EPROTO;
    phx_wdec_t d;
    phx_wdec_init(&d, p, len);
    m->epoch = phx_wdec_u64(&d);
    m->dead = phx_wdec_take(&d, (size_t)n);
    m->flags = phx_wdec_u8(&d);
    m->joins = phx_wdec_left(&d) > 0;
    if (m->joins) {
        m->view = phx_wdec_u16(&d);
        m->inc = phx_wdec_a32(&d, (size_t)n);
        m->table = phx_wdec_a32(&d, (size_t)nloc);
        m->buddies = phx_wdec_a32(&d, (size_t)n);
    }
    return phx_wdec_end(&d, 1);
}

void phx_ck_join_enc(uint8_t *out, uint32_t inc)
{
    phx_wenc_t e;
    phx_wenc_init(&e, out, PHX_CK_JOIN_LEN);
    phx_wenc_u32(&e, inc);
}

int phx_ck_join_dec(const void *p, size_t len, uint32_t *inc)
{
    phx_wdec_t d;
    phx_wdec_init(&d, p, len);
    *inc = phx_wdec_u32(&d);
    return phx_wdec_end(&d, 1);
}

void phx_ck_abort_enc(uint8_t *out, const phx_ck_abort_t *m)
{
    phx_wenc_t e;
    phx_wenc_init(&e, out, PHX_CK_ABORT_LEN);
    phx_wenc_i32(&e, m->lost);
    phx_wenc_i32(&e, m->buddy);
}

int phx_ck_abort_dec(const void *p, size_t len, phx_ck_abort_t *m)
{
    phx_wdec_t d;
    phx_wdec_init(&d, p, len);
    m->lost = phx_wdec_i32(&d);
    m->buddy = phx_wdec_i32(&d);
    return phx_wdec_end(&d, 1);
}

/* ---- checkpoint blob -------------------------------------------------------- */

void phx_ck_blob_head_enc(phx_wenc_t *e, const phx_ck_blob_head_t *h)
{
    phx_wenc_u32(e, PHX_CK_BLOB_MAGIC);
    phx_wenc_u16(e, h->rank);
    phx_wenc_u16(e, (uint16_t)(h->creator - h->rank));
    phx_wenc_u32(e, h->seq);
    phx_wenc_u32(e, h->ntasks);
}

int phx_ck_blob_head_dec(phx_wdec_t *d, phx_ck_blob_head_t *h)
{
    uint32_t magic = phx_wdec_u32(d);
    h->rank = phx_wdec_u16(d);
    h->creator = (uint16_t)(h->rank + phx_wdec_u16(d));
    h->seq = phx_wdec_u32(d);
    h->ntasks = phx_wdec_u32(d);
    return d->err ? d->err : magic != PHX_CK_BLOB_MAGIC ? PHX_EPROTO : 0;
}

int phx_ck_blob_head_get(const void *blob, size_t len, phx_ck_blob_head_t *h)
{
    phx_wdec_t d;
    phx_wdec_init(&d, blob, len);
    return phx_ck_blob_head_dec(&d, h);
}

void phx_ck_msgrec_enc(phx_wenc_t *e, const phx_ck_msgrec_t *m)
{
    phx_wenc_u8(e, m->kind);
    phx_wenc_u16(e, m->type);
    phx_wenc_u64(e, m->src);
    phx_wenc_u64(e, m->dst);
    phx_wenc_u64(e, m->ssn);
    phx_wenc_u32(e, m->tag);
    phx_wenc_u32(e, m->len);
    phx_wenc_bytes(e, m->data, m->len);
}

int phx_ck_msgrec_dec(phx_wdec_t *d, phx_ck_msgrec_t *m)
{
    m->kind = phx_wdec_u8(d);
    m->type = phx_wdec_u16(d);
    m->src = phx_wdec_u64(d);
    m->dst = phx_wdec_u64(d);
    m->ssn = phx_wdec_u64(d);
    m->tag = phx_wdec_u32(d);
    m->len = phx_wdec_u32(d);
    m->data = phx_wdec_take(d, m->len);
    return d->err;
}

void phx_ck_task_head_enc(phx_wenc_t *e, const phx_ck_task_head_t *t)
{
    phx_wenc_u64(e, t->id);
    phx_wenc_u16(e, t->type);
    phx_wenc_u64(e, t->rsn);
}

int phx_ck_task_head_dec(phx_wdec_t *d, phx_ck_task_head_t *t)
{
    t->id = phx_wdec_u64(d);
    t->type = phx_wdec_u16(d);
    t->rsn = phx_wdec_u64(d);
    return d->err;
}

static void skip_pairs(phx_wdec_t *d)
{
    uint32_t k = phx_wdec_u32(d);
    if (phx_wdec_left(d) / 16 < k)
        d->err = PHX_EPROTO;
    phx_wdec_take(d, (size_t)k * 16);
}

static void skip_msgs(phx_wdec_t *d, uint32_t k)
{
    phx_ck_msgrec_t m;
    for (uint32_t i = 0; i < k && !d->err; i++)
        phx_ck_msgrec_dec(d, &m);
}

int phx_ck_task_skip(phx_wdec_t *d)
{
    skip_pairs(d);                        /* out_ssn */
    skip_pairs(d);                        /* in_ssn */
    phx_wdec_take(d, phx_wdec_u32(d));    /* state */
    skip_msgs(d, phx_wdec_u32(d));        /* held back */
    return d->err;
}

int phx_ck_blob_scan(const void *blob, size_t len, phx_ck_blob_info_t *out)
{
    phx_wdec_t d;
    phx_wdec_init(&d, blob, len);
    memset(out, 0, sizeof *out);
    if (phx_ck_blob_head_dec(&d, &out->head))
        return PHX_EPROTO;
    phx_ck_task_head_t t;
    for (uint32_t i = 0; i < out->head.ntasks && !d.err; i++)
        if (!phx_ck_task_head_dec(&d, &t))
            phx_ck_task_skip(&d);
    out->queued = phx_wdec_u32(&d);
    skip_msgs(&d, out->queued);
    out->gone = phx_wdec_u32(&d);
    if (phx_wdec_left(&d) / 8 < out->gone)
        return PHX_EPROTO;
    phx_wdec_take(&d, (size_t)out->gone * 8);
    return phx_wdec_end(&d, 1);
}

/* ---- disk ----------------------------------------------------------------- */

void phx_ckd_hdr_enc(uint8_t *out, const phx_ckd_hdr_t *h)
{
    phx_wenc_t e;
    phx_wenc_init(&e, out, PHX_CKD_HDR);
    phx_wenc_u64(&e, h->magic);
    phx_wenc_u32(&e, h->version);
    phx_wenc_u64(&e, h->tag);
    phx_wenc_u64(&e, h->epoch);
    phx_wenc_u32(&e, h->rank);
    phx_wenc_u64(&e, h->len);
    phx_wenc_bytes(&e, h->sum, sizeof h->sum);
}

int phx_ckd_hdr_dec(const void *p, size_t len, phx_ckd_hdr_t *h)
{
    phx_wdec_t d;
    phx_wdec_init(&d, p, len);
    h->magic = phx_wdec_u64(&d);
    h->version = phx_wdec_u32(&d);
    h->tag = phx_wdec_u64(&d);
    h->epoch = phx_wdec_u64(&d);
    h->rank = phx_wdec_u32(&d);
    h->len = phx_wdec_u64(&d);
    phx_wdec_bytes(&d, h->sum, sizeof h->sum);
    return d.err;
}

uint8_t *phx_ckd_manifest_enc(const phx_ckd_manifest_t *m, uint64_t tag, size_t *body)
{
    size_t cap = 128 + 4 * ((size_t)m->nhome * (size_t)m->slices + (size_t)m->nfiles);
    uint8_t *buf = malloc(cap);
    if (!buf)
        return NULL;
    phx_wenc_t e;
    phx_wenc_init(&e, buf, cap);
    phx_wenc_u64(&e, PHX_CKD_MANI_MAGIC);
    phx_wenc_u32(&e, PHX_CKD_VERSION);
    phx_wenc_u64(&e, tag);
    phx_wenc_u64(&e, m->epoch);
    phx_wenc_u32(&e, (uint32_t)m->size);
    phx_wenc_u32(&e, (uint32_t)m->nhome);
    phx_wenc_u32(&e, (uint32_t)m->slices);
    phx_wenc_i32s(&e, m->loc, (size_t)m->nhome * (size_t)m->slices, -1);
    phx_wenc_u32(&e, (uint32_t)m->nfiles);
    phx_wenc_i32s(&e, m->ranks, (size_t)m->nfiles, -1);
    ptrdiff_t n = phx_wenc_end(&e);
    if (n < 0 || (size_t)n + 32 > cap) {
        free(buf);
        return NULL;
    }
    *body = (size_t)n;
    return buf;
}

void phx_ckd_manifest_free(phx_ckd_manifest_t *m)
{
    free(m->loc);
    free(m->ranks);
    m->loc = m->ranks = NULL;
}

int phx_ckd_manifest_dec(const void *p, size_t len, phx_ckd_manifest_t *m, uint64_t *tag, size_t *body,
                         const uint8_t **sum, const char **why)
{
    memset(m, 0, sizeof *m);
    phx_wdec_t d;
    phx_wdec_init(&d, p, len);
    uint64_t magic = phx_wdec_u64(&d);
    uint32_t ver = phx_wdec_u32(&d);
    *tag = phx_wdec_u64(&d);
    m->epoch = phx_wdec_u64(&d);
    m->size = (int)phx_wdec_u32(&d);
    m->nhome = (int)phx_wdec_u32(&d);
    m->slices = (int)phx_wdec_u32(&d);
    *why = NULL;
    if (d.err || magic != PHX_CKD_MANI_MAGIC || ver != PHX_CKD_VERSION)
        *why = "not a Phalanx manifest (bad magic, version or truncated)";
    else if (m->size < 1 || m->size > 65535 || m->nhome < m->size || m->nhome > 65535 || m->slices < 1 ||
             m->slices > 1024)
        *why = "inconsistent header";
    if (*why)
        return PHX_EPROTO;
    size_t nl = (size_t)m->nhome * (size_t)m->slices;
    phx_wire_a32_t loc = phx_wdec_a32(&d, nl);
    m->nfiles = (int)phx_wdec_u32(&d);
    if (d.err || m->nfiles < 1 || m->nfiles > m->size) {
        *why = "truncated or inconsistent";
        return PHX_EPROTO;
    }
    phx_wire_a32_t ranks = phx_wdec_a32(&d, (size_t)m->nfiles);
    *body = (size_t)(d.p - d.start);
    *sum = phx_wdec_take(&d, 32);
    if (phx_wdec_end(&d, 1)) {
        *why = "truncated";
        return PHX_EPROTO;
    }
    m->loc = calloc(nl, sizeof *m->loc);
    m->ranks = calloc((size_t)m->nfiles, sizeof *m->ranks);
    if (!m->loc || !m->ranks) {
        phx_ckd_manifest_free(m);
        *why = "out of memory";
        return PHX_ENOMEM;
    }
    for (size_t i = 0; i < nl; i++)
        m->loc[i] = phx_wire_a32_i32(loc, i);
    for (int i = 0; i < m->nfiles; i++)
        m->ranks[i] = phx_wire_a32_i32(ranks, (size_t)i);
    return 0;
}
