// Sweep totals and the summary table of the `rsc-sim` command line.

#include <fmt/format.h>

#include "sim/simulation.h"

namespace rsc::sim {

void SweepTotals::Add(const SimResult& r) {
  ++seeds;
  failures += r.violation ? 1 : 0;
  simulated_ms += r.simulated_ms;
  real_seconds += r.real_seconds;
  events += r.events;
  for (const auto& [k, v] : r.faults) faults[k] += v;
  for (const auto& [k, v] : r.probes) probes[k] += v;
  const CheckerCounters& c = r.counters;
  counters.events += c.events;
  counters.intervals += c.intervals;
  counters.handoffs += c.handoffs;
  counters.publishes += c.publishes;
  counters.delivered_unique += c.delivered_unique;
  counters.redeliveries += c.redeliveries;
  counters.lost_by_rollback += c.lost_by_rollback;
  counters.overlaps_excused += c.overlaps_excused;
  counters.skips_excused += c.skips_excused;
  counters.mutex_double_entries += c.mutex_double_entries;
  counters.refused_publishes += c.refused_publishes;
  counters.syncs_after_rollback += c.syncs_after_rollback;
  counters.handoffs_excused += c.handoffs_excused;
  counters.l1_rearms += c.l1_rearms;
}

std::vector<std::string> SweepTotals::UnreachedProbes() const {
  std::vector<std::string> out;
  for (const ProbeSpec& p : AllProbes()) {
    auto it = probes.find(p.name);
    if (p.required && (it == probes.end() || it->second == 0)) out.push_back(p.name);
  }
  return out;
}

std::string SweepTotals::Summary() const {
  std::string out;
  const double hours = static_cast<double>(simulated_ms) / 3.6e6;
  out += fmt::format("{:<28} {}\n", "seeds", seeds);
  out += fmt::format("{:<28} {}\n", "violations", failures);
  out += fmt::format("{:<28} {:.2f} h\n", "simulated time", hours);
  out += fmt::format("{:<28} {:.1f} s\n", "real time", real_seconds);
  out +=
      fmt::format("{:<28} {:.0f}x\n", "speed-up",
                  real_seconds > 0 ? static_cast<double>(simulated_ms) / 1000 / real_seconds : 0.0);
  out += fmt::format("{:<28} {}\n", "history events", events);
  out += fmt::format(
      "{:<28} publishes {} delivered {} redeliveries {} lost-by-rollback {} "
      "refused {} handoffs {} overlaps-excused {} skips-excused {} handoffs-excused {} "
      "syncs-after-rollback {} mutex-double-entries {} l1-rearms {}\n",
      "checker counters", counters.publishes, counters.delivered_unique, counters.redeliveries,
      counters.lost_by_rollback, counters.refused_publishes, counters.handoffs,
      counters.overlaps_excused, counters.skips_excused, counters.handoffs_excused,
      counters.syncs_after_rollback, counters.mutex_double_entries, counters.l1_rearms);
  out += "faults injected:\n";
  for (const auto& [k, v] : faults) out += fmt::format("  {:<26} {}\n", k, v);
  out += "rare-path probes:\n";
  for (const ProbeSpec& p : AllProbes()) {
    auto it = probes.find(p.name);
    const int64_t n = it == probes.end() ? 0 : it->second;
    out += fmt::format("  {:<30} {:>7}{}\n", p.name, n,
                       !p.required ? "   (optional)"
                       : n == 0    ? "   <-- never reached"
                                   : "");
  }
  return out;
}

}  // namespace rsc::sim
