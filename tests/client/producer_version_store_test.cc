// FileVersionStore (include/rsc/version_store.h): the persistent observed-version SPI.

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "rsc/version_store.h"

namespace rsc {
namespace {

class FileVersionStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/rsc-version-store-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    path_ = dir_ + "/versions";
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string dir_;
  std::string path_;
};

TEST_F(FileVersionStoreTest, MissingFileIsAnEmptyStore) {
  FileVersionStore store(path_);
  ObservedVersion v{7, "x"};
  std::string error;
  ASSERT_TRUE(store.Load("orders", "g", &v, &error)) << error;
  EXPECT_EQ(v, (ObservedVersion{0, ""}));
}

TEST_F(FileVersionStoreTest, SaveThenLoadPerGroupAcrossInstances) {
  std::string error;
  {
    FileVersionStore store(path_);
    ASSERT_TRUE(store.Save("orders", "g1", {41, "abc"}, &error)) << error;
    ASSERT_TRUE(store.Save("orders", "g2", {3, ""}, &error)) << error;
    ASSERT_TRUE(store.Save("orders", "g1", {39, "def"}, &error)) << error;  // may go down (sync)
  }
  FileVersionStore reopened(path_);
  ObservedVersion v;
  ASSERT_TRUE(reopened.Load("orders", "g1", &v, &error)) << error;
  EXPECT_EQ(v, (ObservedVersion{39, "def"}));
  ASSERT_TRUE(reopened.Load("orders", "g2", &v, &error)) << error;
  EXPECT_EQ(v, (ObservedVersion{3, ""}));
  ASSERT_TRUE(reopened.Load("other", "g1", &v, &error)) << error;
  EXPECT_EQ(v, (ObservedVersion{0, ""}));
  // Nothing left beside it but the lock file: no temporary file survives a Save.
  for (const auto& e : std::filesystem::directory_iterator(dir_)) {
    const std::string name = e.path().filename().string();
    EXPECT_TRUE(name == "versions" || name == "versions.lock") << name;
  }
}

TEST_F(FileVersionStoreTest, AnEmptyFileIsCorruptNotAnEmptyStore) {
  std::ofstream(path_, std::ios::trunc).flush();  // e.g. truncated by another program
  FileVersionStore store(path_);
  ObservedVersion v;
  std::string error;
  EXPECT_FALSE(store.Load("orders", "g", &v, &error)) << "an empty file would start from 0";
  EXPECT_NE(error.find("empty"), std::string::npos) << error;
  EXPECT_FALSE(store.Save("orders", "g", {1, "L"}, &error));
}

TEST_F(FileVersionStoreTest, TwoStoresOnOnePathLoseNoUpdate) {
  // Two processes, or a consumer and a producer each given its own store, on one file.
  FileVersionStore a(path_);
  FileVersionStore b(path_);
  constexpr int kSaves = 30;
  auto saves = [&](FileVersionStore& store, const std::string& group) {
    std::string error;
    for (int i = 1; i <= kSaves; ++i) {
      EXPECT_TRUE(store.Save("orders", group, {i, "L"}, &error)) << error;
    }
  };
  std::thread ta(saves, std::ref(a), "ga");
  std::thread tb(saves, std::ref(b), "gb");
  ta.join();
  tb.join();
  for (const char* group : {"ga", "gb"}) {
    ObservedVersion v;
    std::string error;
    ASSERT_TRUE(FileVersionStore(path_).Load("orders", group, &v, &error)) << error;
    EXPECT_EQ(v.metadata_version, kSaves) << group << ": an update was lost";
  }
}

TEST_F(FileVersionStoreTest, CorruptFileFailsLoudly) {
  for (const char* content : {"garbage\n", "rsc-version-store 1\norders\tg\tnot-a-number\tL\n",
                              "rsc-version-store 1\norders\tg\t5\n"}) {
    std::ofstream(path_, std::ios::trunc) << content;
    FileVersionStore store(path_);
    ObservedVersion v;
    std::string error;
    EXPECT_FALSE(store.Load("orders", "g", &v, &error)) << content;
    EXPECT_NE(error.find(path_), std::string::npos) << error;
    EXPECT_FALSE(store.Save("orders", "g", {1, "L"}, &error))
        << "never overwrite what we cannot read";
  }
}

TEST_F(FileVersionStoreTest, ConcurrentSavesFromThreadsKeepTheFileReadable) {
  FileVersionStore store(path_);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      std::string error;
      for (int i = 1; i <= 20; ++i) {
        EXPECT_TRUE(store.Save("orders", "g" + std::to_string(t), {i, "L"}, &error)) << error;
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < 4; ++t) {
    ObservedVersion v;
    std::string error;
    ASSERT_TRUE(store.Load("orders", "g" + std::to_string(t), &v, &error)) << error;
    EXPECT_EQ(v.metadata_version, 20);
  }
}

}  // namespace
}  // namespace rsc
