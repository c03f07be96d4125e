// The fuzzed entry points, shared by the libFuzzer targets (fuzz_*.cc, clang,
// TSARCHIVE_FUZZ=ON) and the replay test of the normal build (replay.cc),
// which feeds testdata/hostile/ and testdata/fuzz-crashes/ through the same
// functions. Each takes arbitrary bytes and must return normally: malformed
// input is a tsarchive::Error, which they swallow; anything else escaping (or
// a crash, a leak, undefined behaviour under the sanitizers) is a finding.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tsarchive::fuzz {

// read_zip_layout, then every entry read through libzip (bounded).
void zip_layer(const uint8_t* data, size_t size);
// parse_pickle of the bytes, then the model walkers over the graph.
void pickle_reader(const uint8_t* data, size_t size);
// What `inspect` and the validation gate do to a file: inspect_source, then
// open_torchscript_archive + verify_archive.
void inspect_path(const uint8_t* data, size_t size);
// ZIP structure (zip_structure.cc): the bytes as an archive, and as mutations
// of a small PyTorch-shaped one (end records, comments, names, case, local vs
// central fields); wherever our layout parser accepts, miniz's end-record
// choice, Python's zipfile's and libzip's view must agree with it (a
// std::logic_error otherwise).
void zip_structure(const uint8_t* data, size_t size);

// What tsarchive does to JSON and text taken from an archive: the bounded
// parse and pretty print (bounded_json.h), an extra file's preview, the stamp
// and run self-check parsers, and escape_text (terminal_text.h), whose output
// must need no further escaping (checked; a violation aborts).
void json_text(const uint8_t* data, size_t size);

// What `run` does to a picture file (core/inputs/image.h): decode_image under small
// limits (4 Mpixel), then the picture written back as PNG and decoded again,
// which must give the same pixels (a difference aborts); and the bytes read
// as a labels file.
void image(const uint8_t* data, size_t size);

// What `verify --key` does to a signature file before any file of the model
// is read (core/provenance/model_signature.h): the bundle parse (bounded JSON, base64,
// the envelope), the statement parse of its payload (names, duplicates,
// digests, the root) and the PAEs; the bytes are also parsed as a statement.
void signature_bundle(const uint8_t* data, size_t size);
// Sigstore keyless material (core/provenance/sigstore_trust_root.h, transparency_log.h):
// the bytes parsed as a trust root, and as a keyless bundle whose log entries are
// parsed, their SET payloads made and their inclusion proofs walked.
void sigstore_trust_root(const uint8_t* data, size_t size);
// The load-safety verdict (core/inspect/load_safety.h): scan_pickle of the bytes, which
// must end with a result (never throw), and assess_load_safety of them as a
// file, which must give a verdict for every loader of a pickle it reads (an
// empty one aborts) or a tsarchive::Error for what the ZIP checks refuse.
void load_safety(const uint8_t* data, size_t size);
// What tsarchive does to a worker's reply before it decodes it (measure_cbor,
// base/bounded_json.h): the shape must stay within the bounds it was given,
// and a reply it measures well-formed is then decoded (from_cbor) as
// decode_result would. What to_cbor writes of the decoded value must measure
// well-formed too (an honest worker's reply is never refused; a violation
// aborts).
void worker_reply(const uint8_t* data, size_t size);

}  // namespace tsarchive::fuzz
