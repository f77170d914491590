// Chunked scans: a state of per-line carries in the kernels' own form, the chunk scanned from it
// by the same row kernels a long row's pieces use, and the state's byte form.
#include <algorithm>
#include <cstring>
#include <vector>

#include "core/fail.h"
#include "core/float_env.h"
#include "core/parallel.h"
#include "cumulus/chunks.h"
#include "kernels/kernels.h"
#include "ops/checks.h"
#include "ops/long_line.h"
#include "ops/tuning.h"

namespace cumulus {

struct ScanState::Impl {
  OpKind op;
  DType dtype;
  Shape lines_shape;
  // Nothing added yet: the kernels then start the lines fresh (a scan's own first element).
  bool fresh = true;
  std::vector<detail::Carry> carries;  // one per line, in row-major order of lines_shape
};

namespace {

constexpr std::string_view kStateName = "ScanState";

void check_scan_op(OpKind op) {
  if (op != OpKind::kCumSum && op != OpKind::kCumProd) {
    detail::fail(ErrorCode::kInvalidArgument, "{}: op must be CumSum or CumProd, not {}",
                 kStateName, op_name(op));
  }
}

const detail::ScanKernels& scan_kernels(OpKind op, DType dtype) {
  const detail::KernelTable& table = detail::tuning().kernel_table();
  return (op == OpKind::kCumSum ? table.cumsum : table.cumprod)[static_cast<int>(dtype)];
}

// The lines of x along `axis` (its shape without the axis), after the scan checks.
Shape lines_of(ConstTensorView x, int64_t axis) {
  const auto rank = static_cast<int64_t>(x.shape.size());
  const auto a = static_cast<std::size_t>(axis < 0 ? axis + rank : axis);
  Shape lines(x.shape.begin(), x.shape.end());
  lines.erase(lines.begin() + static_cast<std::ptrdiff_t>(a));
  return lines;
}

void check_state_matches(std::string_view op_text, const ScanState::Impl& s, OpKind op, DType dtype,
                         const Shape& lines) {
  if (s.op != op) {
    detail::fail(ErrorCode::kInvalidArgument, "{}: the scan state is for {}, not {}", op_text,
                 op_name(s.op), op_name(op));
  }
  if (s.dtype != dtype) {
    detail::fail(ErrorCode::kInvalidArgument,
                 "{}: the scan state is for type {} but input 'x' has type {}", op_text,
                 dtype_name(s.dtype), dtype_name(dtype));
  }
  if (s.lines_shape != lines) {
    detail::fail(ErrorCode::kInvalidArgument,
                 "{}: the scan state has lines of shape {} but input 'x' has {} along the axis",
                 op_text, shape_string(s.lines_shape), shape_string(lines));
  }
}

// Lines that lie `inner` apart go a group of adjacent ones at a time, kGroupBytes of each row:
// gathered into contiguous scratch line after line (each row's bytes of the group read together,
// where a line at a time would fetch a cache line per element), so that the row kernels and their
// exact carries serve columns too, and scattered back after a scan.
constexpr std::size_t kGroupBytes = 256;

std::size_t group_lines(std::size_t item, std::size_t inner) {
  return std::min(inner, std::max<std::size_t>(1, kGroupBytes / item));
}

// Between `width` lines `stride` bytes apart in the tensor, rows `length` long, and the scratch
// where they lie one after another: gathering (true) or scattering. A gather goes in tiles of
// kTile rows by kTile lines, so that the pages a tile touches (a row or a line each) stay in the
// TLB; a scatter row by row, so that it fills the tensor's cache lines one after another (measured
// on [5461, 4096] float32: the tiles halve a gather's time and add half to a scatter's).
template <std::size_t N, bool kGather>
void move_group(const std::byte* from, std::byte* to, std::size_t stride, std::size_t length,
                std::size_t width) {
  if constexpr (kGather) {
    constexpr std::size_t kTile = 16;
    for (std::size_t i0 = 0; i0 < length; i0 += kTile) {
      const std::size_t i1 = std::min(length, i0 + kTile);
      for (std::size_t g0 = 0; g0 < width; g0 += kTile) {
        for (std::size_t g = g0; g < std::min(width, g0 + kTile); ++g) {
          for (std::size_t i = i0; i < i1; ++i) {
            std::memcpy(to + (g * length + i) * N, from + i * stride + g * N, N);
          }
        }
      }
    }
  } else {
    for (std::size_t i = 0; i < length; ++i) {
      for (std::size_t g = 0; g < width; ++g) {
        std::memcpy(to + i * stride + g * N, from + (g * length + i) * N, N);
      }
    }
  }
}

template <bool kGather>
void move_group(std::size_t item, const std::byte* from, std::byte* to, std::size_t stride,
                std::size_t length, std::size_t width) {
  switch (item) {
    case 1:
      return move_group<1, kGather>(from, to, stride, length, width);
    case 2:
      return move_group<2, kGather>(from, to, stride, length, width);
    case 4:
      return move_group<4, kGather>(from, to, stride, length, width);
    default:
      return move_group<8, kGather>(from, to, stride, length, width);
  }
}

// Runs body(line, in, out) for every line of the chunk x (in parallel): `in` the line's elements,
// contiguous, and `out` where its scan goes. With inner == 1 those are the line's places in x and
// y; otherwise both are the line's place in a group gathered from x, scattered to y afterwards
// (unless y is null: nothing is written).
template <class Body>
void for_lines(const detail::ScanLayout& layout, std::size_t item, const std::byte* x, std::byte* y,
               const Body& body) {
  const std::size_t length = layout.length, inner = layout.inner;
  const std::size_t min_chunk = detail::tuning().min_chunk_elements;
  if (inner == 1) {
    const std::size_t grain =
        std::max<std::size_t>(1, min_chunk / std::max<std::size_t>(1, length));
    detail::parallel_for(layout.outer, grain, [&](std::size_t begin, std::size_t end) {
      for (std::size_t line = begin; line < end; ++line) {
        const std::size_t at = line * length * item;
        body(line, x + at, y == nullptr ? nullptr : y + at);
      }
    });
    return;
  }
  const std::size_t group = group_lines(item, inner);
  const std::size_t groups = (inner + group - 1) / group;
  const std::size_t grain =
      std::max<std::size_t>(1, min_chunk / std::max<std::size_t>(1, length * group));
  const std::size_t stride = inner * item;
  detail::parallel_for(layout.outer * groups, grain, [&](std::size_t begin, std::size_t end) {
    std::vector<std::byte> scratch(group * length * item);
    for (std::size_t task = begin; task < end; ++task) {
      const std::size_t o = task / groups, first = (task % groups) * group;
      const std::size_t width = std::min(group, inner - first);
      const std::size_t at = (o * length * inner + first) * item;
      move_group<true>(item, x + at, scratch.data(), stride, length, width);
      for (std::size_t g = 0; g < width; ++g) {
        std::byte* line = scratch.data() + g * length * item;
        body(o * inner + first + g, line, line);
      }
      if (y != nullptr) move_group<false>(item, scratch.data(), y + at, stride, length, width);
    }
  });
}

// Adds each line's chunk total to the state's carries (the first chunk's totals become them).
void add_totals(const detail::ScanKernels& kernel, const detail::ScanLayout& layout,
                const std::byte* x, std::size_t item, ScanState::Impl& s) {
  for_lines(layout, item, x, nullptr, [&](std::size_t line, const std::byte* in, std::byte*) {
    const detail::Carry total = kernel.total(in, layout.length);
    s.carries[line] = s.fresh ? total : kernel.combine(s.carries[line], total);
  });
}

// The byte form: a header naming what the state is, every line's carry, and a checksum of all of
// it (FNV-1a, 64 bits), so a truncated or altered state is refused rather than read.
constexpr char kMagic[8] = {'C', 'U', 'M', 'S', 'C', 'A', 'N', '1'};
constexpr std::size_t kMaxRank = 64;

template <class T>
void put(std::vector<std::byte>& out, T v) {
  const std::size_t at = out.size();
  out.resize(at + sizeof v);
  std::memcpy(out.data() + at, &v, sizeof v);
}

uint64_t checksum(std::span<const std::byte> bytes) {
  uint64_t h = 0xcbf29ce484222325u;
  for (std::byte b : bytes) h = (h ^ static_cast<uint8_t>(b)) * 0x100000001b3u;
  return h;
}

class Reader {
 public:
  explicit Reader(std::span<const std::byte> in) : in_(in) {}
  template <class T>
  T get(std::string_view what) {
    T v;
    if (in_.size() - at_ < sizeof v) truncated(what);
    std::memcpy(&v, in_.data() + at_, sizeof v);
    at_ += sizeof v;
    return v;
  }
  [[noreturn]] void truncated(std::string_view what) const {
    detail::fail(ErrorCode::kInvalidArgument,
                 "{}: the bytes end (after {}) while reading {}: truncated, or not a scan state",
                 kStateName, in_.size(), what);
  }
  std::span<const std::byte> in_;
  std::size_t at_ = 0;
};

enum class Payload { kWrapping, kExactSum, kProduct };
Payload payload_of(OpKind op, DType dtype) {
  if (!is_floating(dtype)) return Payload::kWrapping;
  return op == OpKind::kCumSum ? Payload::kExactSum : Payload::kProduct;
}

}  // namespace

std::vector<std::byte> ScanState::to_bytes() const {
  const Impl& s = *impl_;
  std::vector<std::byte> out;
  for (char m : kMagic) put(out, m);
  put(out, static_cast<uint8_t>(s.op));
  put(out, static_cast<uint8_t>(s.dtype));
  put(out, static_cast<uint8_t>(s.fresh ? 1 : 0));
  put(out, static_cast<uint8_t>(s.lines_shape.size()));
  for (int64_t d : s.lines_shape) put(out, d);
  if (!s.fresh) {
    const Payload payload = payload_of(s.op, s.dtype);
    for (const detail::Carry& c : s.carries) {
      switch (payload) {
        case Payload::kWrapping:
          put(out, c.u);
          break;
        case Payload::kExactSum:
          c.sum.append_bytes(out);
          break;
        case Payload::kProduct:
          put(out, c.prod.hi);
          put(out, c.prod.lo);
          put(out, c.prod.q);
          put(out, c.prod.exp);
          break;
      }
    }
  }
  put(out, checksum(out));
  return out;
}

ScanState ScanState::from_bytes(std::span<const std::byte> bytes) {
  Reader r(bytes);
  char magic[sizeof kMagic];
  for (char& m : magic) m = r.get<char>("its format mark");
  if (!std::equal(magic, magic + sizeof magic, kMagic)) {
    detail::fail(ErrorCode::kInvalidArgument,
                 "{}: the bytes do not start with a cumulus scan state's mark", kStateName);
  }
  if (bytes.size() < sizeof kMagic + sizeof(uint64_t)) r.truncated("the checksum");
  uint64_t stored = 0;
  std::memcpy(&stored, bytes.data() + bytes.size() - sizeof stored, sizeof stored);
  if (checksum(bytes.first(bytes.size() - sizeof stored)) != stored) {
    detail::fail(ErrorCode::kInvalidArgument,
                 "{}: the checksum does not match the {} bytes: they were truncated or altered",
                 kStateName, bytes.size());
  }
  Reader body(bytes.first(bytes.size() - sizeof stored));
  body.at_ = sizeof kMagic;
  const auto op = body.get<uint8_t>("the operator");
  const auto dtype = body.get<uint8_t>("the type");
  const auto fresh = body.get<uint8_t>("the fresh mark");
  const auto rank = body.get<uint8_t>("the rank");
  if (op != static_cast<uint8_t>(OpKind::kCumSum) && op != static_cast<uint8_t>(OpKind::kCumProd)) {
    detail::fail(ErrorCode::kInvalidArgument, "{}: operator code {} is not CumSum or CumProd",
                 kStateName, op);
  }
  if (dtype >= kNumDTypes || fresh > 1 || rank > kMaxRank) {
    detail::fail(ErrorCode::kInvalidArgument,
                 "{}: type code {}, fresh mark {} or rank {} is out of range", kStateName, dtype,
                 fresh, rank);
  }
  Shape lines(rank);
  for (int64_t& d : lines) {
    d = body.get<int64_t>("the lines' shape");
    if (d < 0) {
      detail::fail(ErrorCode::kInvalidArgument, "{}: a lines dimension is negative ({})",
                   kStateName, d);
    }
  }
  // Every line of a state with contents takes at least 8 bytes: refuse a shape the bytes cannot
  // hold before allocating for it.
  const int64_t count = element_count(lines);
  if (fresh == 0 && static_cast<uint64_t>(count) > (body.in_.size() - body.at_) / 8) {
    detail::fail(
        ErrorCode::kInvalidArgument,
        "{}: lines of shape {} do not fit in the {} bytes that follow: truncated or altered",
        kStateName, shape_string(lines), body.in_.size() - body.at_);
  }
  ScanState state(static_cast<OpKind>(op), static_cast<DType>(dtype), lines);
  Impl& s = *state.impl_;
  s.fresh = fresh == 1;
  if (!s.fresh) {
    const Payload payload = payload_of(s.op, s.dtype);
    for (detail::Carry& c : s.carries) {
      switch (payload) {
        case Payload::kWrapping:
          c.u = body.get<uint64_t>("a line's accumulator");
          break;
        case Payload::kExactSum:
          if (!detail::ExactSum::read_bytes(body.in_, body.at_, c.sum)) {
            detail::fail(ErrorCode::kInvalidArgument,
                         "{}: a line's exact sum at byte {} is malformed", kStateName, body.at_);
          }
          break;
        case Payload::kProduct:
          c.prod.hi = body.get<double>("a line's product");
          c.prod.lo = body.get<double>("a line's product");
          c.prod.q = body.get<double>("a line's product");
          c.prod.exp = body.get<int64_t>("a line's product");
          break;
      }
    }
  }
  if (body.at_ != body.in_.size()) {
    detail::fail(ErrorCode::kInvalidArgument, "{}: {} bytes follow the state's last line",
                 kStateName, body.in_.size() - body.at_);
  }
  return state;
}

ScanState::ScanState(OpKind op, DType dtype, Shape lines_shape) {
  check_scan_op(op);
  const int64_t lines = element_count(lines_shape);
  check_memory_limit(static_cast<std::size_t>(lines) * sizeof(detail::Carry),
                     "the scan state's lines");
  impl_ = std::make_unique<Impl>(Impl{op, dtype, std::move(lines_shape), true, {}});
  impl_->carries.resize(static_cast<std::size_t>(lines));
}
ScanState::ScanState(const ScanState& other) : impl_(std::make_unique<Impl>(*other.impl_)) {}
ScanState::ScanState(ScanState&& other) noexcept = default;
ScanState& ScanState::operator=(const ScanState& other) {
  if (this != &other) impl_ = std::make_unique<Impl>(*other.impl_);
  return *this;
}
ScanState& ScanState::operator=(ScanState&& other) noexcept = default;
ScanState::~ScanState() = default;

OpKind ScanState::op() const noexcept { return impl_->op; }
DType ScanState::dtype() const noexcept { return impl_->dtype; }
const Shape& ScanState::lines_shape() const noexcept { return impl_->lines_shape; }

void ScanState::combine(const ScanState& later) {
  const detail::DefaultFloatEnvironment environment;
  check_state_matches("ScanState.combine", *later.impl_, impl_->op, impl_->dtype,
                      impl_->lines_shape);
  if (later.impl_->fresh) return;
  if (impl_->fresh) {
    *impl_ = *later.impl_;
    return;
  }
  const detail::ScanKernels& kernel = scan_kernels(impl_->op, impl_->dtype);
  auto& carries = impl_->carries;
  const auto& next = later.impl_->carries;
  detail::parallel_for(carries.size(), 4096, [&](std::size_t begin, std::size_t end) {
    for (std::size_t i = begin; i < end; ++i) carries[i] = kernel.combine(carries[i], next[i]);
  });
}

void scan_chunk(OpKind op, ConstTensorView x, int64_t axis, TensorView y, ScanOptions options,
                ScanState& state) {
  const detail::DefaultFloatEnvironment environment;
  check_scan_op(op);
  const detail::ScanLayout layout = detail::check_scan(op, x, axis, y);
  ScanState::Impl& s = *state.impl_;
  check_state_matches(op_name(op), s, op, x.dtype, lines_of(x, axis));
  if (layout.count == 0) return;
  const detail::ScanKernels& kernel = scan_kernels(op, x.dtype);
  const std::size_t item = dtype_size(x.dtype);
  const auto* xb = static_cast<const std::byte*>(x.data);
  auto* yb = static_cast<std::byte*>(y.data);
  const detail::Tuning tuning = detail::tuning();
  if (layout.inner == 1 && layout.length >= tuning.long_row) {
    for (std::size_t line = 0; line < layout.outer; ++line) {
      const std::size_t at = line * layout.length * item;
      s.carries[line] =
          *detail::scan_long_line(op, x.dtype, xb + at, yb + at, layout.length, options,
                                  s.fresh ? nullptr : &s.carries[line], true);
    }
    s.fresh = false;
    return;
  }
  const auto carries_with_terms = [&] {
    if (op != OpKind::kCumSum || !is_floating(x.dtype)) return true;
    return std::ranges::all_of(s.carries, [](const detail::Carry& c) { return c.sum.terms().any; });
  };
  if (layout.inner > 1 && kernel.block_carries && (s.fresh || carries_with_terms())) {
    // The column kernels, continuing from the carries and leaving the states after the chunk in
    // their place: tiles of columns, as the one-pass scan takes them.
    const std::size_t inner = layout.inner, slab = layout.length * inner;
    const std::size_t tile = tuning.column_tile, tiles = (inner + tile - 1) / tile;
    const std::size_t grain = std::max<std::size_t>(
        1, tuning.min_chunk_elements / (layout.length * std::min(inner, tile)));
    detail::Carry* carries = s.carries.data();
    const bool fresh = s.fresh;
    detail::parallel_for(layout.outer * tiles, grain, [&](std::size_t begin, std::size_t end) {
      for (std::size_t task = begin; task < end; ++task) {
        const std::size_t o = task / tiles, col = (task % tiles) * tile;
        kernel.block({xb + o * slab * item, yb + o * slab * item, 1, layout.length, inner, col,
                      std::min(inner, col + tile), options.exclusive, options.reverse,
                      fresh ? nullptr : carries + o * inner, carries + o * inner});
      }
    });
    s.fresh = false;
    return;
  }
  const bool stream =
      layout.inner == 1 && detail::stream_rows(tuning, kernel, layout.bytes, x.data == y.data);
  for_lines(layout, item, xb, yb, [&](std::size_t line, const std::byte* in, std::byte* out) {
    detail::Carry& carry = s.carries[line];
    const detail::Carry total = kernel.total(in, layout.length);  // first: out may be in
    kernel.rows({in, out, 1, layout.length, options.exclusive, options.reverse,
                 s.fresh ? nullptr : &carry, stream});
    carry = s.fresh ? total : kernel.combine(carry, total);
  });
  s.fresh = false;
}

ScanState chunk_total(OpKind op, ConstTensorView x, int64_t axis) {
  const detail::DefaultFloatEnvironment environment;
  check_scan_op(op);
  // The scan's checks, with x as its own output (nothing is written).
  const detail::ScanLayout layout =
      detail::check_scan(op, x, axis, TensorView{x.dtype, x.shape, const_cast<void*>(x.data)});
  ScanState state(op, x.dtype, lines_of(x, axis));
  if (layout.count == 0) return state;
  add_totals(scan_kernels(op, x.dtype), layout, static_cast<const std::byte*>(x.data),
             dtype_size(x.dtype), *state.impl_);
  state.impl_->fresh = false;
  return state;
}

std::size_t scan_chunk_scratch_bytes(DType dtype, int64_t length, int64_t inner) {
  if (inner <= 1 || length <= 0) return 0;
  const std::size_t item = dtype_size(dtype);
  return group_lines(item, static_cast<std::size_t>(inner)) * static_cast<std::size_t>(length) *
         item;
}

}  // namespace cumulus
