// DCT branch (docs/design.md §2.2) and the FPH ablation (A1).
#include "model/dct_branch.h"

#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <atomic>

#include "diffnet/common.h"
#include "diffnet/embedding.h"
#include "model/convnext.h"

namespace diffnet::model {

at::Tensor space_to_depth8(const at::Tensor& x) {
  const int64_t B = x.size(0), H = x.size(1), W = x.size(2);
  return x.view({B, H / 8, 8, W / 8, 8}).permute({0, 1, 3, 2, 4}).reshape({B, H / 8, W / 8, 64});
}

TwoLayerMlpImpl::TwoLayerMlpImpl(int64_t in, int64_t hidden, int64_t out) {
  fc1 = register_module("0", torch::nn::Linear(in, hidden));
  fc2 = register_module("2", torch::nn::Linear(hidden, out));
}

DctEmbed::DctEmbed(const ModelConfig& cfg) : d_(cfg.dct_dim), gamma_(cfg.dct_gamma), beta_(cfg.dct_beta) {
  const int64_t d = d_;
  if (cfg.dct_linear) {
    coef_linear = register_module("coef_linear", torch::nn::Linear(1, d));
  } else {
    coef_embed = register_module("coef_embed", torch::nn::Embedding(21, d));
  }
  const int64_t n_mod = (gamma_ ? 1 : 0) + (beta_ ? 1 : 0);
  if (n_mod > 0) {
    q_embed = register_module("q_embed", torch::nn::Embedding(256, d));
    q_mlp = register_module("q_mlp", TwoLayerMlp(d, 2 * d, n_mod * d));
  }
  if (cfg.dct_freq_embed) freq_embed = register_parameter("freq_embed", torch::zeros({64, d}));
  if (cfg.dct_table_bias) table_mlp = register_module("table_mlp", TwoLayerMlp(64, 64, d));
  blocks = register_module("blocks", make_blocks(64 * d, cfg.dct_depth));
  init_conv_linear(*this);
  if (freq_embed.defined()) trunc_normal_(freq_embed, 0.02);
  // Embeddings keep torch's N(0, 1) init: v then has unit scale, like a normalised input.
}

at::Tensor DctEmbed::embed(const at::Tensor& dct_blocks, const at::Tensor& qt) {
  at::Tensor e;  // (B,h,w,64,d)
  if (coef_linear) {
    e = coef_linear->forward(dct_blocks.unsqueeze(-1).to(coef_linear->weight.scalar_type()).div(20.0));
  } else {
    e = ops::embedding(coef_embed->weight, dct_blocks);  // the Embedding, with a faster CPU backward
  }
  e = modulate(e, qt);
  return e.reshape({e.size(0), e.size(1), e.size(2), 64 * d_});
}

at::Tensor DctEmbed::modulate(at::Tensor e, const at::Tensor& qt) {
  const int64_t d = d_;
  if (q_embed) {
    at::Tensor gb = q_mlp->forward(ops::embedding(q_embed->weight, qt));  // (B,64,n*d)
    int64_t off = 0;
    if (gamma_) {
      at::Tensor gamma = gb.narrow(2, off, d).unsqueeze(1).unsqueeze(1);
      e = e + e * gamma;
      off += d;
    }
    if (beta_) e = e + gb.narrow(2, off, d).unsqueeze(1).unsqueeze(1);
  }
  if (freq_embed.defined()) e = e + freq_embed;
  if (table_mlp) {
    at::Tensor t = table_mlp->forward(qt.to(e.scalar_type()).div(255.0));  // (B,d)
    e = e + t.view({t.size(0), 1, 1, 1, d});
  }
  return e;
}

at::Tensor DctEmbed::embed_by_table(const at::Tensor& dct, const at::Tensor& qt) {
  const int64_t B = dct.size(0), H = dct.size(1), W = dct.size(2), h = H / 8, w = W / 8, d = d_;
  const int64_t V = coef_embed->weight.size(0);
  // (B,1,V,64,d): every coefficient value of every frequency of every window, through the same operations
  // as the (B,h,w,64,d) embedding, each element computed alike (bit-identical to embed()).
  const at::Tensor table =
      modulate(coef_embed->weight.view({1, 1, V, 1, d}).expand({B, 1, V, 64, d}), qt).contiguous();
  const at::Tensor idx = dct.contiguous();
  at::Tensor out = at::empty({B, h, w, 64 * d}, table.options());
  std::atomic<bool> bad{false};
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, table.scalar_type(), "dct_embed_by_table", [&] {
    const scalar_t* tab = table.data_ptr<scalar_t>();
    const int64_t* in = idx.data_ptr<int64_t>();
    scalar_t* o = out.data_ptr<scalar_t>();
    // One task per row of blocks; its pixel rows are read in order, row u giving coefficients 8u..8u+7
    // of every block in the row (natural order: k = 8u + v).
    at::parallel_for(0, B * h, 1, [&](int64_t lo, int64_t hi) {
      bool out_of_range = false;
      for (int64_t r = lo; r < hi; ++r) {
        const int64_t b = r / h, by = r % h;
        const scalar_t* tb = tab + b * V * 64 * d;
        scalar_t* orow = o + r * w * 64 * d;
        for (int64_t u = 0; u < 8; ++u) {
          const int64_t* row = in + (b * H + by * 8 + u) * W;
          for (int64_t bx = 0; bx < w; ++bx)
            for (int64_t v8 = 0; v8 < 8; ++v8) {
              const int64_t v = row[bx * 8 + v8], k = u * 8 + v8;
              out_of_range |= static_cast<uint64_t>(v) >= static_cast<uint64_t>(V);
              const scalar_t* src = tb + (std::min<uint64_t>(static_cast<uint64_t>(v), V - 1) * 64 + k) * d;
              scalar_t* dst = orow + (bx * 64 + k) * d;
              if (d == 1) *dst = *src;
              else std::copy(src, src + d, dst);
            }
        }
      }
      if (out_of_range) bad = true;
    });
  });
  if (bad) throw Error("DiffNet", "dct values must be in [0, " + std::to_string(V - 1) + "]");
  return out;
}

at::Tensor DctEmbed::forward(const at::Tensor& dct, const at::Tensor& qt) {
  // Inference on the CPU: the embedding as a gather from its per-window table (no (B,h,w,64,d)
  // intermediates; docs/model.md); training and other devices: the modules as written.
  const bool table = coef_embed && dct.is_cpu() && dct.scalar_type() == at::kLong && !at::GradMode::is_enabled();
  at::Tensor e = table ? embed_by_table(dct, qt) : embed(space_to_depth8(dct), qt);
  return run_blocks(blocks, e.permute({0, 3, 1, 2}));  // channels_last (B,64d,h,w)
}

namespace {

at::Tensor swish(const at::Tensor& x) { return x * at::sigmoid(x); }

torch::nn::BatchNorm2d bn(int64_t c, double eps) {
  return torch::nn::BatchNorm2d(torch::nn::BatchNorm2dOptions(c).eps(eps).momentum(0.01));
}

// EfficientNet MBConv (expand x6, dw 3x3, SE 0.25, swish, BN eps 1e-3, identity skip), as in DTD's FPH.
class MBConvImpl : public torch::nn::Module {
 public:
  explicit MBConvImpl(int64_t c) {
    const int64_t e = 6 * c, s = std::max<int64_t>(1, c / 4);
    using torch::nn::Conv2d;
    using torch::nn::Conv2dOptions;
    expand_conv = register_module("expand_conv", Conv2d(Conv2dOptions(c, e, 1).bias(false)));
    bn0 = register_module("bn0", bn(e, 1e-3));
    depthwise_conv =
        register_module("depthwise_conv", Conv2d(Conv2dOptions(e, e, 3).padding(1).groups(e).bias(false)));
    bn1 = register_module("bn1", bn(e, 1e-3));
    se_reduce = register_module("se_reduce", Conv2d(Conv2dOptions(e, s, 1)));
    se_expand = register_module("se_expand", Conv2d(Conv2dOptions(s, e, 1)));
    project_conv = register_module("project_conv", Conv2d(Conv2dOptions(e, c, 1).bias(false)));
    bn2 = register_module("bn2", bn(c, 1e-3));
  }
  at::Tensor forward(const at::Tensor& x) {
    at::Tensor y = swish(bn0->forward(pointwise_conv(x, expand_conv->weight, expand_conv->bias)));
    y = swish(bn1->forward(depthwise_conv->forward(y)));
    at::Tensor g = y.mean({2, 3}, /*keepdim=*/true);
    g = swish(pointwise_conv(g, se_reduce->weight, se_reduce->bias));
    g = at::sigmoid(pointwise_conv(g, se_expand->weight, se_expand->bias));
    y = bn2->forward(pointwise_conv(y * g, project_conv->weight, project_conv->bias));
    return x + y;
  }
  torch::nn::Conv2d expand_conv{nullptr}, depthwise_conv{nullptr}, se_reduce{nullptr}, se_expand{nullptr},
      project_conv{nullptr};
  torch::nn::BatchNorm2d bn0{nullptr}, bn1{nullptr}, bn2{nullptr};
};
TORCH_MODULE(MBConv);

// x (B,C,H,W) ++ coordinates along H and W in [-1,1] ++ radius sqrt((x-.5)^2 + (y-.5)^2).
at::Tensor add_coords(const at::Tensor& x) {
  const int64_t B = x.size(0), H = x.size(2), W = x.size(3);
  auto opt = x.options();
  at::Tensor ys = at::linspace(-1.0, 1.0, H, opt).view({1, 1, H, 1}).expand({B, 1, H, W});
  at::Tensor xs = at::linspace(-1.0, 1.0, W, opt).view({1, 1, 1, W}).expand({B, 1, H, W});
  at::Tensor rr = ((ys - 0.5).square() + (xs - 0.5).square()).sqrt();
  return at::cat({x, ys, xs, rr}, 1);
}

}  // namespace

Fph::Fph(const ModelConfig& cfg) : out_(64 * cfg.dct_dim) {
  using torch::nn::Conv2d;
  using torch::nn::Conv2dOptions;
  conv1 = register_module("conv1", torch::nn::Sequential(Conv2d(Conv2dOptions(21, 64, 3).padding(8).dilation(8)),
                                                         bn(64, 1e-5), torch::nn::ReLU()));
  conv2 = register_module(
      "conv2", torch::nn::Sequential(Conv2d(Conv2dOptions(64, 16, 1).bias(false)), bn(16, 1e-5), torch::nn::ReLU()));
  qt_embed = register_module("qt_embed", torch::nn::Embedding(64, 16));
  conv0 = register_module("conv0", torch::nn::Sequential(Conv2d(Conv2dOptions(35, out_, 8).stride(8).bias(false)),
                                                         bn(out_, 1e-5), torch::nn::ReLU()));
  blocks = register_module("blocks", torch::nn::ModuleList());
  for (int j = 0; j < 3; ++j) blocks->push_back(MBConv(out_));
  init_conv_linear(*this);
}

at::Tensor Fph::forward(const at::Tensor& dct, const at::Tensor& qt) {
  const int64_t B = dct.size(0), H = dct.size(1), W = dct.size(2);
  // One-hot over 21 values (DTD's frozen identity embedding).
  at::Tensor x = at::one_hot(dct, 21).to(qt_embed->weight.scalar_type()).permute({0, 3, 1, 2});  // channels_last (B,21,H,W)
  x = conv1->forward(x);
  const auto& c2 = *conv2[0]->as<torch::nn::Conv2dImpl>();  // conv2 = 1x1 conv, BN, ReLU
  x = conv2[2]->as<torch::nn::ReLUImpl>()->forward(
      conv2[1]->as<torch::nn::BatchNorm2dImpl>()->forward(pointwise_conv(x, c2.weight, c2.bias)));  // (B,16,H,W)
  at::Tensor q = ops::embedding(qt_embed->weight, qt.clamp(0, 63));              // (B,64,16)
  q = q.view({B, 8, 8, 16}).permute({0, 3, 1, 2}).reshape({B, 16, 1, 8, 1, 8});
  at::Tensor xm = (x.reshape({B, 16, H / 8, 8, W / 8, 8}) * q).reshape({B, 16, H, W});
  x = add_coords(at::cat({xm, x}, 1));  // 35 channels
  x = conv0->forward(x.contiguous(at::MemoryFormat::ChannelsLast));
  for (const auto& b : *blocks) x = b->as<MBConvImpl>()->forward(x);
  return x;
}

}  // namespace diffnet::model
