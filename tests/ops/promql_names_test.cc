// The PromQL metric-name extractor of the ops tests (SPEC §14 O5): it must find exactly
// the metric names of an expression, or the check that the dashboard and the alert rules use
// only exported metrics would miss some or flag label names and functions.

#include "support/promql_names.h"

#include <gtest/gtest.h>

namespace rsc {
namespace {

using testing::MetricNamesInPromQL;

TEST(PromqlNames, FindsMetricNamesOnly) {
  using S = std::set<std::string>;
  EXPECT_EQ(MetricNamesInPromQL("rsc_ticks_total"), S{"rsc_ticks_total"});
  EXPECT_EQ(
      MetricNamesInPromQL(
          R"(sum by (stream, group) (rate(rsc_heartbeats_total{status=~"OK|DRAIN", group="$group"}[5m])))"),
      S{"rsc_heartbeats_total"});
  EXPECT_EQ(
      MetricNamesInPromQL(
          "histogram_quantile(0.99, sum by (le) (rate(rsc_http_request_duration_seconds_bucket"
          "{route=\"heartbeat\"}[$__rate_interval])))"),
      S{"rsc_http_request_duration_seconds_bucket"});
  EXPECT_EQ(MetricNamesInPromQL("sum(up{job=\"rsc-coordinator\"}) == 0 or absent(up{job=\"x\"})"),
            S{"up"});
  EXPECT_EQ(MetricNamesInPromQL(
                "min_over_time(rsc_a[2m]) > 0 and on (stream, group) rsc_b unless ignoring(x) "
                "rsc_c offset 10m * group_left(member) rsc_d"),
            (S{"rsc_a", "rsc_b", "rsc_c", "rsc_d"}));
  EXPECT_EQ(MetricNamesInPromQL("max without (instance) (rsc_x) > bool 1e3 # rsc_comment"),
            S{"rsc_x"});
  EXPECT_EQ(MetricNamesInPromQL("topk(3, rsc_y) / ${scale} + $var"), S{"rsc_y"});
  EXPECT_EQ(MetricNamesInPromQL("max(max_over_time(rsc_z[1h:5m]))"), S{"rsc_z"});
  EXPECT_EQ(MetricNamesInPromQL("vector(1) + 0.5 + Inf"), S{});
}

}  // namespace
}  // namespace rsc
