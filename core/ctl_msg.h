/* The runtime's own control messages (PHX_FT_CTRL frames outside the
 * recovery modes' tag range), each a struct with one encoder and one
 * decoder over the base codec. Layouts: docs/wire.md.
 *
 * Pure: no state, callable from any thread. */
#ifndef PHX_CORE_CTL_MSG_H
#define PHX_CORE_CTL_MSG_H

#include <stddef.h>
#include <stdint.h>

#include "base/phx_wire.h"

/* PHX_CTRL_EXIT: the job ends with this exit code (sent by the rank that
 * ends it to every peer). */
#define PHX_CTL_EXIT_LEN 4
static inline void phx_ctl_exit_enc(uint8_t *out, int32_t code)
{
    phx_wenc_t e;
    phx_wenc_init(&e, out, PHX_CTL_EXIT_LEN);
    phx_wenc_i32(&e, code);
}
/* 0 and *code, or PHX_EPROTO. */
static inline int phx_ctl_exit_dec(const void *p, size_t len, int32_t *code)
{
    phx_wdec_t d;
    phx_wdec_init(&d, p, len);
    *code = phx_wdec_i32(&d);
    return phx_wdec_end(&d, 1);
}

#endif
