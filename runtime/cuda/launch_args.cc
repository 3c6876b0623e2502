#include "runtime/cuda/launch_args.h"

#include <limits>
#include <variant>

#include "absl/strings/str_cat.h"
#include "scheduler/status_macros.h"

namespace weft::runtime::cuda {

bool IsScalar(const KernelArg& arg) {
  return !std::holds_alternative<DeviceBufferArg>(arg);
}

absl::Status ArgError(absl::string_view op, size_t index,
                      absl::string_view what) {
  return absl::InvalidArgumentError(
      absl::StrCat(op, ": argument ", index, " ", what));
}

absl::Status CheckArity(absl::string_view op, const KernelLaunch& launch,
                        size_t want) {
  if (launch.args.size() != want) {
    return absl::InvalidArgumentError(absl::StrCat(
        op, ": expected ", want, " arguments, got ", launch.args.size()));
  }
  return absl::OkStatus();
}

bool Overlaps(DevicePtr a, uint64_t a_bytes, DevicePtr b, uint64_t b_bytes) {
  if (a.device != b.device || a_bytes == 0 || b_bytes == 0) return false;
  return a.address < b.address + b_bytes && b.address < a.address + a_bytes;
}

absl::Status CheckElementwiseAlias(absl::string_view op, size_t out_index,
                                   DevicePtr out, uint64_t out_bytes,
                                   size_t in_index, DevicePtr in,
                                   uint64_t in_bytes) {
  if (!Overlaps(out, out_bytes, in, in_bytes)) return absl::OkStatus();
  if (out.address == in.address && out_bytes == in_bytes) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrCat(
      op, ": argument ", out_index, " (the output) overlaps argument ",
      in_index,
      " without being the same memory; an output may be exactly an input or "
      "apart from it"));
}

absl::Status CheckNoOverlap(absl::string_view op, size_t out_index,
                            absl::string_view out_name, DevicePtr out,
                            uint64_t out_bytes, size_t in_index,
                            absl::string_view in_name, DevicePtr in,
                            uint64_t in_bytes) {
  if (!Overlaps(out, out_bytes, in, in_bytes)) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(op, ": argument ", out_index, " (", out_name,
                   ") overlaps argument ", in_index, " (", in_name, "); ", op,
                   " cannot write its result into its input"));
}

absl::StatusOr<uint64_t> DimensionAt(absl::string_view op,
                                     const KernelLaunch& launch, size_t index,
                                     absl::string_view name) {
  int64_t v = 0;
  if (const auto* i = std::get_if<int32_t>(&launch.args[index])) {
    v = *i;
  } else if (const auto* l = std::get_if<int64_t>(&launch.args[index])) {
    v = *l;
  } else {
    return ArgError(op, index,
                    absl::StrCat("(", name, ") must be an integer scalar"));
  }
  if (v < 1 || v > std::numeric_limits<int32_t>::max()) {
    return ArgError(
        op, index,
        absl::StrCat("(", name, ") must be in [1, 2^31 - 1], got ", v));
  }
  return static_cast<uint64_t>(v);
}

absl::StatusOr<DeviceBufferArg> BufferAt(absl::string_view op,
                                         const KernelLaunch& launch,
                                         size_t index, int device,
                                         const RangeCheck& check_range) {
  const auto* buffer = std::get_if<DeviceBufferArg>(&launch.args[index]);
  if (buffer == nullptr) return ArgError(op, index, "must be a buffer");
  if (device >= 0 && buffer->ptr.device != device) {
    return ArgError(op, index,
                    absl::StrCat("lives on device ", buffer->ptr.device,
                                 " but the stream is on device ", device));
  }
  if (buffer->size_bytes > 0) {
    WEFT_RETURN_IF_ERROR(check_range(buffer->ptr, buffer->size_bytes,
                                     absl::StrCat(op, ": argument ", index)));
  }
  return *buffer;
}

absl::StatusOr<DeviceBufferArg> Float32At(absl::string_view op,
                                          const KernelLaunch& launch,
                                          size_t index, int device,
                                          const RangeCheck& check_range) {
  WEFT_ASSIGN_OR_RETURN(DeviceBufferArg buffer,
                        BufferAt(op, launch, index, device, check_range));
  if (buffer.dtype != scheduler::DType::kFloat32) {
    return ArgError(op, index,
                    absl::StrCat("must be float32, got ",
                                 scheduler::DTypeName(buffer.dtype)));
  }
  return buffer;
}

}  // namespace weft::runtime::cuda
