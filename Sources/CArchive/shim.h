#ifndef ACCOUNTLIFECYCLE_CARCHIVE_SHIM_H
#define ACCOUNTLIFECYCLE_CARCHIVE_SHIM_H

#include <archive.h>
#include <archive_entry.h>
// libarchive's gzip reader ignores the CRC-32 and length in the gzip trailer;
// the reader decompresses with zlib itself so that corruption is caught.
#include <zlib.h>

#ifdef __linux__
#include <fcntl.h>
// Swift's Glibc module leaves out O_DIRECT (it is a _GNU_SOURCE flag, and its value
// differs between architectures); the archive writer uses it for big archives.
#ifndef O_DIRECT
#define O_DIRECT __O_DIRECT
#endif
static const int accountlifecycle_o_direct = O_DIRECT;

#include <sys/types.h>
// fallocate(2) is a _GNU_SOURCE function too. Not posix_fallocate: on a file system
// without fallocate it writes zeros over the whole range, the very cost it is meant to save.
extern int fallocate(int fd, int mode, off_t offset, off_t length);
static inline int accountlifecycle_fallocate(int fd, off_t offset, off_t length) {
    return fallocate(fd, 0, offset, length);
}
#endif

#endif
