/* recovery=cr: the coordinator's judgement of a recovery round, pure.
 * Once every report of a round is in (the recovery machine's JUDGE,
 * ft/ckpt/recover.h), the coordinator knows the highest committed epoch
 * and a summary of the reports' partial-round bits; this decides what the
 * round does with them:
 *   - ABORT (the work is lost): nothing was committed, or the coordinator
 *     holds no copy of the epoch, or some lost rank's two memory copies are
 *     both gone, and no disk checkpoint exists;
 *   - DECIDE from disk (PHX_CK_D_DISK): the memory copies cannot serve, a
 *     disk checkpoint can (its newest epoch);
 *   - DECIDE partial (PHX_CK_D_PARTIAL, message logging): only the lost
 *     ranks' tasks are restored, on the survivors, where the mode's rule
 *     says every determinant they need survives; sequential
 *     (PHX_CK_D_SEQ) when every live rank ended exactly one partial round
 *     of this period already, so the round moves only what the newly dead
 *     host now (phx_ck_seq_keep);
 *   - WAIT (restart-on=respawn, a global round): some lost rank's newcomer
 *     is not connected everywhere yet; the glue asks again when it is.
 * What needs the runtime comes in as inputs or callbacks: the relocation's
 * answer (spares, helpers), the disk lookup, the logging mode's rule.
 * Tests: test_ft_judge.c; under the round explorer, test_ft_recover.c.
 *
 * Threading: none of its own; the callbacks run on the caller's thread,
 * during the call. Arrays are read during the call only. */
#ifndef PHX_FT_CKPT_JUDGE_H
#define PHX_FT_CKPT_JUDGE_H

#include <stdint.h>

/* What the reports say about partial rounds since the epoch (the rule's
 * `replayed`): none restored; every live rank ended one partial round and
 * nothing else; anything else (a round under way, a global one). */
enum { PHX_CK_REPLAYED_NONE = 0, PHX_CK_REPLAYED_ENDED = 1, PHX_CK_REPLAYED_OTHER = 2 };

/* The logging mode's rule: may the losses in `since` (dead since the
 * epoch, within dead) be recovered partially? */
typedef int (*phx_ck_when_fn)(void *arg, const uint8_t *dead, const uint8_t *since, int replayed);
/* The newest disk checkpoint: 1 and *epoch if there is one, else 0. */
typedef int (*phx_ck_disk_fn)(void *arg, uint64_t *epoch);

typedef struct phx_ck_judge_in {
    int n, nloc;
    const uint8_t *dead;        /* n: the round's dead set */
    uint64_t epoch;             /* the highest committed epoch reported (0: none) */
    int summary;                /* JUDGE's PHX_CK_REC_J_* bits */
    const int *loc_e;           /* nloc: the epoch's table in the coordinator's copy (NULL: no copy) */
    int reloc;                  /* relocating the dead set from that copy: 0 or an error */
    int lost, lost_buddy;       /* reloc PHX_EUNRECOVERABLE: a rank and its buddy both dead */
    phx_ck_disk_fn disk;        /* NULL: no disk checkpoints */
    void *disk_arg;
    int partial_ok;             /* the mode recovers partially and the restart mode lets the
                                 * survivors take the lost tasks (survivors, respawn) */
    phx_ck_when_fn when;        /* NULL: one rank dead since the epoch, nothing replayed */
    void *when_arg;
    int keeps;                  /* some live rank keeps running in a partial round (mlog-team) */
    int joins_missing;          /* respawn: some lost rank's newcomer is not ready yet */
} phx_ck_judge_in_t;

enum { PHX_CK_JUDGE_DECIDE = 1, PHX_CK_JUDGE_ABORT, PHX_CK_JUDGE_WAIT };

typedef struct phx_ck_judge {
    int verdict;                /* PHX_CK_JUDGE_* */
    uint64_t epoch;             /* DECIDE: the rollback's (the disk's with PHX_CK_D_DISK); ABORT: as reported */
    int flags;                  /* DECIDE: PHX_CK_D_* */
    int lost, lost_buddy;       /* ABORT: the pair (-1: none, nothing committed) */
} phx_ck_judge_t;

void phx_ck_judge(const phx_ck_judge_in_t *in, phx_ck_judge_t *out);

/* A sequential round's restore scope: of the new table loc, only slices
 * whose host in cur (the table the period's earlier round made) died move;
 * the rest keep running where that round put them. keep[i] = loc[i] for
 * those, -1 for the others. */
void phx_ck_seq_keep(int nloc, const int *cur, const uint8_t *dead, const int *loc, int *keep);

#endif
