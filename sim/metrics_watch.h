#pragma once
// MetricsWatch: what a Prometheus server scraping the simulated clients would rely on (SPEC
// O2). Every few simulated seconds the simulation renders every live consumer's Status() and
// producer's Metrics() — made by the library's own client/client_status.h from the runtime
// it runs — with the library's RenderMetricsText, one series per process, and hands the text
// here: every sample line must parse, and a counter series (a family ending in `_total`)
// must never go down within one process (a restart is a new process, a new series).

#include <map>
#include <optional>
#include <string>

namespace rsc::sim {

class MetricsWatch {
 public:
  // nullopt, or what is wrong with this scrape.
  std::optional<std::string> Scrape(const std::string& text);
  int scrapes() const { return scrapes_; }

 private:
  std::map<std::string, double> counters_;  // series (name and labels) → last value
  int scrapes_ = 0;
};

}  // namespace rsc::sim
