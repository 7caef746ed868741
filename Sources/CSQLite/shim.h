#ifndef KVOD_CSQLITE_SHIM_H
#define KVOD_CSQLITE_SHIM_H
/* SQLite 3, from Debian's libsqlite3-dev (pkg-config: sqlite3). Nothing else lives here. */
#include <sqlite3.h>
#endif
