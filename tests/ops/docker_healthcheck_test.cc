// deploy/Dockerfile's HEALTHCHECK (SPEC §14 O5), run as Docker runs its exec form (bash, with
// the container's RSC_LISTEN) against a live coordinator (RedisProcess + CoordinatorProcess:
// LiveCoordinatorTest of integration/harness.h): healthy while it runs, also with Redis gone
// (a liveness probe), unhealthy once nothing listens. Docker itself is not on the project's
// machines; scripts/check-dockerfile.sh checks the rest of the file.

#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "integration/harness.h"
#include "support/ops_assets.h"
#include "support/yaml_json.h"

namespace rsc::integration {
namespace {

class DockerHealthcheckTest : public LiveCoordinatorTest {};

TEST_F(DockerHealthcheckTest, TheDockerHealthcheckPassesOnALiveCoordinatorAndFailsWithoutOne) {
  std::string text, error;
  ASSERT_TRUE(
      rsc::testing::ReadTextFile(rsc::testing::SourcePath("deploy/Dockerfile"), &text, &error))
      << error;
  const size_t at = text.find("\nHEALTHCHECK ");
  ASSERT_NE(at, std::string::npos);
  const size_t cmd = text.find("CMD [", at);
  ASSERT_NE(cmd, std::string::npos);
  const size_t end = text.find("]\n", cmd);
  json::value argv = json::parse(text.substr(cmd + 4, end - cmd - 3));
  ASSERT_TRUE(argv.is_array()) << "the HEALTHCHECK uses the exec form";
  ASSERT_EQ(argv.as_array().size(), 3u);
  EXPECT_EQ(argv.as_array()[0].as_string(), "bash");
  EXPECT_EQ(argv.as_array()[1].as_string(), "-c");
  const std::string script(argv.as_array()[2].as_string());
  const std::string path =
      ::testing::TempDir() + "/rsc-healthcheck-" + std::to_string(coord_->Port());
  {
    std::ofstream f(path);
    f << script;
  }
  auto run = [&](int port) {
    std::string out;
    const int rc = rsc::testing::RunCommand(
        "RSC_LISTEN=0.0.0.0:" + std::to_string(port) + " timeout 5 bash " + path, &out);
    return std::make_pair(rc, out);
  };
  auto [ok_rc, ok_out] = run(coord_->Port());
  EXPECT_EQ(ok_rc, 0) << ok_out;
  // Liveness, not readiness: still healthy while Redis is gone.
  redis_.Kill();
  auto [still_rc, still_out] = run(coord_->Port());
  EXPECT_EQ(still_rc, 0) << still_out;
  coord_->Kill();
  auto [down_rc, down_out] = run(coord_->Port());
  EXPECT_NE(down_rc, 0) << "healthy with no coordinator listening: " << down_out;
  std::remove(path.c_str());
}

}  // namespace
}  // namespace rsc::integration
