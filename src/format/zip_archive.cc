// ZipArchive: our layout, content through ZipEntryReader (zip_content.cc), and
// libzip over the same ByteSource as an independent second parser whose view
// must agree with ours (see zip.h).
#include <algorithm>
#include <cstring>
#include <memory>
#include <string_view>

#include "base/error.h"
#include "format/libzip.h"
#include "format/zip.h"

namespace tsarchive {
namespace {

// libzip "function source" reading from a ByteSource it does not own.
// libzip reads a central directory that is not in its end-record buffer one
// record at a time, in two or three small reads each; those are served from a
// read-ahead block, so a 2,000-record archive costs a few reads, not 6,000.
struct SourceState {
  static constexpr uint64_t kBlock = 64 * 1024;

  explicit SourceState(const ByteSource* from) : source(from) {}

  const ByteSource* source;
  uint64_t position = 0;
  zip_error_t error{};
  std::string block;  // the source's bytes [block_start, block_start + block.size())
  uint64_t block_start = 0;

  // Copies n bytes at `position` into `out` (the caller keeps them in range).
  void read(void* out, uint64_t n) {
    if (position >= block_start && position + n <= block_start + block.size()) {
      std::memcpy(out, block.data() + (position - block_start), static_cast<size_t>(n));
      return;
    }
    if (n >= kBlock) {
      source->read_at(position, out, static_cast<size_t>(n));
      return;
    }
    block_start = position;
    block = source->read_string(position, static_cast<size_t>(std::min(kBlock, source->size() - position)));
    std::memcpy(out, block.data(), static_cast<size_t>(n));
  }
};

zip_int64_t source_callback(void* userdata, void* data, zip_uint64_t len, zip_source_cmd_t cmd) {
  const LibZip& z = libzip();
  auto* state = static_cast<SourceState*>(userdata);
  switch (cmd) {
    case ZIP_SOURCE_OPEN:
      state->position = 0;
      return 0;
    case ZIP_SOURCE_READ: {
      const uint64_t size = state->source->size();
      const uint64_t n = std::min<uint64_t>(len, size - std::min(size, state->position));
      try {
        state->read(data, n);
      } catch (const std::exception&) {
        z.error_set(&state->error, ZIP_ER_READ, EIO);
        return -1;
      }
      state->position += n;
      return static_cast<zip_int64_t>(n);
    }
    case ZIP_SOURCE_CLOSE:
      return 0;
    case ZIP_SOURCE_STAT: {
      auto* st = static_cast<zip_stat_t*>(data);
      z.stat_init(st);
      st->size = state->source->size();
      st->valid |= ZIP_STAT_SIZE;
      return sizeof(zip_stat_t);
    }
    case ZIP_SOURCE_ERROR:
      return z.error_to_data(&state->error, data, len);
    case ZIP_SOURCE_FREE:
      z.error_fini(&state->error);
      delete state;
      return 0;
    case ZIP_SOURCE_SEEK: {
      const zip_int64_t pos = z.source_seek_compute_offset(state->position, state->source->size(), data, len,
                                                             &state->error);
      if (pos < 0) return -1;
      state->position = static_cast<uint64_t>(pos);
      return 0;
    }
    case ZIP_SOURCE_TELL:
      return static_cast<zip_int64_t>(state->position);
    case ZIP_SOURCE_SUPPORTS:
      return z.source_make_command_bitmap(ZIP_SOURCE_OPEN, ZIP_SOURCE_READ, ZIP_SOURCE_CLOSE, ZIP_SOURCE_STAT,
                                            ZIP_SOURCE_ERROR, ZIP_SOURCE_FREE, ZIP_SOURCE_SEEK, ZIP_SOURCE_TELL,
                                            ZIP_SOURCE_SUPPORTS, -1);
    default:
      z.error_set(&state->error, ZIP_ER_OPNOTSUPP, 0);
      return -1;
  }
}

std::string libzip_message(zip_error_t* error) { return libzip().error_strerror(error); }

// libzip finds its own end record (it tries every candidate and keeps the most
// consistent one) and reads the central directory itself; any difference from
// our layout means two ZIP readers see different archives in this file.
void compare_with_libzip(zip_t* za, const ZipLayout& layout, const std::string& file) {
  const LibZip& z = libzip();
  auto disagree = [&](const std::string& what) {
    throw_bad_input("invalid ZIP archive: libzip reads it differently (" + what + ")", file,
                    "ZIP readers could disagree on what this file holds, so PyTorch might load other records than "
                    "the ones checked; re-export it with torch.jit.save");
  };
  const zip_int64_t count = z.get_num_entries(za, 0);
  if (count < 0 || static_cast<uint64_t>(count) != layout.entries.size()) {
    disagree(std::to_string(count) + " entries, not " + std::to_string(layout.entries.size()));
  }
  int comment_len = 0;
  const char* comment = z.get_archive_comment(za, &comment_len, ZIP_FL_ENC_RAW);
  if (std::string_view(comment != nullptr ? comment : "", comment != nullptr ? static_cast<size_t>(comment_len) : 0) !=
      layout.comment) {
    disagree("another archive comment");
  }
  constexpr zip_uint64_t kWanted = ZIP_STAT_NAME | ZIP_STAT_SIZE | ZIP_STAT_COMP_SIZE | ZIP_STAT_CRC |
                                   ZIP_STAT_COMP_METHOD | ZIP_STAT_ENCRYPTION_METHOD;
  for (const ZipEntry& e : layout.entries) {
    zip_stat_t st;
    z.stat_init(&st);
    if (z.stat_index(za, e.index, ZIP_FL_ENC_RAW, &st) != 0 || (st.valid & kWanted) != kWanted) {
      disagree("entry " + std::to_string(e.index) + " cannot be read");
    }
    if (st.name == nullptr || e.name != st.name) {
      disagree("entry " + std::to_string(e.index) + " is named '" + (st.name != nullptr ? st.name : "") + "', not '" +
               e.name + "'");
    }
    if (st.size != e.uncompressed_size || st.comp_size != e.compressed_size || st.crc != e.crc32 ||
        st.comp_method != static_cast<zip_int32_t>(e.method) || st.encryption_method != ZIP_EM_NONE) {
      disagree("sizes, CRC, method or encryption of '" + e.name + "'");
    }
  }
}

// libzip's view of the archive: its open zip_t.
class LibzipView {
 public:
  explicit LibzipView(const ByteSource& source);
  ~LibzipView() { libzip().discard(za_); }
  LibzipView(const LibzipView&) = delete;
  LibzipView& operator=(const LibzipView&) = delete;

  zip_t* get() const { return za_; }

 private:
  zip_t* za_ = nullptr;
};

LibzipView::LibzipView(const ByteSource& source) {
  const LibZip& z = libzip();
  auto* state = new SourceState(&source);
  z.error_init(&state->error);
  zip_error_t error;
  z.error_init(&error);
  zip_source_t* src = z.source_function_create(source_callback, state, &error);
  if (src == nullptr) {
    z.error_fini(&state->error);
    delete state;
    std::string msg = libzip_message(&error);
    z.error_fini(&error);
    throw_io("cannot open ZIP reader: " + msg, source.name());
  }
  za_ = z.open_from_source(src, ZIP_RDONLY, &error);
  if (za_ == nullptr) {
    z.source_free(src);  // also frees `state`
    std::string msg = libzip_message(&error);
    z.error_fini(&error);
    throw_bad_input("invalid ZIP archive: " + msg, source.name(), "the file is damaged or truncated");
  }
  z.error_fini(&error);
}

// Our reading of the central directory, while libzip loads for the cross-check.
ZipLayout read_layout_while_libzip_loads(const ByteSource& source) {
  start_loading_libzip();
  return read_zip_layout(source);
}

}  // namespace

ZipArchive::ZipArchive(std::unique_ptr<ByteSource> source)
    : source_(std::move(source)), layout_(read_layout_while_libzip_loads(*source_)) {}

ZipArchive::~ZipArchive() = default;

const ZipEntry* ZipArchive::find(std::string_view name) const {
  for (const ZipEntry& e : layout_.entries) {
    if (e.name == name) return &e;
  }
  return nullptr;
}

void ZipArchive::cross_check() const {
  std::lock_guard<std::mutex> lock(cross_check_mutex_);
  if (cross_checked_) return;
  const LibzipView view(*source_);
  compare_with_libzip(view.get(), layout_, source_->name());
  cross_checked_ = true;
}

std::string ZipArchive::read(const ZipEntry& entry, uint64_t max_size) const {
  std::string out;
  if (entry.stored() && entry.compressed_size == entry.uncompressed_size && entry.uncompressed_size <= max_size) {
    // Read in place, in one piece: the layout checked that the file holds
    // these bytes.
    out.resize(static_cast<size_t>(entry.uncompressed_size));
    read_checked(entry, max_size, [](const unsigned char*, size_t) {}, reinterpret_cast<unsigned char*>(out.data()));
    return out;
  }
  // Deflate expands at most ~1032:1, so a larger declared size is a lie that
  // the read refuses; no need to reserve it up front.
  if (entry.uncompressed_size <= max_size) {
    out.reserve(static_cast<size_t>(std::min<uint64_t>(entry.uncompressed_size, entry.compressed_size * 1032 + 1024)));
  }
  read_to(entry, max_size, [&](const unsigned char* data, size_t n) { out.append(reinterpret_cast<const char*>(data), n); });
  return out;
}

void ZipArchive::read_to(const ZipEntry& entry, uint64_t max_size, const ZipEntryReader::Sink& sink) const {
  read_checked(entry, max_size, sink, nullptr);
}

void ZipArchive::read_checked(const ZipEntry& entry, uint64_t max_size, const ZipEntryReader::Sink& sink,
                              unsigned char* stored_into) const {
  const std::string& file = source_->name();
  if (entry.uncompressed_size > max_size) {
    throw_bad_input("record '" + entry.name + "' declares " + std::to_string(entry.uncompressed_size) +
                        " bytes, above the " + std::to_string(max_size) + "-byte limit for this kind of record",
                    file, "the archive is corrupt or hostile");
  }
  cross_check();
  ZipEntryReader reader(*source_);
  const ZipContentCheck check = reader.read(entry, sink, stored_into);
  if (!check.problem.empty()) {
    throw_bad_input("cannot read record '" + entry.name + "': " + check.problem, file,
                    "the archive is damaged or hostile");
  }
}

}  // namespace tsarchive
