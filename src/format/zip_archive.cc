// ZipArchive: our layout, content through ZipEntryReader (zip_content.cc), and
// libzip over the same ByteSource as an independent second parser whose view
// must agree with ours (see zip.h).
#include <zip.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <string_view>

#include "base/error.h"
#include "format/zip.h"

namespace tsarchive {
namespace {

// libzip "function source" reading from a ByteSource it does not own.
struct SourceState {
  const ByteSource* source;
  uint64_t position = 0;
  zip_error_t error;
};

zip_int64_t source_callback(void* userdata, void* data, zip_uint64_t len, zip_source_cmd_t cmd) {
  auto* state = static_cast<SourceState*>(userdata);
  switch (cmd) {
    case ZIP_SOURCE_OPEN:
      state->position = 0;
      return 0;
    case ZIP_SOURCE_READ: {
      const uint64_t size = state->source->size();
      const uint64_t n = std::min<uint64_t>(len, size - std::min(size, state->position));
      try {
        state->source->read_at(state->position, data, static_cast<size_t>(n));
      } catch (const std::exception&) {
        zip_error_set(&state->error, ZIP_ER_READ, EIO);
        return -1;
      }
      state->position += n;
      return static_cast<zip_int64_t>(n);
    }
    case ZIP_SOURCE_CLOSE:
      return 0;
    case ZIP_SOURCE_STAT: {
      auto* st = static_cast<zip_stat_t*>(data);
      zip_stat_init(st);
      st->size = state->source->size();
      st->valid |= ZIP_STAT_SIZE;
      return sizeof(zip_stat_t);
    }
    case ZIP_SOURCE_ERROR:
      return zip_error_to_data(&state->error, data, len);
    case ZIP_SOURCE_FREE:
      zip_error_fini(&state->error);
      delete state;
      return 0;
    case ZIP_SOURCE_SEEK: {
      const zip_int64_t pos = zip_source_seek_compute_offset(state->position, state->source->size(), data, len,
                                                             &state->error);
      if (pos < 0) return -1;
      state->position = static_cast<uint64_t>(pos);
      return 0;
    }
    case ZIP_SOURCE_TELL:
      return static_cast<zip_int64_t>(state->position);
    case ZIP_SOURCE_SUPPORTS:
      return zip_source_make_command_bitmap(ZIP_SOURCE_OPEN, ZIP_SOURCE_READ, ZIP_SOURCE_CLOSE, ZIP_SOURCE_STAT,
                                            ZIP_SOURCE_ERROR, ZIP_SOURCE_FREE, ZIP_SOURCE_SEEK, ZIP_SOURCE_TELL,
                                            ZIP_SOURCE_SUPPORTS, -1);
    default:
      zip_error_set(&state->error, ZIP_ER_OPNOTSUPP, 0);
      return -1;
  }
}

std::string libzip_message(zip_error_t* error) { return zip_error_strerror(error); }

// libzip finds its own end record (it tries every candidate and keeps the most
// consistent one) and reads the central directory itself; any difference from
// our layout means two ZIP readers see different archives in this file.
void compare_with_libzip(zip_t* za, const ZipLayout& layout, const std::string& file) {
  auto disagree = [&](const std::string& what) {
    throw_bad_input("invalid ZIP archive: libzip reads it differently (" + what + ")", file,
                    "ZIP readers could disagree on what this file holds, so PyTorch might load other records than "
                    "the ones checked; re-export it with torch.jit.save");
  };
  const zip_int64_t count = zip_get_num_entries(za, 0);
  if (count < 0 || static_cast<uint64_t>(count) != layout.entries.size()) {
    disagree(std::to_string(count) + " entries, not " + std::to_string(layout.entries.size()));
  }
  int comment_len = 0;
  const char* comment = zip_get_archive_comment(za, &comment_len, ZIP_FL_ENC_RAW);
  if (std::string_view(comment != nullptr ? comment : "", comment != nullptr ? static_cast<size_t>(comment_len) : 0) !=
      layout.comment) {
    disagree("another archive comment");
  }
  constexpr zip_uint64_t kWanted = ZIP_STAT_NAME | ZIP_STAT_SIZE | ZIP_STAT_COMP_SIZE | ZIP_STAT_CRC |
                                   ZIP_STAT_COMP_METHOD | ZIP_STAT_ENCRYPTION_METHOD;
  for (const ZipEntry& e : layout.entries) {
    zip_stat_t st;
    zip_stat_init(&st);
    if (zip_stat_index(za, e.index, ZIP_FL_ENC_RAW, &st) != 0 || (st.valid & kWanted) != kWanted) {
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

}  // namespace

ZipArchive::ZipArchive(std::unique_ptr<ByteSource> source)
    : source_(std::move(source)), layout_(read_zip_layout(*source_)) {}

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
  auto* state = new SourceState{source_.get(), 0, {}};
  zip_error_init(&state->error);
  zip_error_t error;
  zip_error_init(&error);
  zip_source_t* src = zip_source_function_create(source_callback, state, &error);
  if (src == nullptr) {
    zip_error_fini(&state->error);
    delete state;
    std::string msg = libzip_message(&error);
    zip_error_fini(&error);
    throw_io("cannot open ZIP reader: " + msg, source_->name());
  }
  zip_t* za = zip_open_from_source(src, ZIP_RDONLY, &error);
  if (za == nullptr) {
    zip_source_free(src);  // also frees `state`
    std::string msg = libzip_message(&error);
    zip_error_fini(&error);
    throw_bad_input("invalid ZIP archive: " + msg, source_->name(), "the file is damaged or truncated");
  }
  zip_error_fini(&error);
  std::unique_ptr<zip_t, void (*)(zip_t*)> guard(za, zip_discard);
  compare_with_libzip(za, layout_, source_->name());
  cross_checked_ = true;
}

std::string ZipArchive::read(const ZipEntry& entry, uint64_t max_size) const {
  // Deflate expands at most ~1032:1, so a larger declared size is a lie that
  // the read refuses; no need to reserve it up front.
  std::string out;
  if (entry.uncompressed_size <= max_size) {
    out.reserve(static_cast<size_t>(std::min<uint64_t>(entry.uncompressed_size, entry.compressed_size * 1032 + 1024)));
  }
  read_to(entry, max_size, [&](const unsigned char* data, size_t n) { out.append(reinterpret_cast<const char*>(data), n); });
  return out;
}

void ZipArchive::read_to(const ZipEntry& entry, uint64_t max_size, const ZipEntryReader::Sink& sink) const {
  const std::string& file = source_->name();
  if (entry.uncompressed_size > max_size) {
    throw_bad_input("record '" + entry.name + "' declares " + std::to_string(entry.uncompressed_size) +
                        " bytes, above the " + std::to_string(max_size) + "-byte limit for this kind of record",
                    file, "the archive is corrupt or hostile");
  }
  cross_check();
  ZipEntryReader reader(*source_);
  const ZipContentCheck check = reader.read(entry, sink);
  if (!check.problem.empty()) {
    throw_bad_input("cannot read record '" + entry.name + "': " + check.problem, file,
                    "the archive is damaged or hostile");
  }
}

}  // namespace tsarchive
