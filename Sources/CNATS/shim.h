#ifndef KVOD_CNATS_SHIM_H
#define KVOD_CNATS_SHIM_H
/* The NATS C client with its JetStream API, from Debian's libnats-dev (3.4.1). Used by the cluster's
   bridge (Sources/KVOServer/Cluster), on its own threads only. */
#include <stdint.h>
#include <stdbool.h>
#include <nats/nats.h>
#endif
