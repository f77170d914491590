// The message of the cumulus::Error a call throws, for the tests of messages.
#pragma once

#include <gtest/gtest.h>

#include <exception>
#include <string>

#include "cumulus/error.h"

namespace cumulus {

// Runs f, requires a cumulus::Error with `code`, and returns its message.
template <class F>
std::string error_of(F&& f, ErrorCode code = ErrorCode::kInvalidArgument) {
  try {
    f();
  } catch (const Error& e) {
    EXPECT_EQ(static_cast<int>(e.code()), static_cast<int>(code)) << e.what();
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "not a cumulus::Error: " << e.what();
    return {};
  }
  ADD_FAILURE() << "no error raised";
  return {};
}

}  // namespace cumulus
