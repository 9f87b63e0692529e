// Line context (ours, not in the paper; docs/design.md §2.5, "Line context"): each row of the decoder's
// stride-4 features is compared with the window's other rows, so a line that differs from the page's other
// lines (a typeface, weight or ink that is not the page's) can raise the pixel head's output along it.
#pragma once

#include <torch/torch.h>

namespace diffnet::model {

// decoder.line.{attn, mix, out}. On x (B,D,h,w):
//   a = sigmoid(attn(x)) (B,1,h,w), text-ness of each position;
//   r_y = sum_x a x / (sum_x a + eps), the text-weighted mean of row y (B,D,h);
//   m = sum_y (sum_x a) r_y / (sum_y sum_x a + eps), the window's text-weighted mean (B,D,1);
//   d_y = r_y - m;  z = [d, d*d, sum_x a / w] (B,2D+1,h);
//   g = out(gelu(mix(z))), mix a 1-D conv over rows (kernel 5, zero padding), out 1x1;
//   returns x + g broadcast along each row. out starts at zero, so a new part leaves the model unchanged.
class LineContextImpl : public torch::nn::Module {
 public:
  static constexpr double kEps = 1e-3;
  static constexpr int64_t kRowKernel = 5;
  explicit LineContextImpl(int64_t channels);
  at::Tensor forward(const at::Tensor& x);
  torch::nn::Conv2d attn{nullptr};
  torch::nn::Conv1d mix{nullptr}, out{nullptr};
};
TORCH_MODULE(LineContext);

}  // namespace diffnet::model
