#pragma once
// RSC_CHECK: always-on invariant guard (never used on outside input).

#include <cstdio>
#include <cstdlib>

#define RSC_CHECK(cond)                                                                   \
  do {                                                                                    \
    if (!(cond)) {                                                                        \
      std::fprintf(stderr, "RSC_CHECK failed: %s at %s:%d\n", #cond, __FILE__, __LINE__); \
      std::abort();                                                                       \
    }                                                                                     \
  } while (0)
