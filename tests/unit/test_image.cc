// Pictures in the core (core/inputs/image.h): decoding under limits, PNG round trips,
// image specs, output pictures, top k and labels. What the tensors hold
// against torchvision is pytorch.images' job (tests/pytorch/check_images.py).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <fstream>

#include "helpers.h"
#include "base/error.h"
#include "core/inputs/image.h"
#include "core/inputs/input_values.h"
#include "format/crc32.h"

using namespace tsarchive;

namespace {

std::string picture(const std::string& name) { return testdata("images/" + name); }

float element(const HostTensor& t, size_t i) {
  float f;
  std::memcpy(&f, t.bytes->data() + i * 4, 4);
  return f;
}

}  // namespace

TEST_CASE("decode_image reads PNG, JPEG and BMP into RGB, and a PNG written back decodes to the same pixels") {
  for (const char* name :
       {"gradient.png", "photo.jpg", "odd.bmp", "topdown.bmp", "gray.png", "rgba.png", "palette.png"}) {
    INFO(name);
    const Image image = decode_image(slurp(picture(name)), name);
    CHECK(image.rgb.size() == static_cast<size_t>(image.width * image.height * 3));
    const Image again = decode_image(encode_png(image.rgb, image.width, image.height, 3), "again.png");
    CHECK(again.width == image.width);
    CHECK(again.height == image.height);
    CHECK(again.rgb == image.rgb);
  }
  CHECK(decode_image(slurp(picture("odd.bmp")), "odd.bmp").width == 37);
  // Rows stored top-down (a negative height in the header) come out upright.
  const Image top_down = decode_image(slurp(picture("topdown.bmp")), "topdown.bmp");
  CHECK(top_down.width == 29);
  CHECK(top_down.height == 13);
  CHECK(std::string(image_format(slurp(picture("photo.jpg")))) == "JPEG");
  CHECK(image_format("P6 1 1 255\n") == nullptr);
}

TEST_CASE("a PNG with an empty IDAT chunk is the same picture, and stb's reasonless failures still say something") {
  // PIL and libpng read a zero-length IDAT as nothing; stb_image would memcpy
  // into a null buffer (undefined, fatal under UBSan: a fuzz find).
  const std::string png = slurp(picture("gradient.png"));
  const size_t idat = png.find("IDAT") - 4;
  const std::string empty_idat = std::string("\0\0\0\0IDAT", 8) + "\x35\xaf\x06\x1e";  // CRC-32 of "IDAT"
  const Image plain = decode_image(png, "gradient.png");
  const Image with_empty = decode_image(png.substr(0, idat) + empty_idat + png.substr(idat), "empty_idat.png");
  CHECK(with_empty.width == plain.width);
  CHECK(with_empty.height == plain.height);
  CHECK(with_empty.rgb == plain.rgb);
  // An unknown critical chunk whose type begins with a NUL: stb's reason is
  // then an empty string.
  std::string odd = png;
  odd.replace(idat + 4, 4, std::string("\0ABC", 4));
  error_of([&] { decode_image(odd, "odd.png"); }, ErrorKind::BadInput, "the decoder gave no reason");
}

// stb_image never read the zlib stream's Adler-32 trailer: a PNG whose
// pixels' checksum was wrong decoded as if whole (review 55b, finding 10).
TEST_CASE("a PNG whose zlib stream fails its Adler-32 check is damaged") {
  const std::string png = slurp(picture("gradient.png"));
  const size_t idat = png.find("IDAT") - 4;
  const size_t length = static_cast<size_t>(static_cast<unsigned char>(png[idat + 2])) << 8 |
                        static_cast<unsigned char>(png[idat + 3]);
  REQUIRE(png.substr(idat + 12 + length + 4, 4) == "IEND");  // one IDAT chunk: its data ends with the trailer
  const auto with_data = [&](std::string data) {  // the IDAT chunk's data replaced, its CRC made to match
    std::string out = png.substr(0, idat);
    for (int shift : {24, 16, 8, 0}) out += static_cast<char>((data.size() >> shift) & 0xff);
    const uint32_t crc = crc32_of("IDAT" + data);
    out += "IDAT" + data;
    for (int shift : {24, 16, 8, 0}) out += static_cast<char>((crc >> shift) & 0xff);
    return out + png.substr(idat + 12 + length);
  };
  const std::string data = png.substr(idat + 8, length);
  CHECK(decode_image(with_data(data), "same.png").rgb == decode_image(png, "gradient.png").rgb);
  std::string wrong = data;
  wrong[wrong.size() - 1] ^= 0x01;
  error_of([&] { decode_image(with_data(wrong), "adler.png"); }, ErrorKind::BadInput,
           "damaged PNG picture (zlib: incorrect data check)");
  // Split over two IDAT chunks, as encoders write large pictures, the stream is followed across them.
  const std::string first = with_data(data.substr(0, 100));
  const std::string second = with_data(data.substr(100));
  const std::string split = first.substr(0, idat + 12 + 100) + second.substr(idat);
  CHECK(decode_image(split, "split.png").rgb == decode_image(png, "gradient.png").rgb);
}

TEST_CASE("hostile pictures are refused before their pixels are allocated") {
  error_of([] { decode_image(slurp(picture("hostile/huge_dims.png")), "h.png"); }, ErrorKind::BadInput,
              "PNG of 100000x100000 pixels, over the limit");
  error_of([] { decode_image(slurp(picture("hostile/huge_dims.bmp")), "h.bmp"); }, ErrorKind::BadInput,
              "over the limit");
  error_of([] { decode_image(slurp(picture("hostile/over_pixel_limit.png")), "o.png"); }, ErrorKind::BadInput,
              "16000x16000 pixels");
  error_of([] { decode_image(slurp(picture("hostile/inflate_bomb.png")), "b.png"); }, ErrorKind::BadInput,
              "decompression bomb");
  error_of([] { decode_image(slurp(picture("hostile/truncated.jpg")), "t.jpg"); }, ErrorKind::BadInput,
              "truncated");
  error_of([] { decode_image("not a picture", "x.png"); }, ErrorKind::BadInput, "not a PNG, JPEG or BMP");
  ImageLimits small;
  small.max_file_bytes = 100;
  error_of([&] { decode_image(slurp(picture("gradient.png")), "g.png", small); }, ErrorKind::BadInput,
              "MiB limit");
  small = ImageLimits();
  small.max_pixels = 1000;
  error_of([&] { decode_image(slurp(picture("gradient.png")), "g.png", small); }, ErrorKind::BadInput,
              "64x48 pixels");
}

// A batch was decoded whole before its tensor's size was checked
// (16 pictures of 8192x8192 took 3.3 GB). Now every header is read first:
// these headers claim 8192x8192 over pixels that would not decode, so only a
// check made before decoding gives the budget's error instead of the damage.
TEST_CASE("a batch is budgeted from its pictures' headers before any is decoded") {
  const TempDir dir;
  std::string claims_big = encode_png(std::vector<uint8_t>(3, 0), 1, 1, 3);
  for (size_t at : {16, 20}) claims_big.replace(at, 4, std::string("\0\0\x20\0", 4));  // IHDR width, height: 8192
  std::ofstream(dir.file("big.png"), std::ios::binary) << claims_big;
  std::ofstream(dir.file("small.png"), std::ios::binary) << encode_png(std::vector<uint8_t>(12, 0), 2, 2, 3);
  CHECK(read_image_size(claims_big, "big.png").width == 8192);
  error_of([&] { decode_image(claims_big, "big.png"); }, ErrorKind::BadInput, "damaged PNG");

  std::string eleven = dir.file("big.png");
  for (int i = 1; i < 11; ++i) eleven += "," + dir.file("big.png");  // 11 x 8192 x 8192 x 3 > 2^31
  error_of([&] { parse_input_argument("@" + eleven); }, ErrorKind::Usage, "more than 2^31");
  error_of([&] { parse_input_argument("@" + dir.file("small.png") + "," + dir.file("big.png")); }, ErrorKind::Usage,
           "differ in size");
  // The sizes after resize and crop are what must match and what counts.
  error_of([&] { parse_input_argument("@" + dir.file("small.png") + "," + dir.file("big.png") + ":resize=2x2"); },
           ErrorKind::BadInput, "damaged PNG");
  // Headers of every format give the size decoding gives.
  for (const char* name : {"gradient.png", "photo.jpg", "odd.bmp", "topdown.bmp"}) {
    INFO(name);
    const std::string bytes = slurp(picture(name));
    const ImageSize size = read_image_size(bytes, name);
    const Image image = decode_image(bytes, name);
    CHECK(size.width == image.width);
    CHECK(size.height == image.height);
  }
  error_of([] { read_image_size(slurp(picture("hostile/huge_dims.bmp")), "h.bmp"); }, ErrorKind::BadInput,
           "over the limit");
  error_of([] { read_image_size("\xff\xd8\xff\xe0", "t.jpg"); }, ErrorKind::BadInput, "damaged or unsupported JPEG");
}

TEST_CASE("image specs: default tensor, options, batches and their errors") {
  const HostValue v = parse_input_argument("@" + picture("gradient.png"));
  REQUIRE(v.kind == HostValue::Kind::Tensor);
  CHECK(v.tensor.dtype == "float32");
  CHECK(v.tensor.shape == std::vector<int64_t>{1, 3, 48, 64});
  const Image image = decode_image(slurp(picture("gradient.png")), "g");
  CHECK(element(v.tensor, 0) == static_cast<float>(image.rgb[0]) / 255.0f);       // R of (0, 0)
  CHECK(element(v.tensor, 48 * 64) == static_cast<float>(image.rgb[1]) / 255.0f);  // G of (0, 0)

  const HostValue u = parse_input_argument("@" + picture("portrait.png") + ":resize=20:crop=16x12:dtype=uint8:layout=nhwc");
  CHECK(u.tensor.dtype == "uint8");
  CHECK(u.tensor.shape == std::vector<int64_t>{1, 16, 12, 3});
  CHECK(parse_input_argument("@" + picture("gradient.png") + ":resize=10x20:layout=chw").tensor.shape ==
        std::vector<int64_t>{3, 10, 20});
  CHECK(parse_input_argument("@" + picture("batch") + ":resize=8x8").tensor.shape == std::vector<int64_t>{3, 3, 8, 8});
  // Resize(N) keeps the aspect ratio, shorter side N: 64x48 -> 42x32 (int(32 * 64 / 48)).
  CHECK(parse_input_argument("@" + picture("gradient.png") + ":resize=32").tensor.shape ==
        std::vector<int64_t>{1, 3, 32, 42});

  const std::string g = "@" + picture("gradient.png");
  error_of([&] { parse_input_argument(g + ":resize=0"); }, ErrorKind::Usage, "not a size");
  error_of([&] { parse_input_argument(g + ":colour=red"); }, ErrorKind::Usage, "unknown option \"colour\"");
  error_of([&] { parse_input_argument(g + ":crop=100"); }, ErrorKind::Usage, "larger than the picture");
  error_of([&] { parse_input_argument(g + ":dtype=uint8:normalize=imagenet"); }, ErrorKind::Usage, "dtype=float32");
  error_of([&] { parse_input_argument(g + ":mean=1,2"); }, ErrorKind::Usage, "one value or three");
  error_of([&] { parse_input_argument("@" + picture("batch")); }, ErrorKind::Usage, "differ in size");
  error_of([&] { parse_input_argument("@" + picture("nothing.png") + ":resize=3"); }, ErrorKind::Io, "no such file");
  error_of([&] { parse_input_argument("@" + testdata("run/mlp_in.npy") + ":resize=3"); }, ErrorKind::Usage,
              "apply to pictures");
  // .npy and .pt inputs still go their own way.
  CHECK(parse_input_argument("@" + testdata("run/mlp_in.npy")).kind == HostValue::Kind::Tensor);
}

TEST_CASE("output pictures: normalization undone, clamped, shapes checked") {
  // [1, 3, 1, 2]: normalized with mean 0.5 / std 0.25 per channel.
  const HostTensor t = float_tensor({1, 3, 1, 2}, {-2.0f, 2.0f, 0.0f, 1.0f, -1.0f, 10.0f});
  ImageOutputSpec spec = parse_image_output("out.png:mean=0.5:std=0.25");
  CHECK(spec.path == "out.png");
  const Image image = decode_image(output_tensor_png(t, spec), "out.png");
  REQUIRE(image.width == 2);
  // pixel 0: R = -2*0.25+0.5 = 0, G = 0.5 -> 128, B = -1*0.25+0.5 = 0.25 -> 64
  CHECK(image.rgb == std::vector<uint8_t>{0, 128, 64, 255, 191, 255});
  CHECK(is_image_output("x/out.PNG:normalize=imagenet"));
  CHECK_FALSE(is_image_output("out.npy"));
  error_of([&] { output_tensor_png(float_tensor({1, 10}, std::vector<float>(10)), ImageOutputSpec{}); },
              ErrorKind::BadInput, "not one picture");
  error_of([&] { output_tensor_png(float_tensor({2, 2, 2}, std::vector<float>(8)), ImageOutputSpec{}); },
              ErrorKind::BadInput, "2 channels");
  error_of([] { parse_image_output("out.png:resize=3"); }, ErrorKind::Usage, "unknown option");
}

TEST_CASE("top k with softmax probabilities and labels in their usual files") {
  const HostTensor scores = float_tensor({1, 4}, {1.0f, 3.0f, 2.0f, 3.0f});
  const std::vector<TopClass> top = top_classes(scores, 3, {"a", "b", "c"});
  REQUIRE(top.size() == 3);
  CHECK(top[0].index == 1);  // ties: the lower index first
  CHECK(top[1].index == 3);
  CHECK(top[2].index == 2);
  CHECK(top[0].label == "b");
  CHECK(top[1].label.empty());  // no label for class 3
  const double sum = std::exp(1.0) + 2 * std::exp(3.0) + std::exp(2.0);
  CHECK(top[0].probability == Approx(std::exp(3.0) / sum));
  CHECK(top_classes(scores, 10, {}).size() == 4);
  error_of([] { top_classes(float_tensor({2, 2}, std::vector<float>(4)), 1, {}); }, ErrorKind::BadInput,
              "not one row");

  CHECK(parse_labels(R"(["x", "y"])", "l") == std::vector<std::string>{"x", "y"});
  CHECK(parse_labels(R"({"classes": ["cat", "dog"]})", "l") == std::vector<std::string>{"cat", "dog"});
  CHECK(parse_labels(R"({"1": ["n2", "goldfish"], "0": ["n1", "tench"]})", "l") ==
        std::vector<std::string>{"tench", "goldfish"});
  CHECK(parse_labels("red\r\ngreen\n", "l") == std::vector<std::string>{"red", "green"});
  error_of([] { parse_labels(R"({"a": 1})", "l.json"); }, ErrorKind::BadInput, "no labels");
}
