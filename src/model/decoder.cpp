// Decoder and heads (docs/design.md §2.5).
#include "model/decoder.h"

#include <cmath>

#include "model/convnext.h"

namespace diffnet::model {

at::Tensor resize_bilinear(const at::Tensor& x, int64_t h, int64_t w) {
  namespace F = torch::nn::functional;
  if (x.size(2) == h && x.size(3) == w) return x;
  return F::interpolate(x, F::InterpolateFuncOptions()
                               .size(std::vector<int64_t>{h, w})
                               .mode(torch::kBilinear)
                               .align_corners(false));
}

DecoderImpl::DecoderImpl(const ModelConfig& cfg) {
  const int64_t D = cfg.disc_dim;
  refine = register_module("refine", make_blocks(D, cfg.refine_depth));
  // "head" holds "0" (conv 3x3) and "2" (conv 1x1); "1" is the parameter-free GELU.
  auto head = register_module("head", std::make_shared<torch::nn::Module>("head"));
  head0 = head->register_module("0", torch::nn::Conv2d(torch::nn::Conv2dOptions(D, D, 3).padding(1)));
  head2 = head->register_module("2", torch::nn::Conv2d(torch::nn::Conv2dOptions(D, 2, 1)));
  init_conv_linear(*this);
  if (cfg.line_context) line = register_module("line", LineContext(D));  // its own init (out = 0)
}

DecoderOutput DecoderImpl::forward(const std::vector<at::Tensor>& t, int64_t H, int64_t W) {
  TORCH_CHECK(t.size() == 4, "decoder: 4 levels expected");
  auto up_add = [](const at::Tensor& fine, const at::Tensor& coarse) {
    return fine + resize_bilinear(coarse, fine.size(2), fine.size(3));
  };
  at::Tensor p3 = up_add(t[2], t[3]);
  at::Tensor p2 = up_add(t[1], p3).contiguous(at::MemoryFormat::ChannelsLast);
  p2 = run_blocks(refine, p2);
  at::Tensor p1 = up_add(t[0], p2).contiguous(at::MemoryFormat::ChannelsLast);
  if (line) p1 = line->forward(p1).contiguous(at::MemoryFormat::ChannelsLast);
  at::Tensor y = pointwise_conv(at::gelu(head0->forward(p1)), head2->weight, head2->bias);
  return {resize_bilinear(y, H, W), p2};
}

ClsHeadImpl::ClsHeadImpl(int64_t disc_dim) : TwoLayerMlpImpl(2 * disc_dim + 3, 512, 2) { init_conv_linear(*this); }

at::Tensor ClsHeadImpl::features(const at::Tensor& p2, const at::Tensor& seg_logits) {
  const int64_t B = seg_logits.size(0);
  at::Tensor prob = at::softmax(seg_logits, 1).select(1, 1).reshape({B, -1});  // (B, H*W), not detached
  const int64_t n = prob.size(1);
  const int64_t k = std::max<int64_t>(1, static_cast<int64_t>(std::ceil(0.05 * static_cast<double>(n))));
  at::Tensor topk = std::get<0>(prob.topk(k, 1, /*largest=*/true, /*sorted=*/false)).mean(1, true);
  at::Tensor avg = p2.mean({2, 3});
  at::Tensor mx = p2.amax({2, 3});
  return at::cat({avg, mx, prob.mean(1, true), prob.amax(1, true), topk}, 1);
}

at::Tensor ClsHeadImpl::forward(const at::Tensor& p2, const at::Tensor& seg_logits) {
  return TwoLayerMlpImpl::forward(features(p2, seg_logits));
}

}  // namespace diffnet::model
