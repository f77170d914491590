// Runs the cumulus executable (CUMULUS_CLI) through the shell with its output captured, for the
// command-line tests.
#pragma once

#include <fmt/format.h>
#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "model_builder.h"

namespace cli_runner {

struct Result {
  int status = -1;  // the exit status; -1 when it did not exit normally
  int signal = 0;   // the signal that ended it, if one did
  std::string out, err;
};

inline std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) {
    if (c == '\'') {
      q += "'\\''";
    } else {
      q += c;
    }
  }
  return q + "'";
}

inline std::string read_all(const std::filesystem::path& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// Runs `cumulus args...` with stdout and stderr captured separately; `env` ("NAME=value") is
// added to the environment.
inline Result cli(const std::vector<std::string>& args, const std::string& env = "") {
  static const model_builder::TempDir capture;
  static int calls = 0;
  const std::filesystem::path out = capture / fmt::format("out{}", calls);
  const std::filesystem::path err = capture / fmt::format("err{}", calls);
  ++calls;
  std::string command =
      (env.empty() ? "" : "env " + shell_quote(env) + " ") + shell_quote(CUMULUS_CLI);
  for (const auto& a : args) command += " " + shell_quote(a);
  command += " >" + shell_quote(out.string()) + " 2>" + shell_quote(err.string()) + " </dev/null";
  const int raw = std::system(command.c_str());
  Result r;
  r.status = raw != -1 && WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  r.signal = raw != -1 && WIFSIGNALED(raw) ? WTERMSIG(raw) : 0;
  r.out = read_all(out);
  r.err = read_all(err);
  return r;
}

}  // namespace cli_runner
