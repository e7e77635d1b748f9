/* The GLB glue's task messages (glb_wire.h). */
#include "ext/glb/glb_wire.h"

#include "base/phx_err.h"
#include "base/phx_wire.h"
#include "ft/glb/glb.h"

long phx_glb_init_enc(const uint64_t *tids, int size, uint64_t t0, uint8_t *out, size_t cap)
{
    if (size < 1 || size > PHX_GLB_MAXP)
        return PHX_EINVAL;
    phx_wenc_t e;
    phx_wenc_init(&e, out, cap);
    for (int r = 0; r < size; r++)
        phx_wenc_u64(&e, tids[r]);
    phx_wenc_u64(&e, t0);
    return (long)phx_wenc_end(&e);
}

int phx_glb_init_dec(const uint8_t *p, size_t n, int size, uint64_t *tids, uint64_t *t0)
{
    if (size < 1 || size > PHX_GLB_MAXP || n != PHX_GLB_INIT_LEN(size))
        return PHX_EPROTO;
    phx_wdec_t d;
    phx_wdec_init(&d, p, n);
    for (int r = 0; r < size; r++)
        tids[r] = phx_wdec_u64(&d);
    uint64_t t = phx_wdec_u64(&d);
    if (t0)
        *t0 = t;
    return phx_wdec_end(&d, 1);
}

void phx_glb_kill_enc(uint8_t out[PHX_GLB_KILL_LEN], int64_t pid)
{
    phx_wenc_t e;
    phx_wenc_init(&e, out, PHX_GLB_KILL_LEN);
    phx_wenc_u64(&e, (uint64_t)pid);
}

int phx_glb_kill_dec(const uint8_t *p, size_t n, int64_t *pid)
{
    phx_wdec_t d;
    phx_wdec_init(&d, p, n);
    uint64_t v = phx_wdec_u64(&d);
    int rc = phx_wdec_end(&d, 1);
    if (!rc)
        *pid = (int64_t)v;
    return rc;
}

void phx_glb_spawn_enc(uint8_t out[PHX_GLB_SPAWN_LEN], uint64_t main_tid)
{
    phx_wenc_t e;
    phx_wenc_init(&e, out, PHX_GLB_SPAWN_LEN);
    phx_wenc_u64(&e, main_tid);
}

int phx_glb_spawn_dec(const uint8_t *p, size_t n, uint64_t *main_tid)
{
    phx_wdec_t d;
    phx_wdec_init(&d, p, n);
    uint64_t v = phx_wdec_u64(&d);
    int rc = phx_wdec_end(&d, 1);
    if (!rc)
        *main_tid = v;
    return rc;
}
