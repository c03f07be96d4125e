// Content reads through libzip over our ByteSource (see zip.h for why the
// layout itself is parsed by us).
#include <zip.h>

#include <algorithm>
#include <cstring>

#include "tsarchive/error.h"
#include "tsarchive/zip.h"

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

}  // namespace

ZipArchive::ZipArchive(std::unique_ptr<ByteSource> source)
    : source_(std::move(source)), layout_(read_zip_layout(*source_)) {}

ZipArchive::~ZipArchive() {
  if (zip_ != nullptr) zip_discard(zip_);
}

const ZipEntry* ZipArchive::find(std::string_view name) const {
  for (const ZipEntry& e : layout_.entries) {
    if (e.name == name) return &e;
  }
  return nullptr;
}

zip_t* ZipArchive::libzip() const {
  if (zip_ != nullptr) return zip_;
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
  if (static_cast<uint64_t>(zip_get_num_entries(za, 0)) != layout_.entries.size()) {
    zip_discard(za);
    throw_bad_input("invalid ZIP archive: entry counts disagree", source_->name(), "the file is damaged");
  }
  zip_ = za;
  return zip_;
}

std::string ZipArchive::read(const ZipEntry& entry, uint64_t max_size) const {
  const std::string& file = source_->name();
  if (entry.uncompressed_size > max_size) {
    throw_bad_input("record '" + entry.name + "' declares " + std::to_string(entry.uncompressed_size) +
                        " bytes, above the " + std::to_string(max_size) + "-byte limit for this kind of record",
                    file, "the archive is corrupt or hostile");
  }
  zip_t* za = libzip();
  const char* libzip_name = zip_get_name(za, entry.index, ZIP_FL_ENC_RAW);
  if (libzip_name == nullptr || entry.name != libzip_name) {
    throw_bad_input("invalid ZIP archive: entry " + std::to_string(entry.index) + " names disagree", file);
  }
  zip_file_t* zf = zip_fopen_index(za, entry.index, 0);
  if (zf == nullptr) {
    throw_bad_input("cannot read record '" + entry.name + "': " + libzip_message(zip_get_error(za)), file,
                    "the archive is damaged");
  }
  // Read one byte past the declared size so content longer than declared is caught.
  std::string out(static_cast<size_t>(entry.uncompressed_size) + 1, '\0');
  uint64_t got = 0;
  while (got < out.size()) {
    const zip_int64_t n = zip_fread(zf, out.data() + got, out.size() - got);
    if (n < 0) {
      std::string msg = libzip_message(zip_file_get_error(zf));
      zip_fclose(zf);
      throw_bad_input("cannot read record '" + entry.name + "': " + msg, file,
                      "the archive is damaged (a CRC or size does not match its data)");
    }
    if (n == 0) break;
    got += static_cast<uint64_t>(n);
  }
  zip_fclose(zf);
  if (got != entry.uncompressed_size) {
    throw_bad_input("record '" + entry.name + "' holds " + (got > entry.uncompressed_size ? "more" : "fewer") +
                        " bytes than its declared " + std::to_string(entry.uncompressed_size),
                    file, "the archive is damaged or hostile");
  }
  out.resize(static_cast<size_t>(got));
  return out;
}

}  // namespace tsarchive
