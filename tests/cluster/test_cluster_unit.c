/* Cluster launch rules that need no cluster: the default worker count per
 * node (cores per node), the secret line on stdin, and the identity a
 * directly launched task derives from Slurm's step variables. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/phx_err.h"
#include "core/config.h"
#include "base/place/phx_place.h"

static void workers_share(void **state)
{
    (void)state;
    /* One node on 16 cores: 15 workers and the comm thread. */
    assert_int_equal(phx_config_default_workers(16, 1, 0), 15);
    /* 4 nodes share 16 cores: 4 each, 3 workers + comm. */
    assert_int_equal(phx_config_default_workers(16, 4, 0), 3);
    /* 16 nodes on 16 cores: one core each, never 0 workers (not 240 in all). */
    assert_int_equal(phx_config_default_workers(16, 16, 0), 1);
    assert_int_equal(phx_config_default_workers(2, 4, 0), 1);
    assert_int_equal(phx_config_default_workers(1, 1, 0), 1);
    /* Odd shares round down: 3 nodes on 16 cores get 5 each. */
    assert_int_equal(phx_config_default_workers(16, 3, 0), 4);
    /* Bound by srun to 4 CPUs each: the mask is the share already. */
    assert_int_equal(phx_config_default_workers(4, 4, 1), 3);
}

static int read_line(const char *text, uint8_t *out, size_t cap, size_t *len, char *rest)
{
    int p[2];
    assert_int_equal(pipe(p), 0);
    assert_int_equal(write(p[1], text, strlen(text)), (ssize_t)strlen(text));
    close(p[1]);
    int rc = phx_config_read_secret(p[0], out, cap, len);
    ssize_t r = read(p[0], rest, 63);
    rest[r > 0 ? r : 0] = 0;
    close(p[0]);
    return rc;
}

static void secret_line(void **state)
{
    (void)state;
    uint8_t buf[16];
    size_t len = 0;
    char rest[64];
    assert_int_equal(read_line("abc\nlifeline", buf, sizeof buf, &len, rest), 0);
    assert_int_equal(len, 3);
    assert_memory_equal(buf, "abc", 3);
    assert_string_equal(rest, "lifeline");   /* nothing after the line is taken */
    assert_int_equal(read_line("abc", buf, sizeof buf, &len, rest), PHX_EIO);   /* launcher gone */
    assert_int_equal(read_line("\n", buf, sizeof buf, &len, rest), PHX_EINVAL);
    assert_int_equal(read_line("0123456789abcdefX\n", buf, sizeof buf, &len, rest), PHX_ENOSPC);
}

static void clear_env(void)
{
    static const char *v[] = { "PHX_RANK", "PHX_SIZE", "PHX_PEERS", "PHX_JOB_ID", "PHX_LOCAL_SIZE",
                               "PHX_SECRET", "PHX_SECRET_FILE", "PHX_BASE_PORT", "SLURM_PROCID",
                               "SLURM_NTASKS", "SLURM_STEP_NUM_TASKS", "SLURM_STEP_NODELIST",
                               "SLURM_STEP_TASKS_PER_NODE", "SLURM_JOB_ID", "SLURM_STEP_ID",
                               "SLURMD_NODENAME", "SLURM_DISTRIBUTION" };
    for (size_t i = 0; i < sizeof v / sizeof *v; i++)
        unsetenv(v[i]);
}

static void slurm_identity(void **state)
{
    (void)state;
    clear_env();
    assert_int_equal(phx_slurm_identity(), 0);   /* not under srun */
    setenv("SLURM_PROCID", "3", 1);
    setenv("SLURM_NTASKS", "5", 1);
    setenv("SLURM_STEP_NODELIST", "n[1-2]", 1);
    setenv("SLURM_STEP_TASKS_PER_NODE", "3,2", 1);
    setenv("SLURMD_NODENAME", "n2", 1);
    setenv("SLURM_JOB_ID", "7", 1);
    setenv("SLURM_STEP_ID", "1", 1);
    setenv("PHX_BASE_PORT", "30000", 1);
    setenv("HOME", "/home/u", 1);
    assert_int_equal(phx_slurm_identity(), 1);
    assert_string_equal(getenv("PHX_RANK"), "3");
    assert_string_equal(getenv("PHX_SIZE"), "5");
    assert_string_equal(getenv("PHX_PEERS"), "n1:30000,n1:30001,n1:30002,n2:30000,n2:30001");
    assert_string_equal(getenv("PHX_LOCAL_SIZE"), "2");
    assert_string_equal(getenv("PHX_JOB_ID"), "30064771073");   /* 7 << 32 | 1 */
    assert_string_equal(getenv("PHX_SECRET_FILE"), "/home/u/.phalanx/secret");
    /* Set once: a launched node's identity is never overridden. */
    assert_int_equal(phx_slurm_identity(), 0);

    /* A task on a node block placement does not put it on. */
    unsetenv("PHX_RANK");
    unsetenv("PHX_SIZE");
    unsetenv("PHX_PEERS");
    setenv("SLURMD_NODENAME", "n1", 1);
    assert_int_equal(phx_slurm_identity(), PHX_EINVAL);
    setenv("SLURMD_NODENAME", "n2", 1);
    setenv("SLURM_DISTRIBUTION", "cyclic", 1);
    assert_int_equal(phx_slurm_identity(), PHX_EINVAL);
    unsetenv("SLURM_DISTRIBUTION");
    setenv("SLURM_STEP_TASKS_PER_NODE", "2,2", 1);   /* 4 != 5 tasks */
    assert_int_equal(phx_slurm_identity(), PHX_EINVAL);
    clear_env();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(workers_share),
        cmocka_unit_test(secret_line),
        cmocka_unit_test(slurm_identity),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
