#include "sim/metrics_watch.h"

#include <fmt/format.h>

#include <charconv>
#include <sstream>
#include <string_view>

namespace rsc::sim {

std::optional<std::string> MetricsWatch::Scrape(const std::string& text) {
  ++scrapes_;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    // `name{labels} value`: label values are escaped, so the last blank ends the series.
    const size_t blank = line.rfind(' ');
    if (blank == std::string::npos) return "metrics line without a value: " + line;
    const std::string series = line.substr(0, blank);
    const std::string_view value_text = std::string_view(line).substr(blank + 1);
    double value = 0;
    auto [end, ec] =
        std::from_chars(value_text.data(), value_text.data() + value_text.size(), value);
    if (ec != std::errc() || end != value_text.data() + value_text.size()) {
      return "metrics line with a value that is not a number: " + line;
    }
    const std::string name = series.substr(0, series.find('{'));
    if (!name.ends_with("_total")) continue;
    auto [it, fresh] = counters_.emplace(series, value);
    if (!fresh && value < it->second) {
      return fmt::format("counter {} went down from {} to {}", series, it->second, value);
    }
    it->second = value;
  }
  return std::nullopt;
}

}  // namespace rsc::sim
