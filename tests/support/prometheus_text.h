#pragma once
// ParsePrometheusText: a strict reader of the Prometheus text exposition format (0.0.4), for
// tests that check what a /metrics page says. Written from the format's rules, not from what
// our renderer happens to print, so a test using it fails on a wrong name, a missing HELP or
// TYPE, a malformed sample line or a badly escaped label value:
//   # HELP <name> <text>        (once per name, before its samples)
//   # TYPE <name> <counter|gauge|histogram|summary|untyped>  (once, before its samples)
//   <name>[{<label>="<value>",...}] <value>
// A histogram family <name> has samples <name>_bucket (with an `le` label), <name>_sum and
// <name>_count; a summary <name>_sum and <name>_count (and <name> with `quantile`). Samples
// keep their own names; HELP, TYPE and "a family's samples are together" apply per family.
// Label values may contain only the escapes \\ \" \n; values are floats (NaN, +Inf, -Inf).

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace rsc::testing {

struct PromSample {
  std::string name;
  std::vector<std::pair<std::string, std::string>> labels;  // unescaped values, in order
  double value = 0;

  // The value of label `name`, or nullopt.
  std::optional<std::string> Label(const std::string& name) const;
};

struct PromExposition {
  std::map<std::string, std::string> help;  // family name -> HELP text (unescaped)
  std::map<std::string, std::string> type;  // family name -> TYPE
  std::vector<PromSample> samples;          // in text order
  std::vector<std::string> errors;          // every rule broken, "line N: what"

  // Samples named `name` whose labels include every pair of `match`.
  std::vector<PromSample> Find(
      const std::string& name,
      const std::vector<std::pair<std::string, std::string>>& match = {}) const;
  // The value of the only sample matching, or nullopt when none or several match.
  std::optional<double> Value(
      const std::string& name,
      const std::vector<std::pair<std::string, std::string>>& match = {}) const;
};

PromExposition ParsePrometheusText(const std::string& text);

}  // namespace rsc::testing
