/* The termination detectors' control messages and piggybacks, each a
 * struct with one encoder and one decoder over the base codec
 * (base/phx_wire.h). Layouts: docs/wire.md.
 *
 * Encoders write into buf[0..cap) and return the length, or PHX_ENOSPC.
 * Decoders check the structure only (length, type, flag ranges) and return
 * 0 or PHX_EPROTO; what a field may name (a live rank, a variant that uses
 * the message) is the detector's to check.
 *
 * Pure: no state, callable from any thread. */
#ifndef PHX_FT_TD_MSG_H
#define PHX_FT_TD_MSG_H

#include <stddef.h>
#include <stdint.h>

/* ---- Dijkstra-Scholten with adoption (td_ds.c) ---- */
enum {
    PHX_DS_M_ACK = 1, PHX_DS_M_PGC, PHX_DS_M_QUERY, PHX_DS_M_REPLY, PHX_DS_M_INTERIOR, PHX_DS_M_EXTERIOR,
    PHX_DS_M_NOTIFY, PHX_DS_M_ANSWER, PHX_DS_M_ANNOUNCE, PHX_DS_M_FATAL, PHX_DS_M_FENCE, PHX_DS_M_NTYPES
};
#define PHX_DS_ACK_DISENGAGE 1u

/* A REPLY entry: a potential child of the replier, and (RELEAGER) its
 * unpaired-interior bit. */
typedef struct phx_ds_entry {
    int32_t rank;
    uint8_t bit;
} phx_ds_entry_t;

typedef struct phx_ds_msg {
    uint8_t type;
    uint8_t flags;             /* ACK: PHX_DS_ACK_DISENGAGE */
    uint8_t debt;              /* REPLY: the replier was the failed node's child */
    uint8_t engaged, unpaired; /* ANSWER */
    int32_t rank;              /* PGC: the new successor; QUERY, REPLY: the failed parent;
                                * INTERIOR, EXTERIOR: the sender's parent; NOTIFY: the new grandparent */
    int32_t gparent;           /* QUERY: the querier's own parent (-1: none) */
    uint32_t count;            /* ACK: messages acknowledged; REPLY: entries */
    uint32_t xseq;             /* NOTIFY, ANSWER: the exchange they belong to */
    uint64_t seq;              /* PGC, INTERIOR: the fence notice; FENCE: the notice acknowledged */
    const phx_ds_entry_t *ent; /* REPLY, to encode: count entries */
    const uint8_t *raw;        /* REPLY, decoded: the entries in place (phx_ds_msg_entry) */
} phx_ds_msg_t;

/* Largest DS message for n ranks (a REPLY naming every rank). */
#define PHX_DS_MSG_MAX(n) (10 + 5 * (size_t)(n))

long phx_ds_msg_enc(const phx_ds_msg_t *m, void *buf, size_t cap);
int phx_ds_msg_dec(const void *buf, size_t len, phx_ds_msg_t *m);
/* Entry i < m->count of a decoded REPLY. */
phx_ds_entry_t phx_ds_msg_entry(const phx_ds_msg_t *m, uint32_t i);

/* Piggyback of the Rel variants: the sender's parent (-1: none). */
void phx_ds_pb_enc(uint8_t *pb, int32_t parent);
int32_t phx_ds_pb_dec(const uint8_t *pb);

/* ---- Mattern's four counters (td_4c.c) ---- */
enum { PHX_4C_M_STOP = 1, PHX_4C_M_DOWN = 2 };
typedef struct phx_4c_msg {
    uint8_t type;
    uint8_t term;              /* DOWN: 1 terminate, 0 another wave */
    uint64_t sent, recvd;      /* STOP: the subtree's counters of this wave */
} phx_4c_msg_t;
#define PHX_4C_MSG_MAX 17
long phx_4c_msg_enc(const phx_4c_msg_t *m, void *buf, size_t cap);
int phx_4c_msg_dec(const void *buf, size_t len, phx_4c_msg_t *m);

/* ---- credit distribution (td_cda.c, td_hcda.c): td_credit.h's types ---- */
typedef struct phx_tdc_msg {
    uint8_t type;              /* PHX_TDC_* */
    uint64_t credit;           /* FLUSH, GRANT */
} phx_tdc_msg_t;
#define PHX_TDC_MSG_MAX 9
long phx_tdc_msg_enc(const phx_tdc_msg_t *m, void *buf, size_t cap);
int phx_tdc_msg_dec(const void *buf, size_t len, phx_tdc_msg_t *m);
/* Piggyback: the credit a primary message carries. */
void phx_tdc_pb_enc(uint8_t *pb, uint64_t credit);
uint64_t phx_tdc_pb_dec(const uint8_t *pb);

/* ---- Mahapatra and Dutt's EDOD (td_edod.c) ---- */
enum { PHX_ED_M_STOP = 1, PHX_ED_M_RESUME, PHX_ED_M_ACKT, PHX_ED_M_ACK, PHX_ED_M_TERM };
typedef struct phx_ed_msg {
    uint8_t type;
    int32_t s, r;              /* RESUME, ACK_T, ACK: the primary's sender and receiver */
} phx_ed_msg_t;
#define PHX_ED_MSG_MAX 9
long phx_ed_msg_enc(const phx_ed_msg_t *m, void *buf, size_t cap);
int phx_ed_msg_dec(const void *buf, size_t len, phx_ed_msg_t *m);

#endif
