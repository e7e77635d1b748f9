/* Progress of the partial rounds of one checkpoint period, per rank: the
 * last round whose hand-back (ML_RDONE) or end of replays (ML_RFIN) each
 * rank reported. A period may hold two rounds one after the other (the
 * second failure recovered after the first's round ended everywhere), and
 * the first round's frame from a slow rank may still be in flight when the
 * second begins: a report counts only for the round it names, and never
 * takes a rank back. Pure: no threads, sockets or clock; the owner (the
 * comm thread) keeps one array per kind of report, n ranks long, zeroed at
 * the period's start. */
#ifndef PHX_FT_MLOG_ROUND_H
#define PHX_FT_MLOG_ROUND_H

#include <stdint.h>

/* Rounds are numbered from 1 and kept in a byte: a report naming round 0
 * (an undecodable frame), PHX_ML_ROUND_MAX or more, an earlier round than
 * the rank's last, or a rank out of [0, n) changes nothing. */
#define PHX_ML_ROUND_MAX 256u

void phx_ml_round_note(uint8_t *last, int n, int rank, uint32_t round);

/* 1 iff every rank r not dead (dead[r] == 0) reported round `round` or a
 * later one. */
int phx_ml_round_all(const uint8_t *last, const uint8_t *dead, int n, int round);

#endif
