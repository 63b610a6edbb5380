#include "support/browser.h"

#include <stdlib.h>

#include <cstdlib>
#include <filesystem>
#include <thread>
#include <vector>

namespace rsc::testing {

HeadlessBrowser::HeadlessBrowser() {
  const char* configured = std::getenv("RSC_CHROMIUM");
  path_ = configured != nullptr && *configured != '\0'
              ? std::string(configured)
              : FindInPath({"chromium", "chromium-browser", "google-chrome"});
}

ProcessRun HeadlessBrowser::DumpDom(const std::string& url, std::chrono::milliseconds virtual_time,
                                    std::chrono::milliseconds deadline) {
  return Run({"--dump-dom"}, url, virtual_time, deadline);
}

ProcessRun HeadlessBrowser::Screenshot(const std::string& url, const std::string& png_path,
                                       int width, int height,
                                       std::chrono::milliseconds virtual_time,
                                       std::chrono::milliseconds deadline) {
  return Run({"--screenshot=" + png_path, "--hide-scrollbars",
              "--window-size=" + std::to_string(width) + "," + std::to_string(height)},
             url, virtual_time, deadline);
}

ProcessRun HeadlessBrowser::Run(std::vector<std::string> args, const std::string& url,
                                std::chrono::milliseconds virtual_time,
                                std::chrono::milliseconds deadline) {
  if (path_.empty()) {
    ProcessRun run;
    run.error =
        "no Chromium found (install the Debian package `chromium`: scripts/bootstrap.sh, "
        "or set RSC_CHROMIUM to the browser's path)";
    return run;
  }
  std::string dir_template = (std::filesystem::temp_directory_path() / "rsc-chromium-XXXXXX");
  if (::mkdtemp(dir_template.data()) == nullptr) {
    ProcessRun run;
    run.error = "mkdtemp " + dir_template + " failed";
    return run;
  }
  const std::string dir = dir_template;
  std::vector<std::string> argv = {path_,
                                   "--headless",
                                   "--no-sandbox",
                                   "--disable-gpu",
                                   "--disable-dev-shm-usage",
                                   "--no-first-run",
                                   "--no-default-browser-check",
                                   "--disable-extensions",
                                   "--disable-background-networking",
                                   "--disable-component-update",
                                   "--disable-sync",
                                   "--disable-default-apps",
                                   "--disable-breakpad",
                                   "--disable-crash-reporter",
                                   "--mute-audio",
                                   "--user-data-dir=" + dir + "/profile",
                                   "--virtual-time-budget=" + std::to_string(virtual_time.count())};
  argv.insert(argv.end(), args.begin(), args.end());
  argv.push_back(url);
  // The browser's own files (crash reports, caches, NSS database) go into `dir` as well.
  std::vector<std::string> env = EnvironmentWithout({"HOME", "XDG_CONFIG_HOME", "XDG_CACHE_HOME"});
  env.insert(env.end(), {"HOME=" + dir, "XDG_CONFIG_HOME=" + dir + "/config",
                         "XDG_CACHE_HOME=" + dir + "/cache"});
  ProcessRun run = RunProcess(argv, deadline, env);
  // A helper of the browser can still be writing into `dir` for a moment after the kill.
  for (int attempt = 0; attempt < 20; ++attempt) {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
    if (!std::filesystem::exists(dir, ec)) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return run;
}

}  // namespace rsc::testing
