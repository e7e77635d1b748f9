/* Prometheus file_sd target list (see phx_sd.h). */
#define _GNU_SOURCE   /* asprintf */
#include "phx_sd.h"
#include "phx_jobdir.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char *sd_path;
static int port;
static char *sig;   /* per rank: 1 + incarnation when listed, 0 when not (what the file says) */
static unsigned *sig_inc;

static int listed(const phx_jd_rank_t *r) { return r->state == PHX_JD_UP || r->state == PHX_JD_STARTING; }

static void write_sd(const phx_jobview_t *V)
{
    char *tmp;
    if (asprintf(&tmp, "%s.tmp.%d", sd_path, (int)getpid()) < 0)
        return;
    FILE *f = fopen(tmp, "we");
    if (!f) {
        fprintf(stderr, "phx: --metrics-sd %s: %s\n", sd_path, strerror(errno));
        free(tmp);
        return;
    }
    fprintf(f, "[");
    int k = 0;
    for (int i = 0; i < V->n; i++) {
        const phx_jd_rank_t *r = &V->r[i];
        if (!listed(r))
            continue;
        /* hosts come from the hostfile: plain names or addresses, no quotes */
        fprintf(f, "%s\n  {\"targets\":[\"%s%s%s:%d\"],\"labels\":{\"rank\":\"%d\",\"host\":\"%s\",\"incarnation\":\"%u\"}}",
                k++ ? "," : "", strchr(r->host, ':') ? "[" : "", r->host, strchr(r->host, ':') ? "]" : "",
                port + i, i, r->host, r->inc);
    }
    fprintf(f, "\n]\n");
    if (fclose(f) != 0 || rename(tmp, sd_path) < 0) {
        fprintf(stderr, "phx: --metrics-sd %s: %s\n", sd_path, strerror(errno));
        unlink(tmp);
    }
    free(tmp);
}

int phx_sd_open(const char *path, int metrics_port)
{
    phx_jobview_t *V = phx_jobdir_view();
    if (!V)
        return -1;
    if (metrics_port <= 0) {
        fprintf(stderr, "phx: --metrics-sd needs the nodes to serve /metrics: set metrics-port "
                        "(PHX_METRICS_PORT=P or --phx-metrics-port=P)\n");
        return -1;
    }
    sd_path = strdup(path);
    port = metrics_port;
    sig = calloc((size_t)V->n, 1);
    sig_inc = calloc((size_t)V->n, sizeof *sig_inc);
    if (!sd_path || !sig || !sig_inc)
        return -1;
    write_sd(V);   /* every rank, starting */
    for (int i = 0; i < V->n; i++)
        sig[i] = (char)listed(&V->r[i]), sig_inc[i] = V->r[i].inc;
    return 0;
}

void phx_sd_update(void)
{
    phx_jobview_t *V = phx_jobdir_view();
    if (!sd_path || !V)
        return;
    int diff = 0;
    for (int i = 0; i < V->n; i++)
        if (sig[i] != (char)listed(&V->r[i]) || sig_inc[i] != V->r[i].inc) {
            sig[i] = (char)listed(&V->r[i]);
            sig_inc[i] = V->r[i].inc;
            diff = 1;
        }
    if (diff)
        write_sd(V);
}

void phx_sd_close(void)
{
    free(sd_path);
    free(sig);
    free(sig_inc);
    sd_path = NULL;
    sig = NULL;
    sig_inc = NULL;
}
