/* phx launcher placement: hostfile formats, Slurm lists, rank tables. */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/phx_err.h"
#include "base/place/phx_place.h"

static char err[512];

static void expect_hosts(const phx_hostlist_t *hl, const char *want)
{
    char got[1024] = "";
    for (int i = 0; i < hl->n; i++) {
        size_t l = strlen(got);
        snprintf(got + l, sizeof got - l, "%s%s=%d", i ? " " : "", hl->v[i].host, hl->v[i].slots);
    }
    assert_string_equal(got, want);
}

static void parse_ok(const char *text, const char *want)
{
    phx_hostlist_t hl = { 0 };
    err[0] = 0;
    int rc = phx_hf_parse_text("hf", text, &hl, err, sizeof err);
    if (rc)
        fail_msg("unexpected parse error: %s", err);
    expect_hosts(&hl, want);
    phx_hf_free(&hl);
}

static void parse_bad(const char *text, const char *want_err)
{
    phx_hostlist_t hl = { 0 };
    err[0] = 0;
    assert_int_equal(phx_hf_parse_text("hf", text, &hl, err, sizeof err), PHX_EINVAL);
    if (!strstr(err, want_err))
        fail_msg("error '%s' lacks '%s'", err, want_err);
    phx_hf_free(&hl);
}

static void test_openmpi(void **st)
{
    parse_ok("a slots=4\nb slots=2 max_slots=8\n", "a=4 b=2");
    parse_ok("  a   max_slots=3  slots=2 \t\n", "a=2");
    parse_ok("a max_slots=3\n", "a=1");
}

static void test_mpich(void **st)
{
    parse_ok("a:4\nb:1\nc\n", "a=4 b=1 c=1");
    parse_ok("10.0.0.1:2\n", "10.0.0.1=2");
    /* IPv6: a bare address keeps its colons; brackets allow a count. */
    parse_ok("::1\n[fe80::2]:3\n[::3]\n", "::1=1 fe80::2=3 ::3=1");
}

static void test_bare_comments_blank(void **st)
{
    parse_ok("# cluster\n\n   \nnode1   # the first\nnode2#x\n\tnode3\r\n", "node1=1 node2=1 node3=1");
    /* duplicates merge, keeping first position */
    parse_ok("a:2\nb\na slots=3\n", "a=5 b=1");
    parse_ok("a:2", "a=2");   /* no final newline */
}

static void test_errors(void **st)
{
    parse_bad("a\nb slots=x\n", "hf:2: bad slot count");
    parse_bad("a slots=0\n", "hf:1: bad slot count");
    parse_bad("a slots=-1\n", "hf:1: bad slot count");
    parse_bad("a:\n", "hf:1: bad slot count");
    parse_bad("\n\na:4x\n", "hf:3: bad slot count");
    parse_bad("a\n# c\nb junk\n", "hf:3: unexpected token 'junk'");
    parse_bad("a foo=2\n", "hf:1: unexpected token");
    parse_bad(":4\n", "hf:1: empty host");
    parse_bad("[]:2\n", "hf:1: empty host");
    parse_bad("a:2 slots=3\n", "hf:1: slot count given twice");
    parse_bad("a,b\n", "hf:1: invalid host");
    parse_bad("slots=3\n", "hf:1: invalid host");
    parse_bad("# only comments\n\n", "phx: hostfile 'hf' lists no hosts (only comments");
    parse_bad("", "phx: hostfile 'hf' lists no hosts (it is empty)");
    parse_bad("[::1\n", "hf:1: unterminated");
}

/* mpirun's -H/--host list */
static void test_host_list(void **st)
{
    const char *ok[][2] = { { "a", "a=1" }, { "a:2,b", "a=2 b=1" }, { "a,b,a:3", "a=4 b=1" },
                            { "[::1]:2,10.0.0.1:4", "::1=2 10.0.0.1=4" } };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        phx_hostlist_t hl = { 0 };
        if (phx_hf_parse_list(ok[i][0], &hl, err, sizeof err))
            fail_msg("'%s': %s", ok[i][0], err);
        expect_hosts(&hl, ok[i][1]);
        phx_hf_free(&hl);
    }
    const char *bad[][2] = { { "", "item 1 is not" }, { "a,,b", "item 2 is not" }, { "a:x", "--host:1: bad slot" },
                             { "a,b:0", "--host:2: bad slot" }, { "a b", "item 1 is not" } };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        phx_hostlist_t hl = { 0 };
        err[0] = 0;
        assert_int_equal(phx_hf_parse_list(bad[i][0], &hl, err, sizeof err), PHX_EINVAL);
        if (!strstr(err, bad[i][1]))
            fail_msg("'%s': error '%s' lacks '%s'", bad[i][0], err, bad[i][1]);
        phx_hf_free(&hl);
    }
}

static void test_file(void **st)
{
    char path[] = "/tmp/phx_hf_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    const char *txt = "n1 slots=2\nn2:3\n\nn3 bogus\n";
    assert_int_equal(write(fd, txt, strlen(txt)), (ssize_t)strlen(txt));
    close(fd);
    phx_hostlist_t hl = { 0 };
    assert_int_equal(phx_hf_parse_file(path, &hl, err, sizeof err), PHX_EINVAL);
    char want[128];
    snprintf(want, sizeof want, "%s:4: unexpected token 'bogus' (expected slots=N or max_slots=N)", path);
    assert_string_equal(err, want);
    phx_hf_free(&hl);
    unlink(path);

    assert_int_equal(phx_hf_parse_file(path, &hl, err, sizeof err), -ENOENT);
    snprintf(want, sizeof want, "cannot open hostfile '%s': ", path);   /* named, not FILE:0: */
    assert_non_null(strstr(err, want));
    phx_hf_free(&hl);
}

static void expect_table(const phx_hostlist_t *hl, int n, const char *want, int oversub)
{
    phx_ranktab_t rt;
    assert_int_equal(phx_rt_build(hl, n, &rt), 0);
    char got[1024] = "";
    for (int r = 0; r < rt.n; r++) {
        size_t l = strlen(got);
        snprintf(got + l, sizeof got - l, "%s%s/%d", r ? " " : "", rt.r[r].host, rt.r[r].slot);
    }
    assert_string_equal(got, want);
    assert_int_equal(rt.oversubscribed, oversub);
    phx_rt_free(&rt);
}

static void test_np_override(void **st)
{
    phx_hostlist_t hl = { 0 };
    assert_int_equal(phx_hf_parse_text("hf", "a:2\nb:1\n", &hl, err, sizeof err), 0);
    expect_table(&hl, 0, "a/0 a/1 b/0", 0);
    expect_table(&hl, 2, "a/0 a/1", 0);
    expect_table(&hl, 1, "a/0", 0);
    expect_table(&hl, 6, "a/0 a/1 b/0 a/2 b/1 a/3", 1);
    phx_hf_free(&hl);
}

static void test_ports_and_peers(void **st)
{
    phx_hostlist_t hl = { 0 };
    assert_int_equal(phx_hf_parse_text("hf", "remote-x:2\n127.0.0.1:2\n", &hl, err, sizeof err), 0);
    phx_ranktab_t rt;
    assert_int_equal(phx_rt_build(&hl, 0, &rt), 0);
    assert_false(rt.r[0].local);
    assert_true(rt.r[2].local);
    assert_int_equal(phx_rt_ports_from_base(&rt, 17300, 0), 0);
    assert_int_equal(rt.r[0].port, 17300);
    assert_int_equal(rt.r[1].port, 17301);
    assert_int_equal(rt.r[2].port, 0);   /* local: left to probing */
    assert_int_equal(phx_rt_probe_ports(&rt), 0);
    assert_true(rt.r[2].port > 0 && rt.r[3].port > 0 && rt.r[2].port != rt.r[3].port);
    assert_int_equal(rt.r[0].port, 17300);

    assert_int_equal(phx_rt_ports_from_base(&rt, 9000, 1), 0);
    char *peers;
    assert_int_equal(phx_rt_peers(&rt, &peers), 0);
    assert_string_equal(peers, "remote-x:9000,remote-x:9001,127.0.0.1:9000,127.0.0.1:9001");
    free(peers);
    assert_int_equal(phx_rt_ports_from_base(&rt, 65535, 1), PHX_ERANGE);
    phx_rt_free(&rt);
    phx_hf_free(&hl);
}

static void test_is_local(void **st)
{
    char me[256];
    assert_int_equal(gethostname(me, sizeof me), 0);
    assert_true(phx_host_is_local("localhost"));
    assert_true(phx_host_is_local("127.0.0.2"));
    assert_true(phx_host_is_local("::1"));
    assert_true(phx_host_is_local(me));
    assert_false(phx_host_is_local("node-that-is-not-here.example"));
    assert_false(phx_host_is_local("10.1.2.3"));
}

static void slurm_ok(const char *list, const char *tpn, const char *want)
{
    phx_hostlist_t hl = { 0 };
    err[0] = 0;
    int rc = phx_slurm_expand(list, &hl, err, sizeof err);
    if (!rc && tpn)
        rc = phx_slurm_tasks(tpn, &hl, err, sizeof err);
    if (rc)
        fail_msg("slurm '%s' / '%s': %s", list, tpn ? tpn : "-", err);
    expect_hosts(&hl, want);
    phx_hf_free(&hl);
}

static void test_slurm_lists(void **st)
{
    slurm_ok("a", NULL, "a=1");
    slurm_ok("a,b", NULL, "a=1 b=1");
    slurm_ok("node[01-04,7]", NULL, "node01=1 node02=1 node03=1 node04=1 node7=1");
    slurm_ok("n[8-10]", NULL, "n8=1 n9=1 n10=1");
    slurm_ok("n[098-101]", NULL, "n098=1 n099=1 n100=1 n101=1");
    slurm_ok("r[1-2]-n[1-2]", NULL, "r1-n1=1 r1-n2=1 r2-n1=1 r2-n2=1");
    slurm_ok("x,gpu[1,3]-ib,y[2]", NULL, "x=1 gpu1-ib=1 gpu3-ib=1 y2=1");

    const char *bad[] = { "n[1-", "n[a-b]", "n[3-1]", "a,,b", "n]", "", "n[1-2,]x", "n[]" };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        phx_hostlist_t hl = { 0 };
        if (phx_slurm_expand(bad[i], &hl, err, sizeof err) == 0)
            fail_msg("node list '%s' accepted", bad[i]);
        phx_hf_free(&hl);
    }
}

static void test_slurm_tasks(void **st)
{
    slurm_ok("n[1-4]", "2(x3),1", "n1=2 n2=2 n3=2 n4=1");
    slurm_ok("a,b", "4,3", "a=4 b=3");
    slurm_ok("n[1-3]", "1(x3)", "n1=1 n2=1 n3=1");

    const char *bad[] = { "2(x3)", "2(x5)", "x", "2(x)", "2,", "0,1,1,1", "1(x4", "3y" };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        phx_hostlist_t hl = { 0 };
        assert_int_equal(phx_slurm_expand("n[1-4]", &hl, err, sizeof err), 0);
        if (phx_slurm_tasks(bad[i], &hl, err, sizeof err) == 0)
            fail_msg("tasks per node '%s' accepted for 4 nodes", bad[i]);
        phx_hf_free(&hl);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_openmpi),
        cmocka_unit_test(test_mpich),
        cmocka_unit_test(test_bare_comments_blank),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_host_list),
        cmocka_unit_test(test_file),
        cmocka_unit_test(test_np_override),
        cmocka_unit_test(test_ports_and_peers),
        cmocka_unit_test(test_is_local),
        cmocka_unit_test(test_slurm_lists),
        cmocka_unit_test(test_slurm_tasks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
