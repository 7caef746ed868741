#ifndef KVOD_CLIBUV_SHIM_H
#define KVOD_CLIBUV_SHIM_H
/* libuv, from Debian's libuv1-dev (pkg-config: libuv). Nothing else lives here. */
#include <uv.h>
#endif
