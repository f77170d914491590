// Tensor files: ONNX TensorProto (.pb) and NumPy .npy, and the file I/O under them.
#include "onnx/tensor_files.h"

#include <fcntl.h>
#include <google/protobuf/io/coded_stream.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <cerrno>
#include <cstring>
#include <limits>
#include <random>
#include <system_error>
#include <utility>

#include "core/fail.h"
#include "cumulus/onnx.h"
#include "onnx/proto.h"

namespace cumulus::onnx {
namespace {

using detail::fail;
namespace fs = std::filesystem;

// Both formats store values little endian; they are copied as they are.
static_assert(std::endian::native == std::endian::little,
              "tensor files are read and written on little-endian hosts only");

std::span<const std::byte> as_bytes(std::string_view s) {
  return std::as_bytes(std::span(s.data(), s.size()));
}

void copy_bytes(void* to, const void* from, std::size_t n) {
  // memcpy with a null pointer is undefined even for n == 0, and empty views may have one.
  if (n != 0) std::memcpy(to, from, n);
}

std::string supported_dtypes() {
  std::string names;
  for (DType dtype : kAllDTypes) {
    if (!names.empty()) names += ", ";
    names += dtype_name(dtype);
  }
  return names;
}

// Element count of a shape read from a file. `shape_text` shows the shape as the file writes it.
int64_t checked_count(std::span<const int64_t> shape, std::string_view what,
                      std::string_view shape_text) {
  for (int64_t d : shape) {
    if (d < 0) fail(ErrorCode::kParse, "{}: {} has a negative dimension", what, shape_text);
  }
  try {
    return element_count(shape);
  } catch (const Error& e) {
    fail(e.code(), "{}: {}", what, e.what());
  }
}

// Bytes of `count` elements of `dtype`; the product may not fit even when the count does.
std::size_t checked_bytes(int64_t count, DType dtype, std::string_view what,
                          std::string_view shape_text) {
  const auto item = static_cast<int64_t>(dtype_size(dtype));
  if (count > std::numeric_limits<int64_t>::max() / item) {
    fail(ErrorCode::kLimit, "{}: {} of {} needs more bytes than fit in 64 bits", what, shape_text,
         dtype_name(dtype));
  }
  return static_cast<std::size_t>(count * item);
}

// ---- TensorProto --------------------------------------------------------------------------------

// How messages name a TensorProto: by its file when there is one, and by its name once known.
std::string proto_what(std::string_view file_what, const std::string& name) {
  std::string proto = name.empty() ? "TensorProto" : fmt::format("TensorProto '{}'", name);
  if (file_what.empty()) return proto;
  return name.empty() ? std::string(file_what) : fmt::format("{} ({})", file_what, proto);
}

struct FieldSize {
  std::string_view name;
  int size;
};

std::array<FieldSize, 6> typed_field_sizes(const ::onnx::TensorProto& proto) {
  return {{{"float_data", proto.float_data_size()},
           {"int32_data", proto.int32_data_size()},
           {"string_data", proto.string_data_size()},
           {"int64_data", proto.int64_data_size()},
           {"double_data", proto.double_data_size()},
           {"uint64_data", proto.uint64_data_size()}}};
}

std::string external_location(const ::onnx::TensorProto& proto) {
  for (const auto& entry : proto.external_data()) {
    if (entry.key() == "location") return fmt::format("location '{}'", entry.value());
  }
  return "data_location EXTERNAL";
}

template <class Half>
void copy_half_bits(const google::protobuf::RepeatedField<int32_t>& values, std::string_view what,
                    Half* out) {
  for (int i = 0; i < values.size(); ++i) {
    const int32_t v = values[i];
    if (v < 0 || v > std::numeric_limits<uint16_t>::max()) {
      fail(ErrorCode::kParse, "{}: int32_data[{}] = {} is not a {} bit pattern (0 to 65535)", what,
           i, v, dtype_name(dtype_of<Half>));
    }
    out[i] = Half{static_cast<uint16_t>(v)};
  }
}

// Copies the typed field of t's dtype, whose length has been checked, into t.
void copy_typed_field(const ::onnx::TensorProto& proto, std::string_view what, Tensor& t) {
  switch (t.dtype()) {
    case DType::kFloat32:
      std::copy(proto.float_data().begin(), proto.float_data().end(), t.data<float>());
      return;
    case DType::kFloat64:
      std::copy(proto.double_data().begin(), proto.double_data().end(), t.data<double>());
      return;
    case DType::kFloat16:
      copy_half_bits(proto.int32_data(), what, t.data<Float16>());
      return;
    case DType::kBFloat16:
      copy_half_bits(proto.int32_data(), what, t.data<BFloat16>());
      return;
    case DType::kInt32:
      std::copy(proto.int32_data().begin(), proto.int32_data().end(), t.data<int32_t>());
      return;
    case DType::kInt64:
      std::copy(proto.int64_data().begin(), proto.int64_data().end(), t.data<int64_t>());
      return;
    case DType::kUInt32:
      for (int i = 0; i < proto.uint64_data_size(); ++i) {
        const uint64_t v = proto.uint64_data(i);
        if (v > std::numeric_limits<uint32_t>::max()) {
          fail(ErrorCode::kParse, "{}: uint64_data[{}] = {} does not fit in uint32", what, i, v);
        }
        t.data<uint32_t>()[i] = static_cast<uint32_t>(v);
      }
      return;
    case DType::kUInt64:
      break;
  }
  std::copy(proto.uint64_data().begin(), proto.uint64_data().end(), t.data<uint64_t>());
}

// `file_what` names the file the bytes came from, or is empty.
Tensor parse_tensor_proto_from(std::span<const std::byte> bytes, std::string_view file_what,
                               std::string* name) {
  check_protobuf_size(bytes.size(), proto_what(file_what, {}));
  ::onnx::TensorProto proto;
  if (!proto.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    fail(ErrorCode::kParse, "{}: {} bytes are not a valid protobuf TensorProto",
         proto_what(file_what, {}), bytes.size());
  }
  Tensor t = tensor_from_proto(proto, proto_what(file_what, proto.name()));
  if (name != nullptr) *name = proto.name();
  return t;
}

// ---- .npy ---------------------------------------------------------------------------------------

constexpr std::string_view kNpyMagic = "\x93NUMPY";
// numpy.save pads the header so the data starts at a multiple of this.
constexpr std::size_t kNpyAlign = 64;
// numpy (1.24 and later) reserves room for the first dimension to grow to this many digits, so
// a file can be appended to in place. Writing the same spaces keeps our files identical to numpy's.
constexpr std::size_t kNpyGrowthAxisMaxDigits = 21;

struct NpyHeader {
  std::string descr;
  bool fortran_order = false;
  Shape shape;
};

// The header is a Python dict literal. This reads the subset numpy writes and other writers
// plausibly produce: the three keys in any order, either quote, any whitespace, trailing commas,
// and Python 2's "L" suffix on integers.
class NpyHeaderParser {
 public:
  NpyHeaderParser(std::string_view text, std::string_view what) : text_(text), what_(what) {}

  NpyHeader parse() {
    NpyHeader header;
    bool seen_descr = false;
    bool seen_fortran_order = false;
    bool seen_shape = false;
    expect('{');
    while (!consume('}')) {
      const std::string key = string_literal();
      expect(':');
      if (key == "descr") {
        mark_seen(seen_descr, key);
        skip_space();
        if (peek() == '[') {
          fail(ErrorCode::kUnsupported, "{}: structured dtypes are not supported (descr {:?})",
               what_, excerpt(text_.substr(pos_)));
        }
        header.descr = string_literal();
      } else if (key == "fortran_order") {
        mark_seen(seen_fortran_order, key);
        header.fortran_order = boolean();
      } else if (key == "shape") {
        mark_seen(seen_shape, key);
        header.shape = tuple();
      } else {
        fail(ErrorCode::kParse, "{}: header has an unexpected key '{}'", what_, key);
      }
      if (!consume(',')) {
        expect('}');
        break;
      }
    }
    skip_space();
    if (pos_ != text_.size()) syntax_error("the end of the header");
    for (auto [seen, key] :
         {std::pair{seen_descr, "descr"}, std::pair{seen_fortran_order, "fortran_order"},
          std::pair{seen_shape, "shape"}}) {
      if (!seen) fail(ErrorCode::kParse, "{}: header has no '{}' entry", what_, key);
    }
    return header;
  }

 private:
  static std::string_view excerpt(std::string_view s) { return s.substr(0, 160); }

  [[noreturn]] void syntax_error(std::string_view expected) const {
    fail(ErrorCode::kParse, "{}: cannot parse header {:?}: expected {} at offset {}", what_,
         excerpt(text_), expected, pos_);
  }

  void mark_seen(bool& seen, std::string_view key) const {
    if (seen) fail(ErrorCode::kParse, "{}: header has '{}' twice", what_, key);
    seen = true;
  }

  char peek() const { return pos_ < text_.size() ? text_[pos_] : '\0'; }

  void skip_space() {
    while (pos_ < text_.size() &&
           std::string_view(" \t\n\r\f\v").find(text_[pos_]) != std::string_view::npos) {
      ++pos_;
    }
  }

  bool consume(char c) {
    skip_space();
    if (peek() != c) return false;
    ++pos_;
    return true;
  }

  void expect(char c) {
    if (!consume(c)) syntax_error(fmt::format("'{}'", c));
  }

  std::string string_literal() {
    skip_space();
    const char quote = peek();
    if (quote != '\'' && quote != '"') syntax_error("a quoted string");
    const std::size_t begin = pos_ + 1;
    const std::size_t end = text_.find(quote, begin);
    if (end == std::string_view::npos) syntax_error("a closing quote");
    const std::string_view value = text_.substr(begin, end - begin);
    // The accepted descrs and keys need no escapes; reading them as literal text would misread.
    if (value.find('\\') != std::string_view::npos) syntax_error("a string without escapes");
    pos_ = end + 1;
    return std::string(value);
  }

  bool boolean() {
    skip_space();
    for (bool value : {true, false}) {
      const std::string_view word = value ? "True" : "False";
      if (text_.substr(pos_, word.size()) == word) {
        pos_ += word.size();
        return value;
      }
    }
    syntax_error("True or False");
  }

  Shape tuple() {
    expect('(');
    Shape shape;
    bool comma = false;
    while (!consume(')')) {
      shape.push_back(integer());
      comma = consume(',');
      if (!comma) {
        expect(')');
        break;
      }
    }
    // Python reads "(5)" as the integer 5; numpy would refuse it, so do not guess.
    if (shape.size() == 1 && !comma) syntax_error("',' after the only dimension, as in (5,)");
    return shape;
  }

  int64_t integer() {
    skip_space();
    const bool negative = peek() == '-';
    if (negative) ++pos_;
    const std::size_t begin = pos_;
    uint64_t magnitude = 0;
    bool too_large = false;
    while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9') {
      const auto digit = static_cast<uint64_t>(text_[pos_] - '0');
      too_large = too_large || magnitude > (std::numeric_limits<uint64_t>::max() - digit) / 10;
      magnitude = magnitude * 10 + digit;
      ++pos_;
    }
    if (pos_ == begin) syntax_error("an integer");
    const std::string_view digits = text_.substr(begin, pos_ - begin);
    if (peek() == 'L') ++pos_;
    if (too_large || magnitude > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      fail(ErrorCode::kLimit, "{}: header shape entry {}{} does not fit in 64 bits", what_,
           negative ? "-" : "", digits);
    }
    const auto value = static_cast<int64_t>(magnitude);
    return negative ? -value : value;
  }

  std::string_view text_;
  std::string_view what_;
  std::size_t pos_ = 0;
};

DType npy_dtype(std::string_view descr, std::string_view what) {
  std::vector<std::string> supported;
  for (DType dtype : kAllDTypes) {
    const std::string_view code = dtype_info(dtype).npy_code;
    if (code.empty()) continue;
    supported.push_back(fmt::format("'<{}'", code));
    if (descr.size() != 3 || descr.substr(1) != code) continue;
    // '=' is native order and '|' "not applicable"; numpy reads both as native (little) here.
    if (descr[0] == '<' || descr[0] == '=' || descr[0] == '|') return dtype;
    if (descr[0] == '>') {
      fail(ErrorCode::kUnsupported,
           "{}: big-endian data (descr '{}') is not supported; save it little endian, e.g. "
           "a.astype('<{}')",
           what, descr, code);
    }
  }
  std::ranges::sort(supported);
  fail(ErrorCode::kUnsupported, "{}: descr '{}' is not supported (supported: {})", what, descr,
       fmt::join(supported, ", "));
}

std::string npy_descr(DType dtype) {
  const std::string_view code = dtype_info(dtype).npy_code;
  if (code.empty()) {
    fail(ErrorCode::kUnsupported, "npy: {} has no .npy form; use .pb", dtype_name(dtype));
  }
  return fmt::format("<{}", code);
}

template <class T>
T read_le(std::span<const std::byte> bytes, std::size_t offset) {
  T value;
  std::memcpy(&value, bytes.data() + offset, sizeof(T));
  return value;
}

// Version 1.0 has a 16-bit header length, 2.0 and 3.0 (UTF-8 header) a 32-bit one.
constexpr std::size_t npy_header_begin(unsigned major) { return major == 1 ? 10 : 12; }

// `head` holds at least npy_header_begin(major) bytes.
std::size_t npy_header_length(std::span<const std::byte> head, unsigned major) {
  return major == 1 ? read_le<uint16_t>(head, 8) : read_le<uint32_t>(head, 8);
}

// Everything up to the data, checked against `size`, the file's size: `head` is the file's start,
// through the header or all of a shorter file.
NpyLayout parse_npy_layout(std::span<const std::byte> head, std::size_t size, std::string_view what,
                           bool fortran_allowed) {
  if (head.size() < kNpyMagic.size() ||
      std::memcmp(head.data(), kNpyMagic.data(), kNpyMagic.size()) != 0) {
    fail(ErrorCode::kParse, "{}: not a .npy file (it does not start with \"\\x93NUMPY\")", what);
  }
  if (size < 8) {
    fail(ErrorCode::kParse, "{}: truncated: {} bytes end before the format version", what, size);
  }
  const auto major = static_cast<unsigned>(head[6]);
  const auto minor = static_cast<unsigned>(head[7]);
  if (minor != 0 || major < 1 || major > 3) {
    fail(ErrorCode::kUnsupported,
         "{}: format version {}.{} is not supported (known: 1.0, 2.0, 3.0)", what, major, minor);
  }
  const std::size_t header_begin = npy_header_begin(major);
  if (size < header_begin) {
    fail(ErrorCode::kParse, "{}: truncated: {} bytes end inside the header length", what, size);
  }
  const std::size_t header_length = npy_header_length(head, major);
  if (header_length > size - header_begin) {
    fail(ErrorCode::kParse,
         "{}: truncated: the header of {} bytes runs past the end of the file "
         "({} bytes)",
         what, header_length, size);
  }
  const std::string_view text(reinterpret_cast<const char*>(head.data()) + header_begin,
                              header_length);
  const NpyHeader header = NpyHeaderParser(text, what).parse();

  const DType dtype = npy_dtype(header.descr, what);
  if (header.fortran_order && !fortran_allowed) {
    fail(ErrorCode::kUnsupported,
         "{}: fortran_order True is not supported; save the array in C order, e.g. "
         "np.ascontiguousarray(a)",
         what);
  }
  const std::string shape_text = fmt::format("header shape {}", shape_tuple(header.shape));
  const int64_t count = checked_count(header.shape, what, shape_text);
  const std::size_t nbytes = checked_bytes(count, dtype, what, shape_text);
  const std::size_t data_begin = header_begin + header_length;
  const std::size_t available = size - data_begin;
  if (available < nbytes) {
    fail(ErrorCode::kParse, "{}: truncated: {} of '{}' needs {} bytes of data, the file has {}",
         what, shape_text, header.descr, nbytes, available);
  }
  if (available > nbytes) {
    fail(ErrorCode::kParse, "{}: {} bytes follow the {} bytes of data that {} of '{}' needs", what,
         available - nbytes, nbytes, shape_text, header.descr);
  }
  return {dtype, header.fortran_order, header.shape, data_begin, nbytes};
}

Tensor parse_npy_from(std::span<const std::byte> bytes, std::string_view what) {
  const NpyLayout layout = parse_npy_layout(bytes, bytes.size(), what, false);
  Tensor t(layout.dtype, layout.shape);
  copy_bytes(t.raw(), bytes.data() + layout.data_offset, layout.data_bytes);
  return t;
}

// ---- Files --------------------------------------------------------------------------------------

std::string errno_text(int error) { return std::generic_category().message(error); }

}  // namespace

Fd::~Fd() {
  if (fd_ >= 0) ::close(fd_);
}

int Fd::close() { return ::close(std::exchange(fd_, -1)); }

TempFile::TempFile(const fs::path& target)
    : target_(target), folder_(target.has_parent_path() ? target.parent_path() : ".") {
  // 0666 leaves the permissions to the umask, as for any newly created file. An unnamed file
  // is named through /proc at the end (linkat with AT_EMPTY_PATH needs privileges).
  if (::access("/proc/self/fd", X_OK) == 0) {
    const int fd = ::open(folder_.c_str(), O_WRONLY | O_TMPFILE | O_CLOEXEC, 0666);
    if (fd >= 0) {
      fd_.emplace(fd);
      return;
    }
    // File systems without O_TMPFILE say EOPNOTSUPP; kernels older than 3.11 say EISDIR.
    if (errno != EOPNOTSUPP && errno != EISDIR) fail_io(create_step(), errno);
  }
  name_file(create_step(), [this](const fs::path& path) {
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0) return errno;
    fd_.emplace(fd);
    return 0;
  });
}

TempFile::~TempFile() {
  fd_.reset();
  if (!renamed_ && !path_.empty()) ::unlink(path_.c_str());
}

void TempFile::write(std::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t n = ::write(fd_->get(), bytes.data(), bytes.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      fail_io("write failed", errno);
    }
    bytes.remove_prefix(static_cast<std::size_t>(n));
  }
}

void TempFile::write_at(std::span<const std::byte> bytes, uint64_t offset) {
  while (!bytes.empty()) {
    const ssize_t n = ::pwrite(fd_->get(), bytes.data(), bytes.size(), static_cast<off_t>(offset));
    if (n < 0) {
      if (errno == EINTR) continue;
      fail_io("write failed", errno);
    }
    bytes = bytes.subspan(static_cast<std::size_t>(n));
    offset += static_cast<uint64_t>(n);
  }
}

void TempFile::start_writeback(uint64_t offset, uint64_t bytes) {
  ::sync_file_range(fd_->get(), static_cast<off_t>(offset), static_cast<off_t>(bytes),
                    SYNC_FILE_RANGE_WRITE);
}

void TempFile::commit(bool durable) {
  if (durable && ::fsync(fd_->get()) != 0) fail_io("fsync failed", errno);
  if (path_.empty()) {
    const std::string self = fmt::format("/proc/self/fd/{}", fd_->get());
    name_file("cannot name the temporary file", [&self](const fs::path& path) {
      return ::linkat(AT_FDCWD, self.c_str(), AT_FDCWD, path.c_str(), AT_SYMLINK_FOLLOW) == 0
                 ? 0
                 : errno;
    });
  }
  if (fd_->close() != 0) fail_io("close failed", errno);
  if (::rename(path_.c_str(), target_.c_str()) != 0) {
    fail_io(fmt::format("cannot rename '{}' over it", path_.filename().string()), errno);
  }
  renamed_ = true;
}

std::string TempFile::create_step() const {
  return fmt::format("cannot create a temporary file in '{}'", folder_.string());
}

// Gives the file a fresh hidden name next to the target: `make(path)` creates it there and
// returns 0 or an errno. It never replaces a file; on the rare name clash, another name.
template <class Make>
void TempFile::name_file(std::string_view step, Make make) {
  static std::atomic<uint64_t> counter{0};
  std::random_device random;
  int error = EEXIST;
  for (int attempt = 0; attempt < 100 && error == EEXIST; ++attempt) {
    const fs::path path = folder_ / fmt::format(".{}.tmp{}.{}.{:08x}", target_.filename().string(),
                                                ::getpid(), counter.fetch_add(1), random());
    error = make(path);
    if (error == 0) path_ = path;
  }
  if (error != 0) fail_io(step, error);
}

void TempFile::fail_io(std::string_view step, int error) const {
  fail(ErrorCode::kIo, "cannot write '{}': {}: {}", target_.string(), step, errno_text(error));
}

NpyLayout read_npy_layout(int fd, const fs::path& path, std::string_view what) {
  const auto fail_read = [&path](int error) {
    fail(ErrorCode::kIo, "cannot read '{}': {}", path.string(), errno_text(error));
  };
  struct stat info {};
  if (::fstat(fd, &info) != 0) fail_read(errno);
  if (!S_ISREG(info.st_mode)) {
    fail(ErrorCode::kIo, "cannot read '{}': not a regular file", path.string());
  }
  const auto size = static_cast<std::size_t>(info.st_size);
  const auto read_head = [&](std::size_t n) {
    std::string head(n, '\0');
    std::size_t used = 0;
    while (used < n) {
      const ssize_t got = ::pread(fd, head.data() + used, n - used, static_cast<off_t>(used));
      if (got < 0 && errno == EINTR) continue;
      if (got < 0) fail_read(errno);
      if (got == 0) {
        fail(ErrorCode::kIo, "cannot read '{}': it ended at {} bytes, its size said {}",
             path.string(), used, size);
      }
      used += static_cast<std::size_t>(got);
    }
    return head;
  };
  std::string head = read_head(std::min(size, npy_header_begin(2)));
  const auto major = head.size() >= 8 ? static_cast<unsigned>(head[6]) : 0u;
  if (head.starts_with(kNpyMagic) && major >= 1 && major <= 3 &&
      head.size() >= npy_header_begin(major)) {
    const std::size_t header_length = npy_header_length(as_bytes(head), major);
    if (header_length <= size - npy_header_begin(major)) {
      check_memory_limit(header_length, fmt::format("the header of {}", what));
      head = read_head(npy_header_begin(major) + header_length);
    }
  }
  return parse_npy_layout(as_bytes(head), size, what, true);
}

void check_protobuf_size(std::size_t bytes, std::string_view what) {
  if (bytes > static_cast<std::size_t>(std::numeric_limits<int>::max())) {
    fail(ErrorCode::kLimit, "{}: {} bytes is more than protobuf can parse (2 GiB)", what, bytes);
  }
}

std::string read_protobuf_file(const fs::path& path, std::string_view what) {
  struct stat info {};
  if (::stat(path.c_str(), &info) == 0 && S_ISREG(info.st_mode)) {
    check_protobuf_size(static_cast<std::size_t>(info.st_size), what);
  }
  return read_file(path);
}

void check_no_external_data(const ::onnx::TensorProto& proto, std::string_view what) {
  if (proto.data_location() == ::onnx::TensorProto::EXTERNAL || proto.external_data_size() > 0) {
    fail(ErrorCode::kUnsupported,
         "{}: external data ({}) is not supported; store the values in the tensor itself", what,
         external_location(proto));
  }
}

Tensor tensor_from_proto(const ::onnx::TensorProto& proto, std::string_view what) {
  check_no_external_data(proto, what);
  if (proto.has_segment()) {
    fail(ErrorCode::kUnsupported, "{}: segmented tensors (segment {} to {}) are not supported",
         what, proto.segment().begin(), proto.segment().end());
  }
  const std::optional<DType> dtype = dtype_from_onnx(proto.data_type());
  if (!dtype) {
    fail(ErrorCode::kUnsupported, "{}: data type {} ({}) is not supported (supported: {})", what,
         onnx_type_name(proto.data_type()), proto.data_type(), supported_dtypes());
  }
  Shape shape(proto.dims().begin(), proto.dims().end());
  const std::string shape_text = fmt::format("dims {}", shape_string(shape));
  const int64_t count = checked_count(shape, what, shape_text);
  const std::size_t nbytes = checked_bytes(count, *dtype, what, shape_text);

  const std::string_view own_field = onnx_type_info(*dtype).typed_field;
  int own_size = 0;
  for (const FieldSize& field : typed_field_sizes(proto)) {
    if (field.name == own_field) own_size = field.size;
    if (field.size == 0) continue;
    if (proto.has_raw_data()) {
      fail(ErrorCode::kParse, "{}: has both raw_data and {} ({} values)", what, field.name,
           field.size);
    }
    if (field.name != own_field) {
      fail(ErrorCode::kParse, "{}: {} holds {} values, but {} values belong in {} or raw_data",
           what, field.name, field.size, dtype_name(*dtype), own_field);
    }
  }

  if (proto.has_raw_data()) {
    const std::string& raw = proto.raw_data();
    if (raw.size() != nbytes) {
      fail(ErrorCode::kParse, "{}: raw_data has {} bytes, but {} of {} needs {}", what, raw.size(),
           shape_text, dtype_name(*dtype), nbytes);
    }
    Tensor t(*dtype, std::move(shape));
    copy_bytes(t.raw(), raw.data(), nbytes);
    return t;
  }
  if (own_size != count) {
    fail(ErrorCode::kParse, "{}: {} has {} values, but {} of {} needs {}", what, own_field,
         own_size, shape_text, dtype_name(*dtype), count);
  }
  Tensor t(*dtype, std::move(shape));
  copy_typed_field(proto, what, t);
  return t;
}

Tensor parse_tensor_proto(std::span<const std::byte> bytes, std::string* name) {
  return parse_tensor_proto_from(bytes, {}, name);
}

std::string serialize_tensor_proto(ConstTensorView tensor, std::string_view name) {
  const std::string what = proto_what({}, std::string(name));
  const std::string shape_text = fmt::format("dims {}", shape_string(tensor.shape));
  const std::size_t nbytes =
      checked_bytes(element_count(tensor.shape), tensor.dtype, what, shape_text);
  ::onnx::TensorProto proto;
  proto.set_name(std::string(name));
  proto.set_data_type(onnx_from_dtype(tensor.dtype));
  for (int64_t d : tensor.shape) proto.add_dims(d);
  // Refused before the data is copied (and before protobuf logs its own complaint to stderr):
  // raw_data adds its tag (1 byte) and its length (a varint) to the data.
  const std::size_t total = proto.ByteSizeLong() + 1 +
                            google::protobuf::io::CodedOutputStream::VarintSize64(nbytes) + nbytes;
  if (total > static_cast<std::size_t>(std::numeric_limits<int>::max())) {
    fail(ErrorCode::kLimit,
         "{}: {} bytes of data make a protobuf of {} bytes, more than protobuf can hold (2 GiB)",
         what, nbytes, total);
  }
  std::string* raw = proto.mutable_raw_data();
  raw->resize(nbytes);
  copy_bytes(raw->data(), tensor.data, nbytes);
  std::string bytes;
  if (!proto.SerializeToString(&bytes)) {
    fail(ErrorCode::kLimit, "{}: {} bytes of data is more than protobuf can hold (2 GiB)", what,
         nbytes);
  }
  return bytes;
}

Tensor parse_npy(std::span<const std::byte> bytes) { return parse_npy_from(bytes, "npy"); }

std::string npy_header(DType dtype, std::span<const int64_t> shape, bool fortran_order) {
  const std::string descr = npy_descr(dtype);
  // Exactly what numpy.save writes: keys sorted, repr() values, then the padding below.
  std::string dict = fmt::format("{{'descr': '{}', 'fortran_order': {}, 'shape': {}, }}", descr,
                                 fortran_order ? "True" : "False", shape_tuple(shape));
  // The axis that can grow is the first in C order, the last in Fortran order.
  if (!shape.empty()) {
    const int64_t growth = fortran_order ? shape.back() : shape.front();
    dict.append(kNpyGrowthAxisMaxDigits - fmt::formatted_size("{}", growth), ' ');
  }
  // Spaces and a final newline bring the data to a multiple of kNpyAlign; like numpy, a header
  // that is already aligned gets a full kNpyAlign of padding. Version 2.0 only when 1.0's 16-bit
  // length cannot hold the header.
  const std::size_t unpadded = dict.size() + 1;
  std::size_t prefix = npy_header_begin(1);
  std::size_t padding = kNpyAlign - (prefix + unpadded) % kNpyAlign;
  const bool version2 = unpadded + padding > std::numeric_limits<uint16_t>::max();
  if (version2) {
    prefix = npy_header_begin(2);
    padding = kNpyAlign - (prefix + unpadded) % kNpyAlign;
  }
  const std::size_t header_length = unpadded + padding;
  if (header_length > std::numeric_limits<uint32_t>::max()) {
    fail(ErrorCode::kLimit, "npy: a header of {} bytes does not fit in the .npy format",
         header_length);
  }

  std::string bytes;
  bytes.reserve(prefix + header_length);
  bytes += kNpyMagic;
  bytes += static_cast<char>(version2 ? 2 : 1);
  bytes += '\0';
  const auto length = static_cast<uint32_t>(header_length);
  bytes.append(reinterpret_cast<const char*>(&length), version2 ? 4 : 2);
  bytes += dict;
  bytes.append(padding, ' ');
  bytes += '\n';
  return bytes;
}

std::string serialize_npy(ConstTensorView tensor) {
  const std::string shape_text = fmt::format("shape {}", shape_tuple(tensor.shape));
  npy_descr(tensor.dtype);  // its error comes first
  const std::size_t nbytes =
      checked_bytes(element_count(tensor.shape), tensor.dtype, "npy", shape_text);
  std::string bytes = npy_header(tensor.dtype, tensor.shape, false);
  const std::size_t header_size = bytes.size();
  bytes.resize(header_size + nbytes);
  copy_bytes(bytes.data() + header_size, tensor.data, nbytes);
  return bytes;
}

std::string shape_tuple(std::span<const int64_t> shape) {
  if (shape.size() == 1) return fmt::format("({},)", shape[0]);
  return fmt::format("({})", fmt::join(shape, ", "));
}

Tensor read_tensor_file(const fs::path& path, std::string* name) {
  const std::string what = fmt::format("tensor file '{}'", path.string());
  const std::string extension = path.extension().string();
  if (extension == ".npy") {
    Tensor t = parse_npy_from(as_bytes(read_file(path)), what);
    if (name != nullptr) name->clear();
    return t;
  }
  if (extension == ".pb") {
    return parse_tensor_proto_from(as_bytes(read_protobuf_file(path, what)), what, name);
  }
  fail(ErrorCode::kInvalidArgument,
       "{}: cannot tell the format from {} (accepted: .npy for NumPy, .pb for ONNX TensorProto)",
       what, extension.empty() ? "a name without extension" : fmt::format("'{}'", extension));
}

std::string read_file(const fs::path& path) {
  const auto fail_read = [&path](int error) {
    fail(ErrorCode::kIo, "cannot read '{}': {}", path.string(), errno_text(error));
  };
  const Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) fail_read(errno);
  struct stat info {};
  if (::fstat(fd.get(), &info) != 0) fail_read(errno);
  // One byte more than a regular file's size, so the end shows without growing the buffer; other
  // files (pipes, /proc) report no useful size.
  const std::string what = fmt::format("reading '{}'", path.string());
  if (S_ISREG(info.st_mode)) check_memory_limit(static_cast<std::size_t>(info.st_size), what);
  std::string bytes(S_ISREG(info.st_mode) ? static_cast<std::size_t>(info.st_size) + 1 : 65536,
                    '\0');
  std::size_t used = 0;
  for (;;) {
    if (used == bytes.size()) {
      check_memory_limit(2 * bytes.size(), what);
      bytes.resize(2 * bytes.size());
    }
    const ssize_t n = ::read(fd.get(), bytes.data() + used, bytes.size() - used);
    if (n < 0) {
      if (errno == EINTR) continue;
      fail_read(errno);
    }
    if (n == 0) break;
    used += static_cast<std::size_t>(n);
  }
  bytes.resize(used);
  return bytes;
}

void write_file_atomic(const fs::path& path, std::string_view bytes) {
  TempFile temp(path);
  temp.write(bytes);
  temp.commit();
}

}  // namespace cumulus::onnx
