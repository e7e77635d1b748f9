/* core/mlog.c's control messages (msg.h). */
#include "ft/mlog/msg.h"

#include "base/phx_err.h"

void phx_ml_det_enc(phx_wenc_t *e, const phx_det_t *d)
{
    phx_wenc_u64(e, d->sender);
    phx_wenc_u64(e, d->receiver);
    phx_wenc_u64(e, d->ssn);
    phx_wenc_u64(e, d->rsn);
}

int phx_ml_det_dec(phx_wdec_t *d, phx_det_t *out)
{
    out->sender = phx_wdec_u64(d);
    out->receiver = phx_wdec_u64(d);
    out->ssn = phx_wdec_u64(d);
    out->rsn = phx_wdec_u64(d);
    return d->err;
}

void phx_ml_round_enc(uint8_t *out, uint32_t round)
{
    phx_wenc_t e;
    phx_wenc_init(&e, out, PHX_ML_ROUND_LEN);
    phx_wenc_u32(&e, round);
}

int phx_ml_round_dec(const void *p, size_t len, uint32_t *round)
{
    phx_wdec_t d;
    phx_wdec_init(&d, p, len);
    *round = phx_wdec_u32(&d);
    return phx_wdec_end(&d, 1);
}

void phx_ml_ackdets_head(uint8_t *out, size_t ack_len)
{
    phx_wenc_t e;
    phx_wenc_init(&e, out, PHX_ML_ACKDETS_HEAD);
    phx_wenc_u16(&e, (uint16_t)ack_len);
}

int phx_ml_ackdets_dec(const void *p, size_t len, phx_ml_ackdets_t *m)
{
    phx_wdec_t d;
    phx_wdec_init(&d, p, len);
    m->ack_len = phx_wdec_u16(&d);
    m->ack = phx_wdec_take(&d, m->ack_len);
    m->dets_len = phx_wdec_left(&d);
    m->dets = phx_wdec_take(&d, m->dets_len);
    return phx_wdec_end(&d, 1);
}
