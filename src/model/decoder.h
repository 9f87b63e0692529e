// Decoder and heads (docs/design.md §2.5): FPN add with bilinear upsampling, ConvNeXt-V2 refinement on P2,
// segmentation head on P1 (x4 to input size), image head on pooled P2' and tampered-probability statistics.
#pragma once

#include <torch/torch.h>

#include <vector>

#include "diffnet/config.h"
#include "model/dct_branch.h"
#include "model/line_context.h"

namespace diffnet::model {

// Bilinear (align_corners = false) resize of x to (h, w).
at::Tensor resize_bilinear(const at::Tensor& x, int64_t h, int64_t w);

// The mean of the k largest values of each row of prob (B, n) as (B, 1): prob.topk(k).mean(1). Without
// autograd, on CPU float/double values that are all >= 0 (softmax outputs), a radix selection that sums in
// double (several times faster than topk at the image head's 65,536 values and k = 3,277); else topk.
at::Tensor top_k_mean(const at::Tensor& prob, int64_t k);

struct DecoderOutput {
  at::Tensor seg_logits;  // (B,2,H,W)
  at::Tensor p2;          // P2' (B,D,H/8,W/8)
};

// decoder.refine.{j} (ConvNeXt-V2 blocks at D), decoder.line.* (line context on P1, when cfg.line_context),
// decoder.head.{0: conv3x3 D->D, 2: conv1x1 D->2}.
class DecoderImpl : public torch::nn::Module {
 public:
  explicit DecoderImpl(const ModelConfig& cfg);
  // t: T1..T4 (strides 4..32); (H, W) the input size.
  DecoderOutput forward(const std::vector<at::Tensor>& t, int64_t H, int64_t W);
  torch::nn::ModuleList refine{nullptr};
  LineContext line{nullptr};
  torch::nn::Conv2d head0{nullptr}, head2{nullptr};
};
TORCH_MODULE(Decoder);

// cls_head: [avgpool(P2'), maxpool(P2'), mean, max, top-k mean (k = ceil(0.05 H W)) of softmax(seg)[1]]
// -> Linear(2D+3, 512) -> GELU -> Linear(512, 2).
// Registered as "0" and "2" directly (cls_head.0.weight, ...).
class ClsHeadImpl : public TwoLayerMlpImpl {
 public:
  explicit ClsHeadImpl(int64_t disc_dim);
  at::Tensor forward(const at::Tensor& p2, const at::Tensor& seg_logits);
  // The 2D+3 input features (exposed for tests).
  static at::Tensor features(const at::Tensor& p2, const at::Tensor& seg_logits);
};
TORCH_MODULE(ClsHead);

}  // namespace diffnet::model
