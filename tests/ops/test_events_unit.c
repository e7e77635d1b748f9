/* phx run's recovery lines (tools/phx/phx_events.c), driven with a clock
 * of the test's own and no job directory: each round is printed once,
 * however late a node's report of it comes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "tools/phx/phx_events.h"
#include "tools/phx/phx_jobdir.h"

static double now_s;
phx_jobview_t *phx_jobdir_view(void) { return NULL; }
double phx_jobdir_now(void) { return now_s; }

/* Runs f with stderr going to a file; the count of lines holding needle. */
static int lines_with(void (*f)(void), const char *needle)
{
    char path[] = "/tmp/phx-events-XXXXXX";
    int fd = mkstemp(path), saved = dup(2);
    assert_true(fd >= 0 && saved >= 0);
    fflush(stderr);
    dup2(fd, 2);
    f();
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    FILE *in = fdopen(fd, "r");
    assert_non_null(in);
    rewind(in);
    char line[1024];
    int k = 0;
    while (fgets(line, sizeof line, in))
        k += strstr(line, needle) != NULL;
    fclose(in);
    unlink(path);
    return k;
}

static const char *report(int rank)
{
    static char b[256];
    snprintf(b, sizeof b, "phx-rec 1 rank=%d round=1 epoch=4 kind=global lost=2 detect_us=15000 "
                          "agree_us=1000 transfer_us=2000 replay_us=0", rank);
    return b;
}

/* A node's report that comes after the round's line was printed (the
 * launcher waits REPORT_WAIT_S at most) starts no second line. */
static void late_report(void)
{
    phx_events_open(0);
    now_s = 10;
    phx_events_rec_line(report(0));
    phx_events_tick();   /* no job view: nobody else to wait for, printed */
    now_s = 12;
    phx_events_rec_line(report(1));
    phx_events_tick();
    phx_events_close();
}

static void test_late_report_prints_once(void **st)
{
    (void)st;
    assert_int_equal(lines_with(late_report, "recovered in"), 1);
}

/* A later round (another epoch) still gets its own line. */
static void two_rounds(void)
{
    phx_events_open(0);
    now_s = 20;
    phx_events_rec_line("phx-rec 1 rank=0 round=2 epoch=5 kind=global lost=1 detect_us=1000");
    phx_events_tick();
    now_s = 21;
    phx_events_rec_line("phx-rec 1 rank=0 round=3 epoch=6 kind=global lost=3 detect_us=1000");
    phx_events_tick();
    phx_events_close();
}

static void test_next_round_prints(void **st)
{
    (void)st;
    assert_int_equal(lines_with(two_rounds, "recovered in"), 2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_late_report_prints_once),
        cmocka_unit_test(test_next_round_prints),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
