// The pieces of the tensor files that stream: a .npy header read from an open file and written
// alone, and the atomic output file, for the CLI's scan of files larger than memory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "cumulus/dtype.h"
#include "cumulus/tensor.h"

namespace cumulus::onnx {

// Where a .npy file's data lies and how it is laid out.
struct NpyLayout {
  DType dtype = DType::kFloat32;
  bool fortran_order = false;
  Shape shape;
  std::size_t data_offset = 0;  // bytes before the data
  std::size_t data_bytes = 0;
};

// Reads the header of the .npy file open as `fd` and checks it against the file's size, with
// the same checks and messages as parse_npy, except that Fortran order is accepted. `what`
// names the file in errors; `path` is the file, for read errors.
NpyLayout read_npy_layout(int fd, const std::filesystem::path& path, std::string_view what);

// The header (everything before the data) numpy.save writes for an array of this layout.
std::string npy_header(DType dtype, std::span<const int64_t> shape, bool fortran_order);

// Closes a descriptor on every path out of a scope.
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd();
  int get() const { return fd_; }
  // Closes now, so the caller can check the result (for writes, close can report lost data).
  int close();

 private:
  int fd_;
};

// A new file next to the target, renamed over it once whole. Where the file system allows, the
// file has no name until then (O_TMPFILE), so even a process killed midway leaves nothing behind;
// elsewhere it has a hidden name, removed on failure. Errors name the target.
class TempFile {
 public:
  explicit TempFile(const std::filesystem::path& target);
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  ~TempFile();

  void write(std::string_view bytes);
  // At `offset` from the start of the file, which grows as needed.
  void write_at(std::span<const std::byte> bytes, uint64_t offset);
  // Asks the system to start writing [offset, offset + bytes) to the disk now, without waiting,
  // so that a durable commit later has less left to wait for. Only a hint: errors show at commit.
  void start_writeback(uint64_t offset, uint64_t bytes);
  // Names the file as the target, whole: a killed process never leaves it half written. With
  // `durable`, the contents reach the disk first, so neither does a crash of the system.
  void commit(bool durable = true);

 private:
  std::string create_step() const;
  template <class Make>
  void name_file(std::string_view step, Make make);
  [[noreturn]] void fail_io(std::string_view step, int error) const;

  std::filesystem::path target_;
  std::filesystem::path folder_;
  std::filesystem::path path_;  // empty while the file has no name
  std::optional<Fd> fd_;
  bool renamed_ = false;
};

}  // namespace cumulus::onnx
