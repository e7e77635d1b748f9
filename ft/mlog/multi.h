/* Which failures of one checkpoint period message logging recovers
 * partially (only the lost nodes' tasks restart, from their buddies'
 * copies; survivors hand back and keep running), and when it must fall
 * back to cr's global rollback (issue 11). Pure: the coordinator of a
 * recovery round calls it with what every node agreed on, so every
 * coordinator decides alike.
 *
 * A period runs from one commit to the next; `lost` are the ranks that
 * died in it (they host tasks in the committed epoch's table), `dead`
 * every dead rank (those of earlier periods host nothing and were skipped
 * as determinant stores). A node lost with its buddy is cr's business
 * (exit 78, or the disk epoch) before this is asked.
 *
 *  - One failure, first round of the period: partial, every mode.
 *  - A live rank already restored in a round of this period (`replayed`:
 *    a sequential second failure, or one after a global round): global. Recovering it would
 *    roll back the tasks that round moved (only some of them, those on the
 *    new victim) and re-store the determinants kept on the first victim;
 *    neither is built.
 *  - Two failures in one round (simultaneous):
 *    mlog-fast: partial. No determinants exist; each lost task replays from
 *    its buddy copy and is receive-deterministic, so the messages the
 *    survivors' logs return plus those the other lost node's replay
 *    regenerates (what it had logged for it) give it the same state.
 *    mlog-pessimistic: partial iff neither lost rank stored the other's
 *    determinants: each node stores its dets on the next rank not dead
 *    before the period (phx_mld_det_store) before the delivering handler's
 *    sends may leave, so every det a survivor's state can depend on is on
 *    that store, and the store is alive.
 *    mlog-causal, mlog-team (k = 1): global. A det is carried until one
 *    receiver stored it; that receiver may be the other lost node, while a
 *    survivor depends on the det through a message that carried no copy
 *    (it was acked already). Telling that apart needs transitive
 *    dependency tracking, which k = 1 SCML does not keep.
 *  - Three or more: global (not needed by the issue; not tested). */
#ifndef PHX_FT_MLOG_MULTI_H
#define PHX_FT_MLOG_MULTI_H

#include <stdint.h>

typedef enum { PHX_MLD_CAUSAL, PHX_MLD_PESSIMISTIC, PHX_MLD_FAST, PHX_MLD_TEAM } phx_mld_mode_t;
enum { PHX_MLD_GLOBAL = 0, PHX_MLD_PARTIAL = 1 };

/* n ranks; dead[r], lost[r] as above (lost within dead). PHX_MLD_PARTIAL
 * or PHX_MLD_GLOBAL; PHX_MLD_GLOBAL for bad arguments too. */
int phx_mld_partial(phx_mld_mode_t mode, int n, const uint8_t *dead, const uint8_t *lost, int replayed);

/* Pessimistic: the rank that stored r's determinants during the period,
 * the next rank after r that was alive at its start (dead and not lost);
 * -1 when there is none. */
int phx_mld_det_store(int n, const uint8_t *dead, const uint8_t *lost, int r);

#endif
