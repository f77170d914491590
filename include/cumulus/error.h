// cumulus: the one exception type the library throws.
#pragma once

#include <stdexcept>
#include <string>

namespace cumulus {

enum class ErrorCode {
  kInvalidArgument,  // a value, shape, type or attribute the operator does not accept
  kUnsupported,      // valid ONNX that cumulus does not run (unknown operator, external data)
  kParse,            // a malformed model or tensor file
  kIo,               // a file could not be read or written
  kLimit,            // a size beyond what can be represented or allocated
};

class Error : public std::runtime_error {
 public:
  Error(ErrorCode code, const std::string& message) : std::runtime_error(message), code_(code) {}
  ErrorCode code() const noexcept { return code_; }

 private:
  ErrorCode code_;
};

namespace detail {
// Every error in cumulus leaves through here.
[[noreturn]] void raise(ErrorCode code, std::string message);
}  // namespace detail

}  // namespace cumulus
