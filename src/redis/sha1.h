#pragma once
// SHA-1 of a script body: the name Redis gives a script in its cache (EVALSHA). Computed
// locally so a script can be run by hash without a SCRIPT LOAD round trip first.

#include <string>
#include <string_view>

namespace rsc::redis {

// Lower-case hex digest, 40 characters.
std::string Sha1Hex(std::string_view data);

}  // namespace rsc::redis
