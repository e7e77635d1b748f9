/* GLB runtime glue: one GLB task per node drives the node's state machine
 * (ft/glb/glb_sm.c) over the public Phalanx API.
 *
 * The task's mailbox is the actor loop of the paper: a self-addressed CONT
 * message runs process(n) and the housekeeping, and every protocol message
 * queued meanwhile is handled before the next CONT (probe). An idle task
 * keeps one CONT going with a short sleep, which is its timer (timeouts,
 * waves). Failure notices are polled (phx_failed_nodes) at each handler, so
 * the machine sees them in notice order and on its own thread.
 *
 * Fault injection (tests): --glb-die=POINT:RANK:NTH[:stop|:term|:kill=R][,...] makes
 * RANK, at the NTH time it passes protocol point POINT (see README), SIGKILL
 * itself, SIGSTOP itself, SIGTERM itself (a drain request), or ask rank R
 * to kill both of them (R SIGKILLs the asker's pid, then itself: two deaths
 * before either can be detected; same host only). */
#define _GNU_SOURCE
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/phx_err.h"
#include "core/phalanx.h"
#include "ext/glb/glb_rt.h"
#include "ext/glb/glb_wire.h"
#include "ft/glb/glb_sm.h"

enum { T_INIT, T_MSG, T_CONT, T_KILL, T_UP };     /* to a node's GLB task */
enum { M_HERE, M_POLL };                            /* to rank 0's main task */

typedef struct glb_task {
    phx_glb_sm_t *sm;
    phx_ctx_t *ctx;             /* valid during the current handler only */
    phx_tid_t tids[PHX_GLB_MAXP];
    int size, rank, self_pending, nfailed, relayed, have_tab;
    int draining, gone;         /* drain asked of the machine; it has left */
    uint64_t up;                /* rank 0: ranks whose task has its table (T_UP) */
    uint64_t t0;
    struct early { int src; size_t len; struct early *next; uint8_t b[]; } *early, **early_tail;
} glb_task_t;

static const phx_glb_ops_t *G_ops;
static phx_glb_ops_t G_wrapped;     /* G_ops with process() over the thread team */
static void *G_app;
static phx_glb_cfg_t G_cfg;
static int G_task_type;
#define MAX_DIE 8
static struct die { char point[16]; int rank, nth, stop, term, kill, count; } G_die[MAX_DIE];
static int G_ndie;
/* Set once this node's GLB task has its state machine (comm thread reads). */
static atomic_int G_started;
/* Set by the drain callback (comm thread); the GLB task polls it. */
static atomic_int G_drain;

/* ---- options ------------------------------------------------------------ */

static int opt_int(const char *v, int *out, int min)
{
    char *end;
    long x = strtol(v, &end, 10);
    if (*v == 0 || *end || x < min || x > 1 << 30)
        return PHX_EINVAL;
    *out = (int)x;
    return 0;
}

static int set_opt(phx_glb_cfg_t *c, const char *key, const char *v)
{
    if (!strcmp(key, "ft")) {
        if (!strcmp(v, "on") || !strcmp(v, "1"))
            c->ft = 1;
        else if (!strcmp(v, "off") || !strcmp(v, "0"))
            c->ft = 0;
        else
            return PHX_EINVAL;
        return 0;
    }
    if (!strcmp(key, "n")) return opt_int(v, &c->n, 1);
    if (!strcmp(key, "w")) return opt_int(v, &c->w, 1);
    if (!strcmp(key, "z")) return opt_int(v, &c->z, 1);
    if (!strcmp(key, "k")) return opt_int(v, &c->k, 1);
    if (!strcmp(key, "timeout")) return opt_int(v, &c->timeout_ms, 1);
    if (!strcmp(key, "threads")) return opt_int(v, &c->threads, 1);
    if (!strcmp(key, "die")) {
        if (strlen(v) >= sizeof c->die)
            return PHX_EINVAL;
        strcpy(c->die, v);
        return 0;
    }
    return PHX_EINVAL;
}

int phx_glb_parse(int *argc, char **argv, phx_glb_cfg_t *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    static const char *keys[] = { "ft", "n", "w", "z", "k", "timeout", "threads", "die" };
    for (size_t i = 0; i < sizeof keys / sizeof *keys; i++) {
        char env[32], *v;
        snprintf(env, sizeof env, "PHX_GLB_%s", keys[i]);
        for (char *p = env; *p; p++)
            *p = (char)(*p >= 'a' && *p <= 'z' ? *p - 32 : *p);
        if ((v = getenv(env)) && set_opt(cfg, keys[i], v) != 0) {
            fprintf(stderr, "glb: bad %s=%s\n", env, v);
            return PHX_EINVAL;
        }
    }
    int j = 1;
    for (int i = 1; i < *argc; i++) {
        char *a = argv[i];
        if (strncmp(a, "--glb-", 6) != 0) {
            argv[j++] = a;
            continue;
        }
        char key[16];
        const char *eq = strchr(a, '=');
        size_t kl = eq ? (size_t)(eq - a - 6) : 0;
        if (!eq || kl >= sizeof key) {
            fprintf(stderr, "glb: bad option %s (--glb-KEY=VALUE)\n", a);
            return PHX_EINVAL;
        }
        memcpy(key, a + 6, kl);
        key[kl] = 0;
        if (set_opt(cfg, key, eq + 1) != 0) {
            fprintf(stderr, "glb: bad option %s\n", a);
            return PHX_EINVAL;
        }
    }
    argv[j] = NULL;
    *argc = j;
    char spec[sizeof cfg->die];
    strcpy(spec, cfg->die);
    for (char *sv, *tok = strtok_r(spec, ",", &sv); tok; tok = strtok_r(NULL, ",", &sv)) {
        struct die *d = &G_die[G_ndie];
        char rest[64] = "";
        *d = (struct die){ .rank = -1, .kill = -1 };
        if (G_ndie == MAX_DIE || sscanf(tok, "%15[^:]:%d:%d%63s", d->point, &d->rank, &d->nth, rest) < 3 ||
            d->nth < 1) {
            fprintf(stderr, "glb: bad --glb-die=%s (POINT:RANK:NTH[:stop|:term|:kill=R],...)\n", cfg->die);
            return PHX_EINVAL;
        }
        if (!strcmp(rest, ":stop"))
            d->stop = 1;
        else if (!strcmp(rest, ":term"))
            d->term = 1;
        else if (!strncmp(rest, ":kill=", 6))
            d->kill = atoi(rest + 6);
        else if (rest[0]) {
            fprintf(stderr, "glb: bad --glb-die suffix %s\n", rest);
            return PHX_EINVAL;
        }
        G_ndie++;
    }
    return 0;
}

/* ---- the node's thread team (glb-threads) ------------------------------- *
 * Fork/join around each process(n) call of the GLB task: helpers get a
 * piece split off the node bag, process it into their own result words and
 * hand both back before the call returns. Only the GLB task's thread forks,
 * so the state machine never sees a partial bag. */
static struct team {
    int n;                      /* helper threads */
    pthread_t *th;
    pthread_mutex_t mu;
    pthread_cond_t go, done;
    uint64_t gen;
    int active, pending, items;
    struct piece { void *bag; uint64_t *res; } *p;
} T = { .mu = PTHREAD_MUTEX_INITIALIZER, .go = PTHREAD_COND_INITIALIZER, .done = PTHREAD_COND_INITIALIZER };

static void *team_main(void *arg)
{
    int me = (int)(intptr_t)arg;
    uint64_t seen = 0;
    pthread_mutex_lock(&T.mu);
    for (;;) {
        while (T.gen == seen)
            pthread_cond_wait(&T.go, &T.mu);
        seen = T.gen;
        if (me >= T.active)
            continue;
        struct piece *pc = &T.p[me];
        int n = T.items;
        pthread_mutex_unlock(&T.mu);
        G_ops->process(G_app, pc->bag, n, pc->res);
        pthread_mutex_lock(&T.mu);
        if (--T.pending == 0)
            pthread_cond_signal(&T.done);
    }
    return NULL;
}

static int team_process(void *app, void *bag, int n, uint64_t *result)
{
    int k = 0;
    while (k < T.n) {
        void *piece = G_ops->split(app, bag);
        if (!piece)
            break;
        T.p[k].bag = piece;
        memset(T.p[k].res, 0, G_ops->result_words * 8);
        k++;
    }
    if (k == 0)
        return G_ops->process(app, bag, n, result);
    pthread_mutex_lock(&T.mu);
    T.active = k, T.pending = k, T.items = n;
    T.gen++;
    pthread_cond_broadcast(&T.go);
    pthread_mutex_unlock(&T.mu);
    G_ops->process(app, bag, n, result);
    pthread_mutex_lock(&T.mu);
    while (T.pending)
        pthread_cond_wait(&T.done, &T.mu);
    pthread_mutex_unlock(&T.mu);
    for (int i = 0; i < k; i++) {
        G_ops->merge(app, bag, T.p[i].bag);
        G_ops->reduce(app, result, T.p[i].res);
    }
    return !G_ops->is_empty(app, bag);
}

/* Starts threads-1 helpers (they live until the process exits). */
static int team_start(int threads)
{
    T.n = threads - 1;
    T.th = calloc((size_t)T.n + 1, sizeof *T.th);
    T.p = calloc((size_t)T.n + 1, sizeof *T.p);
    if (!T.th || !T.p)
        return PHX_ENOMEM;
    for (int i = 0; i < T.n; i++) {
        T.p[i].res = calloc(G_ops->result_words + 1, 8);
        if (!T.p[i].res)
            return PHX_ENOMEM;
        int rc = pthread_create(&T.th[i], NULL, team_main, (void *)(intptr_t)i);
        if (rc != 0)
            return -rc;
        pthread_detach(T.th[i]);
    }
    return 0;
}

/* ---- io for the state machine ------------------------------------------- */

static void io_send(void *c, int dst, const uint8_t *buf, size_t len)
{
    glb_task_t *t = c;
    int rc = phx_send(t->ctx, t->tids[dst], T_MSG, buf, len);
    if (rc == PHX_EINVAL)
        return;     /* dst is dead: the protocol learns it from the notice */
    if (rc < 0) {
        fprintf(stderr, "glb: rank %d: send to %d failed: %s\n", t->rank, dst, phx_strerror(rc));
        phx_exit(t->ctx, PHX_GLB_EXIT_LOST);
    }
}

/* The --glb-die hook at protocol point label of rank; tids NULL: no
 * :kill=R (plain SIGKILL instead). */
static void die_point(phx_ctx_t *ctx, int rank, int size, const phx_tid_t *tids, const char *label)
{
    for (int i = 0; i < G_ndie; i++) {
        struct die *d = &G_die[i];
        if (rank != d->rank || strcmp(label, d->point) || ++d->count != d->nth)
            continue;
        fprintf(stderr, "glb: rank %d %s at %s #%d t_ns=%" PRIu64 "\n", rank, d->term ? "is told to drain" : "dies",
                label, d->nth, phx_now_ns());
        fflush(stderr);
        if (d->stop) {
            raise(SIGSTOP);
            return;
        }
        if (d->term) {
            kill(getpid(), SIGTERM);   /* to the process (this thread blocks it): a drain request */
            return;
        }
        if (tids && d->kill >= 0 && d->kill < size && d->kill != rank) {
            uint8_t b[PHX_GLB_KILL_LEN];   /* T_KILL: the sender's pid */
            phx_glb_kill_enc(b, (int64_t)getpid());
            phx_send(ctx, tids[d->kill], T_KILL, b, sizeof b);
            return;     /* rank kill takes both of us down */
        }
        raise(SIGKILL);
    }
}

/* Whether --glb-die names POINT at rank. */
static int die_armed(int rank, const char *label)
{
    for (int i = 0; i < G_ndie; i++)
        if (G_die[i].rank == rank && !strcmp(G_die[i].point, label))
            return 1;
    return 0;
}

static void io_point(void *c, const char *label)
{
    glb_task_t *t = c;
    if (!strcmp(label, "H"))
        fprintf(stderr, "glb: rank %d took over a drained node's final state (a handover: nothing recomputed)\n",
                t->rank);
    if (!strcmp(label, "LX"))
        fprintf(stderr, "glb: rank %d: every other node is gone; the drain is dropped and this node finishes the "
                        "work\n", t->rank);
    if (!strcmp(label, "R5") && getenv("PHX_GLB_STATS"))
        fprintf(stderr, "glb-restored rank=%d t_ns=%" PRIu64 "\n", t->rank, phx_now_ns());
    die_point(t->ctx, t->rank, t->size, t->tids, label);
}

static void io_finish(void *c, const uint64_t *result)
{
    glb_task_t *t = c;
    double secs = (double)(phx_now_ns() - t->t0) / 1e9;
    G_ops->report(G_app, result, secs);
    fflush(stdout);
    die_point(t->ctx, t->rank, t->size, NULL, "F");    /* reported, the job not yet ended */
    phx_exit(t->ctx, 0);
}

static void io_abort(void *c, const char *why)
{
    glb_task_t *t = c;
    fprintf(stderr, "%s\n", why);
    fflush(stderr);
    phx_exit(t->ctx, PHX_GLB_EXIT_LOST);
}

/* ---- the GLB task ------------------------------------------------------- */

/* Rank 0 sends the start messages one by one and may die in between (its
 * outbox not yet flushed): every node that started passes the table on
 * once it learns of rank 0's loss, so a node whose start message was lost
 * with rank 0 still starts (a second start message is ignored). */
static void relay_start(glb_task_t *t)
{
    uint8_t tab[PHX_GLB_INIT_LEN(PHX_GLB_MAXP)];
    long len = phx_glb_init_enc(t->tids, t->size, 0, tab, sizeof tab);   /* phx_tid_t is u64 */
    for (int r = 1; r < t->size && len > 0; r++)
        if (r != t->rank)
            (void)phx_send(t->ctx, t->tids[r], T_INIT, tab, (size_t)len);  /* dead: ignored */
}

static void poll_failures(glb_task_t *t)
{
    int dead[PHX_GLB_MAXP * 2];
    int n = phx_failed_nodes(dead, (int)(sizeof dead / sizeof *dead));
    for (; t->nfailed < n && t->nfailed < (int)(sizeof dead / sizeof *dead); t->nfailed++) {
        if (dead[t->nfailed] == 0 && !t->relayed) {
            t->relayed = 1;
            relay_start(t);
        }
        phx_glb_sm_dead(t->sm, dead[t->nfailed], phx_now_ns());
    }
}

/* The drain (SIGTERM with drain-on=term): asks the machine to hand the
 * node's state over; once it has left, ends this node alone with 0. */
static void poll_drain(glb_task_t *t)
{
    if (!t->sm || t->gone)
        return;
    if (atomic_load(&G_drain) && !t->draining) {
        t->draining = 1;
        int rc = phx_glb_sm_leave(t->sm, phx_now_ns());
        if (rc == 0)
            fprintf(stderr, "glb: rank %d draining: its bag and result go to its backup holder\n", t->rank);
        else
            fprintf(stderr, "glb: rank %d: drain refused (%s): this node keeps its work\n", t->rank,
                    rc == PHX_EAGAIN ? "it is the last live node" : phx_strerror(rc));
    }
    if (phx_glb_sm_left(t->sm)) {
        t->gone = 1;
        fprintf(stderr, "glb: rank %d left: its final state is acknowledged by its backup holder; exiting 0 t_ns=%"
                PRIu64 "\n", t->rank, phx_now_ns());
        fflush(stderr);
        phx_leave(t->ctx);
    }
}

static void kick(glb_task_t *t)
{
    poll_drain(t);
    if (t->self_pending || !t->have_tab || t->gone || (t->sm && phx_glb_sm_over(t->sm)))
        return;
    int rc = phx_send(t->ctx, phx_self(t->ctx), T_CONT, NULL, 0);
    if (rc < 0) {
        fprintf(stderr, "glb: rank %d: self send failed: %s\n", t->rank, phx_strerror(rc));
        phx_exit(t->ctx, PHX_GLB_EXIT_LOST);
        return;
    }
    t->self_pending = 1;
}

static void on_msg(phx_ctx_t *c, void *st, phx_tid_t src, const void *m, size_t n)
{
    glb_task_t *t = st;
    t->ctx = c;
    if (!t->sm) {       /* beat our T_INIT: keep it for later */
        struct early *e = malloc(sizeof *e + n);
        if (!e) {
            fprintf(stderr, "glb: out of memory\n");
            abort();
        }
        e->src = phx_tid_home(src), e->len = n, e->next = NULL;
        memcpy(e->b, m, n);
        if (!t->early_tail)
            t->early_tail = &t->early;
        *t->early_tail = e;
        t->early_tail = &e->next;
        return;
    }
    poll_failures(t);
    phx_glb_sm_recv(t->sm, phx_tid_home(src), m, n, phx_now_ns());
    kick(t);
}

static void start_sm(glb_task_t *t);
static void try_start_root(glb_task_t *t);

static void on_init(phx_ctx_t *c, void *st, phx_tid_t src, const void *m, size_t n)
{
    glb_task_t *t = st;
    (void)src;
    t->ctx = c;
    t->rank = phx_rank(c);
    t->size = phx_size(c);
    uint64_t ids[PHX_GLB_MAXP];
    /* T_INIT: every rank's task id, then the start time (unused: each node
     * uses its own clock). A second one, or a malformed one, is ignored. */
    if (t->have_tab || phx_glb_init_dec(m, n, t->size, ids, NULL) != 0)
        return;
    for (int r = 0; r < t->size; r++)
        t->tids[r] = (phx_tid_t)ids[r];
    /* Whichever node ends up the root reports the time since its own start
     * message (rank 0's includes its start barrier). */
    t->t0 = phx_now_ns();
    t->have_tab = 1;
    if (t->rank != 0) {
        (void)phx_send(c, t->tids[0], T_UP, NULL, 0);     /* rank 0 dead: ignored */
        start_sm(t);
        return;
    }
    t->up |= 1;
    try_start_root(t);
}

/* Rank 0 starts its state machine only once every other rank's task has
 * the table (T_UP) or is dead. Until then its start messages may still sit
 * in its outbox, and its death would leave nobody able to start, or to
 * relay the table: with the barrier, every loss of rank 0 while it holds
 * work finds every live node started. Steal requests wait in the early
 * queue meanwhile: one round trip at the start. */
static void try_start_root(glb_task_t *t)
{
    if (t->sm)
        return;
    int dead[PHX_GLB_MAXP * 2];
    int n = phx_failed_nodes(dead, (int)(sizeof dead / sizeof *dead));
    uint64_t have = t->up;
    for (int i = 0; i < n && i < (int)(sizeof dead / sizeof *dead); i++)
        if (dead[i] >= 0 && dead[i] < t->size)
            have |= 1ull << dead[i];
    if (have == (t->size == 64 ? ~0ull : (1ull << t->size) - 1))
        start_sm(t);
    else
        kick(t);    /* poll again (notices arrive without a message to us) */
}

static void on_up(phx_ctx_t *c, void *st, phx_tid_t src, const void *m, size_t n)
{
    glb_task_t *t = st;
    (void)m; (void)n;
    t->ctx = c;
    int r = phx_tid_home(src);
    if (r > 0 && r < PHX_GLB_MAXP)
        t->up |= 1ull << r;
    die_point(c, t->rank, t->size, NULL, "U");
    if (t->have_tab && !t->sm)
        try_start_root(t);
}

static void start_sm(glb_task_t *t)
{
    phx_ctx_t *c = t->ctx;
    phx_glb_io_t io = { t, io_send, io_point, io_finish, io_abort };
    t->sm = phx_glb_sm_new(&G_cfg, &G_wrapped, G_app, t->rank, t->size, &io, 0x5eed);
    if (!t->sm) {
        fprintf(stderr, "glb: rank %d: cannot start (P=%d, at most %d)\n", t->rank, t->size, PHX_GLB_MAXP);
        phx_exit(c, PHX_GLB_EXIT_LOST);
        return;
    }
    atomic_store(&G_started, 1);
    phx_glb_sm_start(t->sm, phx_now_ns());
    for (struct early *e = t->early, *nx; e; e = nx) {
        nx = e->next;
        phx_glb_sm_recv(t->sm, e->src, e->b, e->len, phx_now_ns());
        free(e);
    }
    t->early = NULL;
    t->early_tail = NULL;
    poll_failures(t);
    kick(t);
}

static void on_cont(phx_ctx_t *c, void *st, phx_tid_t src, const void *m, size_t n)
{
    glb_task_t *t = st;
    (void)src; (void)m; (void)n;
    t->ctx = c;
    t->self_pending = 0;
    if (!t->sm) {   /* rank 0 waiting for every node's T_UP */
        struct timespec ts = { 0, 500000 };
        nanosleep(&ts, NULL);
        try_start_root(t);
        return;
    }
    poll_failures(t);
    if (!phx_glb_sm_step(t->sm, phx_now_ns()) && !phx_glb_sm_over(t->sm)) {
        /* Idle: this CONT is our timer; yield the core to busy nodes. */
        struct timespec ts = { 0, 500000 };
        nanosleep(&ts, NULL);
    }
    kick(t);
}

static void on_kill(phx_ctx_t *c, void *st, phx_tid_t src, const void *m, size_t n)
{
    (void)c; (void)st; (void)src;
    int64_t pid;
    if (!phx_glb_kill_dec(m, n, &pid))
        kill((pid_t)pid, SIGKILL);
    raise(SIGKILL);
}

static void task_fini(void *st)
{
    glb_task_t *t = st;
    if (t->sm && getenv("PHX_GLB_STATS")) {
        phx_glb_sm_stats_t s;
        phx_glb_sm_get_stats(t->sm, &s);
        fprintf(stderr,
                "glb-stats rank=%d steals=%" PRIu64 " stolen=%" PRIu64 " gives=%" PRIu64 " backups=%" PRIu64
                " steal_backups=%" PRIu64 " backup_bytes=%" PRIu64 " adoptions=%" PRIu64 " readopted=%" PRIu64
                " queries=%" PRIu64 " orphans=%" PRIu64 " waves=%" PRIu64 " malformed=%" PRIu64
                " handovers=%" PRIu64 "\n",
                t->rank, s.steals_sent, s.steals_ok, s.gives, s.backups, s.steal_backups, s.backup_bytes,
                s.adoptions, s.readopted, s.queries, s.orphans, s.waves, s.malformed, s.handovers);
    }
    phx_glb_sm_free(t->sm);
    for (struct early *e = t->early, *nx; e; e = nx) {
        nx = e->next;
        free(e);
    }
}

/* Rank 0 sends every node its start message (the task id table). When it
 * is lost and this node's GLB task has not started, the message is already
 * queued here (it left before the death), or comes from a node that got
 * its own (relay_start), or never comes: nobody got one, or rank 0 died
 * before it created this node's task. Then no state machine will ever exist
 * to learn of the loss, and the job would hang until the launcher's
 * timeout. Waits glb-timeout / 20 (at least 100 ms) for the start, then
 * ends the job. */
static void *root_watch(void *arg)
{
    (void)arg;
    long ms = G_cfg.timeout_ms > 0 ? G_cfg.timeout_ms / 20 : 3000;
    for (long i = 0; i < (ms < 100 ? 100 : ms) / 10; i++) {
        if (atomic_load(&G_started))
            return NULL;
        struct timespec ts = { 0, 10000000 };
        nanosleep(&ts, NULL);
    }
    if (atomic_load(&G_started))
        return NULL;
    fprintf(stderr, "unrecoverable: lost rank 0 before it started the GLB tasks\n");
    fflush(stderr);
    _exit(PHX_GLB_EXIT_LOST);
}

/* Communication thread, on each failure notice. With glb-ft off any loss
 * ends the job here (nothing holds the dead rank's work), not in the GLB
 * task, because that task may never run. With glb-ft on every loss,
 * rank 0's included, reaches the state machine by polling: rank 0's state
 * is backed up like any node's and the root role moves to the lowest live
 * rank; only a loss of rank 0 before this node's task started needs the
 * watch above. */
/* Communication thread: SIGTERM (or `phx drain`) with drain-on=term. Only
 * glb-ft can hand the state over (a backup holder takes it); before this
 * node's machine exists there is nothing to hand over either way. */
static int on_drain(void *arg, int why)
{
    (void)arg; (void)why;
    if (!G_cfg.ft) {
        fprintf(stderr, "glb: drain needs glb-ft=on (nobody holds a backup): stopping\n");
        return PHX_ENOTSUP;
    }
    if (!atomic_load(&G_started)) {
        fprintf(stderr, "glb: drain before this node's GLB task started: stopping\n");
        return PHX_EAGAIN;
    }
    if (atomic_exchange(&G_drain, 1)) {
        /* The scheduler's patience is out: stop; the others take the last
         * acked state over as after a crash (exact, some work redone). */
        fprintf(stderr, "glb: a second drain request during the drain: stopping now\n");
        return PHX_ECANCELED;
    }
    return 0;
}

static void on_failure(void *arg, int node, uint32_t inc, uint64_t when_ns)
{
    (void)arg; (void)inc; (void)when_ns;
    if (G_cfg.ft) {
        pthread_t th;
        if (node != 0 || atomic_load(&G_started))
            return;
        if (pthread_create(&th, NULL, root_watch, NULL) == 0) {
            pthread_detach(th);
            return;
        }
        fprintf(stderr, "unrecoverable: lost rank 0 before this node's GLB task started\n");
        fflush(stderr);
        _exit(PHX_GLB_EXIT_LOST);
    }
    fprintf(stderr, "unrecoverable: lost rank %d (glb-ft off)\n", node);
    fflush(stderr);
    _exit(PHX_GLB_EXIT_LOST);
}

/* Rank 0's main task: one GLB task per node; once every one of them
 * exists (M_HERE from its init, or its node is dead), everyone's id table.
 * Waiting for the tasks matters when rank 0 dies before its own GLB task
 * started: a spawn still in its outbox dies with it, and a start message
 * relayed to a task that was never created is held for it forever, so
 * that node would sit out the job until its watch ended it (exit 3, with
 * the survivors' exact count already printed). With the wait, when any
 * start message leaves rank 0 every live node's task exists, and the
 * relay reaches all of them. Costs one round trip at the start.
 * State: written by its own handlers only (one at a time). */
typedef struct glb_main {
    phx_tid_t ids[PHX_GLB_MAXP];
    uint64_t here;              /* ranks whose GLB task exists (M_HERE) */
    int p, sent;
} glb_main_t;

/* The GLB task's init, on its node: tells the main task (its tid is the
 * spawn argument) that it exists. */
static void task_init(phx_ctx_t *c, void *st, const void *arg, size_t len)
{
    (void)st;
    uint64_t main_id;
    if (phx_glb_spawn_dec(arg, len, &main_id) != 0)
        return;     /* not spawned by main_init: nobody waits for it */
    (void)phx_send(c, (phx_tid_t)main_id, M_HERE, NULL, 0);   /* rank 0 dead: ignored */
}

static void main_start_all(phx_ctx_t *c, glb_main_t *m)
{
    uint8_t tab[PHX_GLB_INIT_LEN(PHX_GLB_MAXP)];
    long len = phx_glb_init_enc(m->ids, m->p, 0, tab, sizeof tab);   /* phx_tid_t is u64 */
    if (len < 0) {      /* main_init bounded p: cannot happen */
        fprintf(stderr, "glb: cannot encode the start message: %s\n", phx_strerror((int)len));
        phx_exit(c, PHX_GLB_EXIT_LOST);
        return;
    }
    die_point(c, 0, m->p, NULL, "M");      /* every task exists, no start message sent */
    /* Test hook U (rank 0 dies at a T_UP): only ranks 0 and 1 get a start
     * message, so the others can start only by the survivors' relay. */
    int upto = die_armed(0, "U") && m->p > 2 ? 2 : m->p;
    for (int r = 0; r < upto; r++) {
        int rc = phx_send(c, m->ids[r], T_INIT, tab, (size_t)len);
        if (rc < 0 && rc != PHX_EINVAL) {   /* EINVAL: r is dead, its successor restores it */
            fprintf(stderr, "glb: cannot start rank %d: %s\n", r, phx_strerror(rc));
            phx_exit(c, PHX_GLB_EXIT_LOST);
            return;
        }
    }
    m->sent = 1;
    phx_task_done(c);
}

/* Every rank's task is here or its node is dead: start them all; else
 * poll again (a notice arrives without a message to this task). */
static void main_check(phx_ctx_t *c, glb_main_t *m, int poll)
{
    if (m->sent)
        return;
    int dead[PHX_GLB_MAXP * 2];
    int n = phx_failed_nodes(dead, (int)(sizeof dead / sizeof *dead));
    uint64_t have = m->here;
    for (int i = 0; i < n && i < (int)(sizeof dead / sizeof *dead); i++)
        if (dead[i] >= 0 && dead[i] < m->p)
            have |= 1ull << dead[i];
    if (have == (m->p == 64 ? ~0ull : (1ull << m->p) - 1)) {
        main_start_all(c, m);
        return;
    }
    if (!poll)
        return;     /* the M_POLL chain is already going */
    int rc = phx_send(c, phx_self(c), M_POLL, NULL, 0);
    if (rc < 0) {
        fprintf(stderr, "glb: rank 0: self send failed: %s\n", phx_strerror(rc));
        phx_exit(c, PHX_GLB_EXIT_LOST);
    }
}

static void on_here(phx_ctx_t *c, void *st, phx_tid_t src, const void *msg, size_t len)
{
    glb_main_t *m = st;
    (void)msg; (void)len;
    int r = phx_tid_home(src);
    if (r >= 0 && r < m->p)
        m->here |= 1ull << r;
    main_check(c, m, 0);
}

static void on_main_poll(phx_ctx_t *c, void *st, phx_tid_t src, const void *msg, size_t len)
{
    glb_main_t *m = st;
    (void)src; (void)msg; (void)len;
    struct timespec ts = { 0, 500000 };     /* the poll's timer, as an idle GLB task's */
    nanosleep(&ts, NULL);
    main_check(c, m, 1);
}

static void main_init(phx_ctx_t *c, void *st, const void *arg, size_t len)
{
    glb_main_t *m = st;
    (void)arg; (void)len;
    int p = phx_size(c);
    if (p > PHX_GLB_MAXP) {
        fprintf(stderr, "glb: %d nodes, at most %d\n", p, PHX_GLB_MAXP);
        phx_exit(c, PHX_GLB_EXIT_LOST);
        return;
    }
    m->p = p;
    uint8_t me[PHX_GLB_SPAWN_LEN];
    phx_glb_spawn_enc(me, phx_self(c));
    for (int r = 0; r < p; r++) {
        phx_tid_t id = phx_spawn_on(c, G_task_type, r, me, sizeof me);
        if (id == PHX_TID_NONE) {
            fprintf(stderr, "glb: cannot spawn the GLB task on rank %d\n", r);
            phx_exit(c, PHX_GLB_EXIT_LOST);
            return;
        }
        m->ids[r] = id;
    }
    main_check(c, m, 1);
}

int phx_glb_run(int argc, char **argv, const phx_glb_ops_t *ops, void *app, const phx_glb_cfg_t *cfg)
{
    G_ops = ops;
    G_app = app;
    G_cfg = *cfg;
    G_wrapped = *ops;
    if (cfg->threads > 1) {
        int rc = team_start(cfg->threads);
        if (rc != 0) {
            fprintf(stderr, "glb: cannot start %d threads: %s\n", cfg->threads, phx_strerror(rc));
            return 1;
        }
        G_wrapped.process = team_process;
    }
    /* GLB decides termination itself (waves), so no runtime detector; with
     * glb-ft the runtime must deliver failure notices. */
    setenv("PHX_TD", "none", 0);
    if (cfg->ft)
        setenv("PHX_FT", "1", 0);
    if (phx_on_drain(on_drain, NULL) != 0 || phx_on_failure(on_failure, NULL) != 0) {
        fprintf(stderr, "glb: cannot register the failure callback\n");
        return 1;
    }
    phx_type_t tt = { .name = "glb", .state_size = sizeof(glb_task_t), .init = task_init, .fini = task_fini,
                      .handlers = { [T_INIT] = on_init, [T_MSG] = on_msg, [T_CONT] = on_cont,
                                    [T_KILL] = on_kill, [T_UP] = on_up } };
    G_task_type = phx_register_type(&tt);
    phx_type_t mt = { .name = "glb-main", .state_size = sizeof(glb_main_t), .init = main_init,
                      .handlers = { [M_HERE] = on_here, [M_POLL] = on_main_poll } };
    int main_type = phx_register_type(&mt);
    if (G_task_type < 0 || main_type < 0) {
        fprintf(stderr, "glb: cannot register task types\n");
        return 1;
    }
    return phx_main(argc, argv, main_type, NULL, 0);
}
