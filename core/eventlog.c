#include "core/eventlog.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "base/phx_err.h"

static FILE *fp;
static int ev_rank;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

int phx_evlog_open(const char *pattern, int rank)
{
    if (!pattern || !*pattern)
        return 0;
    char path[1024];
    size_t o = 0;
    for (const char *p = pattern; *p && o < sizeof path - 12; p++) {
        if (p[0] == '%' && p[1] == 'r') {
            o += (size_t)snprintf(path + o, sizeof path - o, "%d", rank);
            p++;
        } else {
            path[o++] = *p;
        }
    }
    path[o] = 0;
    fp = fopen(path, "a");
    if (!fp) {
        fprintf(stderr, "phalanx: cannot open event log %s: %s\n", path, strerror(errno));
        return PHX_EIO;
    }
    ev_rank = rank;
    return 0;
}

int phx_evlog_enabled(void) { return fp != NULL; }

void phx_evlog(const char *ev, const char *extra_fmt, ...)
{
    if (!fp)
        return;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    char extra[768] = "";
    if (extra_fmt) {
        va_list ap;
        va_start(ap, extra_fmt);
        extra[0] = ',';
        vsnprintf(extra + 1, sizeof extra - 1, extra_fmt, ap);
        va_end(ap);
    }
    pthread_mutex_lock(&lock);
    fprintf(fp, "{\"t\":%lld,\"rank\":%d,\"ev\":\"%s\"%s}\n",
            (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec, ev_rank, ev, extra);
    fflush(fp);
    pthread_mutex_unlock(&lock);
}

void phx_evlog_close(void)
{
    pthread_mutex_lock(&lock);
    if (fp)
        fclose(fp);
    fp = NULL;
    pthread_mutex_unlock(&lock);
}
