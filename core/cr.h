/* What cr (coordinated checkpoint/restart, core/cr*.c) offers the
 * recovery modes built on its state, the message-logging modes of
 * core/mlog.c: st is what phx_recovery_cr.init made. Not for the node:
 * it sees cr only through its ops (core/recovery.h).
 *
 * Threads: comm thread, unless stated otherwise. */
#ifndef PHX_CORE_CR_H
#define PHX_CORE_CR_H

#include <stdint.h>

#include "core/recovery.h"

/* The PHX_FT_CTRL tags cr uses: PHX_CTRL_REC_FIRST..PHX_CTRL_CR_LAST; a
 * mode built on cr takes its own from PHX_CTRL_CR_LAST + 1. */
enum { PHX_CTRL_CR_LAST = 39 };
/* ... and one more, the drain's (past the layered mode's tags): a mode on
 * cr hands it to cr like those. */
enum { PHX_CTRL_CR_DRAIN = PHX_CTRL_REC_LAST - 1 };

/* A mode built on cr's state (st from phx_recovery_cr.init) hears of each
 * commit of an epoch and each rollback to one, on the comm thread while
 * every worker is paused. With partial set, the first failure of a
 * checkpoint period (or the losses phx_cr_partial_when allows) restores
 * only the dead nodes' tasks (from its buddy's copy, spread over
 * the survivors as usual) and the survivors keep their state; the mode
 * hears PHX_CR_PARTIAL at the end of that round, workers still paused,
 * and must bring the restored tasks up to date (message logging). */
/* PHX_CR_PARTIAL_BEGIN: a partial round restores here, before the first
 * task it restores (on_restore); every node of the round hears it. */
/* PHX_CR_JOINED: at a commit (after its PHX_CR_COMMIT) ranks were taken
 * back in, hosting nothing yet (restart-on=respawn after a partial round);
 * a newcomer hears it once it is a member. phx_cr_dead says who is dead. */
enum { PHX_CR_COMMIT = 1, PHX_CR_ROLLBACK = 2, PHX_CR_PARTIAL = 3, PHX_CR_PARTIAL_BEGIN = 4, PHX_CR_JOINED = 5 };
typedef void (*phx_cr_listen_fn)(void *arg, int what, uint64_t epoch);
void phx_cr_listen(void *st, phx_cr_listen_fn fn, void *arg, int partial);
/* Whether cr counts rank r dead now (comm thread). */
int phx_cr_dead(void *st, int r);
/* mlog-team: in a partial round, fn(arg, r) (comm thread; arg is the
 * listener's) says whether live rank r reloads its own copy too; the round
 * is partial only while some live rank does not. */
typedef int (*phx_cr_rolls_fn)(void *arg, int rank);
void phx_cr_partial_rolls(void *st, phx_cr_rolls_fn fn);
/* Which losses a partial round recovers: fn(arg, dead, since, replayed)
 * on the round's coordinator (comm thread; arg is the listener's) with
 * every dead rank, those dead since the round's epoch (they host slices in
 * its table) and what the live ranks restored since that epoch: nothing
 * (NONE), one partial round each, ended everywhere (ENDED: a sequential
 * loss; the partial round then moves only what the newly dead host now),
 * or anything else (OTHER: a round under way somewhere, a global one);
 * 1: partial. It must depend on nothing else, so that every
 * coordinator decides alike. Without fn: one loss, nothing replayed. */
enum { PHX_CR_REPLAYED_NONE = 0, PHX_CR_REPLAYED_ENDED = 1, PHX_CR_REPLAYED_OTHER = 2 };
typedef int (*phx_cr_partial_fn)(void *arg, const uint8_t *dead, const uint8_t *since, int replayed);
void phx_cr_partial_when(void *st, phx_cr_partial_fn fn);
/* The decided round's since set (n bytes; comm thread); returns its size. */
int phx_cr_lost_since(void *st, uint8_t *since);
/* hold = 1: the coordinator starts no checkpoint (one asked for meanwhile
 * is logged as ckpt_held and begins at hold = 0); comm thread. Message
 * logging holds them while a partial recovery's replay is under way. */
void phx_cr_hold(void *st, int hold);

#endif
