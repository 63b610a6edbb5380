#pragma once
// The names of this process's threads (/proc/self/task/*/comm), and how many threads carry
// each: what `top -H`, perf and gdb show an operator.

#include <map>
#include <string>

namespace rsc::testing {

std::map<std::string, int> ThreadNames();

// "namexN, ..." (N threads of that name) for a failure message.
std::string DescribeThreadNames(const std::map<std::string, int>& names);

}  // namespace rsc::testing
