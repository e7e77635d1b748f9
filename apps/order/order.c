/* order: an order-sensitive job for message logging (a replay must deliver
 * in the recorded order, or the result differs). P = nodes x V tasks pass 2P tokens around:
 * a task folds every token it receives into a hash chain, in delivery
 * order, and forwards the token with the chain's new value to a task the
 * chain picks. Senders race (several tokens converge on one task), so the
 * delivery order changes from run to run, and with it every value and
 * route: the result is not reproducible, on purpose.
 *
 * What must hold is consistency (no orphans): each task hashes the stream
 * of payloads it sent to every other task and the stream it delivered from
 * every other task. At the end main collects both and checks, for every
 * pair, that what the sender's final state says it sent equals what the
 * receiver used. A task restored after a failure that replayed in another
 * order would re-derive different payloads than its survivors received:
 * the pair would differ, and the job says INCONSISTENT and exits 3.
 *
 * START comes from main, tokens from other tasks: they race, so a token can
 * be delivered before the task knows the job; it waits in the task's state
 * until START and is folded in then, in delivery order.
 *
 * Usage: order [-V tasks/node] [-k hops] [-c ticks per checkpoint] [-L 0|1]
 *              [-S hops] [-H TICK -g FILE]
 *   -L 1  START travels along a line (main to task 0, task i to i+1), so
 *         most tasks get tokens before their START (the race, made certain)
 *   -S s  every s-th hop of a token goes through a child task: the task
 *         spawns it (on a node its chain picks, its own included), the child
 *         mixes its own id into the token and hands it back, and the task
 *         folds that into its chain. A replay that spawned the child under
 *         another id would fold another value (an orphan, or a token twice);
 *         kids= counts the children's visits: tokens x floor((hops - 1) / s)
 *   -H, -g  a test's gate: from tick TICK on, the checkpoint due next and
 *         the job's end wait until FILE exists ({"ev":"order_hold"} logged
 *         at TICK): a kill lands between two checkpoints by construction
 * Prints: order tasks=P tokens=T hops=K kids=N consistent=yes checksum=X
 * Progress: {"ev":"order_tick","n":k} in the event log (k = ticks: one per
 * 64 deliveries of any task); main asks for a checkpoint every c ticks;
 * {"ev":"order_spawn","hop":h} on the node of a task that spawned a child. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/eventlog.h"
#include "core/phalanx.h"
#include "apps/common/phx_args.h"
#include "base/phx_err.h"

#define MAXP 64
enum { T_START, T_TOK, T_DONE, T_TICK, T_ASK, T_REPORT, T_POLL, T_KID };

typedef struct tok { uint32_t id, hop; uint64_t val; uint32_t kids, pad; } tok_t;
typedef struct kid_msg { phx_tid_t parent; tok_t k; } kid_msg_t;
typedef struct early { phx_tid_t src; tok_t k; } early_t;
typedef struct task {
    uint32_t idx, p, hops, started, nearly;
    uint64_t h, delivered;
    phx_tid_t main;
    phx_tid_t tids[MAXP];
    uint64_t sent[MAXP], recv[MAXP];   /* stream hashes per peer index */
    early_t early[2 * MAXP];           /* tokens delivered before START: at most all 2P */
} task_t;
typedef struct report { uint32_t idx; uint64_t sent[MAXP], recv[MAXP]; } report_t;
typedef struct mainst {
    uint32_t p, tokens, hops, ckpt_every, done, reports, ticks, kids;
    uint32_t ckpt_due, end_held;   /* waiting for the gate (-H, -g) */
    uint64_t sum;
    phx_tid_t tids[MAXP];
    uint64_t sent[MAXP][MAXP], recv[MAXP][MAXP];
} mainst_t;
typedef struct start_msg { uint32_t p, hops, line; phx_tid_t main; phx_tid_t tids[MAXP]; } start_msg_t;

static int task_type, main_type, kid_type;
static uint32_t V = 4, HOPS = 400, CKPT_EVERY = 8, LINE, HOLD = UINT32_MAX, SPAWN;
static const char *GATE;   /* every node parses argv: a restored main finds it too */

static int gate_open(void) { return !GATE || access(GATE, F_OK) == 0; }

static uint64_t mix(uint64_t z)
{
    z += 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static uint32_t index_of(const task_t *t, phx_tid_t id)
{
    for (uint32_t i = 0; i < t->p; i++)
        if (t->tids[i] == id)
            return i;
    return UINT32_MAX;
}

/* A lost token would leave the job quiescent with no result: say so and fail. */
static void osend(phx_ctx_t *c, phx_tid_t dst, int tag, const void *buf, size_t len)
{
    int rc = phx_send(c, dst, tag, buf, len);
    if (rc) {
        fprintf(stderr, "order: send of tag %d to %#llx failed: %s\n", tag, (unsigned long long)dst,
                phx_strerror(rc));
        phx_exit(c, 1);
    }
}

static void send_tok(phx_ctx_t *c, task_t *t, tok_t k)
{
    uint32_t to = (uint32_t)(t->h % t->p);
    t->sent[to] = mix(t->sent[to] ^ k.val ^ ((uint64_t)k.id << 32 | k.hop));
    osend(c, t->tids[to], T_TOK, &k, sizeof k);
}

/* Folds one delivered token into the chain and passes it on. */
static void fold(phx_ctx_t *c, task_t *t, phx_tid_t src, tok_t k)
{
    uint32_t from = index_of(t, src);
    if (from < t->p)
        t->recv[from] = mix(t->recv[from] ^ k.val ^ ((uint64_t)k.id << 32 | k.hop));
    t->h = mix(t->h ^ k.val ^ src);   /* the order-sensitive state */
    k.hop++;
    k.val = t->h;
    if (++t->delivered % 64 == 0)
        osend(c, t->main, T_TICK, NULL, 0);
    if (k.hop >= t->hops)
        osend(c, t->main, T_DONE, &k, sizeof k);
    else if (SPAWN && k.hop % SPAWN == 0) {
        kid_msg_t km = { phx_self(c), k };
        int node = (int)((t->h >> 17) % (uint64_t)phx_size(c));
        if (phx_spawn_on(c, kid_type, node, &km, sizeof km) == PHX_TID_NONE) {
            fprintf(stderr, "order: spawn of a child failed\n");
            phx_exit(c, 1);
            return;
        }
        phx_evlog("order_spawn", "\"hop\":%u", k.hop);
    } else
        send_tok(c, t, k);
}

/* A child: mixes its own id into the token and hands it back. */
static void kid_init(phx_ctx_t *c, void *st, const void *arg, size_t n)
{
    (void)st;
    kid_msg_t km;
    if (n != sizeof km)
        return;
    memcpy(&km, arg, sizeof km);
    km.k.val = mix(km.k.val ^ phx_self(c));
    km.k.kids++;
    osend(c, km.parent, T_KID, &km.k, sizeof km.k);
    phx_task_done(c);
}

/* The child's token: folded into the chain (its id with it), then passed on. */
static void on_kid(phx_ctx_t *c, void *st, phx_tid_t src, const void *m, size_t n)
{
    task_t *t = st;
    tok_t k;
    if (n != sizeof k)
        return;
    memcpy(&k, m, sizeof k);
    t->h = mix(t->h ^ k.val ^ src);
    k.val = t->h;
    send_tok(c, t, k);
}

static void on_start(phx_ctx_t *c, void *st, phx_tid_t src, const void *m, size_t n)
{
    (void)src;
    task_t *t = st;
    const start_msg_t *s = m;
    if (n != sizeof *s || t->started)
        return;
    t->started = 1;
    t->p = s->p;
    t->hops = s->hops;
    t->main = s->main;
    memcpy(t->tids, s->tids, sizeof t->tids);
    if (s->line && t->idx + 1 < t->p)
        osend(c, t->tids[t->idx + 1], T_START, s, sizeof *s);
    t->h = mix(t->idx + 1);
    for (uint32_t j = 0; j < 2; j++) {   /* two tokens each */
        tok_t k = { t->idx * 2 + j, 0, mix(t->h + j), 0, 0 };
        t->h = mix(t->h ^ k.val);
        send_tok(c, t, k);
    }
    for (uint32_t i = 0; i < t->nearly; i++)
        fold(c, t, t->early[i].src, t->early[i].k);
    t->nearly = 0;
}

static void on_tok(phx_ctx_t *c, void *st, phx_tid_t src, const void *m, size_t n)
{
    task_t *t = st;
    tok_t k;
    if (n != sizeof k)
        return;
    memcpy(&k, m, sizeof k);
    if (t->started) {
        fold(c, t, src, k);
        return;
    }
    if (t->nearly == sizeof t->early / sizeof t->early[0]) {   /* more tokens than exist */
        fprintf(stderr, "order: task %u got more than %zu tokens before START\n", t->idx,
                sizeof t->early / sizeof t->early[0]);
        phx_exit(c, 1);
        return;
    }
    t->early[t->nearly++] = (early_t){ src, k };
}

static void on_ask(phx_ctx_t *c, void *st, phx_tid_t src, const void *m, size_t n)
{
    (void)src, (void)m, (void)n;
    task_t *t = st;
    report_t *r = calloc(1, sizeof *r);
    if (!r)
        return;
    r->idx = t->idx;
    memcpy(r->sent, t->sent, sizeof r->sent);
    memcpy(r->recv, t->recv, sizeof r->recv);
    osend(c, t->main, T_REPORT, r, sizeof *r);
    free(r);
}

static void task_init(phx_ctx_t *c, void *st, const void *arg, size_t n)
{
    (void)c;
    if (n == sizeof(uint32_t))
        memcpy(&((task_t *)st)->idx, arg, n);
}

static void main_init(phx_ctx_t *c, void *st, const void *arg, size_t n)
{
    (void)arg, (void)n;
    mainst_t *s = st;
    s->p = (uint32_t)phx_size(c) * V;
    if (s->p > MAXP) {
        fprintf(stderr, "order: at most %d tasks (nodes x V)\n", MAXP);
        phx_exit(c, 2);
        return;
    }
    s->tokens = 2 * s->p;
    s->hops = HOPS;
    s->ckpt_every = CKPT_EVERY;
    for (uint32_t i = 0; i < s->p; i++)
        s->tids[i] = phx_spawn_on(c, task_type, (int)(i / V), &i, sizeof i);
    start_msg_t *m = calloc(1, sizeof *m);
    if (!m) {
        phx_exit(c, 1);
        return;
    }
    m->p = s->p;
    m->hops = s->hops;
    m->line = LINE;
    m->main = phx_self(c);
    memcpy(m->tids, s->tids, sizeof m->tids);
    for (uint32_t i = 0; i < (LINE ? 1 : s->p); i++)
        osend(c, s->tids[i], T_START, m, sizeof *m);
    free(m);
}

static void on_tick(phx_ctx_t *c, void *st, phx_tid_t src, const void *m, size_t n)
{
    (void)src, (void)m, (void)n;
    mainst_t *s = st;
    s->ticks++;
    phx_evlog("order_tick", "\"n\":%u", s->ticks);
    if (s->ticks == HOLD)
        phx_evlog("order_hold", "\"tick\":%u", s->ticks);
    if (s->ckpt_every && s->ticks % s->ckpt_every == 0)
        s->ckpt_due = 1;
    /* A checkpoint held by the gate is taken at the first tick after it opens. */
    if (s->ckpt_due && (s->ticks <= HOLD || gate_open())) {
        s->ckpt_due = 0;
        phx_checkpoint(c);
    }
}

static void on_done(phx_ctx_t *c, void *st, phx_tid_t src, const void *m, size_t n)
{
    (void)src;
    mainst_t *s = st;
    tok_t k;
    if (n != sizeof k)
        return;
    memcpy(&k, m, sizeof k);
    s->sum += k.val;
    s->kids += k.kids;
    if (++s->done == s->tokens)
        for (uint32_t i = 0; i < s->p; i++)
            osend(c, s->tids[i], T_ASK, NULL, 0);
}

static void finish(phx_ctx_t *c, mainst_t *s)
{
    uint32_t bad = 0;
    for (uint32_t i = 0; i < s->p; i++)
        for (uint32_t j = 0; j < s->p; j++)
            if (s->sent[i][j] != s->recv[j][i]) {
                if (!bad)
                    fprintf(stderr, "order: task %u's stream to task %u differs from what %u used\n", i, j, j);
                bad++;
            }
    printf("order tasks=%u tokens=%u hops=%u kids=%u consistent=%s checksum=%016" PRIx64 "\n", s->p, s->tokens,
           s->hops, s->kids, bad ? "NO" : "yes", s->sum);
    fflush(stdout);
    phx_exit(c, bad ? 3 : 0);
}

static void on_report(phx_ctx_t *c, void *st, phx_tid_t src, const void *m, size_t n)
{
    (void)src;
    mainst_t *s = st;
    const report_t *r = m;
    if (n != sizeof *r || r->idx >= s->p)
        return;
    memcpy(s->sent[r->idx], r->sent, sizeof r->sent);
    memcpy(s->recv[r->idx], r->recv, sizeof r->recv);
    if (++s->reports < s->p)
        return;
    if (s->ticks >= HOLD && !gate_open()) {   /* the end waits for the gate too */
        s->end_held = 1;
        osend(c, phx_self(c), T_POLL, NULL, 0);
        return;
    }
    finish(c, s);
}

/* Polls the gate once a millisecond by a message to itself (as tdk's gate). */
static void on_poll(phx_ctx_t *c, void *st, phx_tid_t src, const void *m, size_t n)
{
    (void)src, (void)m, (void)n;
    mainst_t *s = st;
    if (!s->end_held)
        return;
    if (gate_open()) {
        s->end_held = 0;
        finish(c, s);
        return;
    }
    struct timespec ts = { 0, 1000000 };
    nanosleep(&ts, NULL);
    osend(c, phx_self(c), T_POLL, NULL, 0);
}

static const phx_args_t ARGS = {
    "order", "order [-V tasks/node] [-k hops] [-c ticks per checkpoint] [-L 0|1] [-S hops] [-H TICK -g FILE]",
    "  -V n   tasks per node, 1 to 32;  -k n  hops per token, 1 to 1000000\n"
    "  -c n   ticks per checkpoint;  -L 0|1  a line of tasks;  -S n  hops between spawns\n"
    "  -H t -g F  hold at tick t until file F exists (tests)\n"
};

int main(int argc, char **argv)
{
    if (phx_args_help(&ARGS, argc, argv))
        return 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int rt = phx_args_runtime(argc, argv, i);
        if (rt) {
            i += rt - 1;
            continue;
        }
        if (strcmp(a, "-g") && strcmp(a, "-V") && strcmp(a, "-k") && strcmp(a, "-c") && strcmp(a, "-L") &&
            strcmp(a, "-S") && strcmp(a, "-H"))
            return phx_args_bad(&ARGS, "unknown argument '%s'", a);
        if (phx_args_need(&ARGS, argc, argv, i))
            return 2;
        const char *s = argv[++i];
        if (!strcmp(a, "-g")) {
            GATE = s;
            continue;
        }
        uint64_t v;
        if (phx_args_u64(&ARGS, a, s, !strcmp(a, "-V") || !strcmp(a, "-k") ? 1 : 0,
                         !strcmp(a, "-V") ? 32 : !strcmp(a, "-L") ? 1 : 1000000, &v))
            return 2;
        if (!strcmp(a, "-V"))
            V = (uint32_t)v;
        else if (!strcmp(a, "-k"))
            HOPS = (uint32_t)v;
        else if (!strcmp(a, "-c"))
            CKPT_EVERY = (uint32_t)v;
        else if (!strcmp(a, "-L"))
            LINE = (uint32_t)v;
        else if (!strcmp(a, "-S"))
            SPAWN = (uint32_t)v;
        else
            HOLD = (uint32_t)v;
    }
    if ((HOLD == UINT32_MAX) != !GATE)
        return phx_args_bad(&ARGS, "-H and -g go together");
    phx_type_t tt = { .name = "order-task", .state_size = sizeof(task_t), .init = task_init,
                      .handlers = { [T_START] = on_start, [T_TOK] = on_tok, [T_ASK] = on_ask, [T_KID] = on_kid } };
    task_type = phx_register_type(&tt);
    phx_type_t mt = { .name = "order-main", .state_size = sizeof(mainst_t), .init = main_init,
                      .handlers = { [T_DONE] = on_done, [T_TICK] = on_tick, [T_REPORT] = on_report,
                                    [T_POLL] = on_poll } };
    main_type = phx_register_type(&mt);
    phx_type_t kt = { .name = "order-kid", .init = kid_init };
    kid_type = phx_register_type(&kt);
    return phx_main(argc, argv, main_type, NULL, 0);
}
