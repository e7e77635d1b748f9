/* One line per recovery (see phx_events.h). */
#define _GNU_SOURCE   /* memmem */
#include "phx_events.h"
#include "phx_jobdir.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define REPORT_WAIT_S 1.0
#define MAXPEND 8
#define HOLD_S 0.5      /* a link warning waits this long for its rank to be known lost */
#define MAXHELD 64

typedef struct {
    double at;
    int src;            /* the node that printed it */
    int rank;           /* the rank the warning is about */
    char *line;
    size_t len;
} held_t;

static held_t H[MAXHELD];
static int nheld;

typedef struct {
    int used, printed;
    double first;               /* when the first report came */
    int round, partial;
    unsigned long long epoch;
    char lost[64];
    double detect, agree, transfer, replay;   /* ms */
    int reports;
    unsigned char *from;        /* ranks that reported */
} pend_t;

static pend_t P[MAXPEND];
static int verbose, n_ranks;
static int folded_since;        /* link warnings folded since the last recovery line */


void phx_events_open(int v)
{
    verbose = v;
    phx_jobview_t *V = phx_jobdir_view();
    n_ranks = V ? V->n : 0;
}

static double num(const char *line, const char *key)
{
    const char *p = strstr(line, key);
    return p ? strtod(p + strlen(key), NULL) : 0;
}

void phx_events_rec_line(const char *line)
{
    const char *rk = strstr(line, " rank=");
    int rank = rk ? atoi(rk + 6) : -1;
    int round = (int)num(line, " round=");
    unsigned long long epoch = (unsigned long long)num(line, " epoch=");
    int partial = strstr(line, " kind=partial") != NULL;
    char lost[64] = "-";
    const char *l = strstr(line, " lost=");
    if (l)
        sscanf(l + 6, "%63[0-9,-]", lost);
    /* A printed round keeps its slot (until a new round needs one), so a
     * report that comes after its line was printed starts no second line. */
    pend_t *p = NULL, *free_slot = NULL, *old = NULL;
    for (int i = 0; i < MAXPEND; i++) {
        if (P[i].used && P[i].round == round && P[i].epoch == epoch && P[i].partial == partial)
            p = &P[i];
        else if (!P[i].used && !free_slot)
            free_slot = &P[i];
        else if (P[i].used && P[i].printed && (!old || P[i].first < old->first))
            old = &P[i];
    }
    if (p && p->printed)
        return;   /* late: the round's line is out */
    if (!free_slot)
        free_slot = old;
    if (!p) {
        if (!free_slot)
            return;   /* more than MAXPEND rounds in flight: the oldest lines are already out */
        p = free_slot;
        memset(p, 0, sizeof *p);
        p->used = 1;
        p->first = phx_jobdir_now();
        p->round = round;
        p->epoch = epoch;
        p->partial = partial;
        snprintf(p->lost, sizeof p->lost, "%s", lost);
        p->detect = -1;
        p->from = calloc((size_t)(n_ranks > 0 ? n_ranks : 1), 1);
    }
    if (rank >= 0 && rank < n_ranks && p->from && p->from[rank])
        return;
    if (rank >= 0 && rank < n_ranks && p->from)
        p->from[rank] = 1;
    double d = num(line, " detect_us=") / 1000, a = num(line, " agree_us=") / 1000,
           t = num(line, " transfer_us=") / 1000, r = num(line, " replay_us=") / 1000;
    if (p->detect < 0 || (d > 0 && d < p->detect) || p->detect == 0)
        p->detect = d;
    if (a > p->agree)
        p->agree = a;
    if (t > p->transfer)
        p->transfer = t;
    if (r > p->replay)
        p->replay = r;
    p->reports++;
}

/* "rank 5 lost (SIGKILL, 127.0.0.1)" for each rank of the round. */
static void describe_lost(char *b, size_t cap, const char *lost, double *at)
{
    phx_jobview_t *V = phx_jobdir_view();
    size_t o = 0;
    *at = -1;
    char tmp[64];
    snprintf(tmp, sizeof tmp, "%s", lost);
    int k = 0;
    for (char *s = strtok(tmp, ","); s && o < cap - 80; s = strtok(NULL, ",")) {
        int r = atoi(s);
        const char *why = "declared dead", *host = "?";
        if (V && r >= 0 && r < V->n) {
            phx_jd_rank_t *x = &V->r[r];
            host = x->host;
            if (x->lost_why[0])
                why = x->lost_why;
            if (x->lost_at >= 0 && (*at < 0 || x->lost_at < *at))
                *at = x->lost_at;
        }
        o += (size_t)snprintf(b + o, cap - o, "%srank %d lost (%s, %s)", k++ ? ", " : "", r, why, host);
    }
    if (!k)
        snprintf(b, cap, "a rank lost");
}

static int waiting_for(const pend_t *p);
static void release_held(int all);

static void print(pend_t *p)
{
    phx_jobview_t *V = phx_jobdir_view();
    char who[512];
    double at;
    describe_lost(who, sizeof who, p->lost, &at);
    double now = phx_jobdir_now(), det = p->detect < 0 ? 0 : p->detect;
    double total = det + p->agree + p->transfer + p->replay;
    char when[32] = "", folded[48] = "";
    if (V)
        snprintf(when, sizeof when, " at %.1f s", (at >= 0 ? at : now) - V->t0);
    if (folded_since && !verbose)
        snprintf(folded, sizeof folded, " · %d link warning%s folded", folded_since, folded_since > 1 ? "s" : "");
    fprintf(stderr, "phx: %s%s · %s to epoch %llu · recovered in %.0f ms (detect %.0f, agree %.0f, "
                    "transfer %.0f, replay %.0f)%s\n", who, when,
            p->partial ? "partial rollback" : "rolled back", p->epoch, total, det, p->agree, p->transfer,
            p->replay, folded);
    folded_since = 0;
    if (V) {
        phx_jd_rec_t *c = &V->rec[V->nrec % PHX_JD_MAXREC];
        memset(c, 0, sizeof *c);
        c->at = now - V->t0;
        c->round = p->round;
        c->epoch = p->epoch;
        c->partial = p->partial;
        snprintf(c->lost, sizeof c->lost, "%s", p->lost);
        c->detect_ms = det;
        c->agree_ms = p->agree;
        c->transfer_ms = p->transfer;
        c->replay_ms = p->replay;
        c->reports = p->reports;
        V->nrec++;
        V->changed = 1;
    }
    p->printed = 1;
    free(p->from);
    p->from = NULL;
}

/* Local nodes up that have not reported round p. */
static int waiting_for(const pend_t *p)
{
    phx_jobview_t *V = phx_jobdir_view();
    int k = 0;
    for (int i = 0; V && i < V->n; i++)
        k += V->r[i].local && V->r[i].state == PHX_JD_UP && !(p->from && p->from[i]);
    return k;
}

int phx_events_tick(void)
{
    release_held(0);
    double now = phx_jobdir_now(), next = nheld ? HOLD_S / 2 : 1.0;
    for (int i = 0; i < MAXPEND; i++) {
        pend_t *p = &P[i];
        if (!p->used || p->printed)
            continue;
        if (waiting_for(p) == 0 || now - p->first >= REPORT_WAIT_S)
            print(p);
        else if (p->first + REPORT_WAIT_S - now < next)
            next = p->first + REPORT_WAIT_S - now;
    }
    return (int)(next * 1000) + 1;
}

void phx_events_close(void)
{
    release_held(1);
    for (int i = 0; i < MAXPEND; i++)
        if (P[i].used && !P[i].printed)
            print(&P[i]);
}

static int is_lost(const phx_jobview_t *V, int r)
{
    int st = V->r[r].state;
    return st == PHX_JD_KILLED || st == PHX_JD_FENCED || st == PHX_JD_LOST;
}

/* "WARN net: ... rank X ..." (a node's line, before phx run's "[R] "): a
 * link warning about rank X. When X is lost, folded; when not (yet), held
 * HOLD_S: a node usually sees the connection break before the launcher
 * reaps the process. */
int phx_events_fold(int src, const char *line, size_t len)
{
    phx_jobview_t *V = phx_jobdir_view();
    if (!V || verbose || len < 20 || memcmp(line, "WARN net: ", 10))
        return 0;
    const char *w = line + 10;
    for (const char *s = w; (s = memmem(s, len - (size_t)(s - line), "rank ", 5)); s += 5) {
        char *end;
        long r = strtol(s + 5, &end, 10);
        if (end == s + 5 || r < 0 || r >= V->n)
            continue;
        if (is_lost(V, (int)r)) {
            folded_since++;
            return 1;
        }
        if (nheld < MAXHELD && (H[nheld].line = malloc(len))) {
            memcpy(H[nheld].line, line, len);
            H[nheld].len = len;
            H[nheld].rank = (int)r;
            H[nheld].src = src;
            H[nheld].at = phx_jobdir_now();
            nheld++;
            return 1;
        }
        return 0;
    }
    return 0;
}

/* Held warnings: folded once their rank is lost, printed after HOLD_S if
 * it is not. all: every one now (the job's end). */
static void release_held(int all)
{
    phx_jobview_t *V = phx_jobdir_view();
    double now = phx_jobdir_now();
    int k = 0;
    for (int i = 0; i < nheld; i++) {
        held_t *h = &H[i];
        if (V && is_lost(V, h->rank)) {
            folded_since++;
        } else if (all || now - h->at >= HOLD_S) {
            fprintf(stderr, "[%d] %.*s\n", h->src, (int)h->len, h->line);
        } else {
            H[k++] = *h;
            continue;
        }
        free(h->line);
    }
    nheld = k;
}

int phx_events_due(void)
{
    double now = phx_jobdir_now();
    for (int i = 0; i < nheld; i++)
        if (now - H[i].at >= HOLD_S)
            return 1;
    for (int i = 0; i < MAXPEND; i++)
        if (P[i].used && !P[i].printed && (waiting_for(&P[i]) == 0 || now - P[i].first >= REPORT_WAIT_S))
            return 1;
    return 0;
}
