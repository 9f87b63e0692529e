// safetensors read/write with strict validation (8-byte LE header length, JSON header, raw LE data).
#pragma once

#include <ATen/ATen.h>

#include <map>
#include <string>
#include <vector>

namespace diffnet {

struct SafeTensors {
  std::map<std::string, at::Tensor> tensors;         // CPU, contiguous, dtype as stored
  std::map<std::string, std::string> metadata;       // __metadata__ (string -> string)
};

// Supported dtypes: F64, F32, F16, BF16, I64, I32, I16, I8, U8, BOOL. Validation: header <= 100 MB,
// valid JSON, known dtype, offsets inside the buffer, size == prod(shape)*itemsize, offsets tile the
// buffer exactly with no overlap or gap, no duplicate names. Errors name the file and the tensor.
SafeTensors load_safetensors(const std::string& path);
SafeTensors parse_safetensors(const std::vector<uint8_t>& bytes, const std::string& name);

// Writes tensors (any supported dtype, CPU or not, contiguous or not) atomically. Tensors are ordered
// by descending alignment, then name, so every tensor is aligned in the 8-aligned data section.
void save_safetensors(const std::string& path, const std::map<std::string, at::Tensor>& tensors,
                      const std::map<std::string, std::string>& metadata = {});
std::vector<uint8_t> serialize_safetensors(const std::map<std::string, at::Tensor>& tensors,
                                           const std::map<std::string, std::string>& metadata = {});

}  // namespace diffnet
