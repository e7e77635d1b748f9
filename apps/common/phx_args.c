#include "apps/common/phx_args.h"

#include "core/config.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int speaks(void)
{
    const char *r = getenv("PHX_RANK");
    return !r || !strcmp(r, "0");
}

int phx_args_help(const phx_args_t *a, int argc, char **argv)
{
    for (int i = 1; i < argc && strcmp(argv[i], "--"); i++)
        if (!strcmp(argv[i], "--help")) {
            if (speaks())
                printf("usage: %s\n%s", a->usage, a->help ? a->help : "");
            fflush(stdout);
            return 1;
        }
    return 0;
}

int phx_args_runtime(int argc, char **argv, int i)
{
    if (strncmp(argv[i], "--phx-", 6))
        return 0;
    return phx_config_flag_arity(argv[i], i + 1 < argc ? argv[i + 1] : NULL);
}

int phx_args_bad(const phx_args_t *a, const char *fmt, ...)
{
    if (speaks()) {
        va_list ap;
        va_start(ap, fmt);
        fprintf(stderr, "%s: ", a->prog);
        vfprintf(stderr, fmt, ap);
        va_end(ap);
        fprintf(stderr, "\nusage: %s\n", a->usage);
    }
    return 2;
}

int phx_args_need(const phx_args_t *a, int argc, char **argv, int i)
{
    return i + 1 < argc ? 0 : phx_args_bad(a, "%s needs a value", argv[i]);
}

int phx_args_u64(const phx_args_t *a, const char *opt, const char *s, uint64_t lo, uint64_t hi, uint64_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = isdigit((unsigned char)s[0]) ? strtoull(s, &end, 10) : 0;
    if (!isdigit((unsigned char)s[0]) || *end)
        return phx_args_bad(a, "%s wants a whole number from %" PRIu64 " to %" PRIu64 ", got '%s'", opt, lo, hi, s);
    if (errno == ERANGE || v < lo || v > hi)
        return phx_args_bad(a, "%s is out of range: %s is not from %" PRIu64 " to %" PRIu64, opt, s, lo, hi);
    *out = v;
    return 0;
}

int phx_args_int(const phx_args_t *a, const char *opt, const char *s, int lo, int hi, int *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (end == s || *end || isspace((unsigned char)s[0]))
        return phx_args_bad(a, "%s wants a whole number from %d to %d, got '%s'", opt, lo, hi, s);
    if (errno == ERANGE || v < lo || v > hi)
        return phx_args_bad(a, "%s is out of range: %s is not from %d to %d", opt, s, lo, hi);
    *out = (int)v;
    return 0;
}

int phx_args_dbl(const phx_args_t *a, const char *opt, const char *s, double lo, double hi, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || *end || isspace((unsigned char)s[0]) || !isfinite(v))
        return phx_args_bad(a, "%s wants a number from %g to %g, got '%s'", opt, lo, hi, s);
    if (errno == ERANGE || v < lo || v > hi)
        return phx_args_bad(a, "%s is out of range: %s is not from %g to %g", opt, s, lo, hi);
    *out = v;
    return 0;
}
