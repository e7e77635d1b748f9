/* recovery=cr: the move home: at a checkpoint's cut, the slices a partial
 * round left on helpers go back to their live home ranks. */
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "core/eventlog.h"
#include "core/cr_int.h"

/* SHIP_OUT: a snapshot of what the home table moves to rank r, shipped
 * there (kept until the commit); *sent counts its tasks. */
static int ship_out(cr_t *c, int r, uint32_t *sent)
{
    size_t len = 0;
    void *b = NULL;
    c->enc_loc = phx_ck_rj_home_loc(c->rj.m);
    c->enc_to = r;
    int rc = cr_snapshot(c, &b, &len);
    c->enc_loc = NULL;
    if (rc)
        return rc;
    free(c->home.out[r]);
    c->home.out[r] = b;
    phx_ck_blob_head_t bh;
    *sent += !phx_ck_blob_head_get(b, len, &bh) ? bh.ntasks : 0;
    return cr_bulk_send(c, BK_MIG, r, c->self, phx_ck_cm_id(c->cm), phx_ck_cm_epoch(c->cm), b, len);
}

/* KEEP: this node rebuilt from a snapshot of what stays. */
static int keep(cr_t *c, uint32_t sent)
{
    phx_node_t *n = c->n;
    void *own = NULL;
    size_t len = 0;
    uint32_t kept = 0;
    c->enc_loc = phx_ck_rj_home_loc(c->rj.m);
    c->enc_to = c->self;
    int rc = cr_snapshot(c, &own, &len);
    c->enc_loc = NULL;
    if (!rc && c->die_point == DIE_SHIPPED && c->die_epoch == n->inc) {
        phx_net_flush(n->net);
        raise(SIGKILL);   /* test: its tasks on their way home, not yet rebuilt here */
    }
    if (!rc) {
        cr_discard_all(c, 1);
        c->home.migrating = 1;
        rc = cr_restore_blob(c, own, len, 1, NULL, &kept);
        c->home.migrating = 0;
        phx_evlog("migrate_out", "\"epoch\":%llu,\"tasks\":%u,\"kept\":%u", (unsigned long long)phx_ck_cm_epoch(c->cm),
                  sent, kept);
    }
    free(own);
    return rc;
}

/* TAKE: rebuilds what s shipped here. */
static int take(cr_t *c, int s)
{
    uint32_t k = 0;
    c->home.migrating = 1;
    int rc = cr_restore_blob(c, c->home.in[s], c->home.in_len[s], 0, phx_ck_rj_home_loc(c->rj.m), &k);
    c->home.migrating = 0;
    free(c->home.in[s]);
    c->home.in[s] = NULL;
    phx_evlog("migrate_in", "\"epoch\":%llu,\"tasks\":%u,\"from\":%d", (unsigned long long)phx_ck_cm_epoch(c->cm), k, s);
    return rc;
}

/* At a moving checkpoint's cut (every marker in, workers paused): the
 * machine (phx_ck_rj_home_cut) says what to ship, keep and rebuild; this
 * carries it out. 1 once this node holds exactly its slices under the
 * home table. */
int cr_migrate(cr_t *c)
{
    phx_node_t *n = c->n;
    uint8_t *have = calloc((size_t)c->size, 1);
    if (!have) {
        cr_fatal(c, 1, "%s", "out of memory moving tasks home");
        return 0;
    }
    for (int s = 0; s < c->size; s++)
        have[s] = c->home.in[s] && c->home.in_id[s] == phx_ck_cm_id(c->cm);
    phx_ck_rj_out_t o = { 0 };
    int done = phx_ck_rj_home_cut(c->rj.m, have, &o);
    free(have);
    int rc = o.err;
    uint32_t sent = 0;
    for (int i = 0; i < o.len && !rc; i++) {
        const phx_ck_rj_act_t *a = &o.a[i];
        switch (a->kind) {
        case PHX_CK_RJ_SHIP_OUT:
            rc = ship_out(c, a->dst, &sent);
            break;
        case PHX_CK_RJ_KEEP:
            rc = keep(c, sent);
            break;
        case PHX_CK_RJ_SWITCH:
            memcpy(c->loc, phx_ck_rj_home_loc(c->rj.m), (size_t)c->nloc * sizeof *c->loc);
            n->loc_n = c->nhome;
            n->loc = c->loc;
            break;
        case PHX_CK_RJ_TAKE:
            rc = take(c, a->x);
            break;
        case PHX_CK_RJ_SETTLED:
            if (c->die_point == DIE_MOVED && c->die_epoch == n->inc)
                raise(SIGKILL);   /* test: its slices rebuilt here, the epoch not stored */
            break;
        }
    }
    phx_ck_rj_out_free(&o);
    if (rc) {
        cr_fatal(c, 1, "moving tasks home failed: %s", phx_strerror(rc));
        return 0;
    }
    return done;
}

/* Ends a moving checkpoint (committed or aborted; its transfers dropped). */
void cr_mig_reset(cr_t *c)
{
    if (c->rj.m)
        phx_ck_rj_home_over(c->rj.m);
    for (int s = 0; s < c->size; s++) {
        free(c->home.out[s]);
        c->home.out[s] = NULL;
        free(c->home.in[s]);
        c->home.in[s] = NULL;
    }
}
