// Sigstore keyless verification (core/provenance/sigstore_keyless.h), offline:
// the trust root's parser, RFC 3339 times, RFC 6962 inclusion proofs, the SET's
// canonical payload, a fake Sigstore's bundles (testdata/sigstore, made by
// tests/sigstore/make_fake_sigstore.py) accepted in each form and refused for
// each tampering, `verify --trust-root` end to end, and a real production
// bundle checked against the real trust root.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "base/base64.h"
#include "base/error.h"
#include "cli/cli.h"
#include "core/provenance/digest.h"
#include "core/provenance/signed_json.h"
#include "core/provenance/signing.h"
#include "core/provenance/sigstore_keyless.h"
#include "core/provenance/transparency_log.h"
#include "helpers.h"

using namespace tsarchive;

namespace {

const std::string kIdentity = "signer@example.com";
const std::string kIssuer = "https://issuer.example";

SignatureTrust keyless_trust(const std::string& root_file = "sigstore/trusted_root.json", const std::string& identity = kIdentity,
                             const std::string& issuer = kIssuer) {
  SignatureTrust trust;
  trust.trust_root_file = testdata(root_file);
  trust.trust_root_json = slurp(trust.trust_root_file);
  trust.identity = identity;
  trust.oidc_issuer = issuer;
  return trust;
}

SignatureCheck check_fake(const std::string& bundle, const SignatureTrust& trust = keyless_trust()) {
  const std::string path = testdata("sigstore/" + bundle);
  return check_model_signature(testdata("sigstore/model.bin"), path, slurp(path), trust, ModelFilesOptions{});
}

// Why the fake bundle is refused ("accepted" when it is not).
std::string fake_bundle_refusal(const std::string& bundle, const SignatureTrust& trust = keyless_trust()) {
  try {
    check_fake(bundle, trust);
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::SignatureInvalid);
    CHECK(e.exit_code() == 7);
    return e.what();
  }
  return "accepted";
}

bool says(const std::string& text, const std::string& part) {
  INFO(text);
  return text.find(part) != std::string::npos;
}

std::string sha256_raw(std::string_view bytes) { return signed_json::hex_to_bytes(sha256_hex(bytes)); }

}  // namespace

TEST_CASE("sigstore: RFC 3339 times in seconds") {
  CHECK(parse_rfc3339("1970-01-01T00:00:00Z") == 0);
  CHECK(parse_rfc3339("2021-03-07T03:20:29Z") == 1615087229);
  CHECK(parse_rfc3339("2022-12-31T23:59:59.999Z") == 1672531199);
  CHECK(parse_rfc3339("2022-12-31T23:59:59+01:00") == 1672531199 - 3600);
  CHECK_FALSE(parse_rfc3339("2022-12-31 23:59:59Z"));
  CHECK_FALSE(parse_rfc3339("2022-13-01T00:00:00Z"));
  CHECK_FALSE(parse_rfc3339("2022-12-31T23:59:59"));
  CHECK(format_utc(1615087229) == "2021-03-07T03:20:29Z");
}

TEST_CASE("sigstore: the production trust root") {
  const SigstoreTrustRoot root = parse_trust_root(slurp(testdata("sigstore/production/trusted_root.json")));
  REQUIRE(root.tlogs.size() == 2);
  CHECK(root.tlogs[0].base_url == "https://rekor.sigstore.dev");
  CHECK(root.tlogs[0].key.has_value());
  // Rekor v1's log id is the SHA-256 of its key's DER.
  const auto doc = nlohmann::json::parse(slurp(testdata("sigstore/production/trusted_root.json")));
  CHECK(root.tlogs[0].key_id == sha256_raw(*base64_decode(doc["tlogs"][0]["publicKey"]["rawBytes"].get<std::string>())));
  CHECK_FALSE(root.tlogs[1].key.has_value());  // Rekor v2's Ed25519 key: kept, not usable
  REQUIRE(root.certificate_authorities.size() == 2);
  CHECK(root.certificate_authorities[0].valid_for.end == 1672531199);
  CHECK(root.certificate_authorities[1].chain.size() == 2);
  CHECK(root.ctlogs == 2);
}

TEST_CASE("sigstore: trust roots refused with the reason") {
  auto why = [](const std::string& text) -> std::string {
    try {
      parse_trust_root(text);
    } catch (const Error& e) {
      return e.what();
    }
    return "accepted";
  };
  CHECK(says(why("{}"), "mediaType"));
  CHECK(says(why(R"({"mediaType":"application/json"})"), "media type"));
  CHECK(says(why(std::string(100, '[')), "nested deeper"));
  const std::string media = R"("mediaType":"application/vnd.dev.sigstore.trustedroot+json;version=0.1")";
  CHECK(says(why("{" + media + R"(,"tlogs":[]})"), "no transparency log"));
  CHECK(says(why("{" + media + R"(,"tlogs":[{"publicKey":{"rawBytes":"!"},"logId":{"keyId":""}}]})"), "not base64"));
  CHECK(says(why("{" + media + R"(,"tlogs":[{"publicKey":{"rawBytes":"","validFor":{"start":"yesterday"}},"logId":{"keyId":""}}]})"),
             "RFC 3339"));
}

TEST_CASE("sigstore: RFC 6962 inclusion proofs") {
  const std::string a = merkle_leaf_hash("a"), b = merkle_leaf_hash("b"), c = merkle_leaf_hash("c");
  const std::string ab = merkle_node_hash(a, b);
  const std::string root = merkle_node_hash(ab, c);
  CHECK(merkle_root_from_proof(c, 2, 3, {ab}) == root);
  CHECK(merkle_root_from_proof(a, 0, 3, {b, c}) == root);
  CHECK(merkle_root_from_proof(b, 1, 3, {a, c}) == root);
  CHECK(merkle_root_from_proof(a, 0, 1, {}) == a);
  CHECK(merkle_root_from_proof(a, 0, 3, {b}) == std::nullopt);        // too short
  CHECK(merkle_root_from_proof(c, 2, 3, {ab, ab}) == std::nullopt);   // too long
  CHECK(merkle_root_from_proof(c, 3, 3, {ab}) == std::nullopt);       // outside the tree
  CHECK(merkle_root_from_proof(b, 1, 3, {c, a}) != root);             // hashes swapped
}

TEST_CASE("sigstore: the signed entry timestamp's canonical payload") {
  TlogEntry entry;
  entry.body = "{}";
  entry.integrated_time = 1718048845;
  entry.log_id = std::string("\xc0\xd2", 2);
  entry.log_index = 101487427;
  CHECK(signed_entry_timestamp_payload(entry) ==
        R"({"body":"e30=","integratedTime":1718048845,"logID":"c0d2","logIndex":101487427})");
}

TEST_CASE("sigstore: a fake Sigstore's keyless bundles in each form") {
  for (const char* bundle : {"good.sigstore.json", "good_v01_set_only.sigstore.json"}) {
    INFO(bundle);
    const SignatureCheck check = check_fake(bundle);
    CHECK(check.method == "keyless");
    CHECK(check.subject == kIdentity);
    CHECK(check.issuer == kIssuer);
    CHECK(check.curve == "P-256");
    CHECK(check.matches());
    CHECK(says(check.transparency, "https://rekor.example entry 1234 at 2025-01-01T00:01:00Z"));
  }
  CHECK(says(check_fake("good.sigstore.json").transparency, "(signed entry timestamp, inclusion proof)"));
  CHECK(says(check_fake("good_v01_set_only.sigstore.json").transparency, "(signed entry timestamp)"));
}

TEST_CASE("sigstore: keyless bundles refused for each tampering") {
  CHECK(says(fake_bundle_refusal("good.sigstore.json", keyless_trust("sigstore/trusted_root.json", "x@example.com")),
             "the signer is 'signer@example.com', not 'x@example.com'"));
  CHECK(says(fake_bundle_refusal("good.sigstore.json",
                                 keyless_trust("sigstore/trusted_root.json", kIdentity, "https://other.example")),
             "issued by 'https://issuer.example', not 'https://other.example'"));
  CHECK(says(fake_bundle_refusal("time_outside_certificate.sigstore.json"), "outside the signing certificate's validity"));
  // An inclusion proof alone: integratedTime is not signed, so it could be set inside an expired certificate's validity.
  CHECK(says(fake_bundle_refusal("proof_only_no_time.sigstore.json"), "no source of verified time"));
  CHECK(says(fake_bundle_refusal("set_other_key.sigstore.json"), "signed entry timestamp does not verify"));
  CHECK(says(fake_bundle_refusal("body_modified.sigstore.json"), "signed entry timestamp does not verify"));
  CHECK(says(fake_bundle_refusal("body_other_payload.sigstore.json"), "its body names another payload"));
  CHECK(says(fake_bundle_refusal("proof_wrong_hash.sigstore.json"), "inclusion proof does not lead to the root hash"));
  CHECK(says(fake_bundle_refusal("statement_changed.sigstore.json"), "does not verify with the signing certificate's key"));
  CHECK(says(fake_bundle_refusal("good.sigstore.json", keyless_trust("sigstore/trusted_root_other_ca.json")),
             "does not chain to a certificate authority of the trust root"));
  CHECK(says(fake_bundle_refusal("good.sigstore.json", keyless_trust("sigstore/trusted_root_ca_expired.json")),
             "no certificate authority of the trust root was valid at 2025-01-01T00:01:00Z"));
  // A log that is not the trust root's: the production root does not know the fake Rekor.
  CHECK(says(fake_bundle_refusal("good.sigstore.json", keyless_trust("sigstore/production/trusted_root.json")),
             "is not in the trust root"));
}

TEST_CASE("sigstore: a transparency-log entry with a member outside the bundle format is refused, naming it") {
  const std::string path = testdata("sigstore/good.sigstore.json");
  const nlohmann::json good = nlohmann::json::parse(slurp(path));
  for (const char* where : {"", "/logId", "/kindVersion", "/inclusionPromise", "/inclusionProof", "/inclusionProof/checkpoint"}) {
    INFO(where);
    nlohmann::json doc = good;
    doc["verificationMaterial"]["tlogEntries"][0][nlohmann::json::json_pointer(where)]["note"] = "unsigned";
    const Error e = error_of([&] { check_model_signature(testdata("sigstore/model.bin"), path, doc.dump(), keyless_trust(), {}); },
                             ErrorKind::SignatureInvalid, "has the member \"note\"");
    CHECK_THAT(e.what(), Catch::Contains("the transparency-log entry 0"));
  }
}

TEST_CASE("sigstore: a keyless bundle without --trust-root, and a key bundle with it") {
  SignatureTrust roots;
  roots.root_pems = {"unused"};
  roots.root_files = {"roots.pem"};
  try {
    check_fake("good.sigstore.json", roots);
    FAIL("accepted");
  } catch (const Error& e) {
    CHECK(says(e.what(), "transparency-log entries"));
    CHECK(says(e.hint(), "--trust-root"));
  }
  const std::string key_bundle = R"({"mediaType":"application/vnd.dev.sigstore.bundle.v0.3+json",)"
                                 R"("verificationMaterial":{"publicKey":{"hint":""},"tlogEntries":[]},)"
                                 R"("dsseEnvelope":{"payload":"e30=","payloadType":"application/vnd.in-toto+json",)"
                                 R"("signatures":[{"sig":"AAAA"}]}})";
  try {
    check_signature_bundle("key.sig", key_bundle, keyless_trust());
    FAIL("accepted");
  } catch (const Error& e) {
    CHECK(says(e.what(), "not made with Sigstore keyless signing"));
  }
}

TEST_CASE("sigstore: verify --trust-root end to end") {
  const std::vector<std::string> args = {"verify", testdata("sigstore/model.bin"), "--signature",
                                         testdata("sigstore/good.sigstore.json"), "--trust-root",
                                         testdata("sigstore/trusted_root.json"), "--identity", kIdentity, "--issuer", kIssuer};
  const CliResult good = run_cli(args);
  CHECK(good.code == 0);
  CHECK(says(good.out, "signed by signer@example.com, issued by https://issuer.example (Sigstore keyless, P-256)"));
  CHECK(says(good.out, "logged   https://rekor.example entry 1234"));
  std::vector<std::string> bad = args;
  bad[3] = testdata("sigstore/set_other_key.sigstore.json");
  const CliResult refused = run_cli(bad);
  CHECK(refused.code == 7);
  CHECK(says(refused.err, "set_other_key.sigstore.json"));
  std::vector<std::string> no_issuer(args.begin(), args.end() - 2);
  CHECK(run_cli(no_issuer).code == static_cast<int>(ErrorKind::Usage));
}

TEST_CASE("sigstore: a real production keyless bundle against the real trust root") {
  const std::string dir = testdata("sigstore/production/");
  const ModelBundle bundle = parse_bundle(slurp(dir + "pypi_attestation_models-0.0.4a2.tar.gz.sigstore"), true);
  const SigstoreTrustRoot root = parse_trust_root(slurp(dir + "trusted_root.json"));
  const KeylessPolicy policy{
      "https://github.com/trailofbits/pypi-attestation-models/.github/workflows/release.yml@refs/tags/v0.0.4a2",
      "https://token.actions.githubusercontent.com"};
  const KeylessCheck check = check_keyless_bundle(bundle, root, policy);
  CHECK(check.log == "https://rekor.sigstore.dev");
  CHECK(check.log_index == 101487427);
  CHECK(check.integrated_time == 1718048845);
  CHECK(check.set_verified);
  CHECK(check.inclusion_verified);
  CHECK(check.authority == "https://fulcio.sigstore.dev");
  // The statement names the artifact by its SHA-256.
  CHECK(says(check.payload, sha256_hex(slurp(dir + "pypi_attestation_models-0.0.4a2.tar.gz"))));
  KeylessPolicy other = policy;
  other.issuer = "https://accounts.google.com";
  CHECK_THROWS_WITH(check_keyless_bundle(bundle, root, other), Catch::Contains("not 'https://accounts.google.com'"));
}
