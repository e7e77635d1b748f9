/* Which failures of one checkpoint period message logging recovers
 * partially (only the lost nodes' tasks restart, from their buddies'
 * copies; survivors hand back and keep running), and when it must fall
 * back to cr's global rollback. Pure: the coordinator of a
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
 *  - `replayed` says what the live ranks restored in this period before:
 *    NONE; ENDED, one partial round each, ended (GO) on every live rank (a
 *    sequential second failure, while or after the first one's replay);
 *    OTHER, anything else (a round under way on some rank, a global one):
 *    always global. A sequential round restores only what the new victim
 *    hosts now: its own tasks (from its buddy's copy) and the first
 *    victim's tasks the first round moved there (from the first victim's
 *    buddy's copy); the first victim's other tasks keep running (a message
 *    a survivor sent them on the same node was never logged, so they could
 *    not be rolled back).
 *  - Two failures, in one round (simultaneous) or ENDED (sequential):
 *    mlog-fast: partial when simultaneous (sequential: global, as its
 *    window, from the first round's end to the commit that follows at
 *    once, cannot be tested by construction). No determinants exist;
 *    each lost task replays from its buddy copy and is receive-deterministic, so the messages the
 *    survivors' logs return plus those the other lost node's replay
 *    regenerates (what it had logged for it) give it the same state.
 *    mlog-pessimistic: partial iff neither lost rank stored the other's
 *    determinants: each node stores its dets on the next rank not dead
 *    before the period (phx_mld_det_store) before the delivering handler's
 *    sends may leave, so every det a survivor's state can depend on is on
 *    that store, and the store is alive. Sequential: the same pairs. The
 *    second victim's dets made before the first died are on its store of
 *    the period's start (lost iff that was the first victim: nothing stores
 *    them again), later ones on its next live rank; the first victim's
 *    tasks moved onto the second replay from the first victim's store
 *    (its dets stay there until the commit) and then from the second's.
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
enum { PHX_MLD_REPLAYED_NONE = 0, PHX_MLD_REPLAYED_ENDED = 1, PHX_MLD_REPLAYED_OTHER = 2 };

/* n ranks; dead[r], lost[r] as above (lost within dead); replayed one of
 * PHX_MLD_REPLAYED_*. PHX_MLD_PARTIAL or PHX_MLD_GLOBAL; PHX_MLD_GLOBAL
 * for bad arguments too. */
int phx_mld_partial(phx_mld_mode_t mode, int n, const uint8_t *dead, const uint8_t *lost, int replayed);

/* Pessimistic: the rank that stored r's determinants during the period,
 * the next rank after r that was alive at its start (dead and not lost);
 * -1 when there is none. */
int phx_mld_det_store(int n, const uint8_t *dead, const uint8_t *lost, int r);

#endif
