/* core/mlog.c's control messages, each a struct with one encoder and one
 * decoder over the base codec (base/phx_wire.h). The determinant trailer
 * and the ack inside them are scml's (scml.h: phx_ml_pb_encode,
 * phx_ml_pb_store, phx_ml_ack_take, phx_ml_on_ack). Layouts: docs/wire.md.
 *
 * Pure: no state, callable from any thread. */
#ifndef PHX_FT_MLOG_MSG_H
#define PHX_FT_MLOG_MSG_H

#include <stddef.h>
#include <stdint.h>

#include "base/phx_wire.h"
#include "ft/mlog/detq.h"

/* ML_RDETS: determinants handed back to the ranks that host their
 * receivers after a recovery, 32 bytes each, as many as fit the body. */
#define PHX_ML_DET_LEN 32
void phx_ml_det_enc(phx_wenc_t *e, const phx_det_t *d);
int phx_ml_det_dec(phx_wdec_t *d, phx_det_t *out);

/* ML_RDONE, ML_RFIN: a recovery round number (1..255). */
#define PHX_ML_ROUND_LEN 4
void phx_ml_round_enc(uint8_t *out, uint32_t round);
int phx_ml_round_dec(const void *p, size_t len, uint32_t *round);

/* ML_ACKDETS: an ack (u16 length first) and a det trailer in one body. */
typedef struct phx_ml_ackdets {
    const uint8_t *ack, *dets;
    size_t ack_len, dets_len;
} phx_ml_ackdets_t;
#define PHX_ML_ACKDETS_HEAD 2
/* The head ahead of an ack of ack_len bytes. */
void phx_ml_ackdets_head(uint8_t *out, size_t ack_len);
int phx_ml_ackdets_dec(const void *p, size_t len, phx_ml_ackdets_t *m);

#endif
