// Fuzzes the stream layout path (SPEC D1): the layout hash's JSON (outside input — an
// operator may edit the hash in Redis) and the decisions a coordinator takes on what
// decoded. Input: a layout JSON document, optionally followed by a NUL byte and a script
// whose bytes pick group adds (with or without a shard count), removes, reshards,
// activations and retirements.
//
// Beyond "no crash, no sanitizer report": every decoded layout re-encodes to itself, and
// every decision either fails with a clear error or produces a layout that passes the
// invariants, round-trips, and never has a lower version. The document is also read as a
// seal's `rsc-next` (RS6: a stream's last entry is outside input too): what decodes
// re-encodes to the same generation, and every generation a reshard prepares is described
// by its successor line exactly.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/check.h"
#include "core/layout.h"
#include "core/layout_codec.h"

namespace {

using namespace rsc;

void CheckWritten(const Layout& before, const Layout& next) {
  RSC_CHECK(CheckLayoutInvariants(next).ok());
  RSC_CHECK(next.version >= before.version);
  auto back = DecodeLayout(EncodeLayout(next));
  RSC_CHECK(back.ok());
  RSC_CHECK(*back == next);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const size_t nul = input.find('\0');
  const std::string_view doc = input.substr(0, nul);
  const std::string_view script = nul == std::string_view::npos ? "" : input.substr(nul + 1);

  // RS6: a seal's successor line (short: "<generation> <hash> <first id> <count> <slots>").
  if (doc.size() <= 40) {
    auto successor = DecodeSuccessor("orders", doc);
    if (successor.ok()) {
      auto text = EncodeSuccessor("orders", *successor);
      RSC_CHECK(text.has_value());
      auto again = DecodeSuccessor("orders", *text);
      RSC_CHECK(again.ok() && *again == *successor);
    } else {
      RSC_CHECK(successor.error().code == ErrorCode::kMetadataUnreadable);
    }
  }
  // The stored-hash wrapper: schemaVersion and revision are checked before the JSON.
  (void)DecodeLayoutHash("orders", {std::string(doc), "1", "1"});
  auto decoded = DecodeLayout(doc);
  if (!decoded.ok()) {
    RSC_CHECK(decoded.error().code == ErrorCode::kMetadataUnreadable);
    return 0;
  }
  Layout l = std::move(*decoded);
  {
    auto back = DecodeLayout(EncodeLayout(l));
    RSC_CHECK(back.ok());
    RSC_CHECK(*back == l);
  }
  for (size_t i = 0; i < script.size(); i += 2) {
    const uint8_t op = static_cast<uint8_t>(script[i]);
    const uint8_t arg = i + 1 < script.size() ? static_cast<uint8_t>(script[i + 1]) : 0;
    const std::string group = "g" + std::to_string(arg % 8);
    switch (op % 5) {
      case 0: {
        int32_t count = -1;
        auto d = DecideAddGroup(l, group, (op & 8) ? arg % 9 : 0, &count, "fuzz");
        if (!d.ok()) break;
        RSC_CHECK(count >= 1);
        if (*d) {
          CheckWritten(l, **d);
          l = **d;
        }
        break;
      }
      case 1:
        if (auto d = DecideRemoveGroup(l, group, "fuzz")) {
          CheckWritten(l, *d);
          l = *d;
        }
        break;
      case 2: {
        // One server, or a small cluster of 1 to 3 masters (tagged keys, D2).
        SlotPlacement placement;
        for (int m = 0; m < (arg / 40) % 4; ++m) placement.push_back({m * 7, m * 7 + 3});
        auto d = DecideReshard(l, arg % 40, placement, "fuzz");
        if (d.ok()) {
          CheckWritten(l, *d);
          auto text = EncodeSuccessor(d->stream, d->generations.back());
          RSC_CHECK(text.has_value());
          auto back = DecodeSuccessor(d->stream, *text);
          RSC_CHECK(back.ok() && *back == d->generations.back());
          l = *d;
        }
        break;
      }
      case 3:
        if (auto d = DecideActivate(l, "fuzz")) {
          CheckWritten(l, *d);
          l = *d;
        }
        break;
      default:
        if (auto d = DecideRetire(l, arg % 8, 1000, "fuzz")) {
          CheckWritten(l, *d);
          l = *d;
        }
        break;
    }
  }
  return 0;
}
