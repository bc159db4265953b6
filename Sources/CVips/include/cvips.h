#ifndef CVIPS_H
#define CVIPS_H

/* libvips for Imaging, opened on first use (cvips.c says why). Only types and
 * constants come from libvips' headers; every call goes through a function
 * here, valid once cvips_open has succeeded. */
#include <vips/vips.h>

/* Opens libvips and looks up every function used; NULL on success, else why not. */
const char *cvips_open(void);

int cvips_init(const char *program);
void cvips_block_untrusted_set(int state);
void cvips_cache_set_max(int max);
void cvips_concurrency_set(int concurrency);
int cvips_version(int flag);
char *cvips_error_buffer_copy(void);
size_t cvips_tracked_get_mem(void);
int cvips_tracked_get_allocs(void);
int cvips_image_hasalpha(VipsImage *image);
int cvips_image_get_orientation(VipsImage *image);
int cvips_image_get_orientation_swap(VipsImage *image);
const char *cvips_foreign_find_load_buffer(const void *data, size_t size);

/*
 * libvips takes its optional arguments as NULL-terminated C varargs, which
 * Swift cannot call. Each wrapper fixes the argument list for the one use
 * Imaging makes of it, so the recipe's options live in one reviewed place
 * (cvips.c).
 */
VipsImage *cvips_header_from_buffer(const void *buf, size_t len);
int cvips_thumbnail_square(const void *buf, size_t len, VipsImage **out, int side, const char *export_profile);
int cvips_jpeg_cmyk_to_srgb(const void *buf, size_t len, VipsImage **out, int shrink);
int cvips_thumbnail_image_square(VipsImage *in, VipsImage **out, int side);
int cvips_to_srgb(VipsImage *in, VipsImage **out);
int cvips_flatten_on_white(VipsImage *in, VipsImage **out);
int cvips_cast_uchar(VipsImage *in, VipsImage **out);
int cvips_crop(VipsImage *in, VipsImage **out, int left, int top, int width, int height);
int cvips_jpegsave_stripped(VipsImage *in, void **buf, size_t *len, int quality);
/* The file the dynamic loader opened for libvips, symlinks resolved, or NULL. */
const char *cvips_library_path(void);
const char *cvips_load_module(const char *path);
/* Whether GLib knows a type of this name (a libvips class registered by libvips or a module). */
int cvips_has_type(const char *name);
int cvips_has_field(VipsImage *image, const char *name);
void cvips_unref(VipsImage *image);
void cvips_free(void *memory);
long cvips_live_object_count(void);

static inline int cvips_width(const VipsImage *image) { return image->Xsize; }
static inline int cvips_height(const VipsImage *image) { return image->Ysize; }
static inline int cvips_bands(const VipsImage *image) { return image->Bands; }
static inline VipsBandFormat cvips_format(const VipsImage *image) { return image->BandFmt; }
static inline VipsInterpretation cvips_interpretation(const VipsImage *image) { return image->Type; }

#endif
