// CRC-32 by carry-less multiplication, after "Fast CRC Computation for Generic
// Polynomials Using PCLMULQDQ Instruction" (Gopal, Ozturk et al., Intel, 2009).
//
// The buffer is read as four 128-bit lanes; each step multiplies every lane by
// x^(512+64) and x^512 mod P (k1, k2) and adds the next 64 bytes, which keeps
// the lanes congruent to the message mod P. The four lanes are then folded
// into one (k3, k4: 128 bits ahead), further 16-byte blocks folded in, the
// 128 bits reduced to 64 (k5) and, by Barrett reduction (mu, P'), to the
// 32-bit remainder. The constants are those of the paper's bit-reflected
// domain for P = 0x04C11DB7; the tests compare with zlib at every length and
// alignment around the block sizes.
#include "format/crc32.h"

#include <zlib.h>

#include <algorithm>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define TSARCHIVE_CRC32_CLMUL 1
#endif

namespace tsarchive {
namespace {

uint32_t crc32_zlib(uint32_t crc, const unsigned char* p, size_t n) {
  return static_cast<uint32_t>(crc32_z(crc, p, n));
}

#ifdef TSARCHIVE_CRC32_CLMUL

#define TSARCHIVE_CLMUL_TARGET __attribute__((target("pclmul,sse4.1")))

TSARCHIVE_CLMUL_TARGET inline __m128i fold(__m128i lane, __m128i k, __m128i next) {
  const __m128i lo = _mm_clmulepi64_si128(lane, k, 0x00);
  const __m128i hi = _mm_clmulepi64_si128(lane, k, 0x11);
  return _mm_xor_si128(_mm_xor_si128(hi, lo), next);
}

// The raw (not pre- or post-inverted) remainder of `n` bytes, n >= 64 and a
// multiple of 16, continuing from the raw remainder `crc`.
TSARCHIVE_CLMUL_TARGET uint32_t crc32_clmul_blocks(uint32_t crc, const unsigned char* p, size_t n) {
  alignas(16) static const uint64_t k1k2[2] = {0x0154442bd4, 0x01c6e41596};
  alignas(16) static const uint64_t k3k4[2] = {0x01751997d0, 0x00ccaa009e};
  alignas(16) static const uint64_t k5k0[2] = {0x0163cd6124, 0x0000000000};
  alignas(16) static const uint64_t poly[2] = {0x01db710641, 0x01f7011641};
  auto load = [](const unsigned char* at) { return _mm_loadu_si128(reinterpret_cast<const __m128i*>(at)); };

  __m128i x1 = _mm_xor_si128(load(p), _mm_cvtsi32_si128(static_cast<int>(crc)));
  __m128i x2 = load(p + 16), x3 = load(p + 32), x4 = load(p + 48);
  p += 64;
  n -= 64;
  __m128i k = _mm_load_si128(reinterpret_cast<const __m128i*>(k1k2));
  for (; n >= 64; p += 64, n -= 64) {
    x1 = fold(x1, k, load(p));
    x2 = fold(x2, k, load(p + 16));
    x3 = fold(x3, k, load(p + 32));
    x4 = fold(x4, k, load(p + 48));
  }
  k = _mm_load_si128(reinterpret_cast<const __m128i*>(k3k4));
  x1 = fold(x1, k, x2);
  x1 = fold(x1, k, x3);
  x1 = fold(x1, k, x4);
  for (; n >= 16; p += 16, n -= 16) x1 = fold(x1, k, load(p));

  // 128 bits to 64.
  const __m128i mask32 = _mm_setr_epi32(~0, 0, ~0, 0);
  __m128i x2r = _mm_clmulepi64_si128(x1, k, 0x10);
  x1 = _mm_xor_si128(_mm_srli_si128(x1, 8), x2r);
  k = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(k5k0));
  x2r = _mm_srli_si128(x1, 4);
  x1 = _mm_xor_si128(_mm_clmulepi64_si128(_mm_and_si128(x1, mask32), k, 0x00), x2r);

  // Barrett reduction to 32 bits.
  k = _mm_load_si128(reinterpret_cast<const __m128i*>(poly));
  x2r = _mm_and_si128(_mm_clmulepi64_si128(_mm_and_si128(x1, mask32), k, 0x10), mask32);
  x1 = _mm_xor_si128(x1, _mm_clmulepi64_si128(x2r, k, 0x00));
  return static_cast<uint32_t>(_mm_extract_epi32(x1, 1));
}

bool cpu_has_clmul() {
  static const bool has = __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse4.1");
  return has;
}

#endif  // TSARCHIVE_CRC32_CLMUL

}  // namespace

uint32_t crc32_update(uint32_t crc, const void* data, size_t n) {
  const auto* p = static_cast<const unsigned char*>(data);
#ifdef TSARCHIVE_CRC32_CLMUL
  if (n >= 64 && cpu_has_clmul()) {
    const size_t blocks = n & ~size_t{15};
    crc = ~crc32_clmul_blocks(~crc, p, blocks);
    p += blocks;
    n -= blocks;
  }
#endif
  return n == 0 ? crc : crc32_zlib(crc, p, n);
}

}  // namespace tsarchive
