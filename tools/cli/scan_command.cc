#include "scan_command.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <filesystem>
#include <iostream>
#include <memory>
#include <system_error>

#include "cumulus/chunks.h"
#include "cumulus/error.h"
#include "cumulus/onnx.h"
#include "kernels/kernels.h"
#include "onnx/tensor_files.h"

namespace cumulus::cli {
namespace {

namespace fs = std::filesystem;
using onnx::NpyLayout;
using onnx::TempFile;

template <class... Args>
[[noreturn]] void fail(ErrorCode code, fmt::format_string<Args...> format, Args&&... args) {
  throw Error(code, fmt::format(format, std::forward<Args>(args)...));
}

std::string errno_text(int error) { return std::generic_category().message(error); }

// The file in C order around the scanned axis: `outer` slabs, each `length` rows of `inner`
// contiguous elements.
struct Layout {
  int64_t outer = 1, length = 1, inner = 1;
};

// A Fortran-order array is the C-order array of the reversed shape, so its axis a is rank-1-a.
Layout layout_around(std::span<const int64_t> file_shape, bool fortran_order, int64_t axis) {
  Shape shape(file_shape.begin(), file_shape.end());
  const auto rank = static_cast<int64_t>(shape.size());
  if (fortran_order) {
    std::ranges::reverse(shape);
    axis = rank - 1 - axis;
  }
  Layout l;
  for (int64_t d = 0; d < rank; ++d) {
    (d < axis ? l.outer : d == axis ? l.length : l.inner) *= shape[static_cast<std::size_t>(d)];
  }
  return l;
}

// How the file is cut. With a row (and its lines' state) within the budget, chunks of whole
// rows, or of whole slabs when a slab fits; otherwise bands of `band` columns.
struct Plan {
  int64_t band = 0;   // positions of `inner` per band: `inner` unless a row does not fit
  int64_t rows = 0;   // rows per chunk, at most `length`
  int64_t slabs = 1;  // slabs per chunk when band == inner and rows == length
};

// What a chunk costs, in bytes: its buffer (scanned in place), the state of its lines, and the
// kernels' scratch: with more than one line to a row, each thread gathers a strided line.
struct Costs {
  uint64_t element;  // one element of the buffer
  uint64_t line;     // one line of state
  uint64_t gather;   // per row, when lines are strided: an element for each thread
};

Plan plan_scan(const Layout& l, uint64_t memory, const Costs& c) {
  const auto inner = static_cast<uint64_t>(l.inner);
  const auto length = static_cast<uint64_t>(l.length);
  const auto gather = [&](uint64_t width) { return width > 1 ? c.gather : 0; };
  if (inner > (memory - std::min(memory, gather(inner))) / (c.element + c.line)) {
    // A row does not fit: bands as wide as fit with one row, a single column at the least.
    const uint64_t wide = (memory - std::min(memory, c.gather)) / (c.element + c.line);
    const uint64_t band = wide >= 2 ? wide : 1;
    const uint64_t rows = (memory - band * c.line) / (band * c.element + gather(band));
    return {static_cast<int64_t>(band), static_cast<int64_t>(std::min(rows, length)), 1};
  }
  const uint64_t row_state = inner * c.line;
  const uint64_t rows = (memory - row_state) / (inner * c.element + gather(inner));
  if (rows < length) return {l.inner, static_cast<int64_t>(rows), 1};
  // Here a slab with its state and scratch fits: length * (inner * element + gather) + row_state
  // <= memory.
  const uint64_t slab = length * inner * c.element + row_state;
  const uint64_t slabs = (memory - length * gather(inner)) / slab;
  return {l.inner, l.length, std::min(static_cast<int64_t>(slabs), l.outer)};
}

// A state keeps one carry a line in memory (an exact accumulator among its fields, whatever the
// op and type, so its byte form is no guide to it), and scan_chunk copies the carries while it
// scans: twice a carry a line.
constexpr uint64_t kStateLineBytes = 2 * sizeof(detail::Carry);

// Bytes done of the total on stderr, when it is a terminal, at most ten times a second.
class Progress {
 public:
  explicit Progress(uint64_t total) : total_(total), shown_(::isatty(STDERR_FILENO) == 1) {}
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;
  ~Progress() {
    if (drawn_) std::cerr << "\r\x1b[K" << std::flush;
  }

  void advance(uint64_t bytes) {
    done_ += bytes;
    if (!shown_) return;
    const auto now = Clock::now();
    if (drawn_ && now - last_ < std::chrono::milliseconds(100)) return;
    last_ = now;
    drawn_ = true;
    const double seconds = std::chrono::duration<double>(now - start_).count();
    const double rate = seconds > 0 ? static_cast<double>(done_) / seconds : 0;
    const double left = rate > 0 ? static_cast<double>(total_ - done_) / rate : 0;
    const auto whole = static_cast<int64_t>(left);
    std::cerr << fmt::format("\rscan: {} of {} ({:.0f}%), {}/s, {}:{:02} left\x1b[K",
                             human(static_cast<double>(done_)), human(static_cast<double>(total_)),
                             total_ > 0
                                 ? 100.0 * static_cast<double>(done_) / static_cast<double>(total_)
                                 : 100.0,
                             human(rate), whole / 60, whole % 60)
              << std::flush;
  }

 private:
  using Clock = std::chrono::steady_clock;

  static std::string human(double bytes) {
    constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int unit = 0;
    while (bytes >= 1024 && unit < 4) {
      bytes /= 1024;
      ++unit;
    }
    return fmt::format("{:.1f} {}", bytes, kUnits[unit]);
  }

  uint64_t total_;
  uint64_t done_ = 0;
  bool shown_;
  bool drawn_ = false;
  Clock::time_point start_ = Clock::now();
  Clock::time_point last_ = start_;
};

// Reads the input's data and writes the output's, chunk by chunk, scanning each in place.
class Scanner {
 public:
  Scanner(const ScanRequest& request, int input, const NpyLayout& file, const Layout& layout,
          const Plan& plan, TempFile& output, uint64_t output_offset, Progress& progress)
      : request_(request),
        input_(input),
        file_(file),
        layout_(layout),
        plan_(plan),
        element_(dtype_size(file.dtype)),
        buffer_(
            new std::byte[static_cast<std::size_t>(plan.slabs * plan.rows * plan.band) * element_]),
        output_(output),
        output_offset_(output_offset),
        progress_(progress) {}

  void run() {
    if (plan_.band == layout_.inner && plan_.rows == layout_.length) {
      for (int64_t slab = 0; slab < layout_.outer; slab += plan_.slabs) {
        scan_slabs(slab, std::min(plan_.slabs, layout_.outer - slab));
      }
      return;
    }
    for (int64_t slab = 0; slab < layout_.outer; ++slab) {
      for (int64_t column = 0; column < layout_.inner; column += plan_.band) {
        scan_band(slab, column, std::min(plan_.band, layout_.inner - column));
      }
    }
  }

 private:
  // `count` whole slabs from `first`, each scanned from the empty state.
  void scan_slabs(int64_t first, int64_t count) {
    const Shape shape = {count, layout_.length, layout_.inner};
    const uint64_t bytes = static_cast<uint64_t>(count * layout_.length * layout_.inner) * element_;
    const uint64_t at = static_cast<uint64_t>(first * layout_.length * layout_.inner) * element_;
    read(buffer_.get(), bytes, at);
    ScanState state(request_.op, file_.dtype, Shape{count, layout_.inner});
    scan_chunk(request_.op, {file_.dtype, shape, buffer_.get()}, 1,
               {file_.dtype, shape, buffer_.get()}, request_.options, state);
    write(buffer_.get(), bytes, at);
    progress_.advance(bytes);
  }

  // Columns [column, column + width) of every row of one slab, in chunks of rows taken in scan
  // order (from the end for a reverse scan), the state carried from chunk to chunk.
  void scan_band(int64_t slab, int64_t column, int64_t width) {
    ScanState state(request_.op, file_.dtype, Shape{width});
    for (int64_t done = 0; done < layout_.length; done += plan_.rows) {
      const int64_t rows = std::min(plan_.rows, layout_.length - done);
      const int64_t first = request_.options.reverse ? layout_.length - done - rows : done;
      transfer(slab, first, rows, column, width, /*reading=*/true);
      const Shape shape = {rows, width};
      scan_chunk(request_.op, {file_.dtype, shape, buffer_.get()}, 0,
                 {file_.dtype, shape, buffer_.get()}, request_.options, state);
      transfer(slab, first, rows, column, width, /*reading=*/false);
      progress_.advance(static_cast<uint64_t>(rows * width) * element_);
    }
  }

  // Moves rows [first, first + rows) x columns [column, column + width) of `slab` between the
  // files and the buffer, where they lie rows x width: one call when the rows are whole.
  void transfer(int64_t slab, int64_t first, int64_t rows, int64_t column, int64_t width,
                bool reading) {
    const int64_t start = (slab * layout_.length + first) * layout_.inner + column;
    const bool whole = width == layout_.inner;
    const int64_t runs = whole ? 1 : rows;
    const uint64_t run_bytes = static_cast<uint64_t>(whole ? rows * width : width) * element_;
    for (int64_t r = 0; r < runs; ++r) {
      std::byte* at = buffer_.get() + static_cast<std::size_t>(r) * run_bytes;
      const uint64_t offset = static_cast<uint64_t>(start + r * layout_.inner) * element_;
      if (reading) {
        read(at, run_bytes, offset);
      } else {
        write(at, run_bytes, offset);
      }
    }
  }

  // `offset` is from the start of the data.
  void read(std::byte* to, uint64_t bytes, uint64_t offset) {
    offset += file_.data_offset;
    while (bytes > 0) {
      const ssize_t n = ::pread(input_, to, bytes, static_cast<off_t>(offset));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) fail(ErrorCode::kIo, "cannot read '{}': {}", request_.input, errno_text(errno));
      if (n == 0) {
        fail(ErrorCode::kIo, "cannot read '{}': it ended at {} bytes, before its data did",
             request_.input, offset);
      }
      to += n;
      bytes -= static_cast<uint64_t>(n);
      offset += static_cast<uint64_t>(n);
    }
  }

  void write(const std::byte* from, uint64_t bytes, uint64_t offset) {
    output_.write_at({from, static_cast<std::size_t>(bytes)}, output_offset_ + offset);
  }

  const ScanRequest& request_;
  int input_;
  const NpyLayout& file_;
  Layout layout_;
  Plan plan_;
  uint64_t element_;
  std::unique_ptr<std::byte[]> buffer_;
  TempFile& output_;
  uint64_t output_offset_;
  Progress& progress_;
};

int64_t checked_axis(const ScanRequest& request, std::span<const int64_t> shape) {
  const std::string_view name = op_name(request.op);
  const auto rank = static_cast<int64_t>(shape.size());
  if (rank == 0) {
    fail(ErrorCode::kInvalidArgument,
         "{}: input '{}' is a scalar (rank 0), which has no axis to scan along", name,
         request.input);
  }
  if (request.axis < -rank || request.axis >= rank) {
    fail(ErrorCode::kInvalidArgument,
         "{}: axis {} is out of range for input '{}' of rank {} (shape {}); valid: [{}, {}]", name,
         request.axis, request.input, rank, shape_string(shape), -rank, rank - 1);
  }
  return request.axis < 0 ? request.axis + rank : request.axis;
}

void check_output(const ScanRequest& request, int input) {
  struct stat in {
  }, out{};
  if (::fstat(input, &in) == 0 && ::stat(request.output.c_str(), &out) == 0) {
    if (in.st_dev == out.st_dev && in.st_ino == out.st_ino) {
      fail(ErrorCode::kInvalidArgument,
           "output '{}' is the input file '{}'; a scan cannot write over what it reads",
           request.output, request.input);
    }
    if (S_ISDIR(out.st_mode)) {
      fail(ErrorCode::kIo, "cannot write '{}': a folder of that name is in the way",
           request.output);
    }
  }
}

}  // namespace

std::optional<std::size_t> parse_memory_size(std::string_view text) {
  std::size_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end == text.data()) return std::nullopt;
  const std::string_view rest(end, static_cast<std::size_t>(text.data() + text.size() - end));
  if (rest.size() > 1) return std::nullopt;
  int shift = 0;
  if (!rest.empty()) {
    const auto at = std::string_view("KMGT").find(static_cast<char>(rest[0] & ~0x20));
    if (at == std::string_view::npos) return std::nullopt;
    shift = 10 * static_cast<int>(at + 1);
  }
  if (shift != 0 && value > (SIZE_MAX >> shift)) return std::nullopt;
  return value << shift;
}

int scan_command(const ScanRequest& request) {
  const onnx::Fd input(::open(request.input.c_str(), O_RDONLY | O_CLOEXEC));
  if (input.get() < 0) {
    fail(ErrorCode::kIo, "cannot read '{}': {}", request.input, errno_text(errno));
  }
  const NpyLayout file = onnx::read_npy_layout(input.get(), request.input,
                                               fmt::format("tensor file '{}'", request.input));
  const int64_t axis = checked_axis(request, file.shape);
  const uint64_t line = kStateLineBytes;
  const uint64_t least = line + dtype_size(file.dtype);
  if (request.memory < least) {
    fail(ErrorCode::kInvalidArgument,
         "--memory {}: too small; {} of {} needs at least {} bytes (one line's scan state of {} "
         "bytes and one element)",
         request.memory, op_name(request.op), dtype_name(file.dtype), least, line);
  }
  check_output(request, input.get());
  ::posix_fadvise(input.get(), 0, 0,
                  request.options.reverse ? POSIX_FADV_NORMAL : POSIX_FADV_SEQUENTIAL);

  TempFile output(request.output);
  const std::string header = onnx::npy_header(file.dtype, file.shape, file.fortran_order);
  output.write(header);
  if (file.data_bytes > 0) {
    const Layout layout = layout_around(file.shape, file.fortran_order, axis);
    const uint64_t element = dtype_size(file.dtype);
    const Plan plan =
        plan_scan(layout, request.memory,
                  {element, line, element * static_cast<uint64_t>(std::max(1, num_threads()))});
    Progress progress(file.data_bytes);
    Scanner(request, input.get(), file, layout, plan, output, header.size(), progress).run();
  }
  output.commit(request.sync);
  std::cout << fmt::format("wrote {} ({}, shape {})\n", request.output, dtype_name(file.dtype),
                           onnx::shape_tuple(file.shape));
  return 0;
}

}  // namespace cumulus::cli
