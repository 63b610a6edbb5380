#pragma once
// Random tokens for write tokens and mutex tokens. Not for cryptography: they only need
// to be unique across coordinators with overwhelming probability.
//
// Thread safety: each thread has its own generator, seeded from std::random_device.

#include <string>

namespace rsc::redis {

// 32 lower-case hex characters (128 random bits).
std::string RandomHex128();
// Uniform in [0, 1).
double RandomUnit();

}  // namespace rsc::redis
