// PNG and BMP through stb_image (Debian's libstb-dev; ARCHITECTURE.md says
// why), compiled here with only those two decoders, from memory, and
// with every allocation it makes bounded by what the header's dimensions need:
// the header is read first (stbi_info_from_memory) and checked against
// ImageLimits, so a decompression bomb (a small PNG whose IDAT inflates past
// its own rows) fails on its first allocation over the cap instead of
// allocating gigabytes.
#include <csetjmp>
#include <cstdio>  // jpeglib.h needs FILE
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>

#include <jpeglib.h>
#include <jerror.h>
#include <zlib.h>

#include "base/error.h"
#include "core/inputs/image.h"

namespace tsarchive {
namespace {

// The largest single allocation stb may make while decoding the current
// picture (per thread: decoding runs on the caller's thread).
thread_local size_t allocation_cap = 0;

void* capped_malloc(size_t size) { return size > allocation_cap ? nullptr : std::malloc(size); }
void* capped_realloc(void* p, size_t size) { return size > allocation_cap ? nullptr : std::realloc(p, size); }

}  // namespace
}  // namespace tsarchive

#define STBI_MALLOC(size) tsarchive::capped_malloc(size)
#define STBI_REALLOC(p, size) tsarchive::capped_realloc(p, size)
#define STBI_FREE(p) std::free(p)
#define STB_IMAGE_STATIC
#define STB_IMAGE_IMPLEMENTATION
#define STBI_ONLY_PNG
#define STBI_ONLY_BMP
#define STBI_NO_STDIO
#define STBI_NO_LINEAR
#define STBI_NO_HDR
#define STBI_MAX_DIMENSIONS (1 << 24)  // stb's default; ImageLimits is checked first
#include <stb/stb_image.h>

#define STB_IMAGE_WRITE_STATIC
#define STB_IMAGE_WRITE_IMPLEMENTATION
#define STBI_WRITE_NO_STDIO
#include <stb/stb_image_write.h>

namespace tsarchive {
namespace {

constexpr const char* kFormatsHint = "give a PNG, JPEG or BMP picture";

void append_bytes(void* context, void* data, int size) {
  static_cast<std::string*>(context)->append(static_cast<const char*>(data), static_cast<size_t>(size));
}

std::string dimensions(int64_t width, int64_t height) { return std::to_string(width) + "x" + std::to_string(height); }

void check_limits(const char* format, int64_t width, int64_t height, const std::string& file, const ImageLimits& limits) {
  if (width > limits.max_side || height > limits.max_side || width * height > limits.max_pixels) {
    throw_bad_input(std::string(format) + " of " + dimensions(width, height) + " pixels, over the limit of " +
                        std::to_string(limits.max_side) + " per side and " + std::to_string(limits.max_pixels >> 20) +
                        " Mpixel",
                    file, "scale the picture down first");
  }
}

// JPEG through libjpeg-turbo, the decoder PIL uses, with PIL's settings
// (libjpeg's defaults: ISLOW inverse DCT, fancy upsampling), so that JPEG
// pixels are PIL's to the bit. libjpeg reports errors by longjmp: nothing with
// a destructor lives in the frames it jumps over (this function's C++ objects
// are the caller's, reached through `out` and `problem`).
struct JpegErrors {
  jpeg_error_mgr manager;
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
};

void jpeg_fail(j_common_ptr info) {
  auto* errors = reinterpret_cast<JpegErrors*>(info->err);
  (*info->err->format_message)(info, errors->message);
  std::longjmp(errors->jump, 1);
}

// Warnings about corrupt data are ignored, as PIL ignores them, except a file
// that ends before its picture does: libjpeg would fill the rest with grey,
// PIL refuses it ("image file is truncated").
void jpeg_warning(j_common_ptr info, int level) {
  if (level == -1 && info->err->msg_code == JWRN_JPEG_EOF) {
    std::snprintf(reinterpret_cast<JpegErrors*>(info->err)->message, JMSG_LENGTH_MAX,
                  "the file ends before the picture does: truncated");
    std::longjmp(reinterpret_cast<JpegErrors*>(info->err)->jump, 4);
  }
}

// A progressive JPEG may hold any number of scans, each a pass over every
// coefficient: libjpeg-turbo's advice against that CPU bomb is a scan limit.
constexpr int kMaxJpegScans = 500;

void jpeg_count_scans(j_common_ptr info) {
  auto* d = reinterpret_cast<j_decompress_ptr>(info);
  if (d->input_scan_number > kMaxJpegScans) {
    std::snprintf(reinterpret_cast<JpegErrors*>(info->err)->message, JMSG_LENGTH_MAX,
                  "more than %d progressive scans", kMaxJpegScans);
    std::longjmp(reinterpret_cast<JpegErrors*>(info->err)->jump, 2);
  }
}

// Fills `out` and returns true, or returns false with `problem` saying why
// (`over_limits`: the size the header gives, in out.width/height, is over `limits`).
// `header_only`: stop after the header, with out.width/height set and no pixel.
bool decode_jpeg(std::string_view bytes, const ImageLimits& limits, Image& out, std::string& problem,
                 bool& over_limits, bool header_only = false) {
  jpeg_decompress_struct info;
  JpegErrors errors;
  jpeg_progress_mgr progress;
  info.err = jpeg_std_error(&errors.manager);
  errors.manager.error_exit = jpeg_fail;
  errors.manager.emit_message = jpeg_warning;
  errors.message[0] = '\0';
  progress.progress_monitor = jpeg_count_scans;
  if (setjmp(errors.jump) != 0) {
    problem = errors.message;
    jpeg_destroy_decompress(&info);
    return false;
  }
  jpeg_create_decompress(&info);
  info.progress = &progress;
  jpeg_mem_src(&info, reinterpret_cast<const unsigned char*>(bytes.data()), static_cast<unsigned long>(bytes.size()));
  jpeg_read_header(&info, TRUE);
  out.width = info.image_width;
  out.height = info.image_height;
  if (out.width <= 0 || out.height <= 0 || out.width > limits.max_side || out.height > limits.max_side ||
      out.width * out.height > limits.max_pixels) {
    over_limits = true;
    jpeg_destroy_decompress(&info);
    return false;
  }
  if (header_only) {
    jpeg_destroy_decompress(&info);
    return true;
  }
  if (info.jpeg_color_space == JCS_CMYK || info.jpeg_color_space == JCS_YCCK) {
    std::snprintf(errors.message, JMSG_LENGTH_MAX, "CMYK pictures are not supported");
    std::longjmp(errors.jump, 3);
  }
  info.out_color_space = JCS_RGB;  // grey is repeated, as PIL's convert("RGB")
  jpeg_start_decompress(&info);
  if (info.output_components != 3) {
    std::snprintf(errors.message, JMSG_LENGTH_MAX, "%d components after conversion to RGB", info.output_components);
    std::longjmp(errors.jump, 3);
  }
  out.rgb.resize(static_cast<size_t>(out.width * out.height * 3));
  while (info.output_scanline < info.output_height) {
    JSAMPROW row = out.rgb.data() + static_cast<size_t>(info.output_scanline) * static_cast<size_t>(out.width) * 3;
    jpeg_read_scanlines(&info, &row, 1);
  }
  jpeg_finish_decompress(&info);
  jpeg_destroy_decompress(&info);
  return true;
}

// Calls `chunk(at, length, type)` for each chunk of a PNG's chunk list, in
// order (`at`: where its length field starts), while the chunks fit in the file.
template <class F>
void for_each_png_chunk(std::string_view png, F&& chunk) {
  const auto be32 = [&](size_t at) {
    const auto* b = reinterpret_cast<const unsigned char*>(png.data() + at);
    return uint64_t{b[0]} << 24 | uint64_t{b[1]} << 16 | uint64_t{b[2]} << 8 | uint64_t{b[3]};
  };
  size_t at = 8;
  while (at + 12 <= png.size()) {
    const uint64_t length = be32(at);
    if (length > png.size() - at - 12) break;
    chunk(at, static_cast<size_t>(length), png.substr(at + 4, 4));
    at += 12 + static_cast<size_t>(length);
  }
}

// stb_image hands a zero-length IDAT chunk to memcpy with a null destination
// (its buffer is not allocated yet): harmless in practice but undefined, and
// fatal under UBSan. Such a chunk holds no data, so the copy without it is
// the same picture. Returns nothing when there is none to drop (or the chunk
// list is malformed: stb reports that itself).
std::optional<std::string> without_empty_idat(std::string_view png) {
  std::string kept;
  bool dropped = false;
  size_t copied = 0;
  for_each_png_chunk(png, [&](size_t at, size_t length, std::string_view type) {
    if (length != 0 || type != "IDAT") return;
    kept.append(png.substr(copied, at - copied));
    copied = at + 12;
    dropped = true;
  });
  if (!dropped) return std::nullopt;
  kept.append(png.substr(copied));
  return kept;
}

// stb_image inflates a PNG's IDAT data without reading the zlib stream's
// Adler-32 trailer, so a stream whose data or trailer was changed decoded as
// if whole. zlib checks it: the IDAT data is inflated again here, into a small
// buffer that is overwritten (no allocation beyond zlib's 40 KiB of state), to
// its end. Returns what zlib found wrong, or nothing.
std::optional<std::string> png_stream_problem(std::string_view png) {
  z_stream z{};
  if (inflateInit(&z) != Z_OK) return std::string("zlib could not start");
  unsigned char out[1 << 16];
  int status = Z_OK;
  for_each_png_chunk(png, [&](size_t at, size_t length, std::string_view type) {
    if (type != "IDAT" || status != Z_OK) return;
    z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(png.data() + at + 8));
    z.avail_in = static_cast<uInt>(length);
    while (status == Z_OK && z.avail_in > 0) {
      z.next_out = out;
      z.avail_out = sizeof out;
      status = inflate(&z, Z_NO_FLUSH);
      if (status == Z_BUF_ERROR) status = Z_OK;  // no progress possible: wants the next chunk
    }
  });
  std::optional<std::string> problem;
  if (status == Z_OK) {
    problem = "its compressed data ends before its zlib stream does";
  } else if (status != Z_STREAM_END) {
    problem = "zlib: " + (z.msg != nullptr ? std::string(z.msg) : "error " + std::to_string(status));
  }
  inflateEnd(&z);
  return problem;
}

}  // namespace

const char* image_format(std::string_view head) {
  if (head.substr(0, 8) == std::string_view("\x89PNG\r\n\x1a\n", 8)) return "PNG";
  if (head.substr(0, 3) == std::string_view("\xff\xd8\xff", 3)) return "JPEG";
  if (head.substr(0, 2) == "BM") return "BMP";
  return nullptr;
}

namespace {

// What every reader checks first: a known format, the file's size and, for a
// PNG, the IHDR's dimensions (stb refuses PNG headers over 2^30 bytes of
// pixels without saying so: checked here, for the message).
const char* checked_format(std::string_view bytes, const std::string& file, const ImageLimits& limits) {
  const char* format = image_format(bytes);
  if (format == nullptr) throw_bad_input("not a PNG, JPEG or BMP picture", file, kFormatsHint);
  if (bytes.size() > limits.max_file_bytes || bytes.size() > static_cast<size_t>(INT32_MAX)) {
    throw_bad_input(std::string(format) + " file of " + std::to_string(bytes.size()) + " bytes, more than the " +
                        std::to_string(limits.max_file_bytes >> 20) + " MiB limit for pictures",
                    file, "give a smaller picture");
  }
  if (std::string_view(format) == "PNG" && bytes.size() >= 24 && bytes.substr(12, 4) == "IHDR") {
    const auto be32 = [&](size_t at) {
      const auto* b = reinterpret_cast<const unsigned char*>(bytes.data() + at);
      return int64_t{b[0]} << 24 | int64_t{b[1]} << 16 | int64_t{b[2]} << 8 | int64_t{b[3]};
    };
    check_limits(format, be32(16), be32(20), file, limits);
  }
  return format;
}

// A JPEG's size from its header, checked against `limits`.
ImageSize jpeg_size(std::string_view bytes, const std::string& file, const ImageLimits& limits) {
  Image header;
  std::string problem;
  bool over_limits = false;
  if (!decode_jpeg(bytes, limits, header, problem, over_limits, true)) {
    if (over_limits) check_limits("JPEG", header.width, header.height, file, limits);
    throw_bad_input("damaged or unsupported JPEG picture (" + problem + ")", file, kFormatsHint);
  }
  return {header.width, header.height};
}

// A PNG's or BMP's size from its header (stbi_info_from_memory), checked against `limits`.
ImageSize stb_size(const char* format, std::string_view bytes, const std::string& file, const ImageLimits& limits) {
  int width = 0, height = 0, channels = 0;
  allocation_cap = size_t{1} << 20;  // the readers' small state
  const int header_ok = stbi_info_from_memory(reinterpret_cast<const stbi_uc*>(bytes.data()),
                                              static_cast<int>(bytes.size()), &width, &height, &channels);
  allocation_cap = 0;
  // A BMP whose rows run top-down says so with a negative height (stb_image
  // gives the header's value here and the pixels upright).
  const int64_t rows = format == std::string_view("BMP") && height < 0 ? -int64_t{height} : int64_t{height};
  if (header_ok == 0 || width <= 0 || rows <= 0) {
    throw_bad_input(std::string("damaged or unsupported ") + format + " header", file, kFormatsHint);
  }
  check_limits(format, width, rows, file, limits);
  return {width, rows};
}

}  // namespace

ImageSize read_image_size(std::string_view bytes, const std::string& file, const ImageLimits& limits) {
  const char* format = checked_format(bytes, file, limits);
  if (std::string_view(format) == "JPEG") return jpeg_size(bytes, file, limits);
  return stb_size(format, bytes, file, limits);
}

Image decode_image(std::string_view bytes, const std::string& file, const ImageLimits& limits) {
  const char* format = checked_format(bytes, file, limits);
  if (std::string_view(format) == "JPEG") {
    Image image;
    std::string problem;
    bool over_limits = false;
    if (!decode_jpeg(bytes, limits, image, problem, over_limits)) {
      if (over_limits) check_limits(format, image.width, image.height, file, limits);
      throw_bad_input("damaged or unsupported JPEG picture (" + problem + ")", file, kFormatsHint);
    }
    return image;
  }
  std::optional<std::string> cleaned;
  if (std::string_view(format) == "PNG") cleaned = without_empty_idat(bytes);
  const std::string_view given = cleaned ? std::string_view(*cleaned) : bytes;
  const auto* data = reinterpret_cast<const stbi_uc*>(given.data());
  const int length = static_cast<int>(given.size());
  const ImageSize header = stb_size(format, given, file, limits);
  const int width = static_cast<int>(header.width), height = static_cast<int>(header.height);
  // The largest buffer a legitimate decode of this header needs: 16-bit RGBA
  // rows with their PNG filter bytes (8 bytes a pixel + 1 a row), plus slack
  // for the decoders' small tables.
  allocation_cap = static_cast<size_t>(height) * (static_cast<size_t>(width) * 8 + 1) + (size_t{1} << 20);
  int w = 0, h = 0, in_channels = 0;
  stbi__g_failure_reason = nullptr;  // a reason left from an earlier picture is not this one's
  stbi_uc* pixels = stbi_load_from_memory(data, length, &w, &h, &in_channels, 3);
  allocation_cap = 0;
  if (pixels == nullptr) {
    // Some of stb's failure paths set no reason; an unknown chunk's is its
    // type's four bytes, which may begin with a NUL.
    const char* said = stbi_failure_reason();
    const std::string reason = said != nullptr && said[0] != '\0' ? said : "the decoder gave no reason";
    throw_bad_input(std::string("damaged ") + format + " picture (" +
                        (reason == "outofmem" ? "its data needs more memory than " + dimensions(width, height) +
                                                    " pixels do: a decompression bomb?"
                                              : reason) +
                        ")",
                    file, kFormatsHint);
  }
  Image image;
  image.width = w;
  image.height = h;
  try {
    image.rgb.assign(pixels, pixels + static_cast<size_t>(w) * static_cast<size_t>(h) * 3);
  } catch (...) {
    stbi_image_free(pixels);
    throw;
  }
  stbi_image_free(pixels);
  if (w != width || h != height) {
    throw_bad_input(std::string(format) + " header says " + dimensions(width, height) + " but decodes to " +
                        dimensions(w, h),
                    file, kFormatsHint);
  }
  if (std::string_view(format) == "PNG") {
    if (const std::optional<std::string> problem = png_stream_problem(given)) {
      throw_bad_input("damaged PNG picture (" + *problem + ")", file, kFormatsHint);
    }
  }
  return image;
}

std::string encode_png(const std::vector<uint8_t>& pixels, int64_t width, int64_t height, int channels) {
  if (width <= 0 || height <= 0 || width > INT32_MAX / 4 || height > INT32_MAX ||
      pixels.size() != static_cast<size_t>(width * height * channels)) {
    throw Error(ErrorKind::Internal, "encode_png: " + dimensions(width, height) + "x" + std::to_string(channels) +
                                         " does not match " + std::to_string(pixels.size()) + " bytes");
  }
  std::string png;
  const int ok = stbi_write_png_to_func(append_bytes, &png, static_cast<int>(width), static_cast<int>(height), channels,
                                        pixels.data(), static_cast<int>(width) * channels);
  if (ok == 0) throw Error(ErrorKind::Internal, "the PNG writer failed on a " + dimensions(width, height) + " picture");
  return png;
}

}  // namespace tsarchive
