// Outputs as pictures (--save-outputs FILE.png) and as a classifier's top k
// (--top K --labels ...): read from the serialized outputs the torch layer
// returns, in the core.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include <nlohmann/json.hpp>

#include "base/bounded_json.h"
#include "base/error.h"
#include "base/strings.h"
#include "core/inputs/image.h"
#include "core/compare/tensor_values.h"

namespace tsarchive {
namespace {

// Element `index` (flattened in C order over the shape) of a real tensor, as a double.
class RealElements {
 public:
  RealElements(const HostTensor& t, const std::string& what) : t_(t) {
    if (t.dtype == "float32") {
      size_ = 4;
    } else if (t.dtype == "float64") {
      size_ = 8;
    } else if (t.dtype == "float16" || t.dtype == "bfloat16") {
      size_ = 2;
    } else if (t.dtype == "uint8") {
      size_ = 1;
    } else {
      throw_bad_input(what + " is a " + t.dtype + " tensor", {},
                      "pictures and scores are read from float32, float64, float16, bfloat16 or uint8 outputs");
    }
    if (!t.bytes || t.stride.size() != t.shape.size()) throw_bad_input(what + " has no data");
    // Every element must lie inside the bytes (a .npy from the torch layer always does).
    int64_t last = t.offset;
    for (size_t i = 0; i < t.shape.size(); ++i) {
      if (t.shape[i] == 0) return;
      if (t.stride[i] < 0) throw_bad_input(what + " has negative strides");
      last += (t.shape[i] - 1) * t.stride[i];
    }
    if (t.offset < 0 || static_cast<uint64_t>(last + 1) * size_ > t.bytes->size()) throw_bad_input(what + " is truncated");
  }

  double at(const std::vector<int64_t>& index) const {
    int64_t element = t_.offset;
    for (size_t i = 0; i < index.size(); ++i) element += index[i] * t_.stride[i];
    const char* p = t_.bytes->data() + element * static_cast<int64_t>(size_);
    if (t_.dtype == "uint8") return static_cast<uint8_t>(*p);
    if (size_ == 4) {
      float f;
      std::memcpy(&f, p, 4);
      return f;
    }
    if (size_ == 8) {
      double d;
      std::memcpy(&d, p, 8);
      return d;
    }
    uint16_t bits;
    std::memcpy(&bits, p, 2);
    return t_.dtype == "float16" ? half_to_double(bits) : bfloat16_to_double(bits);
  }

 private:
  const HostTensor& t_;
  size_t size_ = 0;
};

}  // namespace

std::string output_tensor_png(const HostTensor& tensor, const ImageOutputSpec& spec) {
  std::vector<int64_t> shape = tensor.shape;
  const std::string what = "the output " + shape_text(shape);
  const char* hint = "a picture is an output shaped [1, C, H, W] or [C, H, W] with C = 1, 3 or 4 "
                     "(:layout=nhwc for [1, H, W, C])";
  const bool batched = shape.size() == 4;
  if ((shape.size() != 3 && !batched) || (batched && shape[0] != 1)) {
    throw_bad_input(what + " is not one picture", spec.path, hint);
  }
  const size_t first = batched ? 1 : 0;
  const int64_t channels = spec.channels_last ? shape[first + 2] : shape[first];
  const int64_t height = spec.channels_last ? shape[first] : shape[first + 1];
  const int64_t width = spec.channels_last ? shape[first + 1] : shape[first + 2];
  if (channels != 1 && channels != 3 && channels != 4) {
    throw_bad_input(what + " has " + std::to_string(channels) + " channels", spec.path, hint);
  }
  if (height <= 0 || width <= 0 || height > 65535 || width > 65535 || height * width > (int64_t{1} << 28)) {
    throw_bad_input(what + " is not a picture PNG can hold (1 to 65535 pixels a side, 256 Mpixel)", spec.path, hint);
  }
  if (!spec.mean.empty() && channels != 3) {
    throw_bad_input(what + " has " + std::to_string(channels) + " channels; mean and std are per R, G, B channel",
                    spec.path, "leave out the normalization for grey or RGBA outputs");
  }
  const RealElements elements(tensor, what);
  const bool integer = tensor.dtype == "uint8";
  std::vector<uint8_t> pixels(static_cast<size_t>(height * width * channels));
  std::vector<int64_t> index(shape.size(), 0);
  for (int64_t y = 0; y < height; ++y) {
    for (int64_t x = 0; x < width; ++x) {
      for (int64_t c = 0; c < channels; ++c) {
        const int64_t tensor_channel = spec.bgr && channels >= 3 && c < 3 ? 2 - c : c;
        if (spec.channels_last) {
          index[first] = y, index[first + 1] = x, index[first + 2] = tensor_channel;
        } else {
          index[first] = tensor_channel, index[first + 1] = y, index[first + 2] = x;
        }
        double v = elements.at(index);
        if (!integer) {
          if (!spec.mean.empty()) v = v * spec.std[static_cast<size_t>(c)] + spec.mean[static_cast<size_t>(c)];
          v = std::isnan(v) ? 0 : std::round(v * 255.0);
        }
        pixels[static_cast<size_t>((y * width + x) * channels + c)] = static_cast<uint8_t>(std::clamp(v, 0.0, 255.0));
      }
    }
  }
  return encode_png(pixels, width, height, static_cast<int>(channels));
}

std::vector<TopClass> top_classes(const HostTensor& scores, int64_t k, const std::vector<std::string>& labels) {
  const std::vector<int64_t>& shape = scores.shape;
  const std::string what = "the output " + shape_text(shape);
  if (!(shape.size() == 1 || (shape.size() == 2 && shape[0] == 1)) || shape.back() == 0) {
    throw_bad_input(what + " is not one row of class scores", {}, "--top reads an output shaped [1, N] or [N]");
  }
  const int64_t n = shape.back();
  const RealElements elements(scores, what);
  std::vector<double> values(static_cast<size_t>(n));
  std::vector<int64_t> index(shape.size(), 0);
  for (int64_t i = 0; i < n; ++i) {
    index.back() = i;
    values[static_cast<size_t>(i)] = elements.at(index);
  }
  // Softmax over all classes, from the largest finite score for stability.
  double top = -INFINITY;
  for (double v : values) {
    if (std::isfinite(v)) top = std::max(top, v);
  }
  double sum = 0;
  for (double v : values) sum += std::isfinite(v) ? std::exp(v - top) : 0.0;
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  const auto greater = [&](int64_t a, int64_t b) {
    const double va = values[static_cast<size_t>(a)], vb = values[static_cast<size_t>(b)];
    if (std::isnan(va) != std::isnan(vb)) return std::isnan(vb);  // NaN last
    return va > vb || (!(vb > va) && a < b);
  };
  const int64_t count = std::min(k, n);
  std::partial_sort(order.begin(), order.begin() + count, order.end(), greater);
  std::vector<TopClass> result;
  for (int64_t i = 0; i < count; ++i) {
    TopClass c;
    c.index = order[static_cast<size_t>(i)];
    c.score = values[static_cast<size_t>(c.index)];
    c.probability = std::isfinite(c.score) && sum > 0 ? std::exp(c.score - top) / sum : 0.0;
    if (c.index < static_cast<int64_t>(labels.size())) c.label = labels[static_cast<size_t>(c.index)];
    result.push_back(std::move(c));
  }
  return result;
}

namespace {

std::optional<std::vector<std::string>> labels_from_json(const nlohmann::json& j) {
  std::vector<std::string> labels;
  if (j.is_array()) {
    for (const auto& item : j) {
      if (!item.is_string()) return std::nullopt;
      labels.push_back(item.get<std::string>());
    }
    return labels;
  }
  if (!j.is_object()) return std::nullopt;
  for (const char* key : {"classes", "labels"}) {
    if (j.contains(key)) return labels_from_json(j.at(key));
  }
  // {"0": "tench", ...} or imagenet_class_index.json's {"0": ["n01440764", "tench"], ...}
  for (auto it = j.begin(); it != j.end(); ++it) {
    size_t used = 0;
    long index = -1;
    try {
      index = std::stol(it.key(), &used);
    } catch (const std::exception&) {
      return std::nullopt;
    }
    if (used != it.key().size() || index < 0 || index >= static_cast<long>(j.size())) return std::nullopt;
    const nlohmann::json& v = it.value();
    const nlohmann::json* name = v.is_string() ? &v : (v.is_array() && !v.empty() && v.back().is_string()) ? &v.back() : nullptr;
    if (name == nullptr) return std::nullopt;
    if (labels.size() < j.size()) labels.resize(j.size());
    labels[static_cast<size_t>(index)] = name->get<std::string>();
  }
  return labels;
}

}  // namespace

std::vector<std::string> parse_labels(std::string_view text, const std::string& file) {
  if (const auto doc = parse_bounded_json(text)) {
    if (auto labels = labels_from_json(*doc)) {
      if (!labels->empty()) return *labels;
    }
    throw_bad_input("the JSON holds no labels", file,
                    "give a list of names, {\"classes\": [...]}, {\"0\": \"name\", ...}, or a text file of one label "
                    "per line");
  }
  std::vector<std::string> labels;
  size_t begin = 0;
  while (begin < text.size()) {
    size_t end = text.find('\n', begin);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(begin, end - begin);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    labels.emplace_back(line);
    begin = end + 1;
  }
  if (labels.empty()) throw_bad_input("the labels file is empty", file, "give one label per line, or JSON");
  return labels;
}

}  // namespace tsarchive
