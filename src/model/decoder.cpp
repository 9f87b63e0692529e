// Decoder and heads (docs/design.md §2.5).
#include "model/decoder.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "diffnet/conv_grad.h"
#include "diffnet/gelu.h"
#include "model/convnext.h"

namespace diffnet::model {

at::Tensor resize_bilinear(const at::Tensor& x, int64_t h, int64_t w) {
  namespace F = torch::nn::functional;
  if (x.size(2) == h && x.size(3) == w) return x;
  const auto opts =
      F::InterpolateFuncOptions().size(std::vector<int64_t>{h, w}).mode(torch::kBilinear).align_corners(false);
  // bf16 on the CPU resizes in float32 and rounds once. LibTorch 1.13's bf16 kernels are slower (NCHW, the
  // head's two channels 64² -> 256² in a batch of 8: 6.9 ms against 0.9 ms with both conversions;
  // channels_last about equal) and, at scales other than powers of two, off by several bf16 ulps.
  if (x.is_cpu() && x.scalar_type() == at::kBFloat16) return F::interpolate(x.to(at::kFloat), opts).to(at::kBFloat16);
  return F::interpolate(x, opts);
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
  const at::Tensor h = ops::gelu(ops::conv2d_gemm_grad(p1, head0->weight, head0->bias, 1));  // head0->forward
  at::Tensor y = pointwise_conv(h, head2->weight, head2->bias);
  // Two channels: LibTorch's bilinear resize is ~2x faster on them in NCHW than in channels_last (an
  // atto 256² batch of 8: 0.8 vs 1.8 ms), and the copy to NCHW costs a few microseconds.
  return {resize_bilinear(y.contiguous(), H, W), p2};
}

namespace {

// The mean of the k largest values of one row of n values, all >= 0 (no NaN): radix selection on the
// values' bits, which order non-negative floats as the values do. A pass counts the values per bin of 12
// bits (the top 12 first); those in higher bins than the one holding the k-th largest are summed (in
// double), that bin's values are kept, and while more than 2,048 are left the next 12 bits split them
// again; nth_element finds the largest of the rest that complete k.
template <typename T, typename Bits>
double top_k_mean_row(const T* v, int64_t n, int64_t k, std::vector<T>& kept, std::vector<T>& next) {
  constexpr int kTotal = static_cast<int>(sizeof(Bits) * 8);
  std::vector<int64_t> count(4096);
  double sum = 0.0;
  int64_t need = k;  // how many of the largest values are still to be added
  const T* cur = v;
  int64_t m = n;
  for (int shift = kTotal - 12;; shift -= 12) {
    auto key = [shift](T x) {
      Bits b;
      std::memcpy(&b, &x, sizeof b);
      return static_cast<int>((shift >= 0 ? b >> shift : b << -shift) & Bits(4095));
    };
    std::fill(count.begin(), count.end(), 0);
    for (int64_t i = 0; i < m; ++i) ++count[key(cur[i])];
    int bin = 4095;
    int64_t above = 0;
    while (above + count[bin] < need) above += count[bin--];
    next.clear();
    for (int64_t i = 0; i < m; ++i) {
      const int kk = key(cur[i]);
      if (kk > bin) sum += static_cast<double>(cur[i]);
      else if (kk == bin) next.push_back(cur[i]);
    }
    need -= above;  // 1 <= need <= next.size()
    kept.swap(next);
    cur = kept.data();
    m = static_cast<int64_t>(kept.size());
    if (m <= 2048 || shift <= 0) break;
  }
  std::nth_element(kept.begin(), kept.begin() + (need - 1), kept.end(), std::greater<T>());
  for (int64_t i = 0; i < need; ++i) sum += static_cast<double>(kept[static_cast<size_t>(i)]);
  return sum / static_cast<double>(k);
}

template <typename T, typename Bits>
at::Tensor top_k_mean_rows(const at::Tensor& prob, int64_t k) {
  const at::Tensor p = prob.contiguous();
  const int64_t B = p.size(0), n = p.size(1);
  at::Tensor out = at::empty({B, 1}, p.options());
  const T* base = p.data_ptr<T>();
  T* o = out.data_ptr<T>();
  at::parallel_for(0, B, 1, [&](int64_t lo, int64_t hi) {
    std::vector<T> kept, next;
    for (int64_t b = lo; b < hi; ++b) o[b] = static_cast<T>(top_k_mean_row<T, Bits>(base + b * n, n, k, kept, next));
  });
  return out;
}

}  // namespace

at::Tensor top_k_mean(const at::Tensor& prob, int64_t k) {
  TORCH_CHECK(prob.dim() == 2 && k >= 1 && k <= prob.size(1), "top_k_mean: (B, n) and 1 <= k <= n expected");
  const bool cpu_no_grad = prob.is_cpu() && !(at::GradMode::is_enabled() && prob.requires_grad());
  // bf16 inference on the CPU: a float32 copy through the radix selection, 2-5x faster than topk in bf16
  // on rows of 65536 with k = 3277 (0.4-1.0 against 2.0-2.3 ms for 8 rows of spread-out values; about 2x
  // slower on the flat, heavily tied maps of random weights); the mean is rounded to bf16 once, as topk +
  // mean round it.
  if (cpu_no_grad && prob.scalar_type() == at::kBFloat16) return top_k_mean(prob.to(at::kFloat), k).to(at::kBFloat16);
  const bool own = cpu_no_grad && (prob.scalar_type() == at::kFloat || prob.scalar_type() == at::kDouble) &&
                   prob.numel() > 0 && prob.min().item<double>() >= 0.0;  // also false when a NaN is present
  if (!own) return std::get<0>(prob.topk(k, 1, /*largest=*/true, /*sorted=*/false)).mean(1, true);
  return prob.scalar_type() == at::kFloat ? top_k_mean_rows<float, uint32_t>(prob, k)
                                          : top_k_mean_rows<double, uint64_t>(prob, k);
}

ClsHeadImpl::ClsHeadImpl(int64_t disc_dim) : TwoLayerMlpImpl(2 * disc_dim + 3, 512, 2) { init_conv_linear(*this); }

at::Tensor ClsHeadImpl::features(const at::Tensor& p2, const at::Tensor& seg_logits) {
  const int64_t B = seg_logits.size(0);
  at::Tensor prob = at::softmax(seg_logits, 1).select(1, 1).reshape({B, -1});  // (B, H*W), not detached
  const int64_t n = prob.size(1);
  const int64_t k = std::max<int64_t>(1, static_cast<int64_t>(std::ceil(0.05 * static_cast<double>(n))));
  at::Tensor topk = top_k_mean(prob, k);
  at::Tensor avg = p2.mean({2, 3});
  at::Tensor mx = p2.amax({2, 3});
  return at::cat({avg, mx, prob.mean(1, true), prob.amax(1, true), topk}, 1);
}

at::Tensor ClsHeadImpl::forward(const at::Tensor& p2, const at::Tensor& seg_logits) {
  return TwoLayerMlpImpl::forward(features(p2, seg_logits));
}

}  // namespace diffnet::model
