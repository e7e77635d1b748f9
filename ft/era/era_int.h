/* Internal to ft/era: shared between era.c and group.c. Not installed. */
#ifndef PHX_FT_ERA_INT_H
#define PHX_FT_ERA_INT_H

#include "ft/era/era.h"
#include "ft/era/group.h"

#include <stdbool.h>

struct phx_ft_group {
    struct phx_ft_group *next;
    phx_ft_era_t *era;
    uint64_t id;
    int m;
    const int *members;        /* sorted job ranks */
    bool own_members;          /* else borrowed (phx_ft_group_create_borrowed) */
    int self_idx;
    phx_ft_rankset_t mask;     /* members as a set */
    phx_ft_rankset_t acked;    /* failure_ack snapshot */
    bool revoked;
    int revoke_src;            /* rank we must re-flood for if it dies */
    bool any_started;
    uint64_t last_aid;         /* program-order check */
    uint64_t gc_below;         /* every survivor decided all aids below */
};

/* One agreement as seen locally: lazy (peers' UPs arrived before our
 * start), running, or decided (kept to answer late requesters). */
typedef struct era_inst {
    struct era_inst *next;
    uint64_t gid, aid;
    uint64_t seq;              /* creation order, for history eviction */
    phx_ft_group_t *g;         /* set at start */
    bool started, decided, shrink, has_agg, pre_decided;
    uint8_t op;
    uint32_t nwords;           /* 0 until op/width known */
    phx_ft_era_value_t agg;    /* running reduction, then the decision */
    phx_ft_rankset_t dead;     /* union of contributors' dead sets */
    phx_ft_rankset_t ack;      /* intersection of contributors' acked sets */
    uint64_t low;              /* min over contributors of lowest undecided aid */
    phx_ft_rankset_t got_up;   /* ranks that sent us their contribution */
    int sent_to;               /* rank our UP went to, -1 none */
    int last_parent;           /* after decision: parent last told, -1 none */
    int rc;
} era_inst_t;

enum era_ev_kind { EV_DECIDED, EV_SHRUNK, EV_REVOKED };

typedef struct era_ev {
    enum era_ev_kind kind;
    uint64_t gid, aid;
    phx_ft_group_t *newg;
    phx_ft_era_value_t value;
    phx_ft_rankset_t failed;
    int rc;
} era_ev_t;

typedef struct pend_revoke {
    struct pend_revoke *next;
    uint64_t gid;
    int src;
} pend_revoke_t;

struct phx_ft_era {
    phx_ft_era_env_t env;
    int rank, n, nbm;          /* nbm: rank-set words on the wire */
    unsigned arity;
    unsigned history_max;
    size_t inst_max;           /* hard cap: lazy entries created by peers */
    phx_ft_rankset_t dead;
    phx_ft_group_t *groups;
    era_inst_t *insts;
    size_t ninst;
    uint64_t seq;
    pend_revoke_t *pend_revokes;
    era_ev_t *evq;             /* callbacks delivered at the outermost exit */
    size_t evq_len, evq_cap, evq_head;
    int depth;
    bool flushing, sweep;
    int first_err;             /* first send error of the current call */
};

/* Entry/exit bracket of every public mutating call: exit sweeps GC'd
 * entries, flushes queued callbacks (outermost only) and returns rc or the
 * first send error. */
void era_enter(phx_ft_era_t *era);
int  era_exit(phx_ft_era_t *era, int rc);

int  era_send(phx_ft_era_t *era, int dst, const void *buf, size_t len);
int  era_queue_ev(phx_ft_era_t *era, const era_ev_t *ev);
void era_send_revoke(phx_ft_era_t *era, phx_ft_group_t *g);
int  era_start_internal(phx_ft_era_t *era, phx_ft_group_t *g, uint64_t aid,
                        const phx_ft_era_value_t *value, phx_ft_era_op_t op,
                        bool shrink);
int  group_create_internal(phx_ft_era_t *era, uint64_t gid, const int *members,
                           int nmembers, bool borrow, phx_ft_group_t **out);
void group_on_failure(phx_ft_era_t *era, int rank);
void group_on_revoke_msg(phx_ft_era_t *era, int src, uint64_t gid);
void group_free_all(phx_ft_era_t *era);

static inline bool rs_test(const phx_ft_rankset_t *s, int r)
{
    return phx_ft_rankset_test(s, r) != 0;
}

#endif
