#pragma once
// HeadlessBrowser: a real headless Chromium for the web console's tests (SPEC O3). Each call
// starts a fresh browser with its own profile in a temporary directory (HOME and the XDG
// directories point there too, so nothing is written elsewhere), loads one URL, lets the page
// run for `virtual_time` of virtual time (timers fast-forward; network fetches are waited
// for) and then prints the DOM or writes a screenshot. The browser is killed, with every
// process it started, if it has not finished by `deadline`.
//
// Chromium is found through $RSC_CHROMIUM, else `chromium`, `chromium-browser` or
// `google-chrome` in PATH (scripts/bootstrap.sh installs Debian's `chromium`). It runs with
// --no-sandbox: the tests run as root inside a network namespace, where the sandbox cannot
// start; the pages loaded are the project's own.
//
// Thread safety: none; one HeadlessBrowser per thread.

#include <chrono>
#include <string>

#include "support/subprocess.h"

namespace rsc::testing {

class HeadlessBrowser {
 public:
  HeadlessBrowser();
  // The executable found, or "" (then every call fails with a message saying so).
  const std::string& path() const { return path_; }

  // stdout of the run is the serialized DOM after the page's scripts ran.
  ProcessRun DumpDom(const std::string& url,
                     std::chrono::milliseconds virtual_time = std::chrono::seconds(5),
                     std::chrono::milliseconds deadline = std::chrono::seconds(60));
  // Writes a PNG of the viewport (`width` x `height`) to `png_path`.
  ProcessRun Screenshot(const std::string& url, const std::string& png_path, int width, int height,
                        std::chrono::milliseconds virtual_time = std::chrono::seconds(5),
                        std::chrono::milliseconds deadline = std::chrono::seconds(60));

 private:
  ProcessRun Run(std::vector<std::string> args, const std::string& url,
                 std::chrono::milliseconds virtual_time, std::chrono::milliseconds deadline);

  std::string path_;
};

}  // namespace rsc::testing
