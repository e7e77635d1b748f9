/* GLB's runtime: runs the GLB protocol (ft/glb/glb.h, the pure machine in
 * ft/glb/glb_sm.h) as one task per node over the public Phalanx API
 * (core/phalanx.h). It sits above core/ because it uses the runtime, and
 * below the programs that call it (apps/uts, apps/bc).
 *
 * Threading: call both functions from main() on the main thread, once. */
#ifndef PHX_GLB_RT_H
#define PHX_GLB_RT_H

#include "ft/glb/glb.h"

/* Parses the glb-* options out of argv (argc updated) into cfg (defaults
 * for the rest; w and z are resolved once P is known). Returns 0 or
 * PHX_EINVAL with a message on stderr. */
int phx_glb_parse(int *argc, char **argv, phx_glb_cfg_t *cfg);

/* Runs the job: registers the GLB task type, starts the runtime and returns
 * the job's exit code. Call from main() once, after phx_glb_parse. An
 * unrecoverable loss prints "unrecoverable: ..." and exits non-zero
 * (PHX_GLB_EXIT_LOST): a rank lost with its backup holder, any loss with
 * glb-ft=off, or rank 0 lost before any start message left. */
#define PHX_GLB_EXIT_LOST 3
int phx_glb_run(int argc, char **argv, const phx_glb_ops_t *ops, void *app, const phx_glb_cfg_t *cfg);

#endif
