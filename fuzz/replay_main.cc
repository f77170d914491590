// Runs a fuzz target without libFuzzer: feeds every file named on the command line, and every
// file under every folder named there, to LLVMFuzzerTestOneInput once. The normal build uses it
// to replay the regressions and seeds as tests; a crash or an abort() in the target fails the run.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <system_error>
#include <vector>

// NOLINTNEXTLINE(readability-identifier-naming): libFuzzer fixes the name.
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

namespace fs = std::filesystem;

bool read_whole(const fs::path& path, std::vector<uint8_t>& bytes) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  return !in.bad();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s FILE_OR_FOLDER...\n", argv[0]);
    return 2;
  }
  std::vector<fs::path> files;
  for (int i = 1; i < argc; ++i) {
    const fs::path arg = argv[i];
    std::error_code ec;
    if (fs::is_directory(arg, ec)) {
      // Sorted, so a failure names the same file on every machine.
      std::vector<fs::path> found;
      for (const auto& entry : fs::recursive_directory_iterator(arg, ec)) {
        // Dot files (.gitkeep) keep empty folders in git; they are not inputs.
        if (entry.is_regular_file() && entry.path().filename().string().front() != '.') {
          found.push_back(entry.path());
        }
      }
      if (ec) {
        std::fprintf(stderr, "error: cannot list '%s': %s\n", argv[i], ec.message().c_str());
        return 2;
      }
      std::sort(found.begin(), found.end());
      files.insert(files.end(), found.begin(), found.end());
    } else if (fs::is_regular_file(arg, ec)) {
      files.push_back(arg);
    } else {
      std::fprintf(stderr, "error: '%s' is neither a file nor a folder\n", argv[i]);
      return 2;
    }
  }
  std::vector<uint8_t> bytes;
  for (const fs::path& file : files) {
    if (!read_whole(file, bytes)) {
      std::fprintf(stderr, "error: cannot read '%s'\n", file.c_str());
      return 2;
    }
    // Named before the run, so the log shows which input a crash came from.
    std::fprintf(stderr, "replay: %s (%zu bytes)\n", file.c_str(), bytes.size());
    // A heap block of exactly the file's size, so AddressSanitizer sees any read past its end
    // (a vector's spare capacity would hide it).
    const auto exact = std::make_unique<uint8_t[]>(std::max<std::size_t>(bytes.size(), 1));
    std::copy(bytes.begin(), bytes.end(), exact.get());
    LLVMFuzzerTestOneInput(exact.get(), bytes.size());
  }
  std::printf("replayed %zu inputs\n", files.size());
  return 0;
}
