// Pictures in and out of `run`, with no libtorch: PNG, JPEG and BMP files
// decoded into 8-bit RGB (stb_image and libjpeg-turbo, in image_codec.cc), turned into input
// tensors by the options of an image spec (image_input.cc), and output tensors
// written back as PNG files or read as a classifier's top-k (image_output.cc).
//
// Image input specs (one --input each; the same in run, trace and convert):
//   @PATH[:OPTION=VALUE]...
//     PATH     a PNG, JPEG or BMP file; a folder (every .png .jpg .jpeg .bmp in
//              it, by name: one batch); or files joined by ',' (one batch).
//              A PATH that names an existing file is taken whole.
//     resize=N      shorter side to N, aspect kept (torchvision Resize(N))
//     resize=HxW    exactly H x W (torchvision Resize((H, W)))
//              (PIL's bilinear filter with antialiasing, as torchvision on PIL images)
//     crop=N | crop=HxW   centre crop (torchvision CenterCrop)
//     normalize=imagenet | normalize=none
//     mean=M[,M,M] std=S[,S,S]   (x - mean) / std per channel, x in [0, 1]
//     layout=nchw (default) | nhwc | chw | hwc (the last two: one image)
//     channels=rgb (default) | bgr
//     dtype=float32 (default: values / 255) | uint8 (0..255 as decoded)
// Default: float32 [1, 3, H, W] with values in [0, 1] (torchvision ToTensor).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "contract/host_value.h"

namespace tsarchive {

// Refused before any pixel is allocated (the header's dimensions are read
// first): a picture bomb (a few hundred bytes claiming 100000 x 100000
// pixels) costs nothing. 64 Mpixel is above any camera picture one would feed
// a model, and its float32 tensor (768 MiB) still fits a worker's memory.
struct ImageLimits {
  uint64_t max_file_bytes = uint64_t{256} << 20;
  int64_t max_side = 16384;
  int64_t max_pixels = int64_t{64} << 20;
};

// Decoded pixels, 8 bits per channel, rows top to bottom, channels
// interleaved: RGB (alpha dropped, grey repeated, as PIL's convert("RGB")).
struct Image {
  int64_t width = 0;
  int64_t height = 0;
  std::vector<uint8_t> rgb;  // height * width * 3
};

// "PNG", "JPEG", "BMP" by the file's first bytes; nullptr for anything else.
const char* image_format(std::string_view head);

// Decodes a PNG, JPEG or BMP file's bytes. Error(BadInput) naming `file` for
// anything not one of those, damaged, or over `limits`.
Image decode_image(std::string_view bytes, const std::string& file, const ImageLimits& limits = {});

// The size a PNG, JPEG or BMP file's header declares, checked like
// decode_image's (format, file size, ImageLimits), without decoding a pixel:
// a batch is budgeted by its pictures' headers before any of them is decoded.
struct ImageSize {
  int64_t width = 0;
  int64_t height = 0;
};
ImageSize read_image_size(std::string_view bytes, const std::string& file, const ImageLimits& limits = {});

// A PNG file of 8-bit pixels, `channels` (1 grey, 3 RGB, 4 RGBA) interleaved.
std::string encode_png(const std::vector<uint8_t>& pixels, int64_t width, int64_t height, int channels);

// What follows @ in an --input argument, when it is an image spec: the
// tensor of the picture(s). std::nullopt when it is not (a .npy or .pt file:
// the caller reads it). Error(Usage) for bad options, Error(Io) for files that
// cannot be read, Error(BadInput) for pictures that cannot be decoded, or
// whose tensor, sized from their headers, passes `budget` (when given).
class InputBudget;
std::optional<HostTensor> read_image_argument(const std::string& text, const ImageLimits& limits = {},
                                              InputBudget* budget = nullptr);

// --save-outputs FILE.png[:OPTION=VALUE]...: the options that undo an input's
// preprocessing (normalize, mean, std, channels, layout).
struct ImageOutputSpec {
  std::string path;
  std::vector<double> mean, std;  // empty: none
  bool bgr = false;
  bool channels_last = false;     // layout=nhwc|hwc
};

// True when the argument names a .png file (options allowed after it).
bool is_image_output(const std::string& text);
ImageOutputSpec parse_image_output(const std::string& text);

// The PNG of an output tensor shaped [1, C, H, W] or [C, H, W] (C = 1, 3 or
// 4; [.., H, W, C] with layout=nhwc): mean/std undone, floating values times
// 255, rounded and clamped to 0..255; uint8 as is. Error(BadInput) saying why
// for any other tensor.
std::string output_tensor_png(const HostTensor& tensor, const ImageOutputSpec& spec);

// A classifier's top k: the largest scores of an output shaped [1, N] or [N],
// with their softmax probabilities over all N.
struct TopClass {
  int64_t index = 0;
  double score = 0;
  double probability = 0;
  std::string label;  // empty without labels
};
std::vector<TopClass> top_classes(const HostTensor& scores, int64_t k, const std::vector<std::string>& labels);

// Labels from a file's text: a JSON list of names, an object with a "classes"
// or "labels" list, or an object index -> name (or -> [id, name], as
// imagenet_class_index.json); else one label per line. Error(BadInput) naming
// `file` when none is found.
std::vector<std::string> parse_labels(std::string_view text, const std::string& file);

}  // namespace tsarchive
