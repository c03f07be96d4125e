// Planning and writing ZIP rewrites (format/zip_writer.h).
#include "format/zip_writer.h"

#include <fcntl.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "base/error.h"
#include "base/temp_files_and_locks.h"
#include "format/crc32.h"
#include "format/zip_format.h"

namespace tsarchive {
namespace {

using namespace zipfmt;
constexpr uint16_t kPyTorchFlags = 0x0808;  // data descriptor follows; UTF-8 name

void set64(std::string& s, size_t at, uint64_t v) {
  set32(s, at, static_cast<uint32_t>(v & k32Max));
  set32(s, at + 4, static_cast<uint32_t>(v >> 32));
}
uint16_t get16(std::string_view s, size_t at) {
  return static_cast<uint16_t>(static_cast<uint8_t>(s[at]) | static_cast<uint8_t>(s[at + 1]) << 8);
}
uint32_t get32(std::string_view s, size_t at) { return get16(s, at) | static_cast<uint32_t>(get16(s, at + 2)) << 16; }

// PyTorch's padding field (inline_container.cc getPadding) for an FB field
// that starts at `field_offset`: "FB", a length, then 'Z's up to the next
// 64-byte boundary, where the record's data begins.
std::string padding_field(uint64_t field_offset) {
  const uint64_t data_start = field_offset + 4;
  const auto pad = static_cast<uint16_t>((kRecordAlignment - data_start % kRecordAlignment) % kRecordAlignment);
  std::string field = "FB";
  put16(field, pad);
  field.append(pad, 'Z');
  return field;
}

struct ExtraField {
  uint16_t id;
  std::string_view body;
};

// Splits an extra field area; a malformed trailing field ends the list.
std::vector<ExtraField> split_extra(std::string_view extra) {
  std::vector<ExtraField> fields;
  size_t pos = 0;
  while (extra.size() - pos >= 4) {
    const uint16_t id = get16(extra, pos), len = get16(extra, pos + 2);
    if (len > extra.size() - pos - 4) break;
    fields.push_back({id, extra.substr(pos + 4, len)});
    pos += 4 + len;
  }
  return fields;
}

std::string join_extra(const std::vector<ExtraField>& fields) {
  std::string out;
  for (const ExtraField& f : fields) {
    put16(out, f.id);
    put16(out, static_cast<uint16_t>(f.body.size()));
    out.append(f.body);
  }
  return out;
}

// The local header of `e`, rebuilt for `new_offset` with the FB padding that
// puts its data on a 64-byte boundary there. Other extra fields are kept.
std::string realigned_local_header(const ByteSource& source, const ZipEntry& e, uint64_t new_offset) {
  const size_t name_len = e.name.size();
  const std::string head = source.read_string(e.local_header_offset, kLocalHeaderSize + name_len + e.local_extra_length);
  std::vector<ExtraField> kept;
  for (const ExtraField& f : split_extra(std::string_view(head).substr(kLocalHeaderSize + name_len))) {
    if (f.id != kPyTorchPaddingId) kept.push_back(f);
  }
  std::string extra = join_extra(kept);
  extra += padding_field(new_offset + kLocalHeaderSize + name_len + extra.size());
  if (extra.size() > k16Max) throw_bad_input("local extra field of '" + e.name + "' is too long", source.name());
  std::string out = head.substr(0, kLocalHeaderSize);
  set16(out, 28, static_cast<uint16_t>(extra.size()));
  out += e.name;
  out += extra;
  return out;
}

// The central record of `e` with its local header offset set to `new_offset`.
std::string moved_central_record(const ByteSource& source, const ZipEntry& e, uint64_t new_offset) {
  std::string rec = source.read_string(e.central_offset, e.central_size);
  if (new_offset == e.local_header_offset) return rec;
  const uint16_t name_len = get16(rec, 28), extra_len = get16(rec, 30);
  const size_t extra_at = kCentralHeaderSize + name_len;
  const bool offset_in_zip64 = get32(rec, 42) == k32Max;
  if (!offset_in_zip64 && new_offset < k32Max) {
    set32(rec, 42, static_cast<uint32_t>(new_offset));
    return rec;
  }
  // The offset lives (or must now live) in the ZIP64 field, after the sizes
  // whose 32-bit fields are 0xFFFFFFFF.
  const size_t sizes = (get32(rec, 24) == k32Max ? 8 : 0) + (get32(rec, 20) == k32Max ? 8 : 0);
  std::vector<ExtraField> fields = split_extra(std::string_view(rec).substr(extra_at, extra_len));
  std::string zip64_body;
  auto zip64 = std::find_if(fields.begin(), fields.end(), [](const ExtraField& f) { return f.id == kZip64ExtraId; });
  if (zip64 != fields.end()) zip64_body = std::string(zip64->body);
  if (zip64_body.size() < sizes) throw_bad_input("ZIP64 field of '" + e.name + "' is too short", source.name());
  if (offset_in_zip64) {
    if (zip64_body.size() < sizes + 8) throw_bad_input("ZIP64 field of '" + e.name + "' is too short", source.name());
    set64(zip64_body, sizes, new_offset);
  } else {
    std::string offset;
    put64(offset, new_offset);
    zip64_body.insert(sizes, offset);
  }
  if (zip64 != fields.end()) {
    zip64->body = zip64_body;
  } else {
    fields.push_back({kZip64ExtraId, zip64_body});
  }
  const std::string extra = join_extra(fields);
  std::string out = rec.substr(0, kCentralHeaderSize);
  set32(out, 42, k32Max);
  set16(out, 30, static_cast<uint16_t>(extra.size()));
  out += rec.substr(kCentralHeaderSize, name_len);
  out += extra;
  out += rec.substr(extra_at + extra_len);
  return out;
}

// A new stored entry as PyTorchStreamWriter writes it: local header, data, descriptor.
std::string new_local_entry(const std::string& name, std::string_view data, uint32_t crc, uint64_t offset) {
  std::string out;
  out.reserve(kLocalHeaderSize + name.size() + 4 + 63 + data.size() + 16);
  put32(out, kLocalHeaderSig);
  put16(out, 0);  // version needed, as PyTorch writes it
  put16(out, kPyTorchFlags);
  put16(out, 0);  // stored
  put32(out, 0);  // DOS time and date
  put32(out, 0);  // CRC and sizes are in the descriptor
  put32(out, 0);
  put32(out, 0);
  const std::string extra = padding_field(offset + kLocalHeaderSize + name.size());
  put16(out, static_cast<uint16_t>(name.size()));
  put16(out, static_cast<uint16_t>(extra.size()));
  out += name;
  out += extra;
  out.append(data);
  put32(out, kDescriptorSig);
  put32(out, crc);
  put32(out, static_cast<uint32_t>(data.size()));
  put32(out, static_cast<uint32_t>(data.size()));
  return out;
}

std::string new_central_record(const std::string& name, uint64_t size, uint32_t crc, uint64_t offset) {
  const bool zip64 = offset >= k32Max;
  std::string out;
  put32(out, kCentralHeaderSig);
  put16(out, 0);              // version made by
  put16(out, zip64 ? 45 : 0);  // version needed
  put16(out, kPyTorchFlags);
  put16(out, 0);
  put32(out, 0);
  put32(out, crc);
  put32(out, static_cast<uint32_t>(size));
  put32(out, static_cast<uint32_t>(size));
  put16(out, static_cast<uint16_t>(name.size()));
  put16(out, zip64 ? 12 : 0);
  put16(out, 0);  // comment
  put16(out, 0);  // disk
  put16(out, 0);  // internal attributes
  put32(out, 0);  // external attributes
  put32(out, zip64 ? k32Max : static_cast<uint32_t>(offset));
  out += name;
  if (zip64) {
    put16(out, kZip64ExtraId);
    put16(out, 8);
    put64(out, offset);
  }
  return out;
}

// Builds the plan, tracking where it first departs from the source.
class PlanBuilder {
 public:
  explicit PlanBuilder(const ByteSource& source) : source_(source) { plan_.first_change = UINT64_MAX; }

  uint64_t offset() const { return plan_.size; }

  void copy(uint64_t source_offset, uint64_t length) {
    if (length == 0) return;
    if (plan_.first_change == UINT64_MAX && source_offset != plan_.size) plan_.first_change = plan_.size;
    if (!plan_.pieces.empty()) {
      ZipPiece& last = plan_.pieces.back();
      if (last.from_source && last.source_offset + last.length == source_offset) {
        last.length += length;
        plan_.size += length;
        return;
      }
    }
    plan_.pieces.push_back(ZipPiece{true, source_offset, length, {}});
    plan_.size += length;
  }

  void append(std::string bytes) {
    if (bytes.empty()) return;
    if (plan_.first_change == UINT64_MAX) note_first_difference(bytes);
    plan_.size += bytes.size();
    const uint64_t length = bytes.size();
    plan_.pieces.push_back(ZipPiece{false, 0, length, std::move(bytes)});
  }

  ZipRewritePlan finish() {
    if (plan_.first_change == UINT64_MAX) plan_.first_change = std::min(plan_.size, source_.size());
    return std::move(plan_);
  }

  ZipRewritePlan& plan() { return plan_; }

 private:
  // Made bytes can still equal the source (a central directory rebuilt after a
  // set and a remove that cancel out); compare them in chunks.
  void note_first_difference(const std::string& bytes) {
    const uint64_t at = plan_.size;
    const uint64_t available = source_.size() > at ? source_.size() - at : 0;
    const uint64_t common = std::min<uint64_t>(bytes.size(), available);
    constexpr size_t kChunk = 64 * 1024;
    std::string buf;
    for (uint64_t done = 0; done < common; done += kChunk) {
      const size_t n = static_cast<size_t>(std::min<uint64_t>(kChunk, common - done));
      buf.resize(n);
      source_.read_at(at + done, buf.data(), n);
      const auto mismatch = std::mismatch(buf.begin(), buf.end(), bytes.begin() + static_cast<ptrdiff_t>(done));
      if (mismatch.first != buf.end()) {
        plan_.first_change = at + done + static_cast<uint64_t>(mismatch.first - buf.begin());
        return;
      }
    }
    if (common < bytes.size()) plan_.first_change = at + common;
  }

  const ByteSource& source_;
  ZipRewritePlan plan_;
};

// Where each source entry's span ends: the next local header in file order,
// or the central directory. Rejects entries whose data runs into the next one.
std::vector<uint64_t> span_ends(const ByteSource& source, const ZipLayout& layout) {
  std::vector<size_t> order(layout.entries.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return layout.entries[a].local_header_offset < layout.entries[b].local_header_offset;
  });
  std::vector<uint64_t> ends(layout.entries.size());
  for (size_t k = 0; k < order.size(); ++k) {
    const ZipEntry& e = layout.entries[order[k]];
    const uint64_t end =
        k + 1 < order.size() ? layout.entries[order[k + 1]].local_header_offset : layout.central_directory_offset;
    if (e.data_offset + e.compressed_size > end) {
      throw_bad_input("invalid ZIP archive: entry '" + e.name + "' overlaps the next one", source.name(),
                      "the file is damaged or hostile; it cannot be edited safely");
    }
    ends[order[k]] = end;
  }
  return ends;
}

void append_end_records(PlanBuilder& out, const ByteSource& source, const ZipLayout& layout, uint64_t count,
                        uint64_t cd_offset, uint64_t cd_size) {
  const std::string old_end = source.read_string(layout.end_record_offset, kEndSize);
  const bool need64 = count >= k16Max || cd_size >= k32Max || cd_offset >= k32Max;
  const bool write64 = layout.zip64 || need64;
  std::string tail;
  if (write64) {
    std::string rec;
    if (layout.zip64) {
      rec = source.read_string(layout.zip64_end_record_offset, kZip64EndSize);
      set64(rec, 4, kZip64EndSize - 12);  // extensible data, if any, is not kept
    } else {
      put32(rec, kZip64EndSig);
      put64(rec, kZip64EndSize - 12);
      put16(rec, 0x031E);  // made by: Unix, 3.0 (as PyTorch's miniz writes it)
      put16(rec, 45);
      put32(rec, 0);
      put32(rec, 0);
      rec.resize(kZip64EndSize, '\0');
    }
    set64(rec, 24, count);
    set64(rec, 32, count);
    set64(rec, 40, cd_size);
    set64(rec, 48, cd_offset);
    const uint64_t rec_offset = out.offset();
    tail += rec;
    put32(tail, kZip64LocatorSig);
    put32(tail, 0);
    put64(tail, rec_offset);
    put32(tail, 1);
  }
  // Classic end record: a field keeps a 0xFF.. placeholder where the source
  // used one (ZIP64 holds the value), and gets one where the value does not fit.
  auto field16 = [&](size_t at, uint64_t v) {
    return (v >= k16Max || (layout.zip64 && get16(old_end, at) == k16Max)) ? k16Max : static_cast<uint16_t>(v);
  };
  auto field32 = [&](size_t at, uint64_t v) {
    return (v >= k32Max || (layout.zip64 && get32(old_end, at) == k32Max)) ? k32Max : static_cast<uint32_t>(v);
  };
  put32(tail, kEndSig);
  put16(tail, 0);
  put16(tail, 0);
  put16(tail, field16(8, count));
  put16(tail, field16(10, count));
  put32(tail, field32(12, cd_size));
  put32(tail, field32(16, cd_offset));
  put16(tail, static_cast<uint16_t>(layout.comment.size()));
  tail += layout.comment;
  out.append(std::move(tail));
}

[[noreturn]] void throw_write(const std::string& dest_name) {
  const int err = errno;
  throw_io(std::string("cannot write: ") + std::strerror(err), dest_name,
           err == ENOSPC || err == EFBIG || err == EDQUOT ? "free some disk space (or raise the file size limit)"
                                                          : "check the folder's permissions and the disk");
}

void write_all(int fd, const char* data, size_t length, const std::string& dest_name) {
  while (length > 0) {
    const ssize_t n = ::write(fd, data, length);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      if (n == 0) errno = ENOSPC;
      throw_write(dest_name);
    }
    data += n;
    length -= static_cast<size_t>(n);
  }
}

constexpr uint64_t kChunk = 64u << 20;

void copy_range(int source_fd, uint64_t offset, uint64_t length, int dest_fd, const std::string& dest_name) {
  auto in = static_cast<loff_t>(offset);
  bool kernel_copy = true;
  while (length > 0 && kernel_copy) {
    // Chunks, each handed to writeback as soon as it is copied, so that the
    // final fsync has little left to wait for.
    const off_t out_at = ::lseek(dest_fd, 0, SEEK_CUR);
    const ssize_t n = ::copy_file_range(source_fd, &in, dest_fd, nullptr, std::min<uint64_t>(length, kChunk), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EXDEV || errno == ENOSYS || errno == EINVAL || errno == EOPNOTSUPP)) {
      kernel_copy = false;  // not on this filesystem pair; copy through user space
      break;
    }
    if (n < 0) throw_write(dest_name);
    if (n == 0) throw_io("the source file shrank while being copied", dest_name, "do not change it while editing");
    if (out_at >= 0) ::sync_file_range(dest_fd, out_at, n, SYNC_FILE_RANGE_WRITE);
    length -= static_cast<uint64_t>(n);
  }
  std::string buf(std::min<uint64_t>(length, 4u << 20), '\0');
  while (length > 0) {
    const size_t want = static_cast<size_t>(std::min<uint64_t>(length, buf.size()));
    const ssize_t n = ::pread(source_fd, buf.data(), want, in);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw_io(std::string("cannot read: ") + std::strerror(errno), dest_name);
    if (n == 0) throw_io("the source file shrank while being copied", dest_name, "do not change it while editing");
    write_all(dest_fd, buf.data(), static_cast<size_t>(n), dest_name);
    in += n;
    length -= static_cast<uint64_t>(n);
  }
}

}  // namespace

ZipRewritePlan plan_zip_rewrite(const ByteSource& source, const ZipLayout& layout,
                                const std::vector<ZipEntrySpec>& entries) {
  const std::vector<uint64_t> ends = span_ends(source, layout);
  PlanBuilder out(source);
  uint64_t first_entry = layout.central_directory_offset;
  for (const ZipEntry& e : layout.entries) first_entry = std::min(first_entry, e.local_header_offset);
  out.copy(0, first_entry);  // bytes before the first entry (none in PyTorch's archives)

  std::string central;
  for (const ZipEntrySpec& spec : entries) {
    const uint64_t at = out.offset();
    if (spec.existing != nullptr) {
      const ZipEntry& e = *spec.existing;
      const uint64_t end = ends[e.index];
      const uint64_t shift = at > e.local_header_offset ? at - e.local_header_offset : e.local_header_offset - at;
      if (shift % kRecordAlignment == 0 || !e.has_alignment_padding) {
        out.copy(e.local_header_offset, end - e.local_header_offset);
        ++out.plan().entries_kept;
      } else {
        out.append(realigned_local_header(source, e, at));
        out.copy(e.data_offset, end - e.data_offset);
        ++out.plan().entries_realigned;
      }
      central += moved_central_record(source, e, at);
    } else {
      if (spec.data.size() >= k32Max) {
        throw_usage("'" + spec.name + "' is " + std::to_string(spec.data.size()) + " bytes; entries of 4 GiB or more are not supported");
      }
      if (spec.name.size() > 0xFFFF - 64) throw_usage("entry name is too long (" + std::to_string(spec.name.size()) + " bytes)");
      const uint32_t crc = zipfmt::crc32(spec.data);
      out.append(new_local_entry(spec.name, spec.data, crc, at));
      central += new_central_record(spec.name, spec.data.size(), crc, at);
      ++out.plan().entries_written;
    }
  }
  const uint64_t cd_offset = out.offset();
  const uint64_t cd_size = central.size();
  out.append(std::move(central));
  append_end_records(out, source, layout, entries.size(), cd_offset, cd_size);
  return out.finish();
}

std::string render_plan(const ZipRewritePlan& plan, uint64_t offset, const SourceReader& read_source) {
  std::string out;
  out.reserve(static_cast<size_t>(plan.size > offset ? plan.size - offset : 0));
  uint64_t at = 0;
  for (const ZipPiece& p : plan.pieces) {
    const uint64_t end = at + p.length;
    if (end > offset) {
      const uint64_t skip = offset > at ? offset - at : 0;
      const uint64_t n = p.length - skip;
      if (p.from_source) {
        const size_t old = out.size();
        out.resize(old + static_cast<size_t>(n));
        read_source(p.source_offset + skip, out.data() + old, static_cast<size_t>(n));
      } else {
        out.append(p.bytes, static_cast<size_t>(skip), static_cast<size_t>(n));
      }
    }
    at = end;
  }
  return out;
}

uint32_t zipfmt::crc32(std::string_view data) { return crc32_of(data); }

void write_plan(const ZipRewritePlan& plan, int source_fd, int dest_fd, const std::string& dest_name) {
  for (const ZipPiece& p : plan.pieces) {
    if (p.from_source) {
      copy_range(source_fd, p.source_offset, p.length, dest_fd, dest_name);
    } else {
      write_all(dest_fd, p.bytes.data(), p.bytes.size(), dest_name);
    }
  }
}

bool plan_keeps_offsets(const ZipRewritePlan& plan, uint64_t source_size) {
  if (plan.size != source_size) return false;
  uint64_t offset = 0;
  for (const ZipPiece& p : plan.pieces) {
    if (p.from_source && p.source_offset != offset) return false;
    offset += p.length;
  }
  return offset == plan.size;
}

uint64_t write_plan_over_source(const ZipRewritePlan& plan, int fd, const std::string& name) {
  uint64_t offset = 0, written = 0;
  for (const ZipPiece& p : plan.pieces) {
    if (!p.from_source) {
      posix::pwrite_all(fd, p.bytes, offset, name);
      written += p.length;
    }
    offset += p.length;
  }
  return written;
}

}  // namespace tsarchive
