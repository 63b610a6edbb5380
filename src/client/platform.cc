// The Platform's defaults (platform.h): the consumer's member id and seed from the operating
// system's random device, and the runtime's own reader core. Linked by the simulator too; it
// overrides the first two (seeded draws of the run) and may replace the reader (mutants).

#include "client/platform.h"

#include <fmt/format.h>

#include <random>

namespace rsc::client {

const void* Platform::CurrentThread() {
  static thread_local const char tag = 0;
  return &tag;
}

std::unique_ptr<ReaderPort> Platform::OpenReaders(ReaderPort::Answers /*answers*/) {
  return nullptr;  // a platform without Redis for readers (a producer's): no consumer on it
}

std::string Platform::NewMemberId() {
  std::random_device rd;
  std::mt19937_64 rng((static_cast<uint64_t>(rd()) << 32) ^ rd());
  uint64_t hi = rng();
  uint64_t lo = rng();
  hi = (hi & ~0xF000ULL) | 0x4000ULL;                           // version 4
  lo = (lo & ~(0xC0ULL << 56)) | (0x80ULL << 56);               // RFC 4122 variant
  const std::string h = fmt::format("{:016x}{:016x}", hi, lo);  // 32 hex digits
  return h.substr(0, 8) + "-" + h.substr(8, 4) + "-" + h.substr(12, 4) + "-" + h.substr(16, 4) +
         "-" + h.substr(20);
}

uint64_t Platform::NewSeed() { return std::random_device{}(); }

std::unique_ptr<ReaderCore> Platform::MakeReader(ReaderCoreConfig config, ReaderContext* context,
                                                 DeliveryStats* stats, bool has_predecessor) {
  return std::make_unique<ReaderCore>(std::move(config), context, stats, has_predecessor);
}

}  // namespace rsc::client
