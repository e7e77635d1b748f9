/* recovery=cr: the move home: at a checkpoint's cut, the slices a partial
 * round left on helpers go back to their live home ranks. */
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "core/eventlog.h"
#include "core/cr_int.h"

/* The table that puts every slice whose home rank is live back on it
 * (from c->loc into t); 1 when some slice moves. Only where a partial round
 * can leave a live rank's slices elsewhere (message logging: see mig). */
int cr_home_table(const cr_t *c, int *t)
{
    return c->partial_ok && phx_ck_home_table(c->size, c->nloc, PHX_LOC_SLICES, c->loc, c->dead, t);
}

/* Whether some slice moves from rank a to rank b at this cut. */
static int mig_moves(const cr_t *c, int a, int b)
{
    for (int i = 0; i < c->nloc; i++)
        if (c->home.from[i] == a && c->home.loc[i] == b)
            return 1;
    return 0;
}

/* At a moving checkpoint's cut (every marker in, workers paused): ships a
 * snapshot to each rank that takes some of this node's slices, rebuilds
 * what stays from it, switches the table, and rebuilds what the others
 * ship here. 1 once this node holds exactly its slices under home.loc. */
int cr_migrate(cr_t *c)
{
    phx_node_t *n = c->n;
    int rc = 0;
    if (c->home.mig == 1) {
        c->home.mig = 2;
        /* One snapshot per taker, of what it takes; then, if any left, one
         * of what stays, from which this node is rebuilt. */
        size_t len = 0;
        uint32_t kept = 0, sent = 0;
        int leaves = 0;
        c->enc_loc = c->home.loc;
        for (int r = 0; r < c->size && !rc; r++) {
            if (r == c->self || !mig_moves(c, c->self, r))
                continue;
            leaves = 1;
            c->enc_to = r;
            void *b = NULL;
            if (!(rc = cr_snapshot(c, &b, &len))) {
                free(c->home.out[r]);
                c->home.out[r] = b;
                rc = cr_bulk_send(c, BK_MIG, r, c->self, phx_ck_cm_id(c->cm), phx_ck_cm_epoch(c->cm), b, len);
            }
            phx_ck_blob_head_t bh;
            sent += b && !phx_ck_blob_head_get(b, len, &bh) ? bh.ntasks : 0;
        }
        if (leaves && !rc) {
            void *own = NULL;
            c->enc_to = c->self;
            rc = cr_snapshot(c, &own, &len);
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
        }
        c->enc_loc = NULL;
        memcpy(c->loc, c->home.loc, (size_t)c->nloc * sizeof *c->loc);
        n->loc_n = c->nhome;
        n->loc = c->loc;
    }
    int wait = 0, takes = 0;
    for (int s = 0; s < c->size && !rc; s++) {
        if (s == c->self || !mig_moves(c, s, c->self))
            continue;
        takes = 1;
        if (c->home.in_done[s])
            continue;
        if (!c->home.in[s] || c->home.in_id[s] != phx_ck_cm_id(c->cm)) {
            wait = 1;   /* on its way */
            continue;
        }
        uint32_t k = 0;
        c->home.migrating = 1;
        rc = cr_restore_blob(c, c->home.in[s], c->home.in_len[s], 0, c->home.loc, &k);
        c->home.migrating = 0;
        c->home.in_done[s] = 1;
        free(c->home.in[s]);
        c->home.in[s] = NULL;
        phx_evlog("migrate_in", "\"epoch\":%llu,\"tasks\":%u,\"from\":%d", (unsigned long long)phx_ck_cm_epoch(c->cm), k, s);
    }
    if (rc) {
        cr_fatal(c, 1, "moving tasks home failed: %s", phx_strerror(rc));
        return 0;
    }
    if (!wait && takes && c->die_point == DIE_MOVED && c->die_epoch == n->inc)
        raise(SIGKILL);   /* test: its slices rebuilt here, the epoch not stored */
    return !wait;
}

/* Ends a moving checkpoint (committed or aborted; its transfers dropped). */
void cr_mig_reset(cr_t *c)
{
    c->home.mig = 0;
    for (int s = 0; s < c->size; s++) {
        free(c->home.out[s]);
        c->home.out[s] = NULL;
        free(c->home.in[s]);
        c->home.in[s] = NULL;
        c->home.in_done[s] = 0;
    }
}

