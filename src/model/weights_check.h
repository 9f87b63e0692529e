// Strict state loading shared by load_model and the checkpoint importer.
#pragma once

#include <ATen/ATen.h>

#include <map>
#include <string>

namespace diffnet {

// Copies src into target (same names and shapes; dtype converted). Checks everything before copying:
// unknown tensor, wrong shape (got [..], expected [..]) and missing tensors are Errors with `subject`.
void load_state_strict(const std::map<std::string, at::Tensor>& target, const std::map<std::string, at::Tensor>& src,
                       const std::string& subject);

}  // namespace diffnet
