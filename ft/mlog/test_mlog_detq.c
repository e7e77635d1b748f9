/* The determinant queue (ft/mlog/detq.c, ft/mlog/detq.h): FIFO per
 * producer, nothing lost or seen twice, bounded memory. The stress test is
 * the one ThreadSanitizer must see:
 * it runs in every build, smaller under TSan (PHX_TSAN). */
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "base/phx_err.h"
#include "ft/mlog/detq.h"

static phx_det_t det(uint64_t k)
{
    return (phx_det_t){ .sender = k, .receiver = k + 1, .ssn = k + 2, .rsn = k + 3 };
}

static void assert_det_(const phx_det_t *d, uint64_t a, uint64_t b, uint64_t c, uint64_t e)
{
    assert_int_equal(d->sender, a);
    assert_int_equal(d->receiver, b);
    assert_int_equal(d->ssn, c);
    assert_int_equal(d->rsn, e);
}
#define assert_det(d, a, b, c, e) assert_det_((d), (a), (b), (c), (e))

static void check_inv(phx_detq_t *q)
{
    phx_detq_stat_t s;
    phx_detq_stat(q, &s);
    assert_true(s.start <= s.end && s.end <= s.next);
}

/* sequential add, piggyback, ack; stale and out-of-range acks. The
 * thesis acks the last index (inclusive); ours names one past it. */
static void test_r1_sequential(void **st)
{
    (void)st;
    phx_detq_t *q = phx_detq_create(8, 0, NULL, NULL);
    assert_non_null(q);
    uint64_t f, e;
    assert_int_equal(phx_detq_piggyback(q, &f, &e), 0);
    for (int i = 0; i < 3; i++)
        assert_int_equal(phx_detq_add(q, &(phx_det_t){ .ssn = (uint64_t)i }), i);
    phx_detq_stat_t s;
    phx_detq_stat(q, &s);
    assert_int_equal(s.end, 3);
    assert_int_equal(s.next, 3);
    assert_int_equal(phx_detq_piggyback(q, &f, &e), 3);
    assert_int_equal(f, 0);
    assert_int_equal(e, 3);
    assert_int_equal(phx_detq_ack(q, 0, 2), 1);        /* thesis ACK(1) */
    assert_int_equal(phx_detq_piggyback(q, &f, &e), 1);
    assert_int_equal(f, 2);
    phx_det_t d;
    phx_detq_copy(q, f, 1, &d);
    assert_int_equal(d.ssn, 2);
    assert_int_equal(phx_detq_ack(q, 0, 1), 0);        /* stale: start stays */
    assert_int_equal(phx_detq_piggyback(q, &f, &e), 1);
    assert_int_equal(phx_detq_ack(q, 0, 9), 0);        /* beyond what was published */
    assert_int_equal(phx_detq_ack(q, 0, 3), 1);
    assert_int_equal(phx_detq_piggyback(q, &f, &e), 0);
    check_inv(q);
    /* Wrap-around: copies cross the end of the ring. */
    for (int i = 3; i < 10; i++)
        assert_int_equal(phx_detq_add(q, &(phx_det_t){ .ssn = (uint64_t)i }), i);
    phx_det_t out[7];
    assert_int_equal(phx_detq_piggyback(q, &f, &e), 7);
    phx_detq_copy(q, f, 7, out);
    for (int i = 0; i < 7; i++)
        assert_int_equal(out[i].ssn, 3 + i);
    phx_detq_destroy(q);
}

/* A reserves t and stalls before filling; B fills t+1. Nothing is
 * exposed until A publishes; then both, in order. */
struct r2 {
    phx_detq_t *q;
    int64_t t;
    _Atomic int published;
};

static void *r2_b(void *arg)
{
    struct r2 *r = arg;
    r->t = phx_detq_reserve(r->q);
    *phx_detq_slot(r->q, (uint64_t)r->t) = det(100);
    phx_detq_publish(r->q, (uint64_t)r->t);
    atomic_store(&r->published, 1);
    return NULL;
}

static void test_r2_ordered_publication(void **st)
{
    (void)st;
    phx_detq_t *q = phx_detq_create(16, 0, NULL, NULL);
    int64_t a = phx_detq_reserve(q);
    assert_int_equal(a, 0);
    struct r2 r = { .q = q };
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, r2_b, &r), 0);
    /* Until A publishes, B cannot finish and nothing is visible, however
     * far B got: check it for as long as B runs, and at least a while. */
    uint64_t f, e;
    for (int i = 0; i < 20000; i++) {
        assert_int_equal(phx_detq_piggyback(q, &f, &e), 0);
        assert_int_equal(atomic_load(&r.published), 0);
        if (i % 64 == 0)
            sched_yield();
    }
    *phx_detq_slot(q, 0) = det(0);
    assert_int_equal(phx_detq_publish(q, 0), 0);
    pthread_join(th, NULL);
    assert_int_equal(r.t, 1);
    assert_int_equal(phx_detq_piggyback(q, &f, &e), 2);
    phx_det_t out[2];
    phx_detq_copy(q, f, 2, out);
    assert_det(&out[0], 0, 1, 2, 3);
    assert_det(&out[1], 100, 101, 102, 103);
    phx_detq_destroy(q);
}

/* P producers, the consumer piggybacks and acks at random. */
#ifdef PHX_TSAN
#define STRESS_N 1000
#else
#define STRESS_N 3000
#endif
#define PRODUCERS 16

struct stress {
    phx_detq_t *q;
    int id;
    uint64_t n;
    /* the index of this producer's latest det, released after the add
     * returned: what a message sent after that reception would carry. */
    _Atomic uint64_t last_plus1;
};

static uint64_t mix(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    return x;
}

static void *producer(void *arg)
{
    struct stress *p = arg;
    for (uint64_t k = 1; k <= p->n; k++) {
        int64_t t = phx_detq_reserve(p->q);
        if (t < 0)
            return NULL;
        phx_det_t *d = phx_detq_slot(p->q, (uint64_t)t);
        /* Each entry checksums its own index: a torn or misplaced read
         * shows as a mismatch. */
        d->sender = (uint64_t)p->id;
        d->ssn = k;
        d->receiver = (uint64_t)t;
        d->rsn = mix((uint64_t)t ^ ((uint64_t)p->id << 56) ^ k);
        if (phx_detq_publish(p->q, (uint64_t)t) < 0)
            return NULL;
        atomic_store_explicit(&p->last_plus1, (uint64_t)t + 1, memory_order_release);
    }
    return NULL;
}

static void test_r3_r6_stress(void **st)
{
    (void)st;
    const char *env = getenv("PHX_DETQ_STRESS");
    uint64_t n = env ? strtoull(env, NULL, 10) : STRESS_N;
    phx_detq_t *q = phx_detq_create(1024, 0, NULL, NULL);
    struct stress p[PRODUCERS];
    pthread_t th[PRODUCERS];
    for (int i = 0; i < PRODUCERS; i++) {
        p[i] = (struct stress){ .q = q, .id = i, .n = n };
        assert_int_equal(pthread_create(&th[i], NULL, producer, &p[i]), 0);
    }
    uint64_t seen_ssn[PRODUCERS] = { 0 };
    uint64_t total = 0, want = n * PRODUCERS, next_expected = 0, rng = 42;
    phx_det_t buf[1024];
    while (total < want) {
        /* read each producer's latest index BEFORE piggybacking; the
         * snapshot must cover it or it must be acked already. */
        uint64_t lastp[PRODUCERS];
        for (int i = 0; i < PRODUCERS; i++)
            lastp[i] = atomic_load_explicit(&p[i].last_plus1, memory_order_acquire);
        uint64_t f, e;
        uint64_t cnt = phx_detq_piggyback(q, &f, &e);
        for (int i = 0; i < PRODUCERS; i++)
            assert_true(lastp[i] <= e);
        check_inv(q);
        if (!cnt) {
            sched_yield();
            continue;
        }
        assert_true(f <= next_expected);
        /* Copy only the not yet seen part (the snapshot is a superset). */
        uint64_t from = next_expected, k = e - from;
        if (k > 1024)
            k = 1024;
        phx_detq_copy(q, from, k, buf);
        for (uint64_t j = 0; j < k; j++) {
            phx_det_t *d = &buf[j];
            uint64_t t = from + j;
            assert_int_equal(d->receiver, t);
            assert_true(d->sender < PRODUCERS);
            assert_int_equal(d->rsn, mix(t ^ (d->sender << 56) ^ d->ssn));
            assert_int_equal(d->ssn, seen_ssn[d->sender] + 1);   /* once, in order */
            seen_ssn[d->sender] = d->ssn;
        }
        next_expected += k;
        total += k;
        /* Ack a random prefix of what was seen (sometimes nothing, so the
         * producers hit the capacity bound). */
        rng = mix(rng + 1);
        uint64_t upto = f + rng % (next_expected - f + 1);
        phx_detq_ack(q, 0, upto);
        if (rng % 4 == 0)
            phx_detq_ack(q, 0, next_expected);
    }
    for (int i = 0; i < PRODUCERS; i++) {
        pthread_join(th[i], NULL);
        assert_int_equal(seen_ssn[i], n);
    }
    phx_detq_stat_t s;
    phx_detq_stat(q, &s);
    assert_int_equal(s.end, want);
    assert_int_equal(s.next, want);
    phx_detq_destroy(q);
}

/* no acks, cap 1024: ADD #1025 blocks (the owner is told once) and
 * overwrites nothing until a flush is acked. */
struct r4 {
    phx_detq_t *q;
    _Atomic int full_calls;
    int64_t t;
};

static void r4_full(void *arg)
{
    atomic_fetch_add(&((struct r4 *)arg)->full_calls, 1);
}

static void *r4_add(void *arg)
{
    struct r4 *r = arg;
    phx_det_t d = det(5000);
    r->t = phx_detq_add(r->q, &d);
    return NULL;
}

static void test_r4_capacity_blocks(void **st)
{
    (void)st;
    struct r4 r = { 0 };
    r.q = phx_detq_create(1024, 0, r4_full, &r);
    for (uint64_t i = 0; i < 1024; i++) {
        phx_det_t d = det(i);
        assert_int_equal(phx_detq_add(r.q, &d), (int64_t)i);
    }
    assert_int_equal(atomic_load(&r.full_calls), 0);
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, r4_add, &r), 0);
    /* Wait until the producer is provably blocked (it told the owner). */
    while (!atomic_load(&r.full_calls))
        sched_yield();
    for (int i = 0; i < 1000; i++) {
        phx_detq_stat_t s;
        phx_detq_stat(r.q, &s);
        assert_int_equal(s.end, 1024);
        phx_det_t d0;
        phx_detq_copy(r.q, 0, 1, &d0);
        assert_det(&d0, 0, 1, 2, 3);
        sched_yield();
    }
    assert_int_equal(phx_detq_ack(r.q, 0, 1), 1);   /* the flush was stored */
    pthread_join(th, NULL);
    assert_int_equal(r.t, 1024);
    assert_int_equal(atomic_load(&r.full_calls), 1);
    uint64_t f, e;
    assert_int_equal(phx_detq_piggyback(r.q, &f, &e), 1024);
    phx_det_t last;
    phx_detq_copy(r.q, 1024, 1, &last);
    assert_int_equal(last.sender, 5000);
    phx_det_t second;
    phx_detq_copy(r.q, 1, 1, &second);
    assert_int_equal(second.sender, 1);
    /* A closed queue releases a blocked producer with ECANCELED. */
    r.t = 0;
    assert_int_equal(pthread_create(&th, NULL, r4_add, &r), 0);
    while (atomic_load(&r.full_calls) < 2)
        sched_yield();
    phx_detq_close(r.q);
    pthread_join(th, NULL);
    assert_int_equal(r.t, PHX_ECANCELED);
    phx_detq_destroy(r.q);
}

/* after a restart (new incarnation) acks of the old one are ignored. */
static void test_r5_old_incarnation_ack(void **st)
{
    (void)st;
    phx_detq_t *q = phx_detq_create(64, 3, NULL, NULL);
    for (int i = 0; i < 10; i++) {
        phx_det_t d = det((uint64_t)i);
        phx_detq_add(q, &d);
    }
    assert_int_equal(phx_detq_ack(q, 2, 5), 0);   /* older incarnation */
    phx_detq_reset(q, 4);
    for (int i = 0; i < 3; i++) {
        phx_det_t d = det((uint64_t)i);
        assert_int_equal(phx_detq_add(q, &d), i);
    }
    assert_int_equal(phx_detq_ack(q, 3, 2), 0);   /* a stale ACK(2) from before */
    uint64_t f, e;
    assert_int_equal(phx_detq_piggyback(q, &f, &e), 3);
    assert_int_equal(f, 0);
    assert_int_equal(phx_detq_ack(q, 4, 2), 1);
    assert_int_equal(phx_detq_piggyback(q, &f, &e), 1);
    phx_detq_destroy(q);
}

static void test_create_rejects(void **st)
{
    (void)st;
    assert_null(phx_detq_create(0, 0, NULL, NULL));
    assert_null(phx_detq_create(1000, 0, NULL, NULL));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_create_rejects),
        cmocka_unit_test(test_r1_sequential),
        cmocka_unit_test(test_r2_ordered_publication),
        cmocka_unit_test(test_r4_capacity_blocks),
        cmocka_unit_test(test_r5_old_incarnation_ack),
        cmocka_unit_test(test_r3_r6_stress),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
