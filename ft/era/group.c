/* Groups, failure_ack, revoke and shrink on top of the ERA engine. */
#include "ft/era/era_int.h"

#include "base/phx_err.h"
#include "base/phx_log.h"

#include <stdlib.h>
#include <string.h>

#define SUB "era-group"

static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

phx_ft_group_t *phx_ft_group_lookup(phx_ft_era_t *era, uint64_t gid)
{
    if (!era)
        return NULL;
    for (phx_ft_group_t *g = era->groups; g; g = g->next)
        if (g->id == gid)
            return g;
    return NULL;
}

static void group_free(phx_ft_group_t *g)
{
    if (g->own_members)
        free((void *)g->members);
    free(g);
}

void group_free_all(phx_ft_era_t *era)
{
    while (era->groups) {
        phx_ft_group_t *g = era->groups;
        era->groups = g->next;
        group_free(g);
    }
    while (era->pend_revokes) {
        pend_revoke_t *p = era->pend_revokes;
        era->pend_revokes = p->next;
        free(p);
    }
}

static void mark_revoked(phx_ft_era_t *era, phx_ft_group_t *g, int src)
{
    g->revoked = true;
    g->revoke_src = src;
    era_ev_t ev;
    memset(&ev, 0, sizeof ev);
    ev.kind = EV_REVOKED;
    ev.gid = g->id;
    if (era_queue_ev(era, &ev) < 0 && !era->first_err)
        era->first_err = PHX_ENOMEM;
    /* We hold the revoke alone if its sender is already gone. */
    if (src == era->rank || rs_test(&era->dead, src)) {
        g->revoke_src = era->rank;
        era_send_revoke(era, g);
    }
}

int group_create_internal(phx_ft_era_t *era, uint64_t gid, const int *members,
                          int nmembers, bool borrow, phx_ft_group_t **out)
{
    if (!members || nmembers < 1 || nmembers > era->n || !out)
        return PHX_EINVAL;
    int *own = NULL;
    if (!borrow) {
        if (!(own = malloc(sizeof(int) * (size_t)nmembers)))
            return PHX_ENOMEM;
        memcpy(own, members, sizeof(int) * (size_t)nmembers);
        qsort(own, (size_t)nmembers, sizeof(int), cmp_int);
    }
    const int *mem = own ? own : members;
    int self = -1;
    for (int i = 0; i < nmembers; i++) {
        if (mem[i] < 0 || mem[i] >= era->n || (i && mem[i] <= mem[i - 1])) {
            free(own);
            return PHX_EINVAL;
        }
        if (mem[i] == era->rank)
            self = i;
    }
    if (self < 0) {
        free(own);
        return PHX_EINVAL;
    }
    phx_ft_group_t *old = phx_ft_group_lookup(era, gid);
    if (old) {
        bool same = old->m == nmembers &&
                    memcmp(old->members, mem, sizeof(int) * (size_t)nmembers) == 0;
        free(own);
        if (!same)
            return PHX_EEXIST;
        *out = old;
        return 0;
    }
    phx_ft_group_t *g = calloc(1, sizeof *g);
    if (!g) {
        free(own);
        return PHX_ENOMEM;
    }
    for (int i = 0; i < nmembers; i++)
        phx_ft_rankset_add(&g->mask, mem[i]);
    g->era = era;
    g->id = gid;
    g->m = nmembers;
    g->members = mem;
    g->own_members = own != NULL;
    g->self_idx = self;
    g->revoke_src = -1;
    g->next = era->groups;
    era->groups = g;
    /* A revoke may overtake the shrink that creates the group here. */
    for (pend_revoke_t **pp = &era->pend_revokes; *pp; pp = &(*pp)->next) {
        if ((*pp)->gid == gid) {
            pend_revoke_t *p = *pp;
            *pp = p->next;
            mark_revoked(era, g, p->src);
            free(p);
            break;
        }
    }
    *out = g;
    return 0;
}

int phx_ft_group_create(phx_ft_era_t *era, uint64_t gid, const int *members,
                        int nmembers, phx_ft_group_t **out)
{
    if (!era)
        return PHX_EINVAL;
    era_enter(era);
    return era_exit(era, group_create_internal(era, gid, members, nmembers, false, out));
}

int phx_ft_group_create_borrowed(phx_ft_era_t *era, uint64_t gid, const int *members,
                                 int nmembers, phx_ft_group_t **out)
{
    if (!era)
        return PHX_EINVAL;
    era_enter(era);
    return era_exit(era, group_create_internal(era, gid, members, nmembers, true, out));
}

uint64_t phx_ft_group_id(const phx_ft_group_t *g) { return g->id; }
int phx_ft_group_size(const phx_ft_group_t *g) { return g->m; }
const int *phx_ft_group_members(const phx_ft_group_t *g) { return g->members; }

int phx_ft_group_index_of(const phx_ft_group_t *g, int rank)
{
    if (rank < 0 || rank >= g->era->n || !rs_test(&g->mask, rank))
        return PHX_ENOENT;
    /* members is sorted; a search keeps a group at O(m) ints, not O(n). */
    const int *p = bsearch(&rank, g->members, (size_t)g->m, sizeof(int), cmp_int);
    return (int)(p - g->members);
}

void phx_ft_ulfm_failure_ack(phx_ft_era_t *era, phx_ft_group_t *g)
{
    for (int i = 0; i < PHX_FT_RANKSET_WORDS; i++)
        g->acked.w[i] = era->dead.w[i] & g->mask.w[i];
}

void phx_ft_ulfm_set_acked(phx_ft_group_t *g, const phx_ft_rankset_t *acked)
{
    for (int i = 0; i < PHX_FT_RANKSET_WORDS; i++)
        g->acked.w[i] = acked->w[i] & g->mask.w[i];
}

void phx_ft_ulfm_get_acked(const phx_ft_group_t *g, phx_ft_rankset_t *out)
{
    *out = g->acked;
}

int phx_ft_ulfm_revoke(phx_ft_era_t *era, phx_ft_group_t *g)
{
    if (!era || !g || g->era != era)
        return PHX_EINVAL;
    if (g->revoked)
        return 0;
    era_enter(era);
    mark_revoked(era, g, era->rank);
    return era_exit(era, 0);
}

int phx_ft_ulfm_is_revoked(const phx_ft_group_t *g) { return g->revoked; }

void group_on_revoke_msg(phx_ft_era_t *era, int src, uint64_t gid)
{
    phx_ft_group_t *g = phx_ft_group_lookup(era, gid);
    if (g) {
        if (!rs_test(&g->mask, src))
            PHX_WARN(SUB, "revoke of group %llu from non-member %d ignored",
                     (unsigned long long)gid, src);
        else if (!g->revoked)
            mark_revoked(era, g, src);
        return;
    }
    for (pend_revoke_t *p = era->pend_revokes; p; p = p->next)
        if (p->gid == gid)
            return;
    pend_revoke_t *p = malloc(sizeof *p);
    if (!p) {
        if (!era->first_err)
            era->first_err = PHX_ENOMEM;
        return;
    }
    p->gid = gid;
    p->src = src;
    p->next = era->pend_revokes;
    era->pend_revokes = p;
}

void group_on_failure(phx_ft_era_t *era, int rank)
{
    for (phx_ft_group_t *g = era->groups; g; g = g->next) {
        if (g->revoked && g->revoke_src == rank) {
            /* Its flood may have stopped halfway: finish it ourselves. */
            g->revoke_src = era->rank;
            era_send_revoke(era, g);
        }
    }
}

uint64_t phx_ft_ulfm_shrink_gid(uint64_t gid, uint64_t aid)
{
    /* splitmix64 finaliser: distinct (gid, aid) rarely collide, and every
     * member computes the same id without talking. */
    uint64_t z = gid * 0x9e3779b97f4a7c15ull ^ (aid + 0x632be59bd9b4e019ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

int phx_ft_ulfm_shrink(phx_ft_era_t *era, phx_ft_group_t *g, uint64_t aid)
{
    if (!era || !g || g->era != era || !era->env.shrunk)
        return PHX_EINVAL;
    /* The new group leaves out the decision's failed set: the union of the
     * contributors' known-dead sets, which every UP already carries (and
     * identical at every survivor). A value holding our dead set, as
     * before, would add nothing (each contributor's dead set at start is
     * inside its UP's) and capped jobs at the value's 1024 bits. */
    phx_ft_era_value_t v;
    memset(&v, 0, sizeof v);
    v.nwords = 1;
    era_enter(era);
    return era_exit(era, era_start_internal(era, g, aid, &v, PHX_FT_ERA_OR, true));
}
