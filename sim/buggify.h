#pragma once
// BUGGIFY (after FoundationDB): named fault sites in the simulated shells. Each site is
// switched on or off once per run, from the seed (most with probability 0.25), and an
// enabled site fires with its own probability wherever the shell consults it. A run thus
// exercises a few fault kinds hard instead of every kind a little, and different seeds
// explore different combinations.
//
// Probes are the other half: named counters bumped when a rare path is reached (a
// coordinator crashed between its CAS and its answer, a SYNC_METADATA was delivered, …).
// A sweep reports them, and a sweep of at least the default seed count that never reached
// a required one fails: a fault model that silently stopped reaching a path is a broken
// test.

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "sim/rng.h"

namespace rsc::sim {

struct SiteSpec {
  const char* name;
  double enable_p;  // probability that the site is on in a run
  const char* what;
};
// Every fault site, in a fixed order (the order of the per-run draws).
const std::vector<SiteSpec>& AllSites();

struct ProbeSpec {
  const char* name;
  const char* what;
  // A sweep that never reached a required probe fails. An optional one is counted and
  // reported only: a path that real faults reach too rarely for a short sweep.
  bool required = true;
};
// Every probe, required or not.
const std::vector<ProbeSpec>& AllProbes();

class Buggify {
 public:
  enum class Mode { kRandom, kAllOn, kAllOff };
  // Draws the per-run switches from `seed` (an RNG of their own, so adding a site does not
  // perturb the rest of a run's random choices more than necessary).
  Buggify(uint64_t seed, Mode mode);

  // Site switched on this run (regardless of the fault phase).
  bool Enabled(std::string_view site) const;
  // Enabled, faults active (safety phase), and the draw says fire.
  bool Fire(std::string_view site, double p, Rng& rng) const;
  // Switches a site off for the whole run (a fault the run's configuration does not cover).
  void Disable(std::string_view site) { on_.at(std::string(site)) = false; }
  // Faults stop at the heal: from then on nothing fires.
  void set_active(bool on) { active_ = on; }
  bool active() const { return active_; }
  const std::map<std::string, bool, std::less<>>& sites() const { return on_; }

 private:
  std::map<std::string, bool, std::less<>> on_;
  bool active_ = true;
};

class Probes {
 public:
  Probes();
  void Hit(std::string_view name);
  const std::map<std::string, int64_t>& counts() const { return counts_; }

 private:
  std::map<std::string, int64_t> counts_;
};

}  // namespace rsc::sim
