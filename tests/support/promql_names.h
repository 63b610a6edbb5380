#pragma once
// MetricNamesInPromQL: the metric names a PromQL expression selects, for the tests that
// check that every metric a Grafana panel or a Prometheus alert rule uses is one the
// coordinator (or the client library) really exports (tests/ops/).
//
// A small tokenizer, not a parser (promtool checks the syntax, see tests/ops): it skips
// string literals, label matchers {...}, ranges and subqueries [...], comments, numbers and
// durations, Grafana variables ($var, ${var}), the label lists of by/without/on/ignoring/
// group_left/group_right, keywords (and, or, unless, bool, offset, the aggregation operators)
// and every identifier followed by "(" (a function or aggregation). What is left are metric
// names, as written: "rsc_x_seconds_bucket" stays as it is (the caller compares with the
// sample names of an exposition, which carry those suffixes).
// Selectors written as {__name__="x"} are not recognised (our files do not use them).
//
// Pure: thread-safe.

#include <set>
#include <string>
#include <string_view>

namespace rsc::testing {

std::set<std::string> MetricNamesInPromQL(std::string_view expr);

}  // namespace rsc::testing
