// embedding (include/diffnet/embedding.h): at::embedding forward, and an autograd function whose weight
// gradient is cpu/embedding_kernel.cpp's one pass.
#include "diffnet/embedding.h"

#include <ATen/record_function.h>
#include <torch/csrc/autograd/custom_function.h>

#include "diffnet/common.h"
#include "ops/embedding/cpu/embedding_kernel.h"
#include "ops/env_switch.h"

namespace diffnet::ops {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

constexpr int64_t kMaxTable = 65536;  // V * D of the tables that take our backward

bool aten_forced() {
  static const bool forced = env_says_aten("DIFFNET_EMBEDDING");
  return forced;
}

struct EmbeddingFunction : public torch::autograd::Function<EmbeddingFunction> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& weight, const at::Tensor& indices) {
    ctx->save_for_backward({indices});
    ctx->saved_data["V"] = weight.size(0);
    return at::embedding(weight, indices);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    if (!grads[0].defined()) return {at::Tensor(), at::Tensor()};
    const at::Tensor idx = ctx->get_saved_variables()[0].contiguous();
    const int64_t V = ctx->saved_data["V"].toInt();
    const at::Tensor g = grads[0].contiguous();
    const int64_t D = g.size(-1), N = idx.numel();
    at::Tensor dw = at::empty({V, D}, g.options());
    AT_DISPATCH_FLOATING_TYPES(g.scalar_type(), "embedding_backward", [&] {
      cpu::embedding_grad<scalar_t>(g.data_ptr<scalar_t>(), idx.data_ptr<int64_t>(), N, D, V, dw.data_ptr<scalar_t>());
    });
    return {dw, at::Tensor()};
  }
};

}  // namespace

bool embedding_uses_own_backward(const at::Tensor& weight, const at::Tensor& indices) {
  const auto dt = weight.scalar_type();
  return weight.dim() == 2 && weight.is_cpu() && indices.is_cpu() && indices.scalar_type() == at::kLong &&
         (dt == at::kFloat || dt == at::kDouble) && weight.numel() <= kMaxTable && !aten_forced();
}

at::Tensor embedding(const at::Tensor& weight, const at::Tensor& indices) {
  RECORD_FUNCTION("diffnet::embedding", std::vector<c10::IValue>({indices}));  // named in profiles
  if (weight.dim() != 2) throw Error("embedding", "weight must be (V, D)");
  if (!(at::GradMode::is_enabled() && weight.requires_grad()) || !embedding_uses_own_backward(weight, indices))
    return at::embedding(weight, indices);
  return EmbeddingFunction::apply(weight, indices);
}

}  // namespace diffnet::ops
