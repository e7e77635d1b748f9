/* Tunables of the credit detectors (HCDA, CDA; 001 §4). Process-wide: set
 * them before create(); an instance copies them at create time. Values are
 * identical on every node (C_init is the implicit initial credit). */
#ifndef PHX_FT_TD_CREDIT_H
#define PHX_FT_TD_CREDIT_H

#include <stddef.h>
#include <stdint.h>

typedef struct phx_td_credit_cfg {
    uint64_t c_init;    /* initial credit per node, and per GRANT (2^32) */
    uint64_t c_max;     /* local clamp; the excess is flushed at once */
    uint64_t c_con;     /* CDA: at or below it, at most w_con per message */
    uint64_t w_con;
    uint64_t c_borrow;  /* CDA: prefetch a GRANT below this (0 = never) */
} phx_td_credit_cfg_t;

/* Defaults: 2^32, 2^62, 2^16, 2^8, 2^10 (digest §7 [R]). */
void phx_td_credit_defaults(phx_td_credit_cfg_t *cfg);
/* Returns PHX_EINVAL unless 1 <= c_init <= c_max, w_con >= 1. */
int phx_td_credit_set(const phx_td_credit_cfg_t *cfg);
void phx_td_credit_get(phx_td_credit_cfg_t *cfg);

/* Test hook: a snapshot of one instance, for conservation checks:
 * sum(credit) + credit in flight (piggyback, FLUSH, GRANT) + returned
 * == created must hold at every instant. */
typedef struct phx_td_credit_dbg {
    uint64_t credit;
    size_t held;                   /* sends waiting for credit or batch end */
    int is_agent, borrow_pending;
    unsigned __int128 created, returned;   /* agent only */
} phx_td_credit_dbg_t;
void phx_td_cda_debug(const void *st, phx_td_credit_dbg_t *out);
void phx_td_hcda_debug(const void *st, phx_td_credit_dbg_t *out);

/* Wire format shared by HCDA and CDA: type byte, then a little-endian u64
 * credit for FLUSH/GRANT; the piggyback is the u64 credit. */
enum { PHX_TDC_FLUSH = 1, PHX_TDC_BORROW, PHX_TDC_GRANT, PHX_TDC_TERM };
#endif
