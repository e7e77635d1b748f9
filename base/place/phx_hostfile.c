#define _GNU_SOURCE   /* strndup, getline */
#include "base/place/phx_place.h"

#include "base/phx_err.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int fail(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int fail(char *err, size_t errlen, const char *fmt, ...)
{
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return PHX_EINVAL;
}

int phx_hf_add(phx_hostlist_t *hl, const char *host, size_t len, int slots)
{
    if (!len || slots <= 0 || slots > PHX_HF_MAX_SLOTS)
        return PHX_EINVAL;
    for (int i = 0; i < hl->n; i++) {
        if (strlen(hl->v[i].host) == len && !memcmp(hl->v[i].host, host, len)) {
            if (hl->v[i].slots > PHX_HF_MAX_SLOTS - slots)
                return PHX_ERANGE;
            hl->v[i].slots += slots;
            return 0;
        }
    }
    if (hl->n == hl->cap) {
        int cap = hl->cap ? hl->cap * 2 : 8;
        phx_hf_host_t *v = realloc(hl->v, (size_t)cap * sizeof *v);
        if (!v)
            return PHX_ENOMEM;
        hl->v = v;
        hl->cap = cap;
    }
    char *h = strndup(host, len);
    if (!h)
        return PHX_ENOMEM;
    hl->v[hl->n].host = h;
    hl->v[hl->n].slots = slots;
    hl->n++;
    return 0;
}

void phx_hf_free(phx_hostlist_t *hl)
{
    for (int i = 0; i < hl->n; i++)
        free(hl->v[i].host);
    free(hl->v);
    memset(hl, 0, sizeof *hl);
}

int phx_hf_total_slots(const phx_hostlist_t *hl)
{
    long t = 0;
    for (int i = 0; i < hl->n; i++)
        t += hl->v[i].slots;
    return t > PHX_HF_MAX_SLOTS ? PHX_HF_MAX_SLOTS : (int)t;
}

/* Strict decimal in [1, PHX_HF_MAX_SLOTS]; atoi would accept "4x". */
static int parse_count(const char *s, size_t len)
{
    if (!len || len > 6)
        return -1;
    int v = 0;
    for (size_t i = 0; i < len; i++) {
        if (!isdigit((unsigned char)s[i]))
            return -1;
        v = v * 10 + (s[i] - '0');
    }
    return v >= 1 && v <= PHX_HF_MAX_SLOTS ? v : -1;
}

/* Characters that would corrupt PHX_PEERS or a remote command line. */
static int bad_host_char(int c)
{
    return c == ',' || c == '=' || c == '\'' || c == '"' || c == '\\' || c == '/' ||
           iscntrl((unsigned char)c);
}

static int parse_line(const char *name, int ln, char *line, phx_hostlist_t *hl,
                      char *err, size_t errlen)
{
    char *hash = strchr(line, '#');
    if (hash)
        *hash = 0;
    char *save = NULL, *tok = strtok_r(line, " \t\r\n\v\f", &save);
    if (!tok)
        return 0;

    const char *host = tok;
    size_t hlen = strlen(tok);
    int slots = 0;
    /* "[v6]" or "[v6]:N"; otherwise "host:N" only when the host part has no
     * colon of its own, so a bare "::1" stays an IPv6 address. */
    if (tok[0] == '[') {
        char *rb = strchr(tok, ']');
        if (!rb)
            return fail(err, errlen, "%s:%d: unterminated '[' in host '%s'", name, ln, tok);
        host = tok + 1;
        hlen = (size_t)(rb - host);
        if (rb[1] == ':') {
            if ((slots = parse_count(rb + 2, strlen(rb + 2))) < 0)
                return fail(err, errlen, "%s:%d: bad slot count '%s' (a whole number from 1 to %d)",
                            name, ln, rb + 2, PHX_HF_MAX_SLOTS);
        } else if (rb[1]) {
            return fail(err, errlen, "%s:%d: junk after host: '%s'", name, ln, rb + 1);
        }
    } else {
        char *c = strrchr(tok, ':');
        if (c && memchr(tok, ':', (size_t)(c - tok)) == NULL) {
            hlen = (size_t)(c - tok);
            if ((slots = parse_count(c + 1, strlen(c + 1))) < 0)
                return fail(err, errlen, "%s:%d: bad slot count '%s' (a whole number from 1 to %d)",
                            name, ln, c + 1, PHX_HF_MAX_SLOTS);
        }
    }
    if (!hlen)
        return fail(err, errlen, "%s:%d: empty host name", name, ln);
    for (size_t i = 0; i < hlen; i++)
        if (bad_host_char(host[i]))
            return fail(err, errlen, "%s:%d: invalid host name '%.*s'", name, ln, (int)hlen, host);

    while ((tok = strtok_r(NULL, " \t\r\n\v\f", &save))) {
        char *eq = strchr(tok, '=');
        size_t klen = eq ? (size_t)(eq - tok) : 0;
        int is_slots = eq && klen == 5 && !memcmp(tok, "slots", 5);
        int is_max = eq && ((klen == 9 && !memcmp(tok, "max_slots", 9)) ||
                            (klen == 9 && !memcmp(tok, "max-slots", 9)));
        if (!is_slots && !is_max)
            return fail(err, errlen, "%s:%d: unexpected token '%s' (expected slots=N or max_slots=N)",
                        name, ln, tok);
        int v = parse_count(eq + 1, strlen(eq + 1));
        if (v < 0)
            return fail(err, errlen, "%s:%d: bad slot count '%s' (a whole number from 1 to %d)",
                            name, ln, tok, PHX_HF_MAX_SLOTS);
        if (is_slots) {
            if (slots)
                return fail(err, errlen, "%s:%d: slot count given twice", name, ln);
            slots = v;
        }
    }
    int rc = phx_hf_add(hl, host, hlen, slots ? slots : 1);
    if (rc == PHX_ERANGE)
        return fail(err, errlen, "%s:%d: too many slots for host '%.*s'", name, ln, (int)hlen, host);
    if (rc)
        fail(err, errlen, "%s:%d: cannot add host '%.*s': %s", name, ln, (int)hlen, host,
             phx_strerror(rc));
    return rc;
}

int phx_hf_parse_text(const char *name, const char *text, phx_hostlist_t *hl,
                      char *err, size_t errlen)
{
    int ln = 0, rc = 0;
    const char *p = text;
    while (!rc && *p) {
        const char *nl = strchr(p, '\n');
        size_t n = nl ? (size_t)(nl - p) : strlen(p);
        char *line = strndup(p, n);
        if (!line) {
            fail(err, errlen, "%s: out of memory", name);
            return PHX_ENOMEM;
        }
        rc = parse_line(name, ++ln, line, hl, err, errlen);
        free(line);
        p += n + (nl ? 1 : 0);
    }
    if (!rc && hl->n == 0)
        rc = fail(err, errlen, "phx: hostfile '%s' lists no hosts (%s)", name,
                  ln ? "only comments and blank lines" : "it is empty");
    return rc;
}

int phx_hf_parse_list(const char *list, phx_hostlist_t *hl, char *err, size_t errlen)
{
    int ln = 0, rc = 0;
    for (const char *p = list; !rc; ) {
        size_t n = strcspn(p, ",");
        char *item = strndup(p, n);
        if (!item) {
            fail(err, errlen, "phx: out of memory");
            return PHX_ENOMEM;
        }
        ++ln;
        if (!n || strcspn(item, " \t") != n)
            rc = fail(err, errlen, "phx: --host %s: item %d is not host[:slots]", list, ln);
        else
            rc = parse_line("--host", ln, item, hl, err, errlen);
        free(item);
        if (!p[n])
            break;
        p += n + 1;
    }
    return rc;
}

int phx_hf_parse_file(const char *path, phx_hostlist_t *hl, char *err, size_t errlen)
{
    FILE *fp = fopen(path, "r");
    if (!fp) {
        int e = errno;
        fail(err, errlen, "phx: cannot open hostfile '%s': %s", path, strerror(e));
        return -e;
    }
    char *line = NULL;
    size_t cap = 0;
    int ln = 0, rc = 0;
    while (!rc && getline(&line, &cap, fp) >= 0)
        rc = parse_line(path, ++ln, line, hl, err, errlen);
    if (!rc && ferror(fp)) {
        int e = errno ? errno : EIO;
        fail(err, errlen, "%s:%d: cannot read the hostfile: %s", path, ln + 1, strerror(e));
        rc = -e;
    }
    free(line);
    fclose(fp);
    if (!rc && hl->n == 0)
        rc = fail(err, errlen, "phx: hostfile '%s' lists no hosts (%s)", path,
                  ln ? "only comments and blank lines" : "it is empty");
    return rc;
}

/* ---- Slurm ------------------------------------------------------------ */

/* Expands one item (no top-level commas) by recursing over its bracket
 * groups left to right, so "r[1-2]-n[1-2]" yields r1-n1 r1-n2 r2-n1 r2-n2. */
static int expand_item(const char *prefix, size_t plen, const char *rest, phx_hostlist_t *hl,
                       char *err, size_t errlen)
{
    const char *lb = strchr(rest, '[');
    if (!lb) {
        size_t rlen = strlen(rest);
        char *h = malloc(plen + rlen + 1);
        if (!h)
            return PHX_ENOMEM;
        memcpy(h, prefix, plen);
        memcpy(h + plen, rest, rlen + 1);
        int rc = phx_hf_add(hl, h, plen + rlen, 1);
        free(h);
        return rc;
    }
    const char *rb = strchr(lb, ']');
    if (!rb)
        return fail(err, errlen, "node list: unterminated '['");
    size_t mid = (size_t)(lb - rest);
    char *base = malloc(plen + mid + 32);
    if (!base)
        return PHX_ENOMEM;
    memcpy(base, prefix, plen);
    memcpy(base + plen, rest, mid);
    int rc = 0;
    const char *p = lb + 1;
    while (!rc) {
        const char *e = memchr(p, ',', (size_t)(rb - p));
        if (!e)
            e = rb;
        if (e == p) {
            rc = fail(err, errlen, "node list: empty range in '%.*s'", (int)(rb - lb + 1), lb);
            break;
        }
        const char *dash = memchr(p, '-', (size_t)(e - p));
        const char *loe = dash ? dash : e;
        size_t width = (size_t)(loe - p);
        char *end;
        long lo = strtol(p, &end, 10), hi = lo;
        if (end != loe || !width || width > 9 || !isdigit((unsigned char)*p))
            rc = fail(err, errlen, "node list: bad range '%.*s'", (int)(e - p), p);
        else if (dash) {
            hi = strtol(dash + 1, &end, 10);
            if (end != e || dash + 1 == e || !isdigit((unsigned char)dash[1]) || hi < lo ||
                hi - lo >= PHX_HF_MAX_SLOTS)
                rc = fail(err, errlen, "node list: bad range '%.*s'", (int)(e - p), p);
        }
        for (long v = lo; !rc && v <= hi; v++) {
            /* Slurm pads to the width of the lower bound: n[08-10] -> n08 n09 n10 */
            int k = snprintf(base + plen + mid, 32, "%0*ld", (int)width, v);
            rc = expand_item(base, plen + mid + (size_t)k, rb + 1, hl, err, errlen);
        }
        if (e == rb)
            break;
        p = e + 1;
    }
    free(base);
    return rc;
}

int phx_slurm_expand(const char *list, phx_hostlist_t *hl, char *err, size_t errlen)
{
    const char *p = list;
    int rc = 0;
    while (!rc && *p) {
        int depth = 0;
        const char *e = p;
        for (; *e && (depth || *e != ','); e++) {
            if (*e == '[')
                depth++;
            else if (*e == ']' && --depth < 0)
                return fail(err, errlen, "node list: unbalanced ']' in '%s'", list);
        }
        if (depth)
            return fail(err, errlen, "node list: unterminated '[' in '%s'", list);
        if (e == p)
            return fail(err, errlen, "node list: empty entry in '%s'", list);
        char *item = strndup(p, (size_t)(e - p));
        if (!item)
            return PHX_ENOMEM;
        rc = expand_item("", 0, item, hl, err, errlen);
        free(item);
        p = *e ? e + 1 : e;
    }
    if (!rc && hl->n == 0)
        rc = fail(err, errlen, "node list: empty");
    return rc;
}

int phx_slurm_tasks(const char *tpn, phx_hostlist_t *hl, char *err, size_t errlen)
{
    int i = 0;
    const char *p = tpn;
    while (*p) {
        char *end;
        long c = strtol(p, &end, 10), rep = 1;
        if (end == p || c < 1 || c > PHX_HF_MAX_SLOTS)
            return fail(err, errlen, "SLURM_TASKS_PER_NODE: bad count in '%s'", tpn);
        if (!strncmp(end, "(x", 2)) {
            const char *q = end + 2;
            rep = strtol(q, &end, 10);
            if (end == q || *end != ')' || rep < 1 || rep > PHX_HF_MAX_SLOTS)
                return fail(err, errlen, "SLURM_TASKS_PER_NODE: bad repeat in '%s'", tpn);
            end++;
        }
        if (*end && *end != ',')
            return fail(err, errlen, "SLURM_TASKS_PER_NODE: junk in '%s'", tpn);
        for (long k = 0; k < rep; k++, i++) {
            if (i >= hl->n)
                return fail(err, errlen, "SLURM_TASKS_PER_NODE '%s' lists more nodes than the "
                            "node list (%d)", tpn, hl->n);
            hl->v[i].slots = (int)c;
        }
        p = *end ? end + 1 : end;
    }
    if (i != hl->n)
        return fail(err, errlen, "SLURM_TASKS_PER_NODE '%s' covers %d nodes, node list has %d",
                    tpn, i, hl->n);
    return 0;
}

/* ---- rank table --------------------------------------------------------- */

int phx_host_is_local(const char *host)
{
    if (!strcmp(host, "localhost") || !strcmp(host, "::1") || !strncmp(host, "127.", 4) ||
        !strcmp(host, "localhost.localdomain") || !strcmp(host, "ip6-localhost"))
        return 1;
    char me[256];
    if (gethostname(me, sizeof me) != 0)
        return 0;
    me[sizeof me - 1] = 0;
    if (!strcmp(host, me))
        return 1;
    /* "node7" vs "node7.cluster": same machine either way. */
    size_t a = strcspn(host, "."), b = strcspn(me, ".");
    return a == b && !strncmp(host, me, a) && (!host[a] || !me[b]);
}

int phx_rt_build(const phx_hostlist_t *hl, int n, phx_ranktab_t *rt)
{
    memset(rt, 0, sizeof *rt);
    int total = phx_hf_total_slots(hl);
    if (hl->n == 0 || total <= 0)
        return PHX_EINVAL;
    if (n <= 0)
        n = total;
    if (n > PHX_HF_MAX_SLOTS)
        return PHX_ERANGE;
    rt->r = calloc((size_t)n, sizeof *rt->r);
    if (!rt->r)
        return PHX_ENOMEM;
    rt->n = n;
    for (int i = 0; i < n; i++)
        rt->r[i].listen_fd = -1;
    rt->oversubscribed = n > total;
    int *used = calloc((size_t)hl->n, sizeof *used);
    if (!used) {
        phx_rt_free(rt);
        return PHX_ENOMEM;
    }
    int r = 0;
    for (int h = 0; h < hl->n && r < n; h++)
        for (int s = 0; s < hl->v[h].slots && r < n; s++, r++) {
            rt->r[r].host = hl->v[h].host;
            rt->r[r].slot = used[h]++;
        }
    for (int k = 0; r < n; r++, k++) {
        int h = k % hl->n;
        rt->r[r].host = hl->v[h].host;
        rt->r[r].slot = used[h]++;
    }
    free(used);
    for (r = 0; r < n; r++)
        rt->r[r].local = phx_host_is_local(rt->r[r].host);
    return 0;
}

void phx_rt_free(phx_ranktab_t *rt)
{
    for (int r = 0; r < rt->n; r++)
        if (rt->r && rt->r[r].listen_fd >= 0)
            close(rt->r[r].listen_fd);
    free(rt->r);
    memset(rt, 0, sizeof *rt);
}

int phx_rt_ports_from_base(phx_ranktab_t *rt, int base, int all)
{
    for (int r = 0; r < rt->n; r++) {
        if (!all && rt->r[r].local)
            continue;
        long p = (long)base + rt->r[r].slot;
        if (base <= 0 || p > 65535)
            return PHX_ERANGE;
        rt->r[r].port = (int)p;
    }
    return 0;
}

int phx_rt_peers(const phx_ranktab_t *rt, char **out)
{
    size_t cap = 1;
    for (int r = 0; r < rt->n; r++)
        cap += strlen(rt->r[r].host) + 8;
    char *s = malloc(cap), *p = s;
    if (!s)
        return PHX_ENOMEM;
    *p = 0;
    for (int r = 0; r < rt->n; r++)
        p += sprintf(p, "%s%s:%d", r ? "," : "", rt->r[r].host, rt->r[r].port);
    *out = s;
    return 0;
}
