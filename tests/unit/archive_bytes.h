// Archives in memory for the tests of stamps and of writing them: an
// archive read from bytes, and bytes with a stamp written into them the way
// `extra set` writes one (the alignment-keeping extra/ writer).
#pragma once

#include <memory>
#include <string>

#include "core/edit/extra.h"
#include "core/provenance/producer_info.h"
#include "format/archive.h"
#include "format/byte_source.h"
#include "format/zip_writer.h"

inline std::unique_ptr<tsarchive::TorchArchive> open_bytes(const std::string& bytes) {
  return std::make_unique<tsarchive::TorchArchive>(tsarchive::make_memory_source(bytes, "<test>"));
}

// `bytes` with `stamp` as its extra/producer_info.json, in memory.
inline std::string with_stamp(const std::string& bytes, const std::string& stamp) {
  using namespace tsarchive;
  const auto archive = open_bytes(bytes);
  const ExtraEditPlan plan = plan_extra_edits(*archive, {ExtraEdit{kStampName, stamp}}, false);
  const ByteSource& source = archive->zip().source();
  return render_plan(plan.zip, 0, [&](uint64_t offset, char* out, size_t n) { source.read_at(offset, out, n); });
}
