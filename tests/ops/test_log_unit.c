/* base/phx_log.h's rate limit: a call site prints PHX_LOG_BURST lines per
 * window and counts the rest; the next printed line says how many were
 * suppressed; the rank appears once per line. stderr goes to a file. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "base/phx_log.h"

static char path[64];
static int saved = -1;

static void capture(void)
{
    strcpy(path, "/tmp/phx-log-unit.XXXXXX");
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    saved = dup(2);
    dup2(fd, 2);
    close(fd);
}

/* Restores stderr; returns the captured text (malloc'ed). */
static char *release(void)
{
    dup2(saved, 2);
    close(saved);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    static char buf[1 << 16];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = 0;
    fclose(f);
    unlink(path);
    return strdup(buf);
}

static int lines(const char *s, const char *needle)
{
    int k = 0;
    for (const char *p = s; (p = strstr(p, needle)); p++)
        k++;
    return k;
}

static void flood(int i) { PHX_WARN("node", "message %d to rank 2 dropped", i); }

static void test_burst_then_count(void **st)
{
    (void)st;
    phx_log_set_rank(1);
    uint64_t before = phx_log_suppressed_total();
    capture();
    for (int i = 0; i < 100000; i++)
        flood(i);
    PHX_WARN("other", "a different site still prints");
    char *out = release();
    assert_int_equal(lines(out, "\n"), PHX_LOG_BURST + 1);
    assert_int_equal(lines(out, "dropped\n"), PHX_LOG_BURST);
    assert_int_equal(lines(out, "[rank 1] WARN node: message 0 to rank 2 dropped\n"), 1);
    assert_int_equal(lines(out, "[rank 1] WARN other: a different site still prints\n"), 1);
    assert_int_equal(lines(out, "rank 1]"), PHX_LOG_BURST + 1);   /* once per line */
    assert_int_equal(phx_log_suppressed_total() - before, 100000 - PHX_LOG_BURST);
    free(out);
}

static void test_level_filter(void **st)
{
    (void)st;
    phx_log_set_level(PHX_LOG_ERROR);
    capture();
    for (int i = 0; i < 5; i++)
        PHX_WARN("x", "hidden %d", i);
    PHX_ERROR("x", "shown");
    char *out = release();
    phx_log_set_level(PHX_LOG_WARN);
    assert_string_equal(out, "[rank 1] ERROR x: shown\n");
    free(out);
}

int main(void)
{
    const struct CMUnitTest t[] = { cmocka_unit_test(test_burst_then_count), cmocka_unit_test(test_level_filter) };
    return cmocka_run_group_tests(t, NULL, NULL);
}
