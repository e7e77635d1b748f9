/* core/metrics.c without a node: the table, registration and the text. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "base/phx_err.h"
#include "core/metrics.h"

static char buf[16384];

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
    for (const char *m = "phx_recoveries_total phx_epoch phx_message_log_bytes phx_agreements_total"; *m;) {
        char name[64];
        size_t k = strcspn(m, " ");
        memcpy(name, m, k);
        strcpy(name + k, " 0\n");
        assert_non_null(strstr(buf, name));
        m += k + (m[k] == ' ');
    }
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
    const struct CMUnitTest t[] = { cmocka_unit_test(test_render), cmocka_unit_test(test_register) };
    return cmocka_run_group_tests(t, NULL, NULL);
}
