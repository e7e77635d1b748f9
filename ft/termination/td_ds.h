/* Dijkstra-Scholten core shared by the fault-tolerant detectors INDEP,
 * RELLAZY and RELEAGER (Lifflander, Miller and Kale, "Adoption Protocols for Fanout-Optimal Fault-Tolerant Termination Detection").
 * One state machine, one variant switch: the three protocols differ only in
 * what a grandparent records and in how an adopted child reports back, so a
 * single implementation keeps their common engagement bookkeeping identical.
 * See README.md "Fault-tolerant detectors" for the runtime contract. */
#ifndef PHX_FT_TD_DS_H
#define PHX_FT_TD_DS_H

#include <stdint.h>

#include "ft/termination/td.h"

typedef enum {
    PHX_DS_BASE = 0,   /* plain DS: any failure is fatal (not registered) */
    PHX_DS_INDEP,
    PHX_DS_RELLAZY,    /* lazy exterior signal, adopted children marked */
    PHX_DS_RELEAGER,   /* eager exterior signal, grandchildren re-pointed */
    /* Flag, tests only: no send fence (the detectors' first behaviour), so a
     * test can show that it catches the hole the fence closes. */
    PHX_DS_NOFENCE = 0x100,
} phx_ds_variant_t;

int  phx_td_ds_create(const phx_td_env_t *env, phx_ds_variant_t v, void **out);
void phx_td_ds_destroy(void *st);
void phx_td_ds_start(void *st, int has_work);
int  phx_td_ds_on_send(void *st, int dst, uint64_t token, uint8_t *pb);
void phx_td_ds_on_recv(void *st, int src, const uint8_t *pb);
void phx_td_ds_on_processed(void *st, int src);
void phx_td_ds_on_idle(void *st);
void phx_td_ds_on_busy(void *st);
int  phx_td_ds_on_ctrl(void *st, int src, const void *msg, size_t len);
void phx_td_ds_on_failure(void *st, int rank);
int  phx_td_ds_stats(void *st, phx_td_stat_t *out, int max);

/* Read-only snapshot for tests and diagnostics. */
typedef struct phx_ds_view {
    int engaged;       /* holds a parental obligation */
    int parent;        /* -1: root or not engaged */
    int grandparent;   /* Rel only; -1 unknown */
    int interior;      /* an interior signal is unpaired (Rel), else D > 0 */
    int adopted;       /* current parent came from an adoption */
    int orphan;        /* parent failed, adoption not yet done */
    int recovering;    /* queries outstanding or RELEAGER exchange open */
    int terminal;      /* 0 running, 1 declared, 2 fatal */
    int64_t C, D;
} phx_ds_view_t;

void phx_td_ds_view(const void *st, phx_ds_view_t *out);

/* Plain DS, for tests only (not in the registry). */
extern const phx_td_ops_t phx_td_ds_base_ops;

#endif
