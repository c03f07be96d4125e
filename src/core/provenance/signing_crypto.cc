#include "core/provenance/signing_crypto.h"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/stack.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <cstring>
#include <ctime>

#include "base/base64.h"
#include "base/error.h"
#include "base/runtime_library.h"
#include "core/provenance/digest.h"

namespace tsarchive {
namespace {

// The libcrypto functions used here, bound at first use (see the header).
struct Crypto {
  decltype(&::BIO_new_mem_buf) bio_new_mem_buf;
  decltype(&::BIO_new) bio_new;
  decltype(&::BIO_s_mem) bio_s_mem;
  decltype(&::BIO_ctrl) bio_ctrl;
  decltype(&::BIO_free) bio_free;
  decltype(&::ERR_clear_error) err_clear;
  decltype(&::PEM_read_bio_PrivateKey) read_private_key;
  decltype(&::PEM_read_bio_PUBKEY) read_pubkey;
  decltype(&::PEM_read_bio_X509) read_x509;
  decltype(&::EVP_PKEY_free) pkey_free;
  decltype(&::EVP_PKEY_get_base_id) pkey_base_id;
  decltype(&::EVP_PKEY_get_group_name) pkey_group_name;
  decltype(&::EVP_PKEY_eq) pkey_eq;
  decltype(&::EVP_PKEY_up_ref) pkey_up_ref;
  decltype(&::i2d_PUBKEY) i2d_pubkey;
  decltype(&::EVP_MD_CTX_new) md_ctx_new;
  decltype(&::EVP_MD_CTX_free) md_ctx_free;
  decltype(&::EVP_sha256) sha256;
  decltype(&::EVP_sha384) sha384;
  decltype(&::EVP_sha512) sha512;
  decltype(&::EVP_DigestSignInit) sign_init;
  decltype(&::EVP_DigestSign) sign;
  decltype(&::EVP_DigestVerifyInit) verify_init;
  decltype(&::EVP_DigestVerify) verify;
  decltype(&::d2i_X509) d2i_x509;
  decltype(&::i2d_X509) i2d_x509;
  decltype(&::X509_free) x509_free;
  decltype(&::X509_up_ref) x509_up_ref;
  decltype(&::X509_get_pubkey) x509_get_pubkey;
  decltype(&::X509_get_subject_name) x509_subject;
  decltype(&::X509_get_issuer_name) x509_issuer;
  decltype(&::X509_NAME_print_ex) name_print;
  decltype(&::X509_get_key_usage) key_usage;
  decltype(&::X509_get_extended_key_usage) extended_key_usage;
  decltype(&::X509_STORE_new) store_new;
  decltype(&::X509_STORE_free) store_free;
  decltype(&::X509_STORE_add_cert) store_add_cert;
  decltype(&::X509_STORE_CTX_new) store_ctx_new;
  decltype(&::X509_STORE_CTX_free) store_ctx_free;
  decltype(&::X509_STORE_CTX_init) store_ctx_init;
  decltype(&::X509_STORE_CTX_get_error) store_ctx_error;
  decltype(&::X509_STORE_CTX_get_error_depth) store_ctx_error_depth;
  decltype(&::X509_verify_cert) verify_cert;
  decltype(&::X509_verify_cert_error_string) verify_error_string;
  decltype(&::OPENSSL_sk_new_null) sk_new_null;
  decltype(&::OPENSSL_sk_push) sk_push;
  decltype(&::OPENSSL_sk_free) sk_free;
  decltype(&::OPENSSL_sk_num) sk_num;
  decltype(&::OPENSSL_sk_value) sk_value;
  decltype(&::d2i_PUBKEY) d2i_pubkey;
  decltype(&::X509_STORE_CTX_set_time) store_ctx_set_time;
  decltype(&::X509_get_ext_d2i) get_ext_d2i;
  decltype(&::GENERAL_NAMES_free) general_names_free;
  decltype(&::ASN1_STRING_get0_data) asn1_string_data;
  decltype(&::ASN1_STRING_length) asn1_string_length;
  decltype(&::OBJ_txt2obj) obj_txt2obj;
  decltype(&::ASN1_OBJECT_free) asn1_object_free;
  decltype(&::X509_get_ext_by_OBJ) get_ext_by_obj;
  decltype(&::X509_get_ext) get_ext;
  decltype(&::X509_EXTENSION_get_data) extension_data;
  decltype(&::X509_get0_notBefore) not_before;
  decltype(&::X509_get0_notAfter) not_after;
  decltype(&::ASN1_TIME_to_tm) asn1_time_to_tm;
};

Crypto load_crypto() {
  const RuntimeLibrary library(TSARCHIVE_LIBCRYPTO_SONAME,
                               "install OpenSSL's libcrypto (Debian and Ubuntu: apt-get install libssl3)");
  Crypto c{};
  library.bind("BIO_new_mem_buf", c.bio_new_mem_buf);
  library.bind("BIO_new", c.bio_new);
  library.bind("BIO_s_mem", c.bio_s_mem);
  library.bind("BIO_ctrl", c.bio_ctrl);
  library.bind("BIO_free", c.bio_free);
  library.bind("ERR_clear_error", c.err_clear);
  library.bind("PEM_read_bio_PrivateKey", c.read_private_key);
  library.bind("PEM_read_bio_PUBKEY", c.read_pubkey);
  library.bind("PEM_read_bio_X509", c.read_x509);
  library.bind("EVP_PKEY_free", c.pkey_free);
  library.bind("EVP_PKEY_get_base_id", c.pkey_base_id);
  library.bind("EVP_PKEY_get_group_name", c.pkey_group_name);
  library.bind("EVP_PKEY_eq", c.pkey_eq);
  library.bind("EVP_PKEY_up_ref", c.pkey_up_ref);
  library.bind("i2d_PUBKEY", c.i2d_pubkey);
  library.bind("EVP_MD_CTX_new", c.md_ctx_new);
  library.bind("EVP_MD_CTX_free", c.md_ctx_free);
  library.bind("EVP_sha256", c.sha256);
  library.bind("EVP_sha384", c.sha384);
  library.bind("EVP_sha512", c.sha512);
  library.bind("EVP_DigestSignInit", c.sign_init);
  library.bind("EVP_DigestSign", c.sign);
  library.bind("EVP_DigestVerifyInit", c.verify_init);
  library.bind("EVP_DigestVerify", c.verify);
  library.bind("d2i_X509", c.d2i_x509);
  library.bind("i2d_X509", c.i2d_x509);
  library.bind("X509_free", c.x509_free);
  library.bind("X509_up_ref", c.x509_up_ref);
  library.bind("X509_get_pubkey", c.x509_get_pubkey);
  library.bind("X509_get_subject_name", c.x509_subject);
  library.bind("X509_get_issuer_name", c.x509_issuer);
  library.bind("X509_NAME_print_ex", c.name_print);
  library.bind("X509_get_key_usage", c.key_usage);
  library.bind("X509_get_extended_key_usage", c.extended_key_usage);
  library.bind("X509_STORE_new", c.store_new);
  library.bind("X509_STORE_free", c.store_free);
  library.bind("X509_STORE_add_cert", c.store_add_cert);
  library.bind("X509_STORE_CTX_new", c.store_ctx_new);
  library.bind("X509_STORE_CTX_free", c.store_ctx_free);
  library.bind("X509_STORE_CTX_init", c.store_ctx_init);
  library.bind("X509_STORE_CTX_get_error", c.store_ctx_error);
  library.bind("X509_STORE_CTX_get_error_depth", c.store_ctx_error_depth);
  library.bind("X509_verify_cert", c.verify_cert);
  library.bind("X509_verify_cert_error_string", c.verify_error_string);
  library.bind("OPENSSL_sk_new_null", c.sk_new_null);
  library.bind("OPENSSL_sk_push", c.sk_push);
  library.bind("OPENSSL_sk_free", c.sk_free);
  library.bind("OPENSSL_sk_num", c.sk_num);
  library.bind("OPENSSL_sk_value", c.sk_value);
  library.bind("d2i_PUBKEY", c.d2i_pubkey);
  library.bind("X509_STORE_CTX_set_time", c.store_ctx_set_time);
  library.bind("X509_get_ext_d2i", c.get_ext_d2i);
  library.bind("GENERAL_NAMES_free", c.general_names_free);
  library.bind("ASN1_STRING_get0_data", c.asn1_string_data);
  library.bind("ASN1_STRING_length", c.asn1_string_length);
  library.bind("OBJ_txt2obj", c.obj_txt2obj);
  library.bind("ASN1_OBJECT_free", c.asn1_object_free);
  library.bind("X509_get_ext_by_OBJ", c.get_ext_by_obj);
  library.bind("X509_get_ext", c.get_ext);
  library.bind("X509_EXTENSION_get_data", c.extension_data);
  library.bind("X509_get0_notBefore", c.not_before);
  library.bind("X509_get0_notAfter", c.not_after);
  library.bind("ASN1_TIME_to_tm", c.asn1_time_to_tm);
  return c;
}

const Crypto& crypto() {
  static const Crypto loaded = load_crypto();
  return loaded;
}

// A read-only memory BIO over `bytes` (which must outlive it).
std::unique_ptr<BIO, int (*)(BIO*)> memory_bio(std::string_view bytes) {
  const Crypto& c = crypto();
  if (bytes.size() > static_cast<size_t>(INT32_MAX)) throw std::bad_alloc();
  BIO* bio = c.bio_new_mem_buf(bytes.data(), static_cast<int>(bytes.size()));
  if (bio == nullptr) throw std::bad_alloc();
  return {bio, c.bio_free};
}

std::shared_ptr<evp_pkey_st> own_pkey(EVP_PKEY* pkey) { return {pkey, crypto().pkey_free}; }
std::shared_ptr<x509_st> own_x509(X509* x509) { return {x509, crypto().x509_free}; }

std::string group_name(const EVP_PKEY* pkey) {
  const Crypto& c = crypto();
  if (c.pkey_base_id(pkey) != EVP_PKEY_EC) return {};
  char name[80] = {};
  size_t length = 0;
  if (c.pkey_group_name(pkey, name, sizeof name, &length) != 1) return {};
  return std::string(name, strnlen(name, sizeof name));
}

// "P-256" for a supported key, empty for anything else.
std::string curve_of(const EVP_PKEY* pkey) {
  const std::string group = group_name(pkey);
  if (group == "prime256v1" || group == "P-256") return "P-256";
  if (group == "secp384r1" || group == "P-384") return "P-384";
  if (group == "secp521r1" || group == "P-521") return "P-521";
  return {};
}

// What a key that is not accepted is, in a few words: "an EC key on secp256k1", "an RSA key".
std::string key_kind(const EVP_PKEY* pkey) {
  const int id = crypto().pkey_base_id(pkey);
  if (id == EVP_PKEY_EC) return "an EC key on " + group_name(pkey);
  if (id == EVP_PKEY_RSA) return "an RSA key";
  if (id == EVP_PKEY_ED25519) return "an Ed25519 key";
  if (id == EVP_PKEY_DSA) return "a DSA key";
  return "a key of type " + std::to_string(id);
}

const EVP_MD* digest_for(const EVP_PKEY* pkey) {
  const Crypto& c = crypto();
  const std::string curve = curve_of(pkey);
  if (curve == "P-384") return c.sha384();
  if (curve == "P-521") return c.sha512();
  return c.sha256();
}

bool verify_with(const EVP_PKEY* pkey, const EVP_MD* md, std::string_view message, std::string_view signature) {
  const Crypto& c = crypto();
  std::unique_ptr<EVP_MD_CTX, void (*)(EVP_MD_CTX*)> ctx(c.md_ctx_new(), c.md_ctx_free);
  if (!ctx) throw std::bad_alloc();
  bool ok = c.verify_init(ctx.get(), nullptr, md, nullptr, const_cast<EVP_PKEY*>(pkey)) == 1 &&
            c.verify(ctx.get(), reinterpret_cast<const unsigned char*>(signature.data()), signature.size(),
                     reinterpret_cast<const unsigned char*>(message.data()), message.size()) == 1;
  c.err_clear();
  return ok;
}

std::string name_text(const X509_NAME* name) {
  const Crypto& c = crypto();
  std::unique_ptr<BIO, int (*)(BIO*)> bio(c.bio_new(c.bio_s_mem()), c.bio_free);
  if (!bio) throw std::bad_alloc();
  // RFC 2253 order and escaping, UTF-8 kept as UTF-8 (the terminal layer escapes for display).
  c.name_print(bio.get(), name, 0, XN_FLAG_RFC2253 & ~ASN1_STRFLGS_ESC_MSB);
  char* data = nullptr;
  const long n = c.bio_ctrl(bio.get(), BIO_CTRL_INFO, 0, &data);
  return n > 0 && data != nullptr ? std::string(data, static_cast<size_t>(n)) : std::string();
}

// PEM's 64-column base64 of a DER SubjectPublicKeyInfo, as Python's
// cryptography (and OpenSSL) write it: the text model_signing's key hint hashes.
std::string public_key_pem(const EVP_PKEY* pkey) {
  const Crypto& c = crypto();
  const int n = c.i2d_pubkey(pkey, nullptr);
  if (n <= 0) throw Error(ErrorKind::Internal, "OpenSSL could not encode a public key");
  std::string der(static_cast<size_t>(n), '\0');
  auto* out = reinterpret_cast<unsigned char*>(der.data());
  c.i2d_pubkey(pkey, &out);
  const std::string b64 = base64_encode(der);
  std::string pem = "-----BEGIN PUBLIC KEY-----\n";
  for (size_t i = 0; i < b64.size(); i += 64) pem += b64.substr(i, 64) + "\n";
  return pem + "-----END PUBLIC KEY-----\n";
}

// The PEM password callback: the password given, or none (an encrypted key
// without --key-password-file fails instead of prompting on the terminal).
int password_callback(char* buf, int size, int, void* user) {
  const auto* password = static_cast<const std::string*>(user);
  if (password == nullptr || size <= 0) return -1;
  const size_t n = std::min(password->size(), static_cast<size_t>(size));
  std::memcpy(buf, password->data(), n);
  return static_cast<int>(n);
}

}  // namespace

PublicKey PublicKey::from_pem(std::string_view pem, const std::string& file) {
  const Crypto& c = crypto();
  auto bio = memory_bio(pem);
  EVP_PKEY* pkey = c.read_pubkey(bio.get(), nullptr, nullptr, nullptr);
  c.err_clear();
  if (pkey == nullptr) {
    throw Error(ErrorKind::Usage, "not a PEM public key (-----BEGIN PUBLIC KEY-----)", file,
                "give the public half: openssl ec -in PRIVATE.pem -pubout -out PUBLIC.pem");
  }
  PublicKey key{own_pkey(pkey)};
  if (curve_of(pkey).empty()) {  // the user's --key: a usage error (exit 2), as at sign
    throw Error(ErrorKind::Usage, "unsupported key: " + key_kind(pkey) + "; accepted: " + std::string(kAcceptedKeys),
                file);
  }
  return key;
}

std::optional<PublicKey> PublicKey::from_der(std::string_view spki) {
  const Crypto& c = crypto();
  if (spki.size() > (1u << 20)) return std::nullopt;
  const auto* p = reinterpret_cast<const unsigned char*>(spki.data());
  EVP_PKEY* pkey = c.d2i_pubkey(nullptr, &p, static_cast<long>(spki.size()));
  c.err_clear();
  if (pkey == nullptr) return std::nullopt;
  PublicKey key{own_pkey(pkey)};
  if (p != reinterpret_cast<const unsigned char*>(spki.data()) + spki.size() || curve_of(pkey).empty()) return std::nullopt;
  return key;
}

bool PublicKey::verifies(std::string_view message, std::string_view signature) const {
  return verify_with(pkey.get(), digest_for(pkey.get()), message, signature);
}

bool PublicKey::verifies_sha256(std::string_view message, std::string_view signature) const {
  return verify_with(pkey.get(), crypto().sha256(), message, signature);
}

std::string PublicKey::fingerprint() const { return sha256_hex(public_key_pem(pkey.get())); }
std::string PublicKey::curve() const { return curve_of(pkey.get()); }
bool PublicKey::same_key(const PublicKey& other) const { return crypto().pkey_eq(pkey.get(), other.pkey.get()) == 1; }

PrivateKey PrivateKey::from_pem(std::string_view pem, const std::string& file, const std::optional<std::string>& password) {
  const Crypto& c = crypto();
  auto bio = memory_bio(pem);
  EVP_PKEY* pkey = c.read_private_key(bio.get(), nullptr, password_callback,
                                      password ? const_cast<std::string*>(&*password) : nullptr);
  c.err_clear();
  if (pkey == nullptr) {
    if (pem.find("ENCRYPTED") != std::string_view::npos) {
      throw Error(ErrorKind::Usage,
                  password ? "cannot decrypt the private key with that password" : "the private key is encrypted", file,
                  password ? "check --key-password-file" : "give its password in a file: --key-password-file FILE");
    }
    throw Error(ErrorKind::Usage, "not a PEM private key", file,
                "make one with: openssl ecparam -name prime256v1 -genkey -noout -out PRIVATE.pem");
  }
  PrivateKey key{own_pkey(pkey)};
  if (curve_of(pkey).empty()) {
    throw Error(ErrorKind::Usage, "unsupported key: " + key_kind(pkey) + "; accepted: " + std::string(kAcceptedKeys), file);
  }
  return key;
}

std::string PrivateKey::sign(std::string_view message) const {
  const Crypto& c = crypto();
  std::unique_ptr<EVP_MD_CTX, void (*)(EVP_MD_CTX*)> ctx(c.md_ctx_new(), c.md_ctx_free);
  if (!ctx) throw std::bad_alloc();
  size_t length = 0;
  const auto* data = reinterpret_cast<const unsigned char*>(message.data());
  if (c.sign_init(ctx.get(), nullptr, digest_for(pkey.get()), nullptr, pkey.get()) != 1 ||
      c.sign(ctx.get(), nullptr, &length, data, message.size()) != 1) {
    c.err_clear();
    throw Error(ErrorKind::Internal, "OpenSSL could not start an ECDSA signature");
  }
  std::string signature(length, '\0');
  if (c.sign(ctx.get(), reinterpret_cast<unsigned char*>(signature.data()), &length, data, message.size()) != 1) {
    c.err_clear();
    throw Error(ErrorKind::Internal, "OpenSSL could not make an ECDSA signature");
  }
  signature.resize(length);
  return signature;
}

PublicKey PrivateKey::public_key() const {
  crypto().pkey_up_ref(pkey.get());
  return PublicKey{own_pkey(pkey.get())};
}

Certificate Certificate::from_der(std::string_view der) {
  const Crypto& c = crypto();
  const auto* p = reinterpret_cast<const unsigned char*>(der.data());
  if (der.size() > (64u << 20)) throw_signature_invalid("a certificate larger than 64 MiB");
  X509* x509 = c.d2i_x509(nullptr, &p, static_cast<long>(der.size()));
  c.err_clear();
  if (x509 == nullptr || p != reinterpret_cast<const unsigned char*>(der.data()) + der.size()) {
    if (x509 != nullptr) c.x509_free(x509);
    throw_signature_invalid("a certificate of the bundle is not DER X.509");
  }
  return Certificate{own_x509(x509)};
}

std::string Certificate::der() const {
  const Crypto& c = crypto();
  const int n = c.i2d_x509(x509.get(), nullptr);
  if (n <= 0) throw Error(ErrorKind::Internal, "OpenSSL could not encode a certificate");
  std::string out(static_cast<size_t>(n), '\0');
  auto* p = reinterpret_cast<unsigned char*>(out.data());
  c.i2d_x509(x509.get(), &p);
  return out;
}

std::string Certificate::subject() const { return name_text(crypto().x509_subject(x509.get())); }
std::string Certificate::issuer() const { return name_text(crypto().x509_issuer(x509.get())); }
std::string Certificate::sha256() const { return sha256_hex(der()); }

std::string Certificate::signing_usage_problem() const {
  // RFC 5280 (4.2.1.3, 4.2.1.12): each of the two extensions that is present
  // restricts the key, so a certificate for encryption only does not sign
  // because its extended key usage says codeSigning. UINT32_MAX: absent.
  const Crypto& c = crypto();
  const uint32_t usage = c.key_usage(x509.get());
  const uint32_t extended = c.extended_key_usage(x509.get());
  if (usage != UINT32_MAX && (usage & KU_DIGITAL_SIGNATURE) == 0) return "its key usage does not include digitalSignature";
  if (extended != UINT32_MAX && (extended & (XKU_CODE_SIGN | XKU_ANYEKU)) == 0) {
    return "its extended key usage does not include codeSigning";
  }
  return {};
}

PublicKey Certificate::public_key() const {
  EVP_PKEY* pkey = crypto().x509_get_pubkey(x509.get());
  crypto().err_clear();
  if (pkey == nullptr) throw_signature_invalid("the signing certificate's public key cannot be read");
  PublicKey key{own_pkey(pkey)};
  if (curve_of(pkey).empty()) {
    throw_signature_invalid("the signing certificate holds " + key_kind(pkey) + "; accepted: " + std::string(kAcceptedKeys));
  }
  return key;
}

std::vector<std::string> Certificate::san_identities() const {
  const Crypto& c = crypto();
  auto* names = static_cast<GENERAL_NAMES*>(c.get_ext_d2i(x509.get(), NID_subject_alt_name, nullptr, nullptr));
  c.err_clear();
  std::vector<std::string> out;
  if (names == nullptr) return out;
  const auto* stack = reinterpret_cast<const OPENSSL_STACK*>(names);
  for (int i = 0; i < c.sk_num(stack); ++i) {
    const auto* name = static_cast<const GENERAL_NAME*>(c.sk_value(stack, i));
    if (name->type != GEN_EMAIL && name->type != GEN_URI) continue;
    const ASN1_STRING* text = name->d.ia5;
    out.emplace_back(reinterpret_cast<const char*>(c.asn1_string_data(text)),
                     static_cast<size_t>(std::max(0, c.asn1_string_length(text))));
  }
  c.general_names_free(names);
  return out;
}

std::optional<std::string> Certificate::extension_value(const std::string& oid) const {
  const Crypto& c = crypto();
  std::unique_ptr<ASN1_OBJECT, void (*)(ASN1_OBJECT*)> object(c.obj_txt2obj(oid.c_str(), 1), c.asn1_object_free);
  c.err_clear();
  if (!object) throw Error(ErrorKind::Internal, "OpenSSL does not read the OID " + oid);
  const int at = c.get_ext_by_obj(x509.get(), object.get(), -1);
  if (at < 0) return std::nullopt;
  const ASN1_OCTET_STRING* data = c.extension_data(c.get_ext(x509.get(), at));
  if (data == nullptr) return std::nullopt;
  return std::string(reinterpret_cast<const char*>(c.asn1_string_data(data)),
                     static_cast<size_t>(std::max(0, c.asn1_string_length(data))));
}

namespace {

std::optional<int64_t> epoch_seconds(const ASN1_TIME* time) {
  struct tm parts {};
  if (time == nullptr || crypto().asn1_time_to_tm(time, &parts) != 1) return std::nullopt;
  return static_cast<int64_t>(timegm(&parts));
}

}  // namespace

std::pair<int64_t, int64_t> Certificate::validity() const {
  const Crypto& c = crypto();
  const std::optional<int64_t> start = epoch_seconds(c.not_before(x509.get()));
  const std::optional<int64_t> end = epoch_seconds(c.not_after(x509.get()));
  c.err_clear();
  if (!start || !end) throw_signature_invalid("a certificate's validity cannot be read");
  return {*start, *end};
}

std::vector<Certificate> certificates_from_pem(std::string_view pem, const std::string& file) {
  const Crypto& c = crypto();
  auto bio = memory_bio(pem);
  std::vector<Certificate> out;
  while (X509* x509 = c.read_x509(bio.get(), nullptr, nullptr, nullptr)) out.push_back(Certificate{own_x509(x509)});
  c.err_clear();
  if (out.empty()) throw Error(ErrorKind::Usage, "no PEM certificate (-----BEGIN CERTIFICATE-----) in it", file);
  return out;
}

std::string chain_problem(const Certificate& leaf, const std::vector<Certificate>& intermediates,
                          const std::vector<Certificate>& roots, std::optional<int64_t> at) {
  const Crypto& c = crypto();
  std::unique_ptr<X509_STORE, void (*)(X509_STORE*)> store(c.store_new(), c.store_free);
  std::unique_ptr<X509_STORE_CTX, void (*)(X509_STORE_CTX*)> ctx(c.store_ctx_new(), c.store_ctx_free);
  std::unique_ptr<OPENSSL_STACK, void (*)(OPENSSL_STACK*)> untrusted(c.sk_new_null(), c.sk_free);
  if (!store || !ctx || !untrusted) throw std::bad_alloc();
  for (const Certificate& root : roots) c.store_add_cert(store.get(), root.x509.get());
  for (const Certificate& cert : intermediates) c.sk_push(untrusted.get(), cert.x509.get());
  if (c.store_ctx_init(ctx.get(), store.get(), leaf.x509.get(), reinterpret_cast<STACK_OF(X509)*>(untrusted.get())) != 1) {
    throw std::bad_alloc();
  }
  if (at) c.store_ctx_set_time(ctx.get(), 0, static_cast<time_t>(*at));
  const int ok = c.verify_cert(ctx.get());
  c.err_clear();
  if (ok == 1) return {};
  const int error = c.store_ctx_error(ctx.get());
  const char* why = c.verify_error_string(error);
  return std::string(why != nullptr ? why : "certificate verification failed") + " (certificate " +
         std::to_string(c.store_ctx_error_depth(ctx.get())) + " of the chain, 0 the signer's)";
}

}  // namespace tsarchive
