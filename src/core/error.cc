#include "cumulus/error.h"

namespace cumulus::detail {

void raise(ErrorCode code, std::string message) { throw Error(code, message); }

}  // namespace cumulus::detail
