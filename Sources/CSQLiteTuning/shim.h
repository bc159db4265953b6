#ifndef ACCOUNTLIFECYCLE_CSQLITETUNING_SHIM_H
#define ACCOUNTLIFECYCLE_CSQLITETUNING_SHIM_H

#include <sqlite3.h>

// sqlite3_config is variadic, which Swift cannot call. Memory statistics (on by default)
// take one process-wide mutex on every allocation of every connection: under a purge's
// many threads, allocations queue on it. Nothing here reads the statistics. Effective
// only before SQLite initialises (the process's first connection); SQLITE_MISUSE after.
static inline int accountlifecycle_sqlite_memory_statistics_off(void) {
    return sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
}

#endif
