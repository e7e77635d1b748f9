/* What the transport needs to know about the job, filled in by its caller
 * (the node copies it from its own configuration): net/ reads no
 * configuration of its own and includes nothing above base/. */
#ifndef PHX_NET_CFG_H
#define PHX_NET_CFG_H

#include <stdint.h>

typedef struct phx_net_addr {
    char host[256];
    int port;
} phx_net_addr_t;

typedef struct phx_net_cfg {
    int rank, size;
    uint64_t job_id;                 /* bound into the handshake (net/auth.h) */
    const phx_net_addr_t *peers;     /* size entries; the caller's, read until phx_net_free */
    int listen_fd;                   /* a listening socket handed down (the transport takes it
                                      * and closes it); -1: bind peers[rank] */
    int startup_timeout_ms;          /* give up connecting after this */
    int hb_timeout_ms;               /* a link not restored within this reaches on_peer_down */
    int64_t max_frame;               /* largest accepted payload */
    int rejoin;                      /* a rank declared dead may come back as a newer
                                      * incarnation (phx_link_inc_admit, net/link.h) */
} phx_net_cfg_t;

#endif
