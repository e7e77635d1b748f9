#define _GNU_SOURCE   /* asprintf */
/* Direct launch under srun: a node's identity from Slurm's step variables,
 * the way MPI libraries find theirs without mpirun. */
#include "base/place/phx_place.h"

#include "base/phx_err.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A decimal env var in [lo, hi]; PHX_ENOENT if unset. */
static int env_long(const char *name, long lo, long hi, long *out)
{
    const char *s = getenv(name);
    if (!s)
        return PHX_ENOENT;
    char *end;
    long v = strtol(s, &end, 10);
    if (!*s || *end || v < lo || v > hi) {
        fprintf(stderr, "phalanx: bad %s '%s'\n", name, s);
        return PHX_EINVAL;
    }
    *out = v;
    return 0;
}

static int set_num(const char *name, unsigned long long v)
{
    char num[32];
    snprintf(num, sizeof num, "%llu", v);
    return setenv(name, num, 1) ? PHX_ENOMEM : 0;
}

int phx_slurm_identity(void)
{
    const char *nodes = getenv("SLURM_STEP_NODELIST"), *tpn = getenv("SLURM_STEP_TASKS_PER_NODE");
    const char *dist = getenv("SLURM_DISTRIBUTION");
    if (getenv("PHX_RANK") || getenv("PHX_SIZE") || getenv("PHX_PEERS") || !getenv("SLURM_PROCID") ||
        !nodes)
        return 0;   /* launched by phx, or not a task of an srun step */
    long rank = 0, size = 0, job = 0, step = 0, base = 0;
    int rc;
    if ((rc = env_long("SLURM_PROCID", 0, PHX_HF_MAX_SLOTS - 1, &rank)) ||
        ((rc = env_long("SLURM_STEP_NUM_TASKS", 1, PHX_HF_MAX_SLOTS, &size)) == PHX_ENOENT &&
         (rc = env_long("SLURM_NTASKS", 1, PHX_HF_MAX_SLOTS, &size))))
        return rc == PHX_ENOENT ? PHX_EINVAL : rc;
    if (rank >= size) {
        fprintf(stderr, "phalanx: SLURM_PROCID %ld is not below the step's %ld tasks\n", rank, size);
        return PHX_EINVAL;
    }
    if (dist && strncmp(dist, "block", 5)) {
        /* Ranks are placed host by host as in SLURM_STEP_TASKS_PER_NODE;
         * other layouts would give nodes the wrong peers. */
        fprintf(stderr, "phalanx: direct launch needs srun's block distribution, not '%s' "
                        "(srun -m block, or run the job with salloc ... phx run)\n", dist);
        return PHX_EINVAL;
    }
    if ((rc = env_long("SLURM_JOB_ID", 0, 0x7fffffff, &job)) == PHX_EINVAL ||
        (rc = env_long("SLURM_STEP_ID", 0, 0x7fffffff, &step)) == PHX_EINVAL ||
        (rc = env_long("PHX_BASE_PORT", 1, 65535, &base)) == PHX_EINVAL)
        return rc;
    /* Steps of different jobs on one host get different port ranges. */
    if (!base)
        base = PHX_HF_DEFAULT_BASE_PORT + (int)((job * 7 + step) % 256) * 64;

    phx_hostlist_t hl = { 0 };
    phx_ranktab_t rt = { 0 };
    char err[256] = "", *peers = NULL;
    rc = phx_slurm_expand(nodes, &hl, err, sizeof err);
    if (!rc && tpn && *tpn)
        rc = phx_slurm_tasks(tpn, &hl, err, sizeof err);
    if (!rc && phx_hf_total_slots(&hl) != size) {
        snprintf(err, sizeof err, "phalanx: SLURM_STEP_TASKS_PER_NODE '%s' does not add up to %ld "
                                  "tasks", tpn ? tpn : "", size);
        rc = PHX_EINVAL;
    }
    if (!rc && !(rc = phx_rt_build(&hl, (int)size, &rt)) &&
        !(rc = phx_rt_ports_from_base(&rt, (int)base, 1)))
        rc = phx_rt_peers(&rt, &peers);
    if (!rc) {
        int local = 0;
        for (int i = 0; i < rt.n; i++)
            local += !strcmp(rt.r[i].host, rt.r[rank].host);
        const char *me = getenv("SLURMD_NODENAME");
        if (me && strcmp(me, rt.r[rank].host)) {
            snprintf(err, sizeof err, "phalanx: rank %ld runs on %s, but block placement over "
                                      "SLURM_STEP_NODELIST puts it on %s", rank, me, rt.r[rank].host);
            rc = PHX_EINVAL;
        } else if ((rc = set_num("PHX_RANK", (unsigned long long)rank)) == 0 &&
                   (rc = set_num("PHX_SIZE", (unsigned long long)size)) == 0 &&
                   (rc = set_num("PHX_LOCAL_SIZE", (unsigned long long)local)) == 0 &&
                   (rc = set_num("PHX_JOB_ID", (unsigned long long)job << 32 | (unsigned long long)step)) == 0 &&
                   setenv("PHX_PEERS", peers, 1)) {
            rc = PHX_ENOMEM;
        }
    }
    /* No launcher made a secret: a per-user 0600 file on the shared home,
     * like ~/.ssh keys and the munge key, is the one place every task can
     * find the same secret without it passing through a command line. */
    const char *home = getenv("HOME");
    if (!rc && !getenv("PHX_SECRET") && !getenv("PHX_SECRET_FILE") && home) {
        char *path;
        if (asprintf(&path, "%s/.phalanx/secret", home) < 0) {
            path = NULL;   /* undefined after a failure */
            rc = PHX_ENOMEM;
        } else if (setenv("PHX_SECRET_FILE", path, 1)) {
            rc = PHX_ENOMEM;
        }
        free(path);
    }
    if (rc)
        fprintf(stderr, "%s\n", err[0] ? err : "phalanx: cannot derive the node's identity from "
                                               "Slurm's step variables");
    free(peers);
    phx_rt_free(&rt);
    phx_hf_free(&hl);
    return rc ? rc : 1;
}
