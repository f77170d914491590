// Fuzzes the ONNX TensorProto reader: any bytes either give a tensor or a cumulus::Error. A tensor
// read must survive a round trip: written back and read again, it is the same dtype, shape, bytes
// and name, and writing that again gives the same bytes.
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
  std::string name;
  try {
    tensor = cumulus::onnx::parse_tensor_proto(fuzz::as_bytes(data, size), &name);
  } catch (const cumulus::Error&) {
    return 0;  // refusing bad bytes is the expected outcome
  }
  std::string written;
  cumulus::Tensor again;
  std::string again_name;
  try {
    written = cumulus::onnx::serialize_tensor_proto(tensor, name);
    again = cumulus::onnx::parse_tensor_proto(fuzz::as_bytes(written), &again_name);
  } catch (const cumulus::Error& e) {
    fuzz::finding("a {} tensor of shape {} read from a TensorProto does not round-trip: {}",
                  cumulus::dtype_name(tensor.dtype()), cumulus::shape_string(tensor.shape()),
                  e.what());
  }
  if (!fuzz::identical(tensor, again) || again_name != name) {
    fuzz::finding("TensorProto round trip changed the tensor: {} {} '{}' came back as {} {} '{}'",
                  cumulus::dtype_name(tensor.dtype()), cumulus::shape_string(tensor.shape()), name,
                  cumulus::dtype_name(again.dtype()), cumulus::shape_string(again.shape()),
                  again_name);
  }
  if (cumulus::onnx::serialize_tensor_proto(again, again_name) != written) {
    fuzz::finding("writing the same TensorProto twice gave different bytes");
  }
  return 0;
}
