#ifndef CARGON2_SHIM_H
#define CARGON2_SHIM_H

// The reference Argon2 implementation (Debian: libargon2-dev).
#include <argon2.h>

#endif
