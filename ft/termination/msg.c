/* The termination detectors' wire messages (msg.h): type byte first, then
 * fixed little-endian fields per type through the base cursor. */
#include "ft/termination/msg.h"

#include "base/phx_err.h"
#include "base/phx_wire.h"
#include "ft/termination/td_credit.h"

static long enc_end(const phx_wenc_t *e)
{
    ptrdiff_t n = phx_wenc_end(e);
    return n < 0 ? PHX_ENOSPC : (long)n;
}

/* ---- Dijkstra-Scholten -------------------------------------------------- */

long phx_ds_msg_enc(const phx_ds_msg_t *m, void *buf, size_t cap)
{
    phx_wenc_t e;
    phx_wenc_init(&e, buf, cap);
    phx_wenc_u8(&e, m->type);
    switch (m->type) {
    case PHX_DS_M_ACK:
        phx_wenc_u8(&e, m->flags);
        phx_wenc_u32(&e, m->count);
        break;
    case PHX_DS_M_PGC:
    case PHX_DS_M_INTERIOR:
        phx_wenc_i32(&e, m->rank);
        phx_wenc_u64(&e, m->seq);
        break;
    case PHX_DS_M_EXTERIOR:
        phx_wenc_i32(&e, m->rank);
        break;
    case PHX_DS_M_QUERY:
        phx_wenc_i32(&e, m->rank);
        phx_wenc_i32(&e, m->gparent);
        break;
    case PHX_DS_M_REPLY:
        phx_wenc_i32(&e, m->rank);
        phx_wenc_u8(&e, m->debt);
        phx_wenc_u32(&e, m->count);
        for (uint32_t i = 0; i < m->count; i++) {
            phx_wenc_i32(&e, m->ent[i].rank);
            phx_wenc_u8(&e, m->ent[i].bit);
        }
        break;
    case PHX_DS_M_FENCE:
        phx_wenc_u64(&e, m->seq);
        break;
    case PHX_DS_M_NOTIFY:
        phx_wenc_i32(&e, m->rank);
        phx_wenc_u32(&e, m->xseq);
        break;
    case PHX_DS_M_ANSWER:
        phx_wenc_u32(&e, m->xseq);
        phx_wenc_u8(&e, m->engaged);
        phx_wenc_u8(&e, m->unpaired);
        break;
    case PHX_DS_M_ANNOUNCE:
    case PHX_DS_M_FATAL:
        break;
    default:
        return PHX_EINVAL;
    }
    return enc_end(&e);
}

int phx_ds_msg_dec(const void *buf, size_t len, phx_ds_msg_t *m)
{
    phx_wdec_t d;
    phx_wdec_init(&d, buf, len);
    *m = (phx_ds_msg_t){ .type = phx_wdec_u8(&d), .gparent = -1 };
    switch (m->type) {
    case PHX_DS_M_ACK:
        m->flags = phx_wdec_u8(&d);
        m->count = phx_wdec_u32(&d);
        if (m->flags & ~PHX_DS_ACK_DISENGAGE || !m->count)
            return PHX_EPROTO;
        break;
    case PHX_DS_M_PGC:
    case PHX_DS_M_INTERIOR:
        m->rank = phx_wdec_i32(&d);
        m->seq = phx_wdec_u64(&d);
        break;
    case PHX_DS_M_EXTERIOR:
        m->rank = phx_wdec_i32(&d);
        break;
    case PHX_DS_M_QUERY:
        m->rank = phx_wdec_i32(&d);
        m->gparent = phx_wdec_i32(&d);
        break;
    case PHX_DS_M_REPLY:
        m->rank = phx_wdec_i32(&d);
        m->debt = phx_wdec_u8(&d);
        m->count = phx_wdec_u32(&d);
        if (d.err || m->debt > 1 || phx_wdec_left(&d) / 5 < m->count)
            return PHX_EPROTO;
        m->raw = phx_wdec_take(&d, 5 * (size_t)m->count);
        for (uint32_t i = 0; i < m->count; i++)
            if (m->raw[5 * i + 4] > 1)
                return PHX_EPROTO;
        break;
    case PHX_DS_M_FENCE:
        m->seq = phx_wdec_u64(&d);
        break;
    case PHX_DS_M_NOTIFY:
        m->rank = phx_wdec_i32(&d);
        m->xseq = phx_wdec_u32(&d);
        break;
    case PHX_DS_M_ANSWER:
        m->xseq = phx_wdec_u32(&d);
        m->engaged = phx_wdec_u8(&d);
        m->unpaired = phx_wdec_u8(&d);
        if (m->engaged > 1 || m->unpaired > 1)
            return PHX_EPROTO;
        break;
    case PHX_DS_M_ANNOUNCE:
    case PHX_DS_M_FATAL:
        break;
    default:
        return PHX_EPROTO;
    }
    return phx_wdec_end(&d, 1);
}

phx_ds_entry_t phx_ds_msg_entry(const phx_ds_msg_t *m, uint32_t i)
{
    phx_wdec_t d;
    phx_wdec_init(&d, m->raw + 5 * (size_t)i, 5);
    phx_ds_entry_t x;
    x.rank = phx_wdec_i32(&d);
    x.bit = phx_wdec_u8(&d);
    return x;
}

void phx_ds_pb_enc(uint8_t *pb, int32_t parent)
{
    phx_wenc_t e;
    phx_wenc_init(&e, pb, 4);
    phx_wenc_i32(&e, parent);
}

int32_t phx_ds_pb_dec(const uint8_t *pb)
{
    phx_wdec_t d;
    phx_wdec_init(&d, pb, 4);
    return phx_wdec_i32(&d);
}

/* ---- four counters -------------------------------------------------------- */

long phx_4c_msg_enc(const phx_4c_msg_t *m, void *buf, size_t cap)
{
    phx_wenc_t e;
    phx_wenc_init(&e, buf, cap);
    phx_wenc_u8(&e, m->type);
    if (m->type == PHX_4C_M_STOP) {
        phx_wenc_u64(&e, m->sent);
        phx_wenc_u64(&e, m->recvd);
    } else if (m->type == PHX_4C_M_DOWN) {
        phx_wenc_u8(&e, m->term);
    } else {
        return PHX_EINVAL;
    }
    return enc_end(&e);
}

int phx_4c_msg_dec(const void *buf, size_t len, phx_4c_msg_t *m)
{
    phx_wdec_t d;
    phx_wdec_init(&d, buf, len);
    *m = (phx_4c_msg_t){ .type = phx_wdec_u8(&d) };
    if (m->type == PHX_4C_M_STOP) {
        m->sent = phx_wdec_u64(&d);
        m->recvd = phx_wdec_u64(&d);
    } else if (m->type == PHX_4C_M_DOWN) {
        m->term = phx_wdec_u8(&d);
        if (m->term > 1)
            return PHX_EPROTO;
    } else {
        return PHX_EPROTO;
    }
    return phx_wdec_end(&d, 1);
}

/* ---- credit ------------------------------------------------------------- */

long phx_tdc_msg_enc(const phx_tdc_msg_t *m, void *buf, size_t cap)
{
    phx_wenc_t e;
    phx_wenc_init(&e, buf, cap);
    phx_wenc_u8(&e, m->type);
    if (m->type == PHX_TDC_FLUSH || m->type == PHX_TDC_GRANT)
        phx_wenc_u64(&e, m->credit);
    else if (m->type != PHX_TDC_BORROW && m->type != PHX_TDC_TERM)
        return PHX_EINVAL;
    return enc_end(&e);
}

int phx_tdc_msg_dec(const void *buf, size_t len, phx_tdc_msg_t *m)
{
    phx_wdec_t d;
    phx_wdec_init(&d, buf, len);
    *m = (phx_tdc_msg_t){ .type = phx_wdec_u8(&d) };
    if (m->type == PHX_TDC_FLUSH || m->type == PHX_TDC_GRANT)
        m->credit = phx_wdec_u64(&d);
    else if (m->type != PHX_TDC_BORROW && m->type != PHX_TDC_TERM)
        return PHX_EPROTO;
    return phx_wdec_end(&d, 1);
}

void phx_tdc_pb_enc(uint8_t *pb, uint64_t credit)
{
    phx_wenc_t e;
    phx_wenc_init(&e, pb, 8);
    phx_wenc_u64(&e, credit);
}

uint64_t phx_tdc_pb_dec(const uint8_t *pb)
{
    phx_wdec_t d;
    phx_wdec_init(&d, pb, 8);
    return phx_wdec_u64(&d);
}

/* ---- EDOD ----------------------------------------------------------------- */

static int ed_has_sr(uint8_t t)
{
    return t == PHX_ED_M_RESUME || t == PHX_ED_M_ACKT || t == PHX_ED_M_ACK;
}

long phx_ed_msg_enc(const phx_ed_msg_t *m, void *buf, size_t cap)
{
    phx_wenc_t e;
    phx_wenc_init(&e, buf, cap);
    phx_wenc_u8(&e, m->type);
    if (ed_has_sr(m->type)) {
        phx_wenc_i32(&e, m->s);
        phx_wenc_i32(&e, m->r);
    } else if (m->type != PHX_ED_M_STOP && m->type != PHX_ED_M_TERM) {
        return PHX_EINVAL;
    }
    return enc_end(&e);
}

int phx_ed_msg_dec(const void *buf, size_t len, phx_ed_msg_t *m)
{
    phx_wdec_t d;
    phx_wdec_init(&d, buf, len);
    *m = (phx_ed_msg_t){ .type = phx_wdec_u8(&d) };
    if (ed_has_sr(m->type)) {
        m->s = phx_wdec_i32(&d);
        m->r = phx_wdec_i32(&d);
    } else if (m->type != PHX_ED_M_STOP && m->type != PHX_ED_M_TERM) {
        return PHX_EPROTO;
    }
    return phx_wdec_end(&d, 1);
}
