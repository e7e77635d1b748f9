/* core/metrics.c without a node: the table, registration and the text. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "base/phx_err.h"
#include "core/metrics.h"

static char buf[65536];

static int count(const char *hay, const char *needle)
{
    int k = 0;
    for (const char *p = hay; (p = strstr(p, needle)); p++)
        k++;
    return k;
}

static void test_render(void **st)
{
    (void)st;
    phx_metrics_set(PHX_M_MSGS_SENT, 7);
    phx_metrics_add(PHX_M_MSGS_SENT, 3);
    phx_metrics_set(PHX_M_CKPT_LAST_NS, 1500000000);
    assert_int_equal(phx_metrics_get(PHX_M_MSGS_SENT), 10);
    size_t n = phx_metrics_render(buf, sizeof buf, 3);
    assert_int_equal(n, strlen(buf));
    assert_non_null(strstr(buf, "phx_node_rank 3\n"));
    assert_non_null(strstr(buf, "phx_messages_total{direction=\"sent\"} 10\n"));
    assert_non_null(strstr(buf, "phx_messages_total{direction=\"received\"} 0\n"));
    assert_non_null(strstr(buf, "phx_checkpoint_last_duration_seconds 1.500000000\n"));
    /* one HELP/TYPE per family, even with several labelled members */
    assert_int_equal(count(buf, "# TYPE phx_messages_total counter\n"), 1);
    assert_int_equal(count(buf, "# TYPE phx_queue_depth gauge\n"), 1);
    for (const char *m = "phx_recoveries_total{kind=\"global\"} phx_recoveries_total{kind=\"partial\"} phx_epoch phx_message_log_bytes phx_agreements_total"; *m;) {
        char name[64];
        size_t k = strcspn(m, " ");
        memcpy(name, m, k);
        strcpy(name + k, " 0\n");
        assert_non_null(strstr(buf, name));
        m += k + (m[k] == ' ');
    }
}

/* Histograms: cumulative buckets in seconds, _sum and _count; a labelled
 * family (the recovery phases) has one HELP/TYPE and its samples together. */
static void test_histogram(void **st)
{
    (void)st;
    phx_metrics_observe(PHX_H_REC_AGREE, 3000000);      /* 3 ms */
    phx_metrics_observe(PHX_H_REC_AGREE, 40000000);     /* 40 ms */
    phx_metrics_observe(PHX_H_REC_AGREE, 120000000000); /* 120 s: only +Inf */
    phx_metrics_observe(PHX_H_CKPT_COMMIT, 1000000);    /* 1 ms: le="0.001" holds it */
    phx_metrics_observe(PHX_H_N, 1);                     /* ignored */
    assert_int_equal(phx_metrics_hist_count(PHX_H_REC_AGREE), 3);
    phx_metrics_render(buf, sizeof buf, 0);
    assert_int_equal(count(buf, "# TYPE phx_recovery_phase_seconds histogram\n"), 1);
    assert_non_null(strstr(buf, "phx_recovery_phase_seconds_bucket{phase=\"agree\",le=\"0.0025\"} 0\n"));
    assert_non_null(strstr(buf, "phx_recovery_phase_seconds_bucket{phase=\"agree\",le=\"0.005\"} 1\n"));
    assert_non_null(strstr(buf, "phx_recovery_phase_seconds_bucket{phase=\"agree\",le=\"0.05\"} 2\n"));
    assert_non_null(strstr(buf, "phx_recovery_phase_seconds_bucket{phase=\"agree\",le=\"60\"} 2\n"));
    assert_non_null(strstr(buf, "phx_recovery_phase_seconds_bucket{phase=\"agree\",le=\"+Inf\"} 3\n"));
    assert_non_null(strstr(buf, "phx_recovery_phase_seconds_sum{phase=\"agree\"} 120.043000000\n"));
    assert_non_null(strstr(buf, "phx_recovery_phase_seconds_count{phase=\"agree\"} 3\n"));
    assert_non_null(strstr(buf, "phx_recovery_phase_seconds_count{phase=\"replay\"} 0\n"));
    assert_non_null(strstr(buf, "phx_checkpoint_commit_seconds_bucket{le=\"0.001\"} 1\n"));
    assert_non_null(strstr(buf, "phx_checkpoint_commit_seconds_count 1\n"));
    /* the phases come together, in order, after their one HELP */
    const char *d = strstr(buf, "phase=\"detect\""), *a = strstr(buf, "phase=\"agree\""),
               *t = strstr(buf, "phase=\"transfer\""), *r = strstr(buf, "phase=\"replay\"");
    assert_true(d && a && t && r && d < a && a < t && t < r);
    assert_null(strstr(r, "# HELP phx_recovery_phase_seconds"));
    /* labelled counter families keep their members together */
    const char *g = strstr(buf, "phx_recoveries_total{kind=\"global\"}"),
               *p = strstr(buf, "phx_recoveries_total{kind=\"partial\"}");
    assert_true(g && p && p > g && !memchr(g, '#', (size_t)(p - g)));
    assert_int_equal(count(buf, "# TYPE phx_frames_rejected_total counter\n"), 1);
    assert_int_equal(count(buf, "phx_frames_rejected_total{reason="), 5);
}

static void test_register(void **st)
{
    (void)st;
    assert_int_equal(phx_metrics_register("x", "histogram", "h"), PHX_EINVAL);
    int id = phx_metrics_register("phx_test_things_total", "counter", "things");
    assert_true(id >= PHX_M_NBUILTIN);
    phx_metrics_add(id, 5);
    phx_metrics_render(buf, sizeof buf, 0);
    assert_non_null(strstr(buf, "# TYPE phx_test_things_total counter\nphx_test_things_total 5\n"));
    while ((id = phx_metrics_register("phx_more", "gauge", "more")) >= 0)
        ;
    assert_int_equal(id, PHX_ENOSPC);
    /* out-of-range ids are ignored, never written */
    phx_metrics_add(-1, 1);
    phx_metrics_set(PHX_METRICS_MAX, 1);
    assert_int_equal(phx_metrics_get(PHX_METRICS_MAX), 0);
    /* a small buffer truncates, NUL-terminated */
    char small[32];
    assert_int_equal(phx_metrics_render(small, sizeof small, 0), sizeof small - 1);
    assert_int_equal(strlen(small), sizeof small - 1);
}

int main(void)
{
    const struct CMUnitTest t[] = { cmocka_unit_test(test_render), cmocka_unit_test(test_histogram),
                                    cmocka_unit_test(test_register) };
    return cmocka_run_group_tests(t, NULL, NULL);
}
