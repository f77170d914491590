// cumulus CLI: run, test, perf and scan.
#pragma once

namespace cumulus::cli {

// Exit status: 0 success, 1 bad input or a failed test, 2 usage error.
int main(int argc, char** argv);

}  // namespace cumulus::cli
