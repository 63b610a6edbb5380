// MetricsWatch (sim/metrics_watch.h): the simulator's scrape check of the client metrics (O2).

#include "sim/metrics_watch.h"

#include <gtest/gtest.h>

#include <string>

#include "rsc/metrics.h"

namespace rsc::sim {
namespace {

std::string Text(int64_t handled, const std::string& process) {
  ConsumerStatus s;
  s.stream = "orders";
  s.group = "g1";
  s.messages_handled = handled;
  s.lease_remaining_ms = 1500;
  return RenderMetricsText({{s, {{"process", process}}}}, {});
}

TEST(MetricsWatch, ACounterMayGrowOrStayButNeverGoDownWithinAProcess) {
  MetricsWatch w;
  EXPECT_FALSE(w.Scrape(Text(3, "consumer-0#1")).has_value());
  EXPECT_FALSE(w.Scrape(Text(3, "consumer-0#1")).has_value());
  EXPECT_FALSE(w.Scrape(Text(9, "consumer-0#1")).has_value());
  EXPECT_FALSE(w.Scrape(Text(0, "consumer-0#2")).has_value()) << "a restart is a new series";
  const std::optional<std::string> wrong = w.Scrape(Text(4, "consumer-0#1"));
  ASSERT_TRUE(wrong.has_value());
  EXPECT_NE(wrong->find("rsc_consumer_messages_handled_total"), std::string::npos) << *wrong;
  EXPECT_NE(wrong->find("from 9 to 4"), std::string::npos) << *wrong;
  EXPECT_EQ(w.scrapes(), 5);
}

TEST(MetricsWatch, ALineThatDoesNotParseIsReported) {
  MetricsWatch w;
  EXPECT_TRUE(w.Scrape("rsc_x_total{a=\"b\"} many\n").has_value());
  EXPECT_TRUE(w.Scrape("rsc_x_total\n").has_value());
  EXPECT_FALSE(w.Scrape("# HELP rsc_x_total x\n# TYPE rsc_x_total counter\n").has_value());
}

}  // namespace
}  // namespace rsc::sim
