// Fuzzes the NumPy .npy reader: any bytes either give a tensor or a cumulus::Error. A tensor read
// must survive a round trip: written back and read again, it is the same dtype, shape and bytes,
// and writing that again gives the same bytes.
#include <cstddef>
#include <cstdint>
#include <string>

#include "cumulus/error.h"
#include "cumulus/onnx.h"
#include "fuzz_util.h"

// NOLINTNEXTLINE(readability-identifier-naming): libFuzzer fixes the name.
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::limit_memory();
  cumulus::Tensor tensor;
  try {
    tensor = cumulus::onnx::parse_npy(fuzz::as_bytes(data, size));
  } catch (const cumulus::Error&) {
    return 0;  // refusing bad bytes is the expected outcome
  }
  std::string written;
  cumulus::Tensor again;
  try {
    written = cumulus::onnx::serialize_npy(tensor);
    again = cumulus::onnx::parse_npy(fuzz::as_bytes(written));
  } catch (const cumulus::Error& e) {
    fuzz::finding("a {} tensor of shape {} read from .npy does not round-trip: {}",
                  cumulus::dtype_name(tensor.dtype()), cumulus::shape_string(tensor.shape()),
                  e.what());
  }
  if (!fuzz::identical(tensor, again)) {
    fuzz::finding(".npy round trip changed the tensor: {} {} came back as {} {}",
                  cumulus::dtype_name(tensor.dtype()), cumulus::shape_string(tensor.shape()),
                  cumulus::dtype_name(again.dtype()), cumulus::shape_string(again.shape()));
  }
  if (cumulus::onnx::serialize_npy(again) != written) {
    fuzz::finding("writing the same .npy twice gave different bytes");
  }
  return 0;
}
