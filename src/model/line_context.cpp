// Line context (docs/design.md §2.5, "Line context").
#include "model/line_context.h"

#include "diffnet/gelu.h"
#include "model/convnext.h"

namespace diffnet::model {

LineContextImpl::LineContextImpl(int64_t channels) {
  const int64_t D = channels;
  attn = register_module("attn", torch::nn::Conv2d(torch::nn::Conv2dOptions(D, 1, 1)));
  mix = register_module("mix", torch::nn::Conv1d(torch::nn::Conv1dOptions(2 * D + 1, D, kRowKernel)
                                                     .padding(kRowKernel / 2)));
  out = register_module("out", torch::nn::Conv1d(torch::nn::Conv1dOptions(D, D, 1)));
  init_conv_linear(*this);
  torch::NoGradGuard no_grad;
  out->weight.zero_();
  out->bias.zero_();
}

at::Tensor LineContextImpl::forward(const at::Tensor& x) {
  const int64_t w = x.size(3);
  at::Tensor a = at::sigmoid(pointwise_conv(x, attn->weight, attn->bias));  // (B,1,h,w)
  at::Tensor s = a.sum(3);                                                   // (B,1,h)
  at::Tensor r = (x * a).sum(3) / (s + kEps);                                // (B,D,h)
  at::Tensor m = (r * s).sum(2, true) / (s.sum(2, true) + kEps);             // (B,D,1)
  at::Tensor d = r - m;
  at::Tensor z = at::cat({d, d * d, s / static_cast<double>(w)}, 1);
  at::Tensor g = out->forward(ops::gelu(mix->forward(z)));                    // (B,D,h)
  return x + g.unsqueeze(3);
}

}  // namespace diffnet::model
