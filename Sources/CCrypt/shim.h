#ifndef CCRYPT_SHIM_H
#define CCRYPT_SHIM_H

// libxcrypt (Debian: libcrypt-dev). crypt_rn and struct crypt_data are not
// reachable through Glibc, so libcrypt gets its own module.
#include <crypt.h>

#endif
