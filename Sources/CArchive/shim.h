#ifndef ACCOUNTLIFECYCLE_CARCHIVE_SHIM_H
#define ACCOUNTLIFECYCLE_CARCHIVE_SHIM_H

#include <archive.h>
#include <archive_entry.h>
// libarchive's gzip reader ignores the CRC-32 and length in the gzip trailer;
// the reader decompresses with zlib itself so that corruption is caught.
#include <zlib.h>

#endif
