#ifndef KVOD_CWSLAY_SHIM_H
#define KVOD_CWSLAY_SHIM_H
/* RFC 6455 WebSocket framing, from Debian's libwslay-dev (1.1.1; no pkg-config file). */
#include <sys/types.h>
#include <stdint.h>
#include <wslay/wslay.h>
#endif
