/* Placement: host lists and rank tables, shared by the phx launcher and
 * the node (direct launch under srun). base/ only below it.
 *
 * Kept free of process management so every placement rule can be unit
 * tested: parsing (Open MPI, MPICH and bare hostfiles, Slurm node lists),
 * rank placement, port choice and the PHX_PEERS string. Functions return 0
 * or a negative PHX_E* code; parse errors also fill a caller buffer with a
 * "FILE:LINE: message" diagnostic. */
#ifndef PHX_PLACE_H
#define PHX_PLACE_H

#include <stddef.h>

#define PHX_HF_MAX_SLOTS 65536
#define PHX_HF_DEFAULT_BASE_PORT 17300

typedef struct {
    char *host;
    int slots;
} phx_hf_host_t;

typedef struct {
    phx_hf_host_t *v;
    int n, cap;
} phx_hostlist_t;

typedef struct {
    char *host;         /* borrowed from the host list */
    int port;
    int local;          /* spawned with fork/exec rather than $PHX_RSH */
    int slot;           /* index of this rank among ranks on the same host */
    int listen_fd;      /* phx_rt_probe_ports: a local rank's socket, listening on port
                         * (close-on-exec, >= 4), for the node to inherit; else -1 */
} phx_rank_t;

typedef struct {
    phx_rank_t *r;
    int n;
    int oversubscribed; /* more ranks than slots: placed round-robin */
} phx_ranktab_t;

/* Appends host with slots, merging into an earlier entry of the same name
 * (Open MPI does the same), so a host's ranks stay contiguous. */
int phx_hf_add(phx_hostlist_t *hl, const char *host, size_t len, int slots);
void phx_hf_free(phx_hostlist_t *hl);
int phx_hf_total_slots(const phx_hostlist_t *hl);

/* Parses hostfile text; name is only used in diagnostics. */
int phx_hf_parse_text(const char *name, const char *text, phx_hostlist_t *hl,
                      char *err, size_t errlen);
int phx_hf_parse_file(const char *path, phx_hostlist_t *hl, char *err, size_t errlen);

/* Parses mpirun's -H/--host list "host[:slots][,host[:slots]...]" (a
 * host without :slots has 1, repeats add up). */
int phx_hf_parse_list(const char *list, phx_hostlist_t *hl, char *err, size_t errlen);

/* Expands a Slurm node list ("a,b", "n[01-04,7]", "r[1-2]-n[1-3]") into hl
 * with one slot each. */
int phx_slurm_expand(const char *list, phx_hostlist_t *hl, char *err, size_t errlen);
/* Applies SLURM_TASKS_PER_NODE ("2(x3),1") to the hosts already in hl. */
int phx_slurm_tasks(const char *tpn, phx_hostlist_t *hl, char *err, size_t errlen);

/* Direct launch (srun PROG, no phx): when SLURM_PROCID and
 * SLURM_STEP_NODELIST are set and PHX_RANK/SIZE/PEERS are not, sets
 * PHX_RANK, PHX_SIZE, PHX_PEERS (block placement over the step's node list
 * and SLURM_STEP_TASKS_PER_NODE, port PHX_BASE_PORT or a per-job base +
 * SLURM_LOCALID), PHX_LOCAL_SIZE, PHX_JOB_ID, and PHX_SECRET_FILE =
 * $HOME/.phalanx/secret when no secret is given. Returns 1 when it did, 0
 * when not under srun, or a negative code after a message on stderr.
 * Startup only (setenv). */
int phx_slurm_identity(void);

/* 1 for loopback names and this machine's own hostname. */
int phx_host_is_local(const char *host);

/* Places n ranks (n <= 0: one per slot). Slots fill host by host in list
 * order; extra ranks go round-robin over the hosts. */
int phx_rt_build(const phx_hostlist_t *hl, int n, phx_ranktab_t *rt);
void phx_rt_free(phx_ranktab_t *rt);   /* closes the listen_fds left */
/* port = base + slot, for every rank (all = 1) or for remote ranks only. */
int phx_rt_ports_from_base(phx_ranktab_t *rt, int base, int all);
/* Gives every local rank a free port by binding probe sockets, all held
 * open until the last port is chosen so no two ranks get the same one.
 * The chosen ones stay open and listening (listen_fd) until the node takes
 * its own: a port closed in between could go to another launcher's node. */
int phx_rt_probe_ports(phx_ranktab_t *rt);
/* Malloc'ed "host:port,host:port,..." in rank order. */
int phx_rt_peers(const phx_ranktab_t *rt, char **out);

#endif
