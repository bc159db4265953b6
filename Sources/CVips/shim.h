#ifndef CVIPS_SHIM_H
#define CVIPS_SHIM_H

#include <vips/vips.h>
#include <gmodule.h>

/*
 * libvips takes its optional arguments as NULL-terminated C varargs, which
 * Swift cannot call. Each wrapper below fixes the argument list for the one
 * use Imaging makes of it, so the recipe's options live in one reviewed place.
 */

/* Header-only open: the loader parses the header now and defers pixel
 * decoding until something asks for pixels, so dimensions can be checked
 * before a decompression bomb is decoded. */
static inline VipsImage *
cvips_header_from_buffer(const void *buf, size_t len)
{
	return vips_image_new_from_buffer(buf, len, "",
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
static inline int
cvips_thumbnail_square(const void *buf, size_t len, VipsImage **out,
	int side, const char *export_profile)
{
	if (export_profile)
		return vips_thumbnail_buffer((void *) buf, len, out, side,
			"height", side,
			"crop", VIPS_INTERESTING_CENTRE,
			"size", VIPS_SIZE_DOWN,
			"option_string", "fail_on=error",
			"export_profile", export_profile,
			"intent", VIPS_INTENT_RELATIVE,
			NULL);
	return vips_thumbnail_buffer((void *) buf, len, out, side,
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
static inline int
cvips_jpeg_cmyk_to_srgb(const void *buf, size_t len, VipsImage **out, int shrink)
{
	VipsImage *loaded;
	if (vips_jpegload_buffer((void *) buf, len, &loaded,
			"shrink", shrink,
			"fail_on", VIPS_FAIL_ON_ERROR,
			"access", VIPS_ACCESS_SEQUENTIAL,
			NULL))
		return -1;
	int result = vips_icc_transform(loaded, out, "srgb",
		"input_profile", "cmyk",
		"embedded", TRUE,
		"intent", VIPS_INTENT_RELATIVE,
		"depth", 8,
		NULL);
	g_object_unref(loaded);
	return result;
}

/* The thumbnail step of cvips_thumbnail_square for an image already
 * loaded: orientation, centre crop, shrink, never enlarge. */
static inline int
cvips_thumbnail_image_square(VipsImage *in, VipsImage **out, int side)
{
	return vips_thumbnail_image(in, out, side,
		"height", side,
		"crop", VIPS_INTERESTING_CENTRE,
		"size", VIPS_SIZE_DOWN,
		NULL);
}

static inline int
cvips_to_srgb(VipsImage *in, VipsImage **out)
{
	return vips_colourspace(in, out, VIPS_INTERPRETATION_sRGB, NULL);
}

static inline int
cvips_flatten_on_white(VipsImage *in, VipsImage **out)
{
	double white[3] = { 255.0, 255.0, 255.0 };
	VipsArrayDouble *background = vips_array_double_new(white, 3);
	int result = vips_flatten(in, out, "background", background, NULL);
	vips_area_unref(VIPS_AREA(background));
	return result;
}

static inline int
cvips_cast_uchar(VipsImage *in, VipsImage **out)
{
	return vips_cast(in, out, VIPS_FORMAT_UCHAR, NULL);
}

static inline int
cvips_crop(VipsImage *in, VipsImage **out,
	int left, int top, int width, int height)
{
	return vips_crop(in, out, left, top, width, height, NULL);
}

/* strip=TRUE drops EXIF (with GPS), XMP, IPTC, ICC and comments.
 * optimize_coding only changes Huffman tables: smaller files, same pixels,
 * still deterministic. */
static inline int
cvips_jpegsave_stripped(VipsImage *in, void **buf, size_t *len, int quality)
{
	return vips_jpegsave_buffer(in, buf, len,
		"Q", quality,
		"strip", TRUE,
		"optimize_coding", TRUE,
		"interlace", FALSE,
		NULL);
}

/* A libvips module opened the way vips_init opens them: GModule runs the
 * module's g_module_check_init, which registers its loaders and savers, and
 * the module stays resident since types cannot be unregistered. Returns NULL
 * on success, else GModule's message (owned by GLib). */
static inline const char *
cvips_load_module(const char *path)
{
	GModule *module = g_module_open(path, G_MODULE_BIND_LAZY);
	if (!module)
		return g_module_error();
	g_module_make_resident(module);
	return NULL;
}

static inline int
cvips_has_field(VipsImage *image, const char *name)
{
	return vips_image_get_typeof(image, name) != 0;
}

static inline int cvips_width(const VipsImage *image) { return image->Xsize; }
static inline int cvips_height(const VipsImage *image) { return image->Ysize; }
static inline int cvips_bands(const VipsImage *image) { return image->Bands; }
static inline VipsBandFormat cvips_format(const VipsImage *image) { return image->BandFmt; }
static inline VipsInterpretation cvips_interpretation(const VipsImage *image) { return image->Type; }

static inline void
cvips_unref(VipsImage *image)
{
	g_object_unref(image);
}

static inline void
cvips_free(void *memory)
{
	g_free(memory);
}

static inline void *
cvips__count_object(VipsObject *object, void *count, void *unused)
{
	(void) object;
	(void) unused;
	*(long *) count += 1;
	return NULL;
}

/* Every live VipsObject in the process: a leak shows up as growth across
 * a batch. */
static inline long
cvips_live_object_count(void)
{
	long count = 0;
	vips_object_map((VipsSListMap2Fn) cvips__count_object, &count, NULL);
	return count;
}

#endif
