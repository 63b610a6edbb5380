#pragma once
// Mutants: deliberately broken versions of one protocol rule each, selected at run time
// (`rsc-sim --mutant NAME`), that the checkers must catch within a bounded number of seeds
// (tests/sim/simulator_test.cc). "Prove a checker can fail" (ENGINEERING §5): a rule whose
// mutant survives is a rule the simulator does not really check.
//
// Each mutant is a replacement object at a seam the product already has, never an #if in a
// product file:
//   * coordinator rules: a Decider (server/group_service.h) that transforms the real core's
//     inputs or outputs;
//   * "answer before the CAS" (R3.2): the simulated coordinator's store reports a CAS that
//     did not apply as applied, or a steady renewal the script refused as renewed;
//   * client rules: the simulated consumer/producer transform what their real cores are
//     told (a heartbeat answer's lease, a routing answer's lease) or what the simulated
//     Redis answers (the takeover's XAUTOCLAIM), or replace the reader core's MayHandle
//     seam (client/reader_core.h).
// One exception remains an #if: resume_revoking_on_failure (client/consumer_core.cc)
// mutates the consumer core's internal state, which no port exposes.

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "client/reader_core.h"
#include "core/protocol.h"
#include "server/group_service.h"

namespace rsc::sim {

struct MutantInfo {
  const char* name;
  const char* rule;       // the SPEC rule it breaks
  const char* invariant;  // the checker that must catch it
  const char* what;
};

// Every run-time mutant, for --help, the CLI's validation and the tests.
const std::vector<MutantInfo>& Mutants();
const MutantInfo* FindMutant(std::string_view name);

// The coordinator core as the mutant `name` decides (nullptr: not a decider mutant).
std::unique_ptr<Decider> MakeMutantDecider(std::string_view name);

// The client-side mutants, applied by the simulated processes (no-ops for other names).
struct ClientMutant {
  std::string name;
  // C1: the consumer's core is told a heartbeat answer as if its lease ran from the time
  // the answer arrived (`now`) instead of the request's send time.
  void OnHeartbeatAnswer(HeartbeatResponse& resp, TimeMs sent, TimeMs now) const;
  // PR3/PR5: the producer's core is told a routing answer whose lease never ends.
  void OnRoutingAnswer(RoutingResponse& resp) const;
  // C7: the takeover claims nothing (XAUTOCLAIM answers an empty page).
  bool SkipsTakeover() const;
  // The reader core of a shard: the library's, or (c4_handle_after_lease) one whose
  // MayHandle seam always says yes — it goes on handling and XACKing the batch in hand
  // after its lease ended or it was abandoned.
  std::unique_ptr<client::ReaderCore> MakeReader(client::ReaderCoreConfig config,
                                                 client::ReaderContext* context,
                                                 client::DeliveryStats* stats,
                                                 bool has_predecessor) const;
  // R3.2: a CAS that conflicted is reported applied (the answer goes out unwritten).
  bool AnswersBeforeCas() const;
  // R3.2 on the steady path: a refused renewal is reported applied (the batch is answered
  // from the cached aggregate, the deadlines are not written).
  bool RenewsUnchecked() const;
};

}  // namespace rsc::sim
