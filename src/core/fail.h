// Formatting front of detail::raise, for the library's own sources.
#pragma once

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "cumulus/error.h"

namespace cumulus::detail {

template <class... Args>
[[noreturn]] void fail(ErrorCode code, fmt::format_string<Args...> format, Args&&... args) {
  raise(code, fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace cumulus::detail
