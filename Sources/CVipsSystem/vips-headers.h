#ifndef CVIPS_SYSTEM_H
#define CVIPS_SYSTEM_H

/* libvips' and GLib's declarations only: nothing here is linked. CVips opens
 * the libraries when a photo is first handled. */
#include <vips/vips.h>
#include <gmodule.h>

#endif
