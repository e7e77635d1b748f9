/* ADD, PIGGYBACK and ACK latency of the lock-free determinant queue
 * (ft/mlog/detq.c) against the same queue behind one mutex, the design the
 * thesis measured first and dropped (Meneses, "Scalable Message-Logging Techniques for
 * Effective Fault Tolerance in HPC Applications", Table 7.6), and against per-worker queues (one lock-free
 * queue per producer, the runtime's layout: the consumer sweeps all T per
 * frame, so PIGGYBACK and ACK there cover T queues). T producer threads ADD as fast as they can
 * while one consumer thread PIGGYBACKs (range + copy of up to 64 entries,
 * what a frame carries) and ACKs what it copied, in a loop. Every operation
 * is timed; prints the median of each, in nanoseconds.
 *
 * usage: bench_detq lockfree|mutex|perworker T OPS_PER_PRODUCER
 * prints: impl=... T=... add_ns=... piggyback_ns=... ack_ns=... */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ft/mlog/detq.h"

#define CAP 4096
#define BATCH 64

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ---- the mutex baseline: same ring, same blocking bound ----------------- */
typedef struct mq {
    pthread_mutex_t mu;
    uint64_t start, end;
    phx_det_t ring[CAP];
} mq_t;

static void mq_add(mq_t *q, const phx_det_t *d)
{
    pthread_mutex_lock(&q->mu);
    while (q->end - q->start >= CAP) {   /* full: wait for acks, never overwrite */
        pthread_mutex_unlock(&q->mu);
        sched_yield();
        pthread_mutex_lock(&q->mu);
    }
    q->ring[q->end++ & (CAP - 1)] = *d;
    pthread_mutex_unlock(&q->mu);
}

static uint64_t mq_piggyback(mq_t *q, phx_det_t *out, uint64_t *end)
{
    pthread_mutex_lock(&q->mu);
    uint64_t n = q->end - q->start;
    if (n > BATCH)
        n = BATCH;
    for (uint64_t i = 0; i < n; i++)
        out[i] = q->ring[(q->start + i) & (CAP - 1)];
    *end = q->start + n;
    pthread_mutex_unlock(&q->mu);
    return n;
}

static void mq_ack(mq_t *q, uint64_t end)
{
    pthread_mutex_lock(&q->mu);
    if (end > q->start)
        q->start = end;
    pthread_mutex_unlock(&q->mu);
}

/* ---- harness ------------------------------------------------------------ */
static int lockfree, perworker, nq;
static phx_detq_t *lq, *pq[256];
static mq_t *mq;
static uint64_t ops;
static _Atomic int producers_left;

typedef struct samples {
    uint64_t *v;
    size_t n, cap;
    int id;
} samples_t;

static void push(samples_t *s, uint64_t x)
{
    if (s->n == s->cap) {
        s->cap = s->cap ? 2 * s->cap : 1 << 16;
        s->v = realloc(s->v, s->cap * sizeof *s->v);
        if (!s->v) {
            perror("realloc");
            exit(1);
        }
    }
    s->v[s->n++] = x;
}

static int cmp(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static uint64_t median(samples_t *s)
{
    if (!s->n)
        return 0;
    qsort(s->v, s->n, sizeof *s->v, cmp);
    return s->v[s->n / 2];
}

static void *producer(void *arg)
{
    samples_t *s = arg;
    phx_detq_t *q = perworker ? pq[s->id] : lq;
    phx_det_t d = { 1, 2, 3, 4 };
    for (uint64_t i = 0; i < ops; i++) {
        d.ssn = i;
        uint64_t t0 = now_ns();
        if (lockfree)
            phx_detq_add(q, &d);
        else
            mq_add(mq, &d);
        push(s, now_ns() - t0);
    }
    atomic_fetch_sub(&producers_left, 1);
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc != 4 || (strcmp(argv[1], "lockfree") && strcmp(argv[1], "mutex") && strcmp(argv[1], "perworker"))) {
        fprintf(stderr, "usage: bench_detq lockfree|mutex|perworker T OPS_PER_PRODUCER\n");
        return 2;
    }
    perworker = !strcmp(argv[1], "perworker");
    lockfree = perworker || !strcmp(argv[1], "lockfree");
    int T = atoi(argv[2]);
    ops = strtoull(argv[3], NULL, 10);
    if (T < 1 || T > 256 || !ops) {
        fprintf(stderr, "bench_detq: T in 1..256, OPS > 0\n");
        return 2;
    }
    if (perworker) {
        for (nq = 0; nq < T; nq++)
            if (!(pq[nq] = phx_detq_create(CAP, 0, NULL, NULL)))
                break;
        lq = nq == T ? pq[0] : NULL;
    } else if (lockfree)
        lq = phx_detq_create(CAP, 0, NULL, NULL);
    else {
        mq = calloc(1, sizeof *mq);
        if (mq)
            pthread_mutex_init(&mq->mu, NULL);
    }
    if (!lq && !mq) {
        fprintf(stderr, "bench_detq: out of memory\n");
        return 1;
    }
    samples_t *ps = calloc((size_t)T, sizeof *ps), pb = { 0 }, ak = { 0 };
    pthread_t *th = calloc((size_t)T, sizeof *th);
    atomic_store(&producers_left, T);
    for (int i = 0; i < T; i++)
        ps[i].id = i;
    for (int i = 0; i < T; i++)
        if (pthread_create(&th[i], NULL, producer, &ps[i])) {
            perror("pthread_create");
            return 1;
        }
    /* The consumer: this thread, as the comm thread would be. */
    phx_det_t buf[BATCH];
    for (;;) {
        int left = atomic_load(&producers_left);
        uint64_t end, n, t0 = now_ns();
        uint64_t pend[256];
        if (perworker) {
            n = 0;
            for (int i = 0; i < T; i++) {
                uint64_t first, e, k = phx_detq_piggyback(pq[i], &first, &e);
                if (k > (uint64_t)(BATCH / T + 1))
                    k = (uint64_t)(BATCH / T + 1);
                if (n + k > BATCH)
                    k = BATCH - n;
                phx_detq_copy(pq[i], first, k, buf + n);
                n += k;
                pend[i] = first + k;
            }
            end = 0;
        } else if (lockfree) {
            uint64_t first, e;
            n = phx_detq_piggyback(lq, &first, &e);
            if (n > BATCH)
                n = BATCH;
            phx_detq_copy(lq, first, n, buf);
            end = first + n;
        } else
            n = mq_piggyback(mq, buf, &end);
        uint64_t t1 = now_ns();
        if (!n) {
            if (!left)
                break;
            sched_yield();
            continue;
        }
        push(&pb, t1 - t0);
        t0 = now_ns();
        if (perworker)
            for (int i = 0; i < T; i++)
                phx_detq_ack(pq[i], 0, pend[i]);
        else if (lockfree)
            phx_detq_ack(lq, 0, end);
        else
            mq_ack(mq, end);
        push(&ak, now_ns() - t0);
    }
    samples_t all = { 0 };
    for (int i = 0; i < T; i++) {
        pthread_join(th[i], NULL);
        for (size_t k = 0; k < ps[i].n; k++)
            push(&all, ps[i].v[k]);
        free(ps[i].v);
    }
    printf("impl=%s T=%d add_ns=%llu piggyback_ns=%llu ack_ns=%llu\n", argv[1], T,
           (unsigned long long)median(&all), (unsigned long long)median(&pb), (unsigned long long)median(&ak));
    free(all.v);
    free(pb.v);
    free(ak.v);
    free(ps);
    free(th);
    if (perworker)
        for (int i = 0; i < nq; i++)
            phx_detq_destroy(pq[i]);
    else
        phx_detq_destroy(lq);
    free(mq);
    return 0;
}
