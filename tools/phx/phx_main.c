#define _GNU_SOURCE   /* asprintf, pipe2, sigabbrev_np */
/* phx: starts a Phalanx job, one node process per slot, the way mpirun
 * starts an MPI job. See README.md for the node environment contract. */
#include "base/place/phx_place.h"
#include "phx_opts.h"
#include "phx_jobdir.h"
#include "phx_run.h"

#include "base/phx_err.h"
#include "core/config.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef PHX_VERSION
#define PHX_VERSION "0.1.0"
#endif

static void usage(FILE *fp)
{
    fprintf(fp,
        "usage: phx run [options] [--] PROGRAM [ARGS...]\n"
        "       phx status [--json] [JOB]   (a running job, from another shell)\n"
        "       phx drain RANK [JOB]        (that rank hands its tasks over and leaves)\n"
        "       phx version | phx --help\n"
        "\n"
        "options for run:\n"
        "  -f, --hostfile FILE    hosts and slots (Open MPI 'host slots=N', MPICH 'host:N',\n"
        "                         or one host per line); default: Slurm allocation if any,\n"
        "                         else 127.0.0.1\n"
        "  -H, --host H[:S],...   hosts and slots (1 without :S), as mpirun's -H\n"
        "  -n, -np, --np N        number of nodes (default: all slots, or 1); also +pN\n"
        "  -x VAR[=VALUE]         export VAR (set to VALUE) to every node, remote ones too\n"
        "      --oversubscribe    more nodes than slots without a word, and over %d per slot\n"
        "                         (refused without it; beyond the slots a warning)\n"
        "      --abort-on-failure stop the whole job when one node dies abnormally\n"
        "      --quiet            no status line (see README, \"Watching a job\")\n"
        "      --verbose          also the link warnings a failure causes (folded by default)\n"
        "      --metrics-sd FILE  keep a Prometheus file_sd list of the nodes' /metrics in FILE\n"
        "      --pidfile FILE     write 'rank pid host' lines once all nodes started\n"
        "      --restart DIR      restart a recovery=cr job from its last disk checkpoint in DIR\n"
        "      --spares K         K more nodes (the last ranks), idle until one stands in for a\n"
        "                         lost node (recovery=cr, restart-on=spare)\n"
        "                         (also env PHX_PIDFILE)\n"
        "      --base-port P      node ports P, P+1, ... per host (remote default %d;\n"
        "                         local default: free ports)\n"
        "      --phx-KEY=VALUE    runtime option, passed on to every node (also accepted\n"
        "                         after PROGRAM, and as --phx-KEY VALUE; checked here\n"
        "                         before any node starts; 'PROGRAM --phx-help' lists them)\n"
        "long options may be shortened to any unambiguous prefix; usage errors exit 2\n"
        "\n"
        "environment: PHX_RSH (remote shell, default ssh), PHX_KILL_GRACE (seconds from\n"
        "SIGTERM to SIGKILL, default 3), PHX_SECRET / PHX_SECRET_FILE (cluster secret;\n"
        "generated when neither is set)\n",
        PHX_OPTS_PER_SLOT, PHX_HF_DEFAULT_BASE_PORT);
}

static int parse_int(const char *s, int lo, int hi, int *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi)
        return PHX_EINVAL;
    *out = (int)v;
    return 0;
}

static int read_random(void *buf, size_t n)
{
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    size_t got = 0;
    while (got < n) {
        ssize_t r = read(fd, (char *)buf + got, n - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            int e = r < 0 ? -errno : PHX_EIO;
            close(fd);
            return e;
        }
        got += (size_t)r;
    }
    close(fd);
    return 0;
}

/* Resolves prog the way execvp would, so a typo fails before any node
 * starts instead of as N copies of the same error. */
static char *find_program(const char *prog, int *err)
{
    struct stat st;
    if (strchr(prog, '/')) {
        if (stat(prog, &st) < 0) {
            *err = errno;
            return NULL;
        }
        if (S_ISDIR(st.st_mode) || access(prog, X_OK) < 0) {
            *err = S_ISDIR(st.st_mode) ? EISDIR : errno;
            return NULL;
        }
        return strdup(prog);
    }
    const char *path = getenv("PATH");
    if (!path)
        path = "/usr/local/bin:/bin:/usr/bin";
    *err = ENOENT;
    for (const char *p = path;; ) {
        const char *e = strchr(p, ':');
        size_t dl = e ? (size_t)(e - p) : strlen(p);
        char *cand;
        if (asprintf(&cand, "%.*s%s%s", (int)dl, dl ? p : ".", "/", prog) < 0) {
            *err = ENOMEM;
            return NULL;
        }
        if (stat(cand, &st) == 0 && !S_ISDIR(st.st_mode)) {
            if (access(cand, X_OK) == 0)
                return cand;
            *err = EACCES;   /* execvp too reports EACCES if nothing better turns up */
        }
        free(cand);
        if (!e)
            return NULL;
        p = e + 1;
    }
}

/* Splits PHX_RSH on blanks so "ssh -o BatchMode=yes" works. */
static char **split_words(const char *s)
{
    size_t cap = strlen(s) / 2 + 2, n = 0;
    char **v = calloc(cap, sizeof *v);
    if (!v)
        return NULL;
    for (const char *p = s; *p; ) {
        p += strspn(p, " \t");
        size_t l = strcspn(p, " \t");
        if (!l)
            break;
        if (!(v[n++] = strndup(p, l))) {
            for (size_t i = 0; i < n - 1; i++)
                free(v[i]);
            free(v);
            return NULL;
        }
        p += l;
    }
    return v;
}

/* The local default has this host's cores as its slots. */
static int build_hosts(const char *hostfile, const char *hostlist, phx_hostlist_t *hl)
{
    char err[512] = "";
    int rc;
    const char *slurm = getenv("SLURM_JOB_NODELIST");
    if (!slurm)
        slurm = getenv("SLURM_NODELIST");
    if (hostfile) {
        rc = phx_hf_parse_file(hostfile, hl, err, sizeof err);
    } else if (hostlist) {
        rc = phx_hf_parse_list(hostlist, hl, err, sizeof err);
    } else if (slurm) {
        const char *tpn = getenv("SLURM_TASKS_PER_NODE");
        rc = phx_slurm_expand(slurm, hl, err, sizeof err);
        if (!rc && tpn && *tpn)
            rc = phx_slurm_tasks(tpn, hl, err, sizeof err);
    } else {
        rc = phx_hf_add(hl, "127.0.0.1", 9, phx_opts_cpus());
        if (rc)
            snprintf(err, sizeof err, "phx: %s", phx_strerror(rc));
    }
    if (rc && err[0])
        fprintf(stderr, "%s\n", err);
    else if (rc)
        fprintf(stderr, "phx: cannot build the host list: %s\n", phx_strerror(rc));
    return rc;
}

/* restart-on=respawn (as the nodes read it: phx_opts_check_runtime): the
 * launcher restarts a node that died, at most PHX_RESPAWN_MAX times per
 * rank (default 3). */
static int respawn_max(int respawn_on)
{
    if (!respawn_on)
        return 0;
    const char *m = getenv("PHX_RESPAWN_MAX");
    int k = 3;
    if (m && *m && parse_int(m, 0, 1000000, &k)) {
        fprintf(stderr, "phx: PHX_RESPAWN_MAX wants a count, got '%s'; using 3\n", m);
        k = 3;
    }
    return k;
}

static int cmd_run(int argc, char **argv)
{
    static const struct option opts[] = {
        { "hostfile", required_argument, NULL, 'f' },
        { "host", required_argument, NULL, 'H' },
        { "np", required_argument, NULL, 'n' },
        { "oversubscribe", no_argument, NULL, 'o' },
        { "abort-on-failure", no_argument, NULL, 'a' },
        { "pidfile", required_argument, NULL, 'p' },
        { "base-port", required_argument, NULL, 'b' },
        { "restart", required_argument, NULL, 'r' },
        { "spares", required_argument, NULL, 's' },
        { "quiet", no_argument, NULL, 'q' },
        { "verbose", no_argument, NULL, 'v' },
        { "metrics-sd", required_argument, NULL, 'm' },
        { "help", no_argument, NULL, 'h' },
        { 0, 0, 0, 0 },
    };
    const char *hostfile = NULL, *hostlist = NULL, *pidfile = getenv("PHX_PIDFILE");
    int np = 0, base = 0, abort_on_failure = 0, quiet = 0, c, nrt = 0, spares = 0, over = 0, nx = 0;
    const char **xvars = NULL;   /* -x names, for remote nodes */
    char respelled[32];
    /* Runtime flags given before PROGRAM, as --phx-KEY=VALUE; appended to
     * its arguments, where phx_main takes them out. */
    char **rtflags = calloc((size_t)argc + 1, sizeof *rtflags), **prog = NULL;
    if (!rtflags) {
        fprintf(stderr, "phx: out of memory\n");
        return 1;
    }
    int status = 2, rc, ft = 0, respawn_on = 0;
    phx_hostlist_t hl = { 0 };
    phx_ranktab_t rt = { 0 };
    char *peers = NULL, *prog_path = NULL, **rsh = NULL;
    optind = 1;
    opterr = 1;
    /* '+': stop at PROGRAM, so its own flags are left alone. */
    for (;;) {
        if (optind < argc && !strncmp(argv[optind], "--phx-", 6)) {
            /* --phx-KEY VALUE travels as --phx-KEY=VALUE */
            if (phx_config_flag_arity(argv[optind], optind + 1 < argc ? argv[optind + 1] : NULL) == 2) {
                if (asprintf(&rtflags[nrt], "%s=%s", argv[optind], argv[optind + 1]) < 0)
                    goto oom;
                optind++;
            } else if (!(rtflags[nrt] = strdup(argv[optind]))) {
                goto oom;
            }
            nrt++;
            optind++;
            continue;
        }
        if (optind < argc)
            argv[optind] = (char *)phx_opts_respell(argv[optind], respelled, sizeof respelled);
        if ((c = getopt_long(argc, argv, "+f:H:n:x:h", opts, NULL)) == -1)
            break;
        switch (c) {
        case 'f': hostfile = optarg; break;
        case 'H': hostlist = optarg; break;
        case 'o': over = 1; break;
        case 'a': abort_on_failure = 1; break;
        case 'q': quiet = 1; break;
        case 'v': setenv("PHX_VERBOSE", "1", 1); break;      /* read by phx_run.c */
        case 'm': setenv("PHX_METRICS_SD", optarg, 1); break;
        case 'p': pidfile = optarg; break;
        case 'r': setenv("PHX_RESTART", optarg, 1); break;   /* recovery=cr: restart from DIR */
        case 'x':
            if ((status = phx_opts_export(optarg, &xvars, &nx)))
                goto out;
            break;
        case 's':
            if (parse_int(optarg, 0, PHX_HF_MAX_SLOTS - 1, &spares)) {
                fprintf(stderr, "phx: --spares wants a count from 0 to %d, got '%s'\n", PHX_HF_MAX_SLOTS - 1, optarg);
                goto out;
            }
            break;
        case 'n':
            if (parse_int(optarg, 1, PHX_HF_MAX_SLOTS, &np)) {
                fprintf(stderr, "phx: -n wants a count from 1 to %d, got '%s'\n", PHX_HF_MAX_SLOTS, optarg);
                goto out;
            }
            break;
        case 'b':
            if (parse_int(optarg, 1, 65535, &base)) {
                fprintf(stderr, "phx: --base-port wants a port from 1 to 65535, got '%s'\n", optarg);
                goto out;
            }
            break;
        case 'h': usage(stdout); status = 0; goto out;
        default: usage(stderr); goto out;
        }
    }
    if (hostfile && hostlist) {
        fprintf(stderr, "phx: --hostfile and --host both name the hosts: give one\n");
        goto out;
    }
    if (optind >= argc) {
        fprintf(stderr, "phx: run: no program given%s\n",
                nrt ? " (the runtime options --phx-* are the program's: 'PROGRAM --phx-help' "
                      "lists them)" : "");
        usage(stderr);
        goto out;
    }
    /* PROGRAM ARGS... then the runtime flags, NULL-terminated. */
    if (!(prog = calloc((size_t)(argc - optind + nrt + 1), sizeof *prog)))
        goto oom;
    memcpy(prog, argv + optind, (size_t)(argc - optind) * sizeof *prog);
    memcpy(prog + argc - optind, rtflags, (size_t)nrt * sizeof *prog);
    if (pidfile && !*pidfile)
        pidfile = NULL;

    double grace = 3;
    const char *gs = getenv("PHX_KILL_GRACE");
    if (gs && *gs) {
        char *end;
        grace = strtod(gs, &end);
        if (*end || !(grace >= 0 && grace <= 3600)) {
            fprintf(stderr, "phx: PHX_KILL_GRACE must be seconds from 0 to 3600 (e.g. 3 or 0.5), "
                            "got '%s'\n", gs);
            goto out;
        }
    }

    if (build_hosts(hostfile, hostlist, &hl))
        goto out;
    status = 1;
    /* The local default has the cores as its slots, but one node unless -n. */
    int local_default = !hostfile && !hostlist && !getenv("SLURM_JOB_NODELIST") && !getenv("SLURM_NODELIST");
    if (!np && local_default)
        np = 1;
    /* Spares come on top of -n (or out of all slots without it): the
     * last ranks, so the program's ranks are the same with or without. */
    if ((rc = phx_rt_build(&hl, np ? np + spares : 0, &rt))) {
        fprintf(stderr, "phx: cannot place %d nodes: %s\n", np + spares, phx_strerror(rc));
        goto out;
    }
    if (spares) {
        char k[16];
        snprintf(k, sizeof k, "%d", spares);
        if (spares >= rt.n) {
            fprintf(stderr, "phx: --spares %d leaves no node for the program (%d nodes)\n", spares, rt.n);
            status = 2;
            goto out;
        }
        if (setenv("PHX_SPARES", k, 1))
            goto oom;
    }

    int nlocal = 0;
    for (int r = 0; r < rt.n; r++)
        nlocal += rt.r[r].local;
    /* Every option once, here, rather than one message per node. */
    int help = 0;
    for (char **a = prog; *a; a++)
        help |= !strcmp(*a, "--phx-help");
    if ((status = phx_opts_check_runtime(prog, rt.n, nlocal == rt.n ? phx_opts_cpus() : 0, &ft, &respawn_on)))
        goto out;
    status = 2;
    if (!help && phx_opts_check_slots(rt.n, nlocal, phx_hf_total_slots(&hl), local_default, over))
        goto out;
    status = 1;
    if (nlocal) {
        int e = 0;
        if (!(prog_path = find_program(prog[0], &e))) {
            fprintf(stderr, "phx: cannot run '%s': %s\n", prog[0],
                    e == ENOENT && !strchr(prog[0], '/') ? "command not found in PATH" : strerror(e));
            status = 127;
            goto out;
        }
    }
    if (nlocal < rt.n) {
        const char *rs = getenv("PHX_RSH");
        int e = 0;
        char *rp;
        if (!(rsh = split_words(rs && *rs ? rs : "ssh")) || !rsh[0]) {
            fprintf(stderr, rsh ? "phx: PHX_RSH names no command (e.g. PHX_RSH=ssh)\n"
                                : "phx: out of memory\n");
            goto out;
        }
        if ((status = phx_opts_resolve(&rt, rsh[0])))
            goto out;
        status = 1;
        if (!(rp = find_program(rsh[0], &e))) {
            fprintf(stderr, "phx: cannot run remote shell '%s': %s\n", rsh[0], strerror(e));
            status = 127;
            goto out;
        }
        free(rp);
    }

    rc = base ? phx_rt_ports_from_base(&rt, base, 1)
              : phx_rt_ports_from_base(&rt, PHX_HF_DEFAULT_BASE_PORT, 0);
    if (!rc && !base)
        rc = phx_rt_probe_ports(&rt);
    if (rc) {
        fprintf(stderr, "phx: cannot choose node ports: %s\n", phx_strerror(rc));
        goto out;
    }
    if ((rc = phx_rt_peers(&rt, &peers)))
        goto oom;

    uint64_t job_id;
    char num[32];
    if ((rc = read_random(&job_id, sizeof job_id))) {
        fprintf(stderr, "phx: cannot read /dev/urandom: %s\n", phx_strerror(rc));
        goto out;
    }
    snprintf(num, sizeof num, "%d", rt.n);
    if (setenv("PHX_SIZE", num, 1) || setenv("PHX_PEERS", peers, 1))
        goto oom;
    snprintf(num, sizeof num, "%" PRIu64, job_id);
    if (setenv("PHX_JOB_ID", num, 1))
        goto oom;
    snprintf(num, sizeof num, "%d", (int)getpid());
    if (setenv("PHX_LAUNCHER_PID", num, 1))
        goto oom;
    if (!getenv("PHX_SECRET") && !getenv("PHX_SECRET_FILE")) {
        unsigned char key[32];
        char hex[65];
        if ((rc = read_random(key, sizeof key))) {
            fprintf(stderr, "phx: cannot read /dev/urandom: %s\n", phx_strerror(rc));
            goto out;
        }
        for (size_t i = 0; i < sizeof key; i++)
            snprintf(hex + 2 * i, 3, "%02x", key[i]);
        if (setenv("PHX_SECRET", hex, 1))
            goto oom;
    }
    const char *secret = getenv("PHX_SECRET");
    if (secret && nlocal < rt.n && (strchr(secret, '\n') || strlen(secret) > PHX_RUN_SECRET_MAX)) {
        fprintf(stderr, "phx: PHX_SECRET must be one line of at most %d bytes to reach remote "
                        "nodes (or use PHX_SECRET_FILE)\n", PHX_RUN_SECRET_MAX);
        status = 2;
        goto out;
    }
    /* stdin of every node is a pipe from phx (see phx_run.c): its end of
     * file tells the node that phx, or its ssh session, is gone. */
    if (setenv("PHX_LIFELINE", "1", 1))
        goto oom;
    unsetenv("PHX_RANK");

    phx_job_t job = { .rt = &rt, .argv = prog, .prog_path = prog_path, .rsh = rsh,
                      .abort_on_failure = abort_on_failure, .grace = grace, .pidfile = pidfile,
                      .quiet = quiet, .secret = secret, .respawn = respawn_max(respawn_on),
                      .exports = xvars, .ft = ft };
    status = phx_run_job(&job);
    goto out;
oom:
    fprintf(stderr, "phx: out of memory\n");
    status = 1;
out:
    if (rsh)
        for (char **p = rsh; *p; p++)
            free(*p);
    free(rsh);
    free(prog_path);
    free(prog);
    for (int i = 0; i < nrt; i++)
        free(rtflags[i]);
    free(rtflags);
    for (int i = 0; i < nx; i++)
        free((char *)xvars[i]);
    free(xvars);
    free(peers);
    phx_rt_free(&rt);
    phx_hf_free(&hl);
    return status;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "run"))
        return cmd_run(argc - 1, argv + 1);
    if (!strcmp(cmd, "status"))
        return phx_status_cmd(argc - 1, argv + 1);
    if (!strcmp(cmd, "drain"))
        return phx_drain_cmd(argc - 1, argv + 1);
    if (!strcmp(cmd, "version") || !strcmp(cmd, "--version")) {
        printf("phx %s\n", PHX_VERSION);
        return 0;
    }
    if (!strcmp(cmd, "--help") || !strcmp(cmd, "-h") || !strcmp(cmd, "help")) {
        usage(stdout);
        return 0;
    }
    fprintf(stderr, "phx: unknown command '%s'\n", cmd);
    usage(stderr);
    return 2;
}
