#include "core/provenance/sigstore_trust_root.h"

#include <cstdio>
#include <ctime>

#include "base/bounded_json.h"
#include "base/error.h"
#include "core/provenance/signed_json.h"

namespace tsarchive {
namespace {

using nlohmann::json;
using namespace signed_json;

// Most log keys, authorities and certificates a trust root may list.
constexpr size_t kMaxEntries = 256;

ValidityPeriod parse_valid_for(const json& holder, const std::string& where) {
  ValidityPeriod out;
  const json* valid_for = optional_member(holder, "validFor");
  if (valid_for == nullptr) return out;
  for (const char* key : {"start", "end"}) {
    const json* value = optional_member(*valid_for, key);
    if (value == nullptr) continue;
    const std::optional<int64_t> at = value->is_string() ? parse_rfc3339(value->get<std::string>()) : std::nullopt;
    if (!at) throw_signature_invalid(where + "'s validFor." + key + " is not an RFC 3339 time");
    (std::string_view(key) == "start" ? out.start : out.end) = *at;
  }
  return out;
}

TransparencyLogKey parse_tlog(const json& tlog, size_t index) {
  const std::string where = "tlogs[" + std::to_string(index) + "]";
  TransparencyLogKey out;
  if (const json* url = optional_member(tlog, "baseUrl"); url != nullptr && url->is_string()) out.base_url = url->get<std::string>();
  const json& key = member(tlog, "publicKey", where);
  out.key = PublicKey::from_der(base64_member(key, "rawBytes", where + ".publicKey"));
  if (const json* details = optional_member(key, "keyDetails"); details != nullptr && details->is_string()) {
    out.key_details = details->get<std::string>();
  }
  out.valid_for = parse_valid_for(key, where + ".publicKey");
  out.key_id = base64_member(member(tlog, "logId", where), "keyId", where + ".logId");
  return out;
}

CertificateAuthority parse_authority(const json& authority, size_t index) {
  const std::string where = "certificateAuthorities[" + std::to_string(index) + "]";
  CertificateAuthority out;
  if (const json* uri = optional_member(authority, "uri"); uri != nullptr && uri->is_string()) out.uri = uri->get<std::string>();
  const json& certs = array_member(member(authority, "certChain", where), "certificates", where + ".certChain");
  if (certs.empty() || certs.size() > kMaxEntries) throw_signature_invalid(where + " has no certificate chain");
  for (const json& cert : certs) {
    try {
      out.chain.push_back(Certificate::from_der(base64_member(cert, "rawBytes", where + "'s certificate")));
    } catch (const Error& e) {
      throw_signature_invalid(where + ": " + e.what());
    }
  }
  out.valid_for = parse_valid_for(authority, where);
  return out;
}

// Days from 1970-01-01 to year-month-day (proleptic Gregorian; H. Hinnant's days_from_civil).
int64_t days_from_civil(int64_t y, unsigned m, unsigned d) {
  y -= m <= 2;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const auto yoe = static_cast<unsigned>(y - era * 400);
  const unsigned doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + static_cast<int64_t>(doe) - 719468;
}

bool digits(std::string_view text, size_t at, size_t count, int& out) {
  if (at + count > text.size()) return false;
  out = 0;
  for (size_t i = at; i < at + count; ++i) {
    if (text[i] < '0' || text[i] > '9') return false;
    out = out * 10 + (text[i] - '0');
  }
  return true;
}

}  // namespace

const TransparencyLogKey* SigstoreTrustRoot::log(std::string_view key_id) const {
  for (const TransparencyLogKey& t : tlogs) {
    if (t.key_id == key_id) return &t;
  }
  return nullptr;
}

std::optional<int64_t> parse_rfc3339(std::string_view text) {
  int year = 0, month = 0, day = 0, hour = 0, minute = 0, second = 0;
  if (!digits(text, 0, 4, year) || text.size() < 20 || text[4] != '-' || !digits(text, 5, 2, month) || text[7] != '-' ||
      !digits(text, 8, 2, day) || (text[10] != 'T' && text[10] != 't') || !digits(text, 11, 2, hour) || text[13] != ':' ||
      !digits(text, 14, 2, minute) || text[16] != ':' || !digits(text, 17, 2, second)) {
    return std::nullopt;
  }
  if (month < 1 || month > 12 || day < 1 || day > 31 || hour > 23 || minute > 59 || second > 60) return std::nullopt;
  size_t at = 19;
  if (text[at] == '.') {
    ++at;
    const size_t first = at;
    while (at < text.size() && text[at] >= '0' && text[at] <= '9') ++at;
    if (at == first) return std::nullopt;
  }
  int64_t offset = 0;
  const std::string_view zone = text.substr(at);
  if (zone == "Z" || zone == "z") {
    offset = 0;
  } else if (zone.size() == 6 && (zone[0] == '+' || zone[0] == '-') && zone[3] == ':') {
    int oh = 0, om = 0;
    if (!digits(zone, 1, 2, oh) || !digits(zone, 4, 2, om)) return std::nullopt;
    offset = (zone[0] == '+' ? 1 : -1) * (oh * 3600 + om * 60);
  } else {
    return std::nullopt;
  }
  const int64_t days = days_from_civil(year, static_cast<unsigned>(month), static_cast<unsigned>(day));
  return days * 86400 + hour * 3600 + minute * 60 + second - offset;
}

std::string format_utc(int64_t seconds) {
  const auto t = static_cast<time_t>(seconds);
  struct tm parts {};
  if (gmtime_r(&t, &parts) == nullptr) return std::to_string(seconds);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &parts);
  return text;
}

SigstoreTrustRoot parse_trust_root(std::string_view text) {
  std::string problem;
  const std::optional<json> doc = parse_bounded_json(text, &problem, 32, kMaxTrustRootBytes);
  if (!doc) throw_signature_invalid("the trust root is not a Sigstore trusted_root.json: " + problem);
  if (const std::string media = string_member(*doc, "mediaType", "the trust root"); media != kTrustRootMediaType) {
    throw_signature_invalid("the trust root's media type is '" + media.substr(0, 80) + "', not " +
                            std::string(kTrustRootMediaType));
  }
  SigstoreTrustRoot root;
  const json& tlogs = array_member(*doc, "tlogs", "the trust root", false);
  const json& authorities = array_member(*doc, "certificateAuthorities", "the trust root", false);
  if (tlogs.size() > kMaxEntries || authorities.size() > kMaxEntries) {
    throw_signature_invalid("the trust root lists more than " + std::to_string(kMaxEntries) + " logs or authorities");
  }
  for (size_t i = 0; i < tlogs.size(); ++i) root.tlogs.push_back(parse_tlog(tlogs[i], i));
  for (size_t i = 0; i < authorities.size(); ++i) root.certificate_authorities.push_back(parse_authority(authorities[i], i));
  root.ctlogs = array_member(*doc, "ctlogs", "the trust root", false).size();
  root.timestamp_authorities = array_member(*doc, "timestampAuthorities", "the trust root", false).size();
  if (root.tlogs.empty()) throw_signature_invalid("the trust root lists no transparency log (tlogs)");
  if (root.certificate_authorities.empty()) throw_signature_invalid("the trust root lists no certificate authority");
  return root;
}

}  // namespace tsarchive
