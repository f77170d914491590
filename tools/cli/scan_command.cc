#include "scan_command.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <exception>
#include <filesystem>
#include <iostream>
#include <memory>
#include <mutex>
#include <optional>
#include <system_error>
#include <thread>

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

// What a chunk costs, in bytes: its copies (kChunkCopies), the state of its lines, and the
// kernels' scratch: with lines `width` apart, each thread gathers groups of them.
struct Costs {
  uint64_t element;  // one element of a chunk, in all its copies
  uint64_t line;     // one line of state
  DType dtype;
  uint64_t threads;

  // Per row of a chunk `width` columns wide.
  uint64_t gather(uint64_t width) const {
    return threads * scan_chunk_scratch_bytes(dtype, 1, static_cast<int64_t>(width));
  }
};

Plan plan_scan(const Layout& l, uint64_t memory, const Costs& c) {
  const auto inner = static_cast<uint64_t>(l.inner);
  const auto length = static_cast<uint64_t>(l.length);
  const auto gather = [&](uint64_t width) { return c.gather(width); };
  if (inner > (memory - std::min(memory, gather(inner))) / (c.element + c.line)) {
    // A row does not fit: bands as wide as fit with one row, a single column at the least.
    const uint64_t wide = (memory - std::min(memory, gather(inner))) / (c.element + c.line);
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
// op and type, so its byte form is no guide to it).
constexpr uint64_t kStateLineBytes = sizeof(detail::Carry);

// Each element of a chunk is in memory three times over while the scan runs: in the input's window
// (or the buffer a band is read into), in the buffer it is scanned into, and in the other buffer,
// which holds the chunk before it until that is written.
constexpr uint64_t kChunkCopies = 3;

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

// A piece of the file scanned at once: `runs` runs of `run_bytes`, `stride` bytes apart from
// `offset` (counted from the start of the data), at the same places in both files and one after
// another in a buffer; scanned as `shape` along `axis`, from an empty state of `lines` when
// `fresh`, else from the state the chunk before it left.
struct Chunk {
  uint64_t offset = 0, run_bytes = 0, stride = 0;
  int64_t runs = 1;
  Shape shape;
  int64_t axis = 0;
  bool fresh = true;
  Shape lines;

  uint64_t bytes() const { return run_bytes * static_cast<uint64_t>(runs); }
};

// The chunks of a plan in the order they are scanned: whole slabs at a time, each from the empty
// state; otherwise, per slab, bands of columns, each band's rows in chunks taken in scan order
// (from the end for a reverse scan) with the state carried from chunk to chunk.
class Chunks {
 public:
  Chunks(const Layout& layout, const Plan& plan, uint64_t element, bool reverse)
      : l_(layout), plan_(plan), element_(element), reverse_(reverse) {}

  bool next(Chunk& c) {
    if (plan_.band == l_.inner && plan_.rows == l_.length) {
      if (slab_ >= l_.outer) return false;
      const int64_t count = std::min(plan_.slabs, l_.outer - slab_);
      const int64_t slab_elements = l_.length * l_.inner;
      c = {bytes(slab_ * slab_elements),
           bytes(count * slab_elements),
           0,
           1,
           Shape{count, l_.length, l_.inner},
           1,
           true,
           Shape{count, l_.inner}};
      slab_ += count;
      return true;
    }
    if (done_ >= l_.length) {
      done_ = 0;
      column_ += plan_.band;
      if (column_ >= l_.inner) {
        column_ = 0;
        ++slab_;
      }
    }
    if (slab_ >= l_.outer) return false;
    const int64_t width = std::min(plan_.band, l_.inner - column_);
    const int64_t rows = std::min(plan_.rows, l_.length - done_);
    const int64_t first = reverse_ ? l_.length - done_ - rows : done_;
    const bool whole = width == l_.inner;
    c = {bytes((slab_ * l_.length + first) * l_.inner + column_),
         bytes(whole ? rows * width : width),
         bytes(l_.inner),
         whole ? 1 : rows,
         Shape{rows, width},
         0,
         done_ == 0,
         Shape{width}};
    done_ += rows;
    return true;
  }

 private:
  uint64_t bytes(int64_t elements) const { return static_cast<uint64_t>(elements) * element_; }

  Layout l_;
  Plan plan_;
  uint64_t element_;
  bool reverse_;
  int64_t slab_ = 0, column_ = 0, done_ = 0;
};

// The input's bytes [offset, offset + bytes) mapped read-only, its pages loaded up front; unmapped
// (so no longer resident for this process) when it goes. The file's size is checked once the pages
// are in: a file cut short by another process is an error, not a fault on a page past its end
// (unless it is cut in the moment between the check and the reads).
class Window {
 public:
  Window(int fd, uint64_t offset, uint64_t bytes, const std::string& path) {
    const auto page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
    skip_ = offset % page;
    length_ = static_cast<std::size_t>(bytes + skip_);
    void* at = ::mmap(nullptr, length_, PROT_READ, MAP_SHARED | MAP_POPULATE, fd,
                      static_cast<off_t>(offset - skip_));
    if (at == MAP_FAILED) fail(ErrorCode::kIo, "cannot read '{}': {}", path, errno_text(errno));
    base_ = static_cast<std::byte*>(at);
    struct stat info {};
    const int status = ::fstat(fd, &info);
    const int error = errno;
    if (status != 0 || static_cast<uint64_t>(info.st_size) < offset + bytes) {
      ::munmap(base_, length_);
      if (status != 0) fail(ErrorCode::kIo, "cannot read '{}': {}", path, errno_text(error));
      fail(ErrorCode::kIo, "cannot read '{}': it ended at {} bytes, before its data did", path,
           info.st_size);
    }
  }
  Window(const Window&) = delete;
  Window& operator=(const Window&) = delete;
  ~Window() { ::munmap(base_, length_); }

  const std::byte* data() const { return base_ + skip_; }

 private:
  std::byte* base_ = nullptr;
  std::size_t length_ = 0;
  uint64_t skip_ = 0;
};

// Writes scanned chunks from a thread of its own while the next chunk is scanned, with two
// buffers taking turns. An error on the way stops it; the scanning side meets it (rethrown) at
// its next acquire, submit or finish.
class Writer {
 public:
  // With `durable`, each chunk's writeback starts once it is written, so that the commit's sync
  // waits for the last chunks only, not the whole file.
  Writer(TempFile& output, uint64_t base, std::size_t buffer_bytes, bool durable,
         Progress& progress)
      : output_(output), base_(base), durable_(durable), progress_(progress) {
    for (auto& b : buffers_) {
      b.reset(new std::byte[buffer_bytes]);
      free_.push_back(b.get());
    }
    thread_ = std::thread([this] { loop(); });
  }
  Writer(const Writer&) = delete;
  Writer& operator=(const Writer&) = delete;
  // On the way out of an error: what is queued is dropped, and the file with it.
  ~Writer() {
    if (!thread_.joinable()) return;
    {
      std::lock_guard lock(mutex_);
      jobs_.clear();
      closing_ = true;
    }
    changed_.notify_all();
    thread_.join();
  }

  // A buffer to scan the next chunk into, once the writer has finished with it.
  std::byte* acquire() {
    std::unique_lock lock(mutex_);
    changed_.wait(lock, [&] { return !free_.empty() || error_; });
    if (error_) std::rethrow_exception(error_);
    std::byte* buffer = free_.back();
    free_.pop_back();
    return buffer;
  }

  void submit(std::byte* buffer, const Chunk& chunk) {
    {
      std::lock_guard lock(mutex_);
      if (error_) std::rethrow_exception(error_);
      jobs_.push_back({buffer, chunk});
    }
    changed_.notify_all();
  }

  // Returns once every chunk submitted is written.
  void finish() {
    {
      std::lock_guard lock(mutex_);
      closing_ = true;
    }
    changed_.notify_all();
    thread_.join();
    if (error_) std::rethrow_exception(error_);
  }

 private:
  struct Job {
    std::byte* buffer;
    Chunk chunk;
  };

  void loop() {
    for (;;) {
      Job job;
      {
        std::unique_lock lock(mutex_);
        changed_.wait(lock, [&] { return !jobs_.empty() || closing_; });
        if (jobs_.empty()) return;
        job = jobs_.front();
        jobs_.pop_front();
      }
      try {
        const Chunk& c = job.chunk;
        for (int64_t r = 0; r < c.runs; ++r) {
          output_.write_at({job.buffer + static_cast<std::size_t>(r) * c.run_bytes,
                            static_cast<std::size_t>(c.run_bytes)},
                           base_ + c.offset + static_cast<uint64_t>(r) * c.stride);
        }
        if (durable_) {
          output_.start_writeback(base_ + c.offset,
                                  static_cast<uint64_t>(c.runs - 1) * c.stride + c.run_bytes);
        }
        progress_.advance(c.bytes());
      } catch (...) {
        std::lock_guard lock(mutex_);
        error_ = std::current_exception();
        changed_.notify_all();
        return;
      }
      {
        std::lock_guard lock(mutex_);
        free_.push_back(job.buffer);
      }
      changed_.notify_all();
    }
  }

  TempFile& output_;
  uint64_t base_;
  bool durable_;
  Progress& progress_;
  std::unique_ptr<std::byte[]> buffers_[2];
  std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<std::byte*> free_;
  std::deque<Job> jobs_;
  bool closing_ = false;
  std::exception_ptr error_;
  std::thread thread_;  // last: starts once the rest is ready
};

// Scans the input chunk by chunk into the output. A chunk of whole rows is scanned straight from
// the input's mapped pages into a buffer (no copy on the way in); a band of columns is read into
// the buffer and scanned there. The writer writes one chunk while the next is scanned: a window
// and two buffers (kChunkCopies).
class Scanner {
 public:
  Scanner(const ScanRequest& request, int input, const NpyLayout& file, const Layout& layout,
          const Plan& plan, TempFile& output, uint64_t output_offset, Progress& progress)
      : request_(request),
        input_(input),
        file_(file),
        element_(dtype_size(file.dtype)),
        chunks_(layout, plan, element_, request.options.reverse),
        writer_(output, output_offset,
                static_cast<std::size_t>(plan.slabs * plan.rows * plan.band) * element_,
                request.sync, progress) {}

  void run() {
    Chunk chunk, next;
    bool more = chunks_.next(chunk);
    while (more) {
      const bool after = chunks_.next(next);
      // The page cache loads the next window while this chunk is scanned (when the file is not
      // there already); bands read runs of their own.
      if (after && next.runs == 1) {
        ::posix_fadvise(input_, static_cast<off_t>(file_.data_offset + next.offset),
                        static_cast<off_t>(next.bytes()), POSIX_FADV_WILLNEED);
      }
      scan(chunk);
      chunk = std::move(next);
      more = after;
    }
    writer_.finish();
  }

 private:
  void scan(const Chunk& c) {
    std::byte* out = writer_.acquire();
    if (c.fresh) state_.emplace(request_.op, file_.dtype, c.lines);
    if (c.runs == 1) {
      const Window in(input_, file_.data_offset + c.offset, c.bytes(), request_.input);
      compute(in.data(), out, c);
    } else {
      for (int64_t r = 0; r < c.runs; ++r) {
        read(out + static_cast<std::size_t>(r) * c.run_bytes, c.run_bytes,
             c.offset + static_cast<uint64_t>(r) * c.stride);
      }
      compute(out, out, c);
    }
    writer_.submit(out, c);
  }

  void compute(const std::byte* x, std::byte* y, const Chunk& c) {
    scan_chunk(request_.op, {file_.dtype, c.shape, x}, c.axis, {file_.dtype, c.shape, y},
               request_.options, *state_);
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

  const ScanRequest& request_;
  int input_;
  const NpyLayout& file_;
  uint64_t element_;
  Chunks chunks_;
  std::optional<ScanState> state_;
  Writer writer_;
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
  const uint64_t least = line + kChunkCopies * dtype_size(file.dtype);
  if (request.memory < least) {
    fail(ErrorCode::kInvalidArgument,
         "--memory {}: too small; {} of {} needs at least {} bytes (one line's scan state of {} "
         "bytes and one element read, one scanned and one being written)",
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
    const Plan plan = plan_scan(layout, request.memory,
                                {kChunkCopies * element, line, file.dtype,
                                 static_cast<uint64_t>(std::max(1, num_threads()))});
    Progress progress(file.data_bytes);
    Scanner(request, input.get(), file, layout, plan, output, header.size(), progress).run();
  }
  output.commit(request.sync);
  std::cout << fmt::format("wrote {} ({}, shape {})\n", request.output, dtype_name(file.dtype),
                           onnx::shape_tuple(file.shape));
  return 0;
}

}  // namespace cumulus::cli
