#ifndef KVOD_CLIBUV_SHIM_H
#define KVOD_CLIBUV_SHIM_H
/* libuv, from Debian's libuv1-dev (pkg-config: libuv), and one wrapper Swift needs. */
#include <uv.h>

/* uv_loop_configure is variadic, which Swift cannot call: this wraps its one use, turning on the loop's
   count of time spent blocked in poll (uv_metrics_idle_time, libuv 1.39+) for the loop-iteration metric. */
static inline int kvod_uv_loop_measure_idle_time(uv_loop_t *loop) {
    return uv_loop_configure(loop, UV_METRICS_IDLE_TIME);
}
#endif
