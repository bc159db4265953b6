/*
 * libvips, opened when a photo is first handled rather than linked: it brings about
 * a hundred shared libraries (codecs, GLib's type system, their own dependencies),
 * and loading and relocating them cost every process about 15 ms at start, a
 * worker draining its queue and each CLI command included, and a few MB of memory
 * in processes that never touch a photo. Each function below is looked up once, by
 * the name its own declaration in libvips' headers gives, so a changed signature
 * fails the build rather than the call.
 */
/* dlinfo and struct link_map are GNU extensions. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "cvips.h"

#include <dlfcn.h>
#include <limits.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>

#define CVIPS_FUNCTIONS(X) \
	X(vips_init) X(vips_block_untrusted_set) X(vips_cache_set_max) X(vips_concurrency_set) \
	X(vips_version) X(vips_error_buffer_copy) X(vips_tracked_get_mem) X(vips_tracked_get_allocs) \
	X(vips_image_hasalpha) X(vips_image_get_orientation) X(vips_image_get_orientation_swap) \
	X(vips_foreign_find_load_buffer) X(vips_image_new_from_buffer) X(vips_thumbnail_buffer) \
	X(vips_jpegload_buffer) X(vips_icc_transform) X(vips_thumbnail_image) X(vips_colourspace) \
	X(vips_array_double_new) X(vips_flatten) X(vips_area_unref) X(vips_cast) X(vips_crop) \
	X(vips_jpegsave_buffer) X(vips_image_get_typeof) X(vips_object_map) \
	X(g_object_unref) X(g_free) X(g_module_open) X(g_module_error) X(g_module_make_resident) \
	X(g_type_from_name)

static struct {
#define CVIPS_FIELD(name) __typeof__(&name) name;
	CVIPS_FUNCTIONS(CVIPS_FIELD)
#undef CVIPS_FIELD
} api;

static char open_failure[512];
static void *opened_library;

const char *
cvips_open(void)
{
	/* The soname Debian's libvips42 installs; GLib's functions are found among
	 * libvips' own dependencies. Lazily bound, as a program linked against it
	 * would be: libvips itself and some of its hundred dependencies are linked
	 * to bind at once whatever is asked, and the other forty's functions
	 * (Kerberos, HDF5, X11, librtmp, … that a photo never calls) are then not
	 * looked up at every start, which saved about 5 ms of the 45 ms this call
	 * takes here. The price: a dependency that lost a function in a partial
	 * upgrade stops the process when it is first called instead of failing
	 * this open; the runner resumes the jobs it held, as after any crash, and
	 * Debian's symbol versioning makes such an upgrade a packaging bug. */
	void *library = dlopen("libvips.so.42", RTLD_LAZY | RTLD_GLOBAL);
	if (!library) {
		snprintf(open_failure, sizeof open_failure, "%s", dlerror());
		return open_failure;
	}
	opened_library = library;
#define CVIPS_LOOK_UP(name) \
	if (!(api.name = (__typeof__(api.name)) dlsym(library, #name))) { \
		snprintf(open_failure, sizeof open_failure, "libvips.so.42 has no %s: %s", #name, dlerror()); \
		return open_failure; \
	}
	CVIPS_FUNCTIONS(CVIPS_LOOK_UP)
#undef CVIPS_LOOK_UP
	return NULL;
}

int cvips_init(const char *program) { return api.vips_init(program); }
void cvips_block_untrusted_set(int state) { api.vips_block_untrusted_set(state); }
void cvips_cache_set_max(int max) { api.vips_cache_set_max(max); }
void cvips_concurrency_set(int concurrency) { api.vips_concurrency_set(concurrency); }
int cvips_version(int flag) { return api.vips_version(flag); }
char *cvips_error_buffer_copy(void) { return api.vips_error_buffer_copy(); }
size_t cvips_tracked_get_mem(void) { return api.vips_tracked_get_mem(); }
int cvips_tracked_get_allocs(void) { return api.vips_tracked_get_allocs(); }
int cvips_image_hasalpha(VipsImage *image) { return api.vips_image_hasalpha(image); }
int cvips_image_get_orientation(VipsImage *image) { return api.vips_image_get_orientation(image); }
int cvips_image_get_orientation_swap(VipsImage *image) { return api.vips_image_get_orientation_swap(image); }
const char *cvips_foreign_find_load_buffer(const void *data, size_t size) { return api.vips_foreign_find_load_buffer(data, size); }

/*
 * libvips takes its optional arguments as NULL-terminated C varargs, which
 * Swift cannot call. Each wrapper below fixes the argument list for the one
 * use Imaging makes of it, so the recipe's options live in one reviewed place.
 */

/* Header-only open: the loader parses the header now and defers pixel
 * decoding until something asks for pixels, so dimensions can be checked
 * before a decompression bomb is decoded. */
VipsImage *
cvips_header_from_buffer(const void *buf, size_t len)
{
	return api.vips_image_new_from_buffer(buf, len, "",
		"access", VIPS_ACCESS_SEQUENTIAL,
		"fail_on", VIPS_FAIL_ON_ERROR,
		NULL);
}

/* One-call load, shrink-on-load, orientation, centre crop and resize.
 * `export_profile` is NULL for untagged images: they are taken as sRGB
 * already, and routing them through lcms would only cost time.
 * fail_on=error turns truncation into an error instead of grey padding. It
 * goes in the loader's option string: libvips 8.14's thumbnail_buffer does
 * not forward its own "fail_on" argument to the loader. */
int
cvips_thumbnail_square(const void *buf, size_t len, VipsImage **out,
	int side, const char *export_profile)
{
	if (export_profile)
		return api.vips_thumbnail_buffer((void *) buf, len, out, side,
			"height", side,
			"crop", VIPS_INTERESTING_CENTRE,
			"size", VIPS_SIZE_DOWN,
			"option_string", "fail_on=error",
			"export_profile", export_profile,
			"intent", VIPS_INTENT_RELATIVE,
			NULL);
	return api.vips_thumbnail_buffer((void *) buf, len, out, side,
		"height", side,
		"crop", VIPS_INTERESTING_CENTRE,
		"size", VIPS_SIZE_DOWN,
		"option_string", "fail_on=error",
		NULL);
}

/* A CMYK JPEG that carries its own profile. libvips 8.14's thumbnail turns
 * CMYK into its sRGB processing space with the built-in CMYK profile before
 * it applies the embedded one, which no longer fits the image ("profile
 * incompatible with image"): the press profile would be ignored. So these
 * are loaded (block-shrunk by `shrink`, 1/2/4/8), converted through their
 * own profile (the built-in one only if the embedded one is unusable), and
 * then thumbnailed as the sRGB image they now are. */
int
cvips_jpeg_cmyk_to_srgb(const void *buf, size_t len, VipsImage **out, int shrink)
{
	VipsImage *loaded;
	if (api.vips_jpegload_buffer((void *) buf, len, &loaded,
			"shrink", shrink,
			"fail_on", VIPS_FAIL_ON_ERROR,
			"access", VIPS_ACCESS_SEQUENTIAL,
			NULL))
		return -1;
	int result = api.vips_icc_transform(loaded, out, "srgb",
		"input_profile", "cmyk",
		"embedded", TRUE,
		"intent", VIPS_INTENT_RELATIVE,
		"depth", 8,
		NULL);
	api.g_object_unref(loaded);
	return result;
}

/* The thumbnail step of cvips_thumbnail_square for an image already
 * loaded: orientation, centre crop, shrink, never enlarge. */
int
cvips_thumbnail_image_square(VipsImage *in, VipsImage **out, int side)
{
	return api.vips_thumbnail_image(in, out, side,
		"height", side,
		"crop", VIPS_INTERESTING_CENTRE,
		"size", VIPS_SIZE_DOWN,
		NULL);
}

int
cvips_to_srgb(VipsImage *in, VipsImage **out)
{
	return api.vips_colourspace(in, out, VIPS_INTERPRETATION_sRGB, NULL);
}

int
cvips_flatten_on_white(VipsImage *in, VipsImage **out)
{
	double white[3] = { 255.0, 255.0, 255.0 };
	VipsArrayDouble *background = api.vips_array_double_new(white, 3);
	int result = api.vips_flatten(in, out, "background", background, NULL);
	api.vips_area_unref(VIPS_AREA(background));
	return result;
}

int
cvips_cast_uchar(VipsImage *in, VipsImage **out)
{
	return api.vips_cast(in, out, VIPS_FORMAT_UCHAR, NULL);
}

int
cvips_crop(VipsImage *in, VipsImage **out,
	int left, int top, int width, int height)
{
	return api.vips_crop(in, out, left, top, width, height, NULL);
}

/* strip=TRUE drops EXIF (with GPS), XMP, IPTC, ICC and comments.
 * optimize_coding only changes Huffman tables: smaller files, same pixels,
 * still deterministic. */
int
cvips_jpegsave_stripped(VipsImage *in, void **buf, size_t *len, int quality)
{
	return api.vips_jpegsave_buffer(in, buf, len,
		"Q", quality,
		"strip", TRUE,
		"optimize_coding", TRUE,
		"interlace", FALSE,
		NULL);
}

/* The loader records the name it found the library under, which a relative
 * LD_LIBRARY_PATH entry or a symlink leaves short of the file itself; realpath
 * gives the file, beside which libvips keeps its modules. Called once, from
 * VipsRuntime's one-time start. */
const char *
cvips_library_path(void)
{
	static char path[PATH_MAX];
	struct link_map *map = NULL;
	if (!opened_library || dlinfo(opened_library, RTLD_DI_LINKMAP, &map) != 0 || !map)
		return NULL;
	return realpath(map->l_name, path);
}

/* A libvips module opened the way vips_init opens them: GModule runs the
 * module's g_module_check_init, which registers its loaders and savers, and
 * the module stays resident since types cannot be unregistered. Returns NULL
 * on success, else GModule's message (owned by GLib). */
const char *
cvips_load_module(const char *path)
{
	GModule *module = api.g_module_open(path, G_MODULE_BIND_LAZY);
	if (!module)
		return api.g_module_error();
	api.g_module_make_resident(module);
	return NULL;
}

int
cvips_has_type(const char *name)
{
	return api.g_type_from_name(name) != 0;
}

int
cvips_has_field(VipsImage *image, const char *name)
{
	return api.vips_image_get_typeof(image, name) != 0;
}


void
cvips_unref(VipsImage *image)
{
	api.g_object_unref(image);
}

void
cvips_free(void *memory)
{
	api.g_free(memory);
}

static void *
count_object(VipsObject *object, void *count, void *unused)
{
	(void) object;
	(void) unused;
	*(long *) count += 1;
	return NULL;
}

/* Every live VipsObject in the process: a leak shows up as growth across
 * a batch. */
long
cvips_live_object_count(void)
{
	long count = 0;
	api.vips_object_map((VipsSListMap2Fn) count_object, &count, NULL);
	return count;
}

