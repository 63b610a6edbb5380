// Boost.JSON compiled into the fuzz build (header-only form), so its parser is
// instrumented for coverage along with ours. Exactly one translation unit includes this.
#include <boost/json/src.hpp>
