// Image input specs (image.h has the grammar): pictures to the tensor a vision
// model wants, the way torchvision prepares them from PIL images, so that a
// model gets in C++ what it got in Python:
//   Resize(N) / Resize((H, W))  PIL's bilinear resampling with antialiasing
//                               (ImagingResample: separable passes, horizontal
//                               first, coefficients in 22-bit fixed point,
//                               each pass rounded and clamped to 8 bits)
//   CenterCrop                  offsets int(round((in - out) / 2.0)), Python's
//                               round: halves to even
//   ToTensor, Normalize         x / 255 in float32, then (x - mean) / std in float32
#include <sys/stat.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <memory>

#include "base/error.h"
#include "base/posix_fd.h"
#include "base/strings.h"
#include "core/inputs/image.h"
#include "core/inputs/input_values.h"
#include "format/byte_source.h"

namespace tsarchive {
namespace {

constexpr const char* kOptionsHint =
    "image options: resize=N|HxW crop=N|HxW normalize=imagenet|none mean=M[,M,M] std=S[,S,S] "
    "layout=nchw|nhwc|chw|hwc channels=rgb|bgr dtype=float32|uint8, e.g. @cat.jpg:resize=256:crop=224:normalize=imagenet";
constexpr int64_t kMaxElements = int64_t{1} << 31;  // as generated inputs (input_spec.cc)
constexpr size_t kMaxBatchFiles = 4096;
constexpr double kImagenetMean[3] = {0.485, 0.456, 0.406};
constexpr double kImagenetStd[3] = {0.229, 0.224, 0.225};

struct Size2 {
  int64_t height = 0, width = 0;
};

struct ImageInputOptions {
  std::optional<int64_t> resize_short;  // resize=N
  std::optional<Size2> resize;          // resize=HxW
  std::optional<Size2> crop;
  std::vector<double> mean, std;
  bool channels_last = false;
  bool batch_dim = true;
  bool bgr = false;
  bool uint8 = false;
};

[[noreturn]] void fail_option(const std::string& spec, const std::string& why) {
  throw_usage("bad image spec \"@" + spec.substr(0, 200) + "\": " + why, kOptionsHint);
}

// The options start at the first ':' followed by NAME= (letters); a path that
// names an existing file is taken whole.
size_t options_start(const std::string& text) {
  if (exists(text)) return std::string::npos;
  for (size_t colon = text.find(':'); colon != std::string::npos; colon = text.find(':', colon + 1)) {
    size_t i = colon + 1;
    while (i < text.size() && std::isalpha(static_cast<unsigned char>(text[i]))) ++i;
    if (i > colon + 1 && i < text.size() && text[i] == '=') return colon;
  }
  return std::string::npos;
}

std::vector<std::string> split(const std::string& text, char separator) {
  std::vector<std::string> parts;
  size_t begin = 0;
  while (true) {
    const size_t at = text.find(separator, begin);
    parts.push_back(text.substr(begin, at == std::string::npos ? std::string::npos : at - begin));
    if (at == std::string::npos) return parts;
    begin = at + 1;
  }
}

int64_t positive(const std::string& spec, const std::string& text, const std::string& option) {
  int64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() || value <= 0 || value > 16384) {
    fail_option(spec, option + ": \"" + text + "\" is not a size from 1 to 16384");
  }
  return value;
}

Size2 size2(const std::string& spec, const std::string& text, const std::string& option) {
  const size_t x = text.find('x');
  if (x == std::string::npos) {
    const int64_t n = positive(spec, text, option);
    return {n, n};
  }
  return {positive(spec, text.substr(0, x), option), positive(spec, text.substr(x + 1), option)};
}

std::vector<double> per_channel(const std::string& spec, const std::string& text, const std::string& option,
                                bool nonzero) {
  std::vector<double> values;
  for (const std::string& part : split(text, ',')) {
    double v = 0;
    const auto [end, ec] = std::from_chars(part.data(), part.data() + part.size(), v);
    if (part.empty() || ec != std::errc() || end != part.data() + part.size() || !std::isfinite(v) ||
        (nonzero && v == 0)) {
      fail_option(spec, option + ": \"" + part + "\" is not a " + (nonzero ? "non-zero " : "") + "number");
    }
    values.push_back(v);
  }
  if (values.size() == 1) values.assign(3, values[0]);
  if (values.size() != 3) fail_option(spec, option + " takes one value or three (R,G,B)");
  return values;
}

// Options shared with --save-outputs FILE.png: normalize, mean, std, layout,
// channels. Returns false for a name it does not know.
bool apply_common_option(const std::string& spec, const std::string& name, const std::string& value,
                         std::vector<double>& mean, std::vector<double>& std_dev, bool& channels_last, bool& batch_dim,
                         bool& bgr) {
  if (name == "normalize") {
    if (value == "imagenet") {
      mean.assign(std::begin(kImagenetMean), std::end(kImagenetMean));
      std_dev.assign(std::begin(kImagenetStd), std::end(kImagenetStd));
    } else if (value == "none") {
      mean.clear();
      std_dev.clear();
    } else {
      fail_option(spec, "normalize=" + value + ": give normalize=imagenet, normalize=none, or mean=... and std=...");
    }
  } else if (name == "mean") {
    mean = per_channel(spec, value, name, false);
  } else if (name == "std") {
    std_dev = per_channel(spec, value, name, true);
  } else if (name == "layout") {
    if (value != "nchw" && value != "nhwc" && value != "chw" && value != "hwc") {
      fail_option(spec, "layout=" + value + ": give nchw, nhwc, chw or hwc");
    }
    channels_last = value == "nhwc" || value == "hwc";
    batch_dim = value.size() == 4;
  } else if (name == "channels") {
    if (value != "rgb" && value != "bgr") fail_option(spec, "channels=" + value + ": give rgb or bgr");
    bgr = value == "bgr";
  } else {
    return false;
  }
  return true;
}

// mean= alone divides by 1, std= alone subtracts 0.
void complete_normalization(std::vector<double>& mean, std::vector<double>& std_dev) {
  if (mean.empty() != std_dev.empty()) {
    if (mean.empty()) mean.assign(3, 0.0);
    if (std_dev.empty()) std_dev.assign(3, 1.0);
  }
}

ImageInputOptions parse_options(const std::string& spec, const std::string& text) {
  ImageInputOptions o;
  for (const std::string& option : split(text, ':')) {
    const size_t eq = option.find('=');
    if (eq == std::string::npos) fail_option(spec, "\"" + option + "\" is not OPTION=VALUE");
    const std::string name = option.substr(0, eq), value = option.substr(eq + 1);
    if (name == "resize") {
      if (value.find('x') == std::string::npos) {
        o.resize_short = positive(spec, value, name);
        o.resize.reset();
      } else {
        o.resize = size2(spec, value, name);
        o.resize_short.reset();
      }
    } else if (name == "crop") {
      o.crop = size2(spec, value, name);
    } else if (name == "dtype") {
      if (value != "float32" && value != "float" && value != "uint8") {
        fail_option(spec, "dtype=" + value + ": images are float32 (values / 255) or uint8 (as decoded)");
      }
      o.uint8 = value == "uint8";
    } else if (!apply_common_option(spec, name, value, o.mean, o.std, o.channels_last, o.batch_dim, o.bgr)) {
      fail_option(spec, "unknown option \"" + name + "\"");
    }
  }
  complete_normalization(o.mean, o.std);
  if (o.uint8 && !o.mean.empty()) {
    fail_option(spec, "dtype=uint8 keeps the decoded values; normalizing needs dtype=float32");
  }
  return o;
}

// PIL's resampling (Pillow's libImaging/Resample.c) with its bilinear filter.
constexpr int kPrecisionBits = 32 - 8 - 2;

struct Coefficients {
  int64_t ksize = 0;
  std::vector<int64_t> bounds;  // per output: first input, count
  std::vector<int32_t> weights;  // per output: ksize fixed-point weights
};

Coefficients precompute(int64_t in_size, int64_t out_size) {
  const double scale = static_cast<double>(in_size) / static_cast<double>(out_size);
  const double filterscale = scale < 1.0 ? 1.0 : scale;
  const double support = 1.0 * filterscale;
  Coefficients c;
  c.ksize = static_cast<int64_t>(std::ceil(support)) * 2 + 1;
  c.bounds.resize(static_cast<size_t>(out_size) * 2);
  c.weights.assign(static_cast<size_t>(out_size * c.ksize), 0);
  std::vector<double> k(static_cast<size_t>(c.ksize));
  for (int64_t xx = 0; xx < out_size; ++xx) {
    const double center = (static_cast<double>(xx) + 0.5) * scale;
    const double ss = 1.0 / filterscale;
    int64_t xmin = static_cast<int64_t>(center - support + 0.5);
    if (xmin < 0) xmin = 0;
    int64_t xmax = static_cast<int64_t>(center + support + 0.5);
    if (xmax > in_size) xmax = in_size;
    xmax -= xmin;
    double ww = 0.0;
    for (int64_t x = 0; x < xmax; ++x) {
      double t = (static_cast<double>(x + xmin) - center + 0.5) * ss;
      if (t < 0.0) t = -t;
      const double w = t < 1.0 ? 1.0 - t : 0.0;
      k[static_cast<size_t>(x)] = w;
      ww += w;
    }
    for (int64_t x = 0; x < xmax; ++x) {
      double w = ww != 0.0 ? k[static_cast<size_t>(x)] / ww : k[static_cast<size_t>(x)];
      w *= static_cast<double>(1 << kPrecisionBits);
      c.weights[static_cast<size_t>(xx * c.ksize + x)] = static_cast<int32_t>(w < 0 ? -0.5 + w : 0.5 + w);
    }
    c.bounds[static_cast<size_t>(xx) * 2] = xmin;
    c.bounds[static_cast<size_t>(xx) * 2 + 1] = xmax;
  }
  return c;
}

uint8_t clip8(int64_t sum) {
  const int64_t v = sum >> kPrecisionBits;  // arithmetic shift, as Pillow's
  return static_cast<uint8_t>(v < 0 ? 0 : v > 255 ? 255 : v);
}

// One pass along rows (horizontal) or columns (vertical) of an RGB image.
Image resample_pass(const Image& in, int64_t out_size, bool horizontal) {
  const int64_t in_size = horizontal ? in.width : in.height;
  const Coefficients c = precompute(in_size, out_size);
  Image out;
  if (horizontal) {
    out.width = out_size;
    out.height = in.height;
  } else {
    out.width = in.width;
    out.height = out_size;
  }
  out.rgb.resize(static_cast<size_t>(out.width * out.height * 3));
  for (int64_t y = 0; y < out.height; ++y) {
    for (int64_t x = 0; x < out.width; ++x) {
      const int64_t o = horizontal ? x : y;
      const int64_t start = c.bounds[static_cast<size_t>(o) * 2], count = c.bounds[static_cast<size_t>(o) * 2 + 1];
      const int32_t* k = &c.weights[static_cast<size_t>(o * c.ksize)];
      for (int ch = 0; ch < 3; ++ch) {
        int64_t sum = int64_t{1} << (kPrecisionBits - 1);
        for (int64_t i = 0; i < count; ++i) {
          const int64_t sx = horizontal ? start + i : x;
          const int64_t sy = horizontal ? y : start + i;
          sum += int64_t{in.rgb[static_cast<size_t>((sy * in.width + sx) * 3 + ch)]} * k[i];
        }
        out.rgb[static_cast<size_t>((y * out.width + x) * 3 + ch)] = clip8(sum);
      }
    }
  }
  return out;
}

// Pillow resamples the rows the vertical pass reads, then the columns; the
// rows it skips are never read, so resampling all of them gives the same values.
Image resize(const Image& in, Size2 to) {
  Image image = in;
  if (to.width != image.width) image = resample_pass(image, to.width, true);
  if (to.height != image.height) image = resample_pass(image, to.height, false);
  return image;
}

// torchvision's _compute_resized_output_size for Resize(N).
Size2 shorter_side_size(Size2 image, int64_t n) {
  const bool portrait = image.width <= image.height;
  const int64_t shorter = portrait ? image.width : image.height, longer = portrait ? image.height : image.width;
  const auto new_long = static_cast<int64_t>(static_cast<double>(n * longer) / static_cast<double>(shorter));
  return portrait ? Size2{new_long, n} : Size2{n, new_long};
}

int64_t round_half_even(double v) { return static_cast<int64_t>(std::nearbyint(v)); }  // FE_TONEAREST by default

void check_crop(Size2 in, Size2 to, const std::string& file) {
  if (to.height > in.height || to.width > in.width) {
    throw_usage("crop=" + std::to_string(to.height) + "x" + std::to_string(to.width) + " is larger than the picture " +
                    file.substr(0, 200) + " (" + std::to_string(in.height) + "x" + std::to_string(in.width) +
                    " after resizing, HxW)",
                "give a smaller crop, or resize=N with N at least the crop");
  }
}

Image center_crop(const Image& in, Size2 to, const std::string& file) {
  check_crop(Size2{in.height, in.width}, to, file);
  const int64_t top = round_half_even(static_cast<double>(in.height - to.height) / 2.0);
  const int64_t left = round_half_even(static_cast<double>(in.width - to.width) / 2.0);
  Image out;
  out.width = to.width;
  out.height = to.height;
  out.rgb.resize(static_cast<size_t>(to.width * to.height * 3));
  for (int64_t y = 0; y < to.height; ++y) {
    const uint8_t* row = &in.rgb[static_cast<size_t>(((top + y) * in.width + left) * 3)];
    std::memcpy(&out.rgb[static_cast<size_t>(y * to.width * 3)], row, static_cast<size_t>(to.width * 3));
  }
  return out;
}

Image prepare(Image image, const ImageInputOptions& o, const std::string& file) {
  if (o.resize_short) image = resize(image, shorter_side_size(Size2{image.height, image.width}, *o.resize_short));
  if (o.resize) image = resize(image, *o.resize);
  if (o.crop) image = center_crop(image, *o.crop, file);
  return image;
}

// The size `prepare` makes of a picture of `size`, computed the same way,
// before any pixel is decoded.
Size2 prepared_size(Size2 size, const ImageInputOptions& o, const std::string& file) {
  if (o.resize_short) size = shorter_side_size(size, *o.resize_short);
  if (o.resize) size = *o.resize;
  if (o.crop) {
    check_crop(size, *o.crop, file);
    size = *o.crop;
  }
  return size;
}

void check_batch_elements(int64_t elements) {
  if (elements > kMaxElements) {
    throw_usage("the pictures make a tensor of " + std::to_string(elements) + " elements, more than 2^31",
                "give fewer pictures or resize them, e.g. :resize=224x224");
  }
}

[[noreturn]] void batch_sizes_differ(const std::string& first_file, Size2 first, const std::string& file, Size2 size) {
  throw_usage("pictures of one batch differ in size: " + first_file + " is " + std::to_string(first.width) + "x" +
                  std::to_string(first.height) + ", " + file + " is " + std::to_string(size.width) + "x" +
                  std::to_string(size.height) + " (WxH, after resize and crop)",
              "give :resize=HxW or :resize=N:crop=N so that they match");
}

std::vector<std::string> folder_images(const std::string& folder) {
  std::vector<std::string> files;
  std::error_code ec;
  for (std::filesystem::directory_iterator it(folder, ec), end; !ec && it != end; it.increment(ec)) {
    std::string ext = it->path().extension().string();
    std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return std::tolower(c); });
    if (ext == ".png" || ext == ".jpg" || ext == ".jpeg" || ext == ".bmp") files.push_back(it->path().string());
    if (files.size() > kMaxBatchFiles) break;
  }
  if (ec) throw_io("cannot list the folder: " + ec.message(), folder, "@FOLDER names a folder of pictures");
  if (files.empty()) throw_bad_input("the folder holds no .png, .jpg, .jpeg or .bmp file", folder, "give a folder of pictures");
  std::sort(files.begin(), files.end());
  return files;
}

std::string read_picture_file(const std::string& path, const ImageLimits& limits) {
  std::unique_ptr<ByteSource> source;
  try {
    source = open_file_source(path);
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::Io) throw;
    throw Error(ErrorKind::Io, std::string("cannot read picture: ") + e.what(), path,
                "@FILE names a PNG, JPEG or BMP picture, a folder of them, or files joined by ','");
  }
  if (source->size() > limits.max_file_bytes) {
    throw_bad_input("picture file of " + std::to_string(source->size()) + " bytes, more than the " +
                        std::to_string(limits.max_file_bytes >> 20) + " MiB limit",
                    path, "give a smaller picture");
  }
  return source->read_string(0, static_cast<size_t>(source->size()));
}

bool file_is_picture(const std::string& path) {
  std::unique_ptr<ByteSource> source;
  try {
    source = open_file_source(path);
  } catch (const Error&) {
    return false;  // the caller's reader says why
  }
  char head[8] = {};
  const size_t n = source->size() < sizeof head ? static_cast<size_t>(source->size()) : sizeof head;
  source->read_at(0, head, n);
  return image_format(std::string_view(head, n)) != nullptr;
}

HostTensor to_tensor(const std::vector<Image>& images, const ImageInputOptions& o) {
  const int64_t n = static_cast<int64_t>(images.size()), h = images[0].height, w = images[0].width;
  HostTensor t;
  t.dtype = o.uint8 ? "uint8" : "float32";
  if (o.batch_dim) t.shape.push_back(n);
  if (o.channels_last) {
    t.shape.insert(t.shape.end(), {h, w, 3});
  } else {
    t.shape.insert(t.shape.end(), {3, h, w});
  }
  t.stride.assign(t.shape.size(), 1);
  for (size_t i = t.shape.size() - 1; i > 0; --i) t.stride[i - 1] = t.stride[i] * t.shape[i];
  const int64_t elements = n * h * w * 3;
  check_batch_elements(elements);
  const size_t element_size = o.uint8 ? 1 : 4;
  auto bytes = std::make_shared<std::string>(static_cast<size_t>(elements) * element_size, '\0');
  float mean[3] = {0, 0, 0}, std_dev[3] = {1, 1, 1};
  for (int c = 0; c < 3 && !o.mean.empty(); ++c) {
    mean[c] = static_cast<float>(o.mean[static_cast<size_t>(c)]);  // as torch.as_tensor(mean, dtype=float32)
    std_dev[c] = static_cast<float>(o.std[static_cast<size_t>(c)]);
  }
  for (int64_t i = 0; i < n; ++i) {
    const std::vector<uint8_t>& rgb = images[static_cast<size_t>(i)].rgb;
    for (int64_t y = 0; y < h; ++y) {
      for (int64_t x = 0; x < w; ++x) {
        for (int64_t c = 0; c < 3; ++c) {
          const int64_t source_channel = o.bgr ? 2 - c : c;
          const uint8_t v = rgb[static_cast<size_t>((y * w + x) * 3 + source_channel)];
          const int64_t at = o.channels_last ? ((i * h + y) * w + x) * 3 + c : ((i * 3 + c) * h + y) * w + x;
          if (o.uint8) {
            (*bytes)[static_cast<size_t>(at)] = static_cast<char>(v);
          } else {
            float f = static_cast<float>(v) / 255.0f;
            if (!o.mean.empty()) f = (f - mean[o.bgr ? 2 - c : c]) / std_dev[o.bgr ? 2 - c : c];
            std::memcpy(&(*bytes)[static_cast<size_t>(at) * 4], &f, 4);
          }
        }
      }
    }
  }
  t.bytes = std::move(bytes);
  return t;
}

}  // namespace

std::optional<HostTensor> read_image_argument(const std::string& text, const ImageLimits& limits, InputBudget* budget) {
  const size_t colon = options_start(text);
  const std::string path = text.substr(0, colon);
  const bool has_options = colon != std::string::npos;
  std::vector<std::string> files;
  if (is_directory(path)) {
    files = folder_images(path);
  } else if (!exists(path) && path.find(',') != std::string::npos) {
    files = split(path, ',');
    if (files.size() > kMaxBatchFiles) throw_usage("more than " + std::to_string(kMaxBatchFiles) + " pictures in one batch");
  } else if (file_is_picture(path)) {
    files = {path};
  } else if (has_options && !exists(path)) {
    throw_io("cannot read picture: no such file", path,
             "@FILE names a PNG, JPEG or BMP picture, a folder of them, or files joined by ','");
  } else if (has_options) {
    throw_usage("\"@" + text.substr(0, 200) + "\": options after ':' apply to pictures (PNG, JPEG, BMP) only, and " +
                    path.substr(0, 200) + " is not one",
                "a .npy or .pt input takes no options: @x.npy");
  } else {
    return std::nullopt;  // a .npy or torch.save file, or a missing one: input_spec.cc says which
  }
  const ImageInputOptions options = has_options ? parse_options(text, text.substr(colon + 1)) : ImageInputOptions{};
  if (!options.batch_dim && files.size() > 1) {
    throw_usage("layout=chw and layout=hwc hold one picture; " + std::to_string(files.size()) + " were given",
                "use layout=nchw or layout=nhwc for a batch");
  }
  // Every header first, then the pixels: the batch's sizes and its tensor's
  // elements are known from the headers alone, so a batch over the budget is
  // refused before any picture is decoded (decoding first held 16 pictures of
  // 8192x8192, 3.3 GB, before the count was checked). Each file is read twice
  // rather than all kept.
  Size2 size;
  int64_t elements = 0;
  for (size_t i = 0; i < files.size(); ++i) {
    const std::string& file = files[i];
    if (file.empty()) throw_usage("\"@" + text.substr(0, 200) + "\" has an empty file name between ','");
    const ImageSize header = read_image_size(read_picture_file(file, limits), file, limits);
    const Size2 prepared = prepared_size(Size2{header.height, header.width}, options, file);
    if (i > 0 && (prepared.height != size.height || prepared.width != size.width)) {
      batch_sizes_differ(files.front(), size, file, prepared);
    }
    size = prepared;
    elements += size.height * size.width * 3;
    check_batch_elements(elements);
  }
  if (budget != nullptr) {
    budget->take(static_cast<uint64_t>(elements) * (options.uint8 ? 1 : 4),
                 files.size() == 1 ? "the picture's tensor" : "the pictures' tensor", files.front());
  }
  std::vector<Image> images;
  for (const std::string& file : files) {
    images.push_back(prepare(decode_image(read_picture_file(file, limits), file, limits), options, file));
    if (images.back().height != size.height || images.back().width != size.width) {  // changed since its header was read
      batch_sizes_differ(files.front(), size, file, Size2{images.back().height, images.back().width});
    }
  }
  return to_tensor(images, options);
}

// --save-outputs FILE.png[:OPTIONS] -------------------------------------------

bool is_image_output(const std::string& text) {
  const size_t colon = options_start(text);
  std::string path = text.substr(0, colon);
  std::transform(path.begin(), path.end(), path.begin(), [](unsigned char c) { return std::tolower(c); });
  return ends_with(path, ".png");
}

ImageOutputSpec parse_image_output(const std::string& text) {
  ImageOutputSpec spec;
  const size_t colon = options_start(text);
  spec.path = text.substr(0, colon);
  if (colon == std::string::npos) return spec;
  bool batch_dim = true;
  for (const std::string& option : split(text.substr(colon + 1), ':')) {
    const size_t eq = option.find('=');
    const std::string name = option.substr(0, eq), value = eq == std::string::npos ? "" : option.substr(eq + 1);
    if (eq == std::string::npos ||
        !apply_common_option(text, name, value, spec.mean, spec.std, spec.channels_last, batch_dim, spec.bgr)) {
      throw_usage("bad --save-outputs \"" + text.substr(0, 200) + "\": unknown option \"" + option + "\"",
                  "a PNG output takes normalize=imagenet|none, mean=M[,M,M], std=S[,S,S], layout=nchw|nhwc|chw|hwc, "
                  "channels=rgb|bgr: the options its input was prepared with");
    }
  }
  complete_normalization(spec.mean, spec.std);
  return spec;
}

}  // namespace tsarchive
