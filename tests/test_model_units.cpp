// Model building blocks against float64 loop references written here: ConvNeXt-V2 block and stage, the DCT
// joint embedding, the materialised discrepancy kernels, the line context, the image-head features, RGB
// normalisation, config.
#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "diffnet/common.h"
#include "diffnet/cpu_isa.h"
#include "diffnet/depthwise.h"
#include "diffnet/model.h"
#include "model/convnext.h"
#include "model/dct_branch.h"
#include "model/decoder.h"
#include "model/discrepancy.h"
#include "model/line_context.h"
#include "model/model_info.h"
#include "testing.h"

using namespace diffnet;
using diffnet::testutil::max_abs_diff;

namespace {

// Plain (B,C,H,W) float64 array with index helpers; the references below use only loops over these.
struct Arr {
  int64_t n0 = 0, n1 = 0, n2 = 0, n3 = 0;
  std::vector<double> v;
  Arr(int64_t a, int64_t b, int64_t c, int64_t d) : n0(a), n1(b), n2(c), n3(d), v(a * b * c * d, 0.0) {}
  double& at(int64_t a, int64_t b, int64_t c, int64_t d) { return v[((a * n1 + b) * n2 + c) * n3 + d]; }
};

Arr to_arr(const at::Tensor& t) {
  at::Tensor c = t.to(at::kDouble).contiguous();
  Arr a(c.size(0), c.size(1), c.size(2), c.size(3));
  std::memcpy(a.v.data(), c.data_ptr<double>(), a.v.size() * sizeof(double));
  return a;
}

at::Tensor to_tensor(const Arr& a) {
  return at::from_blob(const_cast<double*>(a.v.data()), {a.n0, a.n1, a.n2, a.n3}, at::kDouble).clone();
}

double gelu(double x) { return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0))); }

// Accessor for a parameter of any rank as a flat double vector.
std::vector<double> flat(const at::Tensor& t) {
  at::Tensor c = t.detach().to(at::kDouble).contiguous();
  return std::vector<double>(c.data_ptr<double>(), c.data_ptr<double>() + c.numel());
}

// y = W x + b for W (out, in) flat.
std::vector<double> linear(const std::vector<double>& W, const std::vector<double>& b, const std::vector<double>& x) {
  const size_t out = b.size(), in = x.size();
  std::vector<double> y(out);
  for (size_t o = 0; o < out; ++o) {
    double s = b[o];
    for (size_t i = 0; i < in; ++i) s += W[o * in + i] * x[i];
    y[o] = s;
  }
  return y;
}

// LayerNorm over the channel axis of x at one pixel (biased variance, eps 1e-6).
std::vector<double> layer_norm(const std::vector<double>& x, const std::vector<double>& w, const std::vector<double>& b) {
  double mean = 0, var = 0;
  for (double v : x) mean += v;
  mean /= static_cast<double>(x.size());
  for (double v : x) var += (v - mean) * (v - mean);
  var /= static_cast<double>(x.size());
  std::vector<double> y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = (x[i] - mean) / std::sqrt(var + 1e-6) * w[i] + b[i];
  return y;
}

// Randomises every parameter of a module (so zero-initialised GRN/bias terms are exercised).
void randomize(torch::nn::Module& m, double scale = 0.3) {
  torch::NoGradGuard ng;
  for (auto& p : m.parameters()) p.normal_(0.0, scale);
}

// Loop reference of one ConvNeXt-V2 block on x (1,C,H,W).
Arr block_reference(model::ConvNeXtBlockImpl& blk, Arr x) {
  const int64_t C = x.n1, H = x.n2, W = x.n3, C4 = 4 * C;
  auto dw = flat(blk.conv_dw->weight), dwb = flat(blk.conv_dw->bias);
  auto nw = flat(blk.norm->weight), nb = flat(blk.norm->bias);
  auto w1 = flat(blk.mlp->fc1->weight), b1 = flat(blk.mlp->fc1->bias);
  auto w2 = flat(blk.mlp->fc2->weight), b2 = flat(blk.mlp->fc2->bias);
  auto gg = flat(blk.mlp->grn->weight), gb = flat(blk.mlp->grn->bias);
  // depthwise 7x7, zero padding 3
  Arr d(1, C, H, W);
  for (int64_t c = 0; c < C; ++c)
    for (int64_t y = 0; y < H; ++y)
      for (int64_t xx = 0; xx < W; ++xx) {
        double s = dwb[c];
        for (int i = 0; i < 7; ++i)
          for (int j = 0; j < 7; ++j) {
            int64_t yy = y + i - 3, xj = xx + j - 3;
            if (yy < 0 || yy >= H || xj < 0 || xj >= W) continue;
            s += dw[c * 49 + i * 7 + j] * x.at(0, c, yy, xj);
          }
        d.at(0, c, y, xx) = s;
      }
  // per pixel: LN -> fc1 -> GELU
  std::vector<std::vector<double>> h(H * W);
  for (int64_t y = 0; y < H; ++y)
    for (int64_t xx = 0; xx < W; ++xx) {
      std::vector<double> px(C);
      for (int64_t c = 0; c < C; ++c) px[c] = d.at(0, c, y, xx);
      auto t = linear(w1, b1, layer_norm(px, nw, nb));
      for (auto& v : t) v = gelu(v);
      h[y * W + xx] = t;
    }
  // GRN over the whole map
  std::vector<double> gx(C4, 0.0);
  for (const auto& px : h)
    for (int64_t c = 0; c < C4; ++c) gx[c] += px[c] * px[c];
  double mean = 0;
  for (auto& g : gx) g = std::sqrt(g), mean += g;
  mean /= static_cast<double>(C4);
  Arr out = x;
  for (int64_t p = 0; p < H * W; ++p) {
    std::vector<double> g(C4);
    for (int64_t c = 0; c < C4; ++c) {
      const double nx = gx[c] / (mean + 1e-6);
      g[c] = gg[c] * (h[p][c] * nx) + gb[c] + h[p][c];
    }
    auto o = linear(w2, b2, g);
    for (int64_t c = 0; c < C; ++c) out.at(0, c, p / W, p % W) += o[c];
  }
  return out;
}

}  // namespace

TEST(ModelUnits, ConvNeXtBlockMatchesLoopReference) {
  torch::manual_seed(1);
  model::ConvNeXtBlock blk(6);
  randomize(*blk);
  blk->to(at::kDouble);
  at::Tensor x = torch::randn({1, 6, 9, 11}, at::kDouble);
  at::Tensor y = blk->forward(x);
  Arr ref = block_reference(*blk, to_arr(x));
  EXPECT_LT(max_abs_diff(y, to_tensor(ref)), 1e-10);
  // channels_last in, channels_last out (the layout the model computes in)
  at::Tensor xcl = x.contiguous(at::MemoryFormat::ChannelsLast);
  at::Tensor ycl = blk->forward(xcl);
  EXPECT_TRUE(ycl.is_contiguous(at::MemoryFormat::ChannelsLast));
  EXPECT_LT(max_abs_diff(ycl, to_tensor(ref)), 1e-10);
}

// Inference on a float32 channels_last input takes the fused depthwise + LayerNorm (ops::depthwise_layer_norm)
// where the kernels' level makes it faster (40 channels: AVX2 and AVX-512): the block against the float64
// loops, and against its own unfused path (gradients recorded).
TEST(ModelUnits, FusedInferenceBlockMatchesLoopReference) {
  torch::manual_seed(5);
  model::ConvNeXtBlock blk(40);
  randomize(*blk);
  blk->eval();
  const at::Tensor x = torch::randn({2, 40, 9, 11}).contiguous(at::MemoryFormat::ChannelsLast);
  at::Tensor fused;
  {
    torch::NoGradGuard no_grad;
    EXPECT_EQ(ops::depthwise_layer_norm_applies(x, blk->conv_dw->weight, blk->conv_dw->bias),
              cpu_isa() != CpuIsa::kBase);
    fused = blk->forward(x);
  }
  EXPECT_TRUE(fused.is_contiguous(at::MemoryFormat::ChannelsLast));
  const at::Tensor unfused = blk->forward(x.clone().requires_grad_(true)).detach();
  EXPECT_LT(max_abs_diff(fused, unfused), 1e-4);
  blk->to(at::kDouble);  // the loop reference takes one image
  const at::Tensor ref = to_tensor(block_reference(*blk, to_arr(x.slice(0, 0, 1).to(at::kDouble))));
  EXPECT_LT(max_abs_diff(fused.slice(0, 0, 1), ref), 1e-4 * std::max(1.0, ref.abs().max().item<double>()));
}

namespace {

// y = x W^T (+ b) on NHWC x (N,H,W,C), W (O,C), b (O) or undefined, and the gradients of sum(y * g) for
// g (N,H,W,O), by float64 loops.
struct LinearReference {
  at::Tensor y, gx, gw, gb;
};
LinearReference linear_reference(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b, const at::Tensor& g) {
  const int64_t N = x.size(0), H = x.size(1), Q = x.size(2), C = x.size(3), O = w.size(0);
  LinearReference r{at::zeros({N, H, Q, O}, at::kDouble), at::zeros({N, H, Q, C}, at::kDouble),
                    at::zeros({O, C}, at::kDouble), at::zeros({O}, at::kDouble)};
  auto X = x.accessor<float, 4>();
  auto Wt = w.accessor<float, 2>();
  auto G = g.accessor<float, 4>();
  const at::Tensor b_or_0 = b.defined() ? b : at::zeros({O});
  auto B = b_or_0.accessor<float, 1>();
  auto Y = r.y.accessor<double, 4>();
  auto GW = r.gw.accessor<double, 2>();
  auto GX = r.gx.accessor<double, 4>();
  auto GB = r.gb.accessor<double, 1>();
  for (int64_t n = 0; n < N; ++n)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t q = 0; q < Q; ++q)
        for (int64_t o = 0; o < O; ++o) {
          double acc = B[o];
          for (int64_t i = 0; i < C; ++i) {
            acc += static_cast<double>(X[n][h][q][i]) * Wt[o][i];
            GW[o][i] += static_cast<double>(G[n][h][q][o]) * X[n][h][q][i];
            GX[n][h][q][i] += static_cast<double>(G[n][h][q][o]) * Wt[o][i];
          }
          Y[n][h][q][o] = acc;
          GB[o] += G[n][h][q][o];
        }
  return r;
}

}  // namespace

TEST(ModelUnits, LinearBackendsMatchFloat64) {
  // Both ways of computing the blocks' Linear layers (LibTorch's BLAS Linear; the same product as a oneDNN
  // 1x1 convolution on the channels_last view) against float64 loops, values and gradients; then a whole
  // float32 block with each against the float64 loop reference of the block.
  const std::string before = linear_backend();  // measured (or $DIFFNET_LINEAR)
  EXPECT_TRUE(before == "blas" || before == "onednn") << before;
  torch::manual_seed(3);
  const at::Tensor x = torch::randn({2, 5, 7, 12}), w = torch::randn({20, 12}) * 0.3, b = torch::randn({20});
  const at::Tensor g = torch::randn({2, 5, 7, 20});
  const LinearReference lin = linear_reference(x, w, b, g);
  const at::Tensor &y_ref = lin.y, &gx_ref = lin.gx, &gw_ref = lin.gw, &gb_ref = lin.gb;
  torch::manual_seed(4);
  model::ConvNeXtBlock blk(6);
  randomize(*blk);
  const at::Tensor xb = torch::randn({1, 6, 9, 11}).contiguous(at::MemoryFormat::ChannelsLast);
  std::map<std::string, at::Tensor> block_out;
  for (const std::string choice : {"blas", "onednn"}) {
    set_linear_backend(choice);
    EXPECT_EQ(linear_backend(), choice);
    at::Tensor xg = x.clone().requires_grad_(true), wg = w.clone().requires_grad_(true);
    at::Tensor bg = b.clone().requires_grad_(true);
    at::Tensor y = model::linear_nhwc(xg, wg, bg);
    EXPECT_LT(max_abs_diff(y, y_ref), 1e-5) << choice;
    (y * g).sum().backward();
    EXPECT_LT(max_abs_diff(wg.grad(), gw_ref), 1e-4) << choice;
    EXPECT_LT(max_abs_diff(xg.grad(), gx_ref), 1e-5) << choice;
    EXPECT_LT(max_abs_diff(bg.grad(), gb_ref), 1e-4) << choice;
    torch::NoGradGuard no_grad;
    block_out[choice] = blk->forward(xb);
  }
  blk->to(at::kDouble);
  const at::Tensor ref = to_tensor(block_reference(*blk, to_arr(xb.to(at::kDouble))));
  for (const auto& [choice, out] : block_out) EXPECT_LT(max_abs_diff(out, ref), 1e-4) << choice;
  EXPECT_THROW(set_linear_backend("gemm"), Error);
  set_linear_backend(before);
}

// A bf16 block (the model converted for --precision bf16; LayerNorm and GRN compute in float32 on bf16
// values, the Linear layers run as bf16 1x1 convolutions) against the float64 loop reference of the same
// bf16-rounded weights and input: within the few bf16 roundings along the way; and each part on its own.
TEST(ModelUnits, Bf16BlockMatchesFloat64OnTheSameValues) {
  torch::manual_seed(8);
  model::ConvNeXtBlock blk(16);
  randomize(*blk);
  blk->eval();
  blk->to(at::kBFloat16);
  const at::Tensor x = torch::randn({1, 16, 9, 11}).contiguous(at::MemoryFormat::ChannelsLast).to(at::kBFloat16);
  torch::NoGradGuard no_grad;
  const at::Tensor y = blk->forward(x);
  EXPECT_EQ(y.scalar_type(), at::kBFloat16);
  // The Linear layer alone: the product of bf16 values accumulated in float, rounded once to bf16.
  const at::Tensor xn = torch::randn({2, 5, 7, 16}).to(at::kBFloat16);
  const at::Tensor w1 = blk->mlp->fc1->weight, b1 = blk->mlp->fc1->bias;
  const at::Tensor lin = model::linear_nhwc(xn, w1, b1);
  EXPECT_EQ(lin.scalar_type(), at::kBFloat16);
  const at::Tensor lin_ref = at::matmul(xn.to(at::kDouble), w1.to(at::kDouble).t()) + b1.to(at::kDouble);
  const at::Tensor lin_scale = at::matmul(xn.to(at::kDouble).abs(), w1.to(at::kDouble).abs().t()) + b1.to(at::kDouble).abs();
  EXPECT_TRUE(((lin.to(at::kDouble) - lin_ref).abs() <= lin_scale * (2.0 / 256)).all().item<bool>());
  // LayerNorm alone: normalised in float32, rounded once.
  const at::Tensor ln = model::layer_norm_last(xn, blk->norm->weight, blk->norm->bias, 1e-6);
  EXPECT_EQ(ln.scalar_type(), at::kBFloat16);
  const at::Tensor xd = xn.to(at::kDouble);
  const at::Tensor mu = xd.mean(-1, true), var = (xd - mu).square().mean(-1, true);
  const at::Tensor ln_ref =
      (xd - mu) / (var + 1e-6).sqrt() * blk->norm->weight.to(at::kDouble) + blk->norm->bias.to(at::kDouble);
  EXPECT_TRUE(((ln.to(at::kDouble) - ln_ref).abs() <= ln_ref.abs() * (1.0 / 256) + 1e-3).all().item<bool>());
  // The whole block against the float64 loops on the same bf16 values.
  blk->to(at::kDouble);
  const at::Tensor ref = to_tensor(block_reference(*blk, to_arr(x.to(at::kDouble))));
  const double err = max_abs_diff(y.to(at::kDouble), ref), scale = ref.abs().max().item<double>();
  EXPECT_LT(err, 0.02 * scale) << "max err " << err << " of " << scale;
}

// The model's 1x1 convolutions (oneDNN on float32 CPU tensors, on any thread count) against a float64
// loop reference, with and without bias, channels_last and contiguous input, forward and gradients.
TEST(ModelUnits, PointwiseConvMatchesLoopReferenceOnOneAndTwoThreads) {
  torch::manual_seed(11);
  const at::Tensor x = torch::randn({2, 12, 5, 7}), w = torch::randn({20, 12, 1, 1}), b = torch::randn({20});
  const at::Tensor g = torch::randn({2, 20, 5, 7});
  // A 1x1 convolution is the linear product over channels at each pixel: the reference on the NHWC view.
  const auto nhwc = [](const at::Tensor& t) { return t.permute({0, 2, 3, 1}).contiguous(); };
  const LinearReference ref = linear_reference(nhwc(x), w.view({20, 12}), at::Tensor(), nhwc(g));
  const at::Tensor y_ref = ref.y.permute({0, 3, 1, 2}), gx_ref = ref.gx.permute({0, 3, 1, 2});
  const at::Tensor gw_ref = ref.gw.view({20, 12, 1, 1}), gb_ref = ref.gb;
  const at::Tensor bias_ref = b.to(at::kDouble).view({1, 20, 1, 1});
  const int before = at::get_num_threads();
  for (int threads : {1, 2})
    for (bool channels_last : {true, false})
      for (bool with_bias : {true, false}) {
        at::set_num_threads(threads);
        const std::string what = std::to_string(threads) + " thread(s), channels_last " +
                                 std::to_string(channels_last) + ", bias " + std::to_string(with_bias);
        at::Tensor xg = (channels_last ? x.contiguous(at::MemoryFormat::ChannelsLast) : x.clone()).requires_grad_(true);
        at::Tensor wg = w.clone().requires_grad_(true), bg = b.clone().requires_grad_(true);
        at::Tensor y = model::pointwise_conv(xg, wg, with_bias ? bg : at::Tensor());
        EXPECT_LT(max_abs_diff(y, with_bias ? y_ref + bias_ref : y_ref), 1e-5) << what;
        if (channels_last) {
          EXPECT_TRUE(y.is_contiguous(at::MemoryFormat::ChannelsLast)) << what;
        }
        (y * g).sum().backward();
        EXPECT_LT(max_abs_diff(xg.grad(), gx_ref), 1e-5) << what;
        EXPECT_LT(max_abs_diff(wg.grad(), gw_ref), 1e-4) << what;
        if (with_bias) {
          EXPECT_LT(max_abs_diff(bg.grad(), gb_ref), 1e-4) << what;
        }
      }
  at::set_num_threads(before);
}

TEST(ModelUnits, ConvNeXtStageWithDownsampleMatchesLoopReference) {
  torch::manual_seed(2);
  model::Stage st(int64_t{3}, int64_t{4}, int64_t{2}, std::vector<double>{0.0, 0.0});
  randomize(*st);
  st->to(at::kDouble);
  at::Tensor x = torch::randn({1, 3, 10, 12}, at::kDouble);
  at::Tensor y = st->forward(x);
  // downsample: channels-first LN over 3 channels, then conv 2x2 stride 2 with bias
  Arr xa = to_arr(x);
  auto lw = flat(st->downsample->norm->weight), lb = flat(st->downsample->norm->bias);
  auto cw = flat(st->downsample->conv->weight), cb = flat(st->downsample->conv->bias);
  Arr ln(1, 3, 10, 12), ds(1, 4, 5, 6);
  for (int64_t yy = 0; yy < 10; ++yy)
    for (int64_t xx = 0; xx < 12; ++xx) {
      std::vector<double> px{xa.at(0, 0, yy, xx), xa.at(0, 1, yy, xx), xa.at(0, 2, yy, xx)};
      auto n = layer_norm(px, lw, lb);
      for (int c = 0; c < 3; ++c) ln.at(0, c, yy, xx) = n[c];
    }
  for (int o = 0; o < 4; ++o)
    for (int yy = 0; yy < 5; ++yy)
      for (int xx = 0; xx < 6; ++xx) {
        double s = cb[o];
        for (int i = 0; i < 3; ++i)
          for (int a = 0; a < 2; ++a)
            for (int b = 0; b < 2; ++b) s += cw[((o * 3 + i) * 2 + a) * 2 + b] * ln.at(0, i, 2 * yy + a, 2 * xx + b);
        ds.at(0, o, yy, xx) = s;
      }
  auto& blocks = *st->blocks;
  Arr r = block_reference(*blocks[0]->as<model::ConvNeXtBlockImpl>(), ds);
  r = block_reference(*blocks[1]->as<model::ConvNeXtBlockImpl>(), r);
  EXPECT_LT(max_abs_diff(y, to_tensor(r)), 1e-10);
}

TEST(ModelUnits, DctEmbeddingMatchesLoopReference) {
  for (bool linear_coef : {false, true}) {
    ModelConfig cfg = model_preset("atto");
    cfg.dct_dim = 3;
    cfg.dct_depth = 0;
    cfg.dct_linear = linear_coef;
    torch::manual_seed(3);
    model::DctEmbed emb(cfg);
    randomize(emb, 0.5);
    emb.to(at::kDouble);
    const int64_t B = 2, H = 16, W = 24, d = 3;
    at::Tensor dct = torch::randint(0, 21, {B, H, W}, at::kLong);
    at::Tensor qt = torch::randint(1, 256, {B, 64}, at::kLong);
    at::Tensor e = emb.embed(model::space_to_depth8(dct), qt);  // (B, H/8, W/8, 64 d)
    ASSERT_EQ(e.sizes(), at::IntArrayRef({B, H / 8, W / 8, 64 * d}));

    auto qe = flat(emb.q_embed->weight);
    auto q1w = flat(emb.q_mlp->fc1->weight), q1b = flat(emb.q_mlp->fc1->bias);
    auto q2w = flat(emb.q_mlp->fc2->weight), q2b = flat(emb.q_mlp->fc2->bias);
    auto t1w = flat(emb.table_mlp->fc1->weight), t1b = flat(emb.table_mlp->fc1->bias);
    auto t2w = flat(emb.table_mlp->fc2->weight), t2b = flat(emb.table_mlp->fc2->bias);
    auto f = flat(emb.freq_embed);
    auto dv = dct.accessor<int64_t, 3>();
    auto qv = qt.accessor<int64_t, 2>();
    at::Tensor ref = at::zeros({B, H / 8, W / 8, 64 * d}, at::kDouble);
    auto rv = ref.accessor<double, 4>();
    for (int64_t b = 0; b < B; ++b) {
      std::vector<double> qn(64);
      for (int k = 0; k < 64; ++k) qn[k] = static_cast<double>(qv[b][k]) / 255.0;
      auto th = linear(t1w, t1b, qn);
      for (auto& v : th) v = gelu(v);
      auto t = linear(t2w, t2b, th);
      for (int k = 0; k < 64; ++k) {
        std::vector<double> eq(qe.begin() + qv[b][k] * d, qe.begin() + (qv[b][k] + 1) * d);
        auto h = linear(q1w, q1b, eq);
        for (auto& v : h) v = gelu(v);
        auto gb = linear(q2w, q2b, h);  // gamma = gb[0:d], beta = gb[d:2d]
        for (int64_t by = 0; by < H / 8; ++by)
          for (int64_t bx = 0; bx < W / 8; ++bx) {
            const int64_t coef = dv[b][8 * by + k / 8][8 * bx + k % 8];
            for (int64_t j = 0; j < d; ++j) {
              double v;
              if (linear_coef) {
                v = flat(emb.coef_linear->weight)[j] * (static_cast<double>(coef) / 20.0) +
                    flat(emb.coef_linear->bias)[j];
              } else {
                v = flat(emb.coef_embed->weight)[coef * d + j];
              }
              rv[b][by][bx][k * d + j] = (1.0 + gb[j]) * v + gb[d + j] + f[k * d + j] + t[j];
            }
          }
      }
    }
    EXPECT_LT(max_abs_diff(e, ref), 1e-10) << "linear_coef " << linear_coef;
    if (!linear_coef) {  // inference's gather from the per-window table, against the same reference
      at::Tensor g = emb.embed_by_table(dct, qt);
      ASSERT_EQ(g.sizes(), e.sizes());
      EXPECT_LT(max_abs_diff(g, ref), 1e-10);
    }
  }
}

// Inference's table-and-gather embedding gives the modules' result to the bit, in float32 and bf16, with
// every optional term and with the ablations that drop them, d = 1 and 4; forward() without autograd
// (which uses it) equals the modules' embedding through the blocks; a value outside the table is an error.
TEST(ModelUnits, DctEmbeddingByTableIsBitIdentical) {
  struct Case {
    int64_t d;
    std::vector<const char*> ablations;
  };
  for (const Case& c : {Case{1, {}}, Case{4, {}}, Case{1, {"A3", "A5"}}, Case{4, {"A4", "A6"}}})
    for (const auto dt : {at::kFloat, at::kBFloat16}) {
      ModelConfig cfg = model_preset("atto");
      cfg.dct_dim = c.d;
      cfg.dct_depth = 0;
      for (const char* a : c.ablations) apply_ablation(cfg, a);
      torch::manual_seed(7);
      model::DctEmbed emb(cfg);
      randomize(emb, 0.5);
      emb.to(dt);
      at::Tensor dct = torch::randint(0, 21, {3, 24, 40}, at::kLong);
      at::Tensor qt = torch::randint(1, 256, {3, 64}, at::kLong);
      torch::NoGradGuard no_grad;
      const at::Tensor want = emb.embed(model::space_to_depth8(dct), qt);
      const at::Tensor got = emb.embed_by_table(dct, qt);
      ASSERT_EQ(got.scalar_type(), dt);
      EXPECT_TRUE(at::equal(got, want)) << "d " << c.d << " " << c.ablations.size() << " ablations " << dt;
      dct[1][9][17] = 21;
      EXPECT_THROW(emb.embed_by_table(dct, qt), Error);
    }
  ModelConfig cfg = model_preset("atto");
  cfg.dct_depth = 1;
  torch::manual_seed(8);
  model::DctEmbed emb(cfg);
  randomize(emb, 0.5);
  at::Tensor dct = torch::randint(0, 21, {2, 32, 32}, at::kLong);
  at::Tensor qt = torch::randint(1, 256, {2, 64}, at::kLong);
  torch::NoGradGuard no_grad;
  const at::Tensor want = model::run_blocks(emb.blocks, emb.embed(model::space_to_depth8(dct), qt).permute({0, 3, 1, 2}));
  EXPECT_TRUE(at::equal(emb.forward(dct, qt), want));
}

TEST(ModelUnits, DctAblationsDropTheirTerms) {
  // A3..A6 remove t, f, gamma, beta: with only the coefficient embedding left, e = E_coef[dct].
  ModelConfig cfg = model_preset("atto");
  for (const char* a : {"A3", "A4", "A5", "A6"}) apply_ablation(cfg, a);
  cfg.dct_depth = 0;
  model::DctEmbed emb(cfg);
  EXPECT_FALSE(emb.q_embed);
  EXPECT_FALSE(emb.table_mlp);
  EXPECT_FALSE(emb.freq_embed.defined());
  at::Tensor dct = torch::randint(0, 21, {1, 8, 16}, at::kLong);
  at::Tensor e = emb.embed(model::space_to_depth8(dct), torch::ones({1, 64}, at::kLong));
  auto w = emb.coef_embed->weight;
  EXPECT_EQ(e[0][0][1][9].item<float>(), w[dct[0][1][9].item<int64_t>()][0].item<float>());
}

TEST(ModelUnits, MaterialisedKernelsAreZeroSumWithAnchoredFamily) {
  ModelConfig cfg = model_preset("atto");
  cfg.num_filters = 4;  // 2 free + 2 centre-anchored
  model::Discrepancy disc(cfg, 8);
  auto& bank = disc->bank;
  ASSERT_EQ(bank.theta.sizes(), at::IntArrayRef({64, 4, 48}));
  at::Tensor k = bank.kernels();
  ASSERT_EQ(k.sizes(), at::IntArrayRef({64, 4, 7, 7}));
  EXPECT_LT(k.to(at::kDouble).sum({2, 3}).abs().max().item<double>(), 1e-6);
  auto kv = k.accessor<float, 4>();
  auto tv = bank.theta.accessor<float, 3>();
  for (int64_t c = 0; c < 64; ++c)
    for (int m = 0; m < 4; ++m) {
      int idx = 0;
      double s = 0;
      for (int y = 0; y < 7; ++y)
        for (int x = 0; x < 7; ++x) {
          if (y == 3 && x == 3) continue;
          const double expect = m < 2 ? tv[c][m][idx] : std::abs(tv[c][m][idx]);
          EXPECT_EQ(kv[c][m][y][x], static_cast<float>(expect));
          if (m >= 2) {
            EXPECT_GE(kv[c][m][y][x], 0.f);
          }
          s += expect;
          ++idx;
        }
      EXPECT_NEAR(kv[c][m][3][3], -s, 1e-6);
    }
  // theta init trunc_normal(0.02), projection U(-1/sqrt(M), 1/sqrt(M)), bias 0
  EXPECT_NEAR(bank.theta.std().item<double>(), 0.02, 0.002);
  EXPECT_LE(bank.proj_weight.abs().max().item<double>(), 0.5 + 1e-7);
  EXPECT_GT(bank.proj_weight.abs().max().item<double>(), 0.4);
  EXPECT_EQ(bank.proj_bias.abs().max().item<double>(), 0.0);
}

TEST(ModelUnits, FilterVariantKernels) {
  // A14: SRM filters are zero-sum, fixed (buffer, no theta); A18: Bayar centre -1, neighbours sum to 1;
  // A0: free kernels equal theta.
  ModelConfig srm = model_preset("atto");
  apply_ablation(srm, "A14");
  model::Discrepancy ds(srm, 8);
  EXPECT_FALSE(ds->bank.theta.defined());
  at::Tensor ks = ds->bank.kernels();
  EXPECT_EQ(ks.sizes(), at::IntArrayRef({64, 3, 7, 7}));
  EXPECT_LT(ks.sum({2, 3}).abs().max().item<double>(), 1e-6);
  EXPECT_FLOAT_EQ(ks[0][1][3][3].item<float>(), -1.0f);  // KV filter centre -12/12
  EXPECT_FLOAT_EQ(ks[0][0][3][3].item<float>(), -1.0f);  // 3x3 second-order centre -4/4

  ModelConfig bay = model_preset("atto");
  apply_ablation(bay, "A18");
  model::Discrepancy db(bay, 8);
  at::Tensor kb = db->bank.kernels();
  EXPECT_LT((kb.select(2, 3).select(2, 3) + 1).abs().max().item<double>(), 1e-6);
  EXPECT_LT((kb.sum({2, 3})).abs().max().item<double>(), 1e-5);
  EXPECT_GE(kb.min().item<float>(), -1.0f - 1e-6f);

  ModelConfig fr = model_preset("atto");
  apply_ablation(fr, "A0");
  model::Discrepancy df(fr, 8);
  EXPECT_EQ(df->bank.theta.sizes(), at::IntArrayRef({64, 2, 49}));
  EXPECT_TRUE(df->bank.kernels().reshape({64, 2, 49}).equal(df->bank.theta));
}

TEST(ModelUnits, DiscrepancyInferenceCacheFollowsParameters) {
  ModelConfig cfg = model_preset("atto");
  cfg.disc_dim = 8;
  torch::manual_seed(4);
  model::Discrepancy disc(cfg, 5);
  disc->set_impl("dense");  // the dense path with materialised, cached kernels
  at::Tensor x = torch::randn({1, 5, 12, 16});
  at::Tensor train_out = disc->forward(x);  // grad mode on: the differentiable ops::zero_sum path
  disc->eval();
  torch::NoGradGuard ng;
  at::Tensor a = disc->forward(x);  // materialised + cached kernels
  EXPECT_LT(max_abs_diff(a, train_out), 1e-5);
  // An in-place parameter update (optimizer step, load) must invalidate the cache.
  disc->bank.theta.mul_(2.0);
  at::Tensor b = disc->forward(x);
  disc->train();
  at::Tensor c = disc->forward(x);
  EXPECT_LT(max_abs_diff(b, c), 1e-5);
  EXPECT_GT(max_abs_diff(a, b), 1e-4);
}

TEST(ModelUnits, LineContextMatchesLoopReference) {
  const int64_t B = 2, D = 3, h = 6, w = 5, K = model::LineContextImpl::kRowKernel;
  torch::manual_seed(11);
  model::LineContext lc(D);
  // A new part adds nothing: its output projection starts at zero.
  at::Tensor x32 = torch::randn({B, D, h, w});
  EXPECT_TRUE(torch::equal(lc->forward(x32), x32));
  lc->to(at::kDouble);
  {
    torch::NoGradGuard ng;
    for (auto& p : lc->parameters()) p.normal_(0.0, 0.7);
  }
  at::Tensor xt = torch::randn({B, D, h, w}, at::kDouble);
  Arr x = to_arr(xt), got = to_arr(lc->forward(xt).detach());
  const std::vector<double> wa = flat(lc->attn->weight), ba = flat(lc->attn->bias);
  const std::vector<double> wm = flat(lc->mix->weight), bm = flat(lc->mix->bias);  // (D, 2D+1, K)
  const std::vector<double> wo = flat(lc->out->weight), bo = flat(lc->out->bias);  // (D, D, 1)
  const double eps = model::LineContextImpl::kEps;
  double worst = 0;
  for (int64_t b = 0; b < B; ++b) {
    std::vector<double> srow(h, 0.0), r(h * D, 0.0), m(D, 0.0);
    double stot = 0;
    for (int64_t y = 0; y < h; ++y) {
      for (int64_t xx = 0; xx < w; ++xx) {
        double t = ba[0];
        for (int64_t c = 0; c < D; ++c) t += wa[c] * x.at(b, c, y, xx);
        const double a = 1.0 / (1.0 + std::exp(-t));
        srow[y] += a;
        for (int64_t c = 0; c < D; ++c) r[y * D + c] += a * x.at(b, c, y, xx);
      }
      for (int64_t c = 0; c < D; ++c) r[y * D + c] /= srow[y] + eps;
      stot += srow[y];
    }
    for (int64_t c = 0; c < D; ++c) {
      for (int64_t y = 0; y < h; ++y) m[c] += srow[y] * r[y * D + c];
      m[c] /= stot + eps;
    }
    // z (2D+1, h): deviation, its square, the row's text share.
    std::vector<double> z((2 * D + 1) * h);
    for (int64_t y = 0; y < h; ++y) {
      for (int64_t c = 0; c < D; ++c) {
        const double d = r[y * D + c] - m[c];
        z[c * h + y] = d;
        z[(D + c) * h + y] = d * d;
      }
      z[2 * D * h + y] = srow[y] / static_cast<double>(w);
    }
    for (int64_t y = 0; y < h; ++y) {
      std::vector<double> hid(D);
      for (int64_t o = 0; o < D; ++o) {
        double s = bm[o];
        for (int64_t i = 0; i < 2 * D + 1; ++i)
          for (int64_t k = 0; k < K; ++k) {
            const int64_t yy = y + k - K / 2;
            if (yy >= 0 && yy < h) s += wm[(o * (2 * D + 1) + i) * K + k] * z[i * h + yy];
          }
        hid[o] = gelu(s);
      }
      for (int64_t o = 0; o < D; ++o) {
        double g = bo[o];
        for (int64_t i = 0; i < D; ++i) g += wo[o * D + i] * hid[i];
        for (int64_t xx = 0; xx < w; ++xx)
          worst = std::max(worst, std::abs(got.at(b, o, y, xx) - (x.at(b, o, y, xx) + g)));
      }
    }
  }
  EXPECT_LT(worst, 1e-10);
}

TEST(ModelUnits, ImageHeadFeatures) {
  // mean, max and top-k (k = ceil(0.05 HW)) mean of softmax(seg)[1], after avg and max pools of P2.
  at::Tensor seg = torch::randn({1, 2, 8, 5}, at::kDouble);  // 40 px -> k = 2
  at::Tensor p2 = torch::randn({1, 3, 2, 2}, at::kDouble);
  at::Tensor f = model::ClsHeadImpl::features(p2, seg);
  ASSERT_EQ(f.sizes(), at::IntArrayRef({1, 9}));
  std::vector<double> prob;
  auto sv = seg.accessor<double, 4>();
  for (int y = 0; y < 8; ++y)
    for (int x = 0; x < 5; ++x) prob.push_back(1.0 / (1.0 + std::exp(sv[0][0][y][x] - sv[0][1][y][x])));
  std::vector<double> sorted = prob;
  std::sort(sorted.rbegin(), sorted.rend());
  double mean = 0;
  for (double p : prob) mean += p / 40.0;
  EXPECT_NEAR(f[0][6].item<double>(), mean, 1e-12);
  EXPECT_NEAR(f[0][7].item<double>(), sorted[0], 1e-12);
  EXPECT_NEAR(f[0][8].item<double>(), (sorted[0] + sorted[1]) / 2, 1e-12);
  auto pv = p2.accessor<double, 4>();
  EXPECT_NEAR(f[0][1].item<double>(), (pv[0][1][0][0] + pv[0][1][0][1] + pv[0][1][1][0] + pv[0][1][1][1]) / 4, 1e-12);
  EXPECT_NEAR(f[0][5].item<double>(), std::max({pv[0][2][0][0], pv[0][2][0][1], pv[0][2][1][0], pv[0][2][1][1]}), 1e-12);
}

// top_k_mean's radix selection against a float64 sort, for rows with many ties (values on a coarse grid),
// many zeros, k = 1 and k = n, float, double and bf16; and its fallback (topk) with autograd and with a NaN.
TEST(ModelUnits, TopKMeanAgainstASort) {
  torch::manual_seed(5);
  struct Case {
    int64_t B, n, k;
    bool ties;
  };
  const Case cases[] = {{3, 65536, 3277, false}, {2, 65536, 3277, true}, {4, 40, 2, false},
                        {2, 17, 1, true},        {1, 17, 17, false},       {2, 5000, 250, true}};
  for (const Case& c : cases)
    for (const auto dt : {at::kFloat, at::kDouble, at::kBFloat16}) {
      at::Tensor p = at::rand({c.B, c.n}, at::kDouble).pow(4);  // most values small, as a page's map
      if (c.ties) p = (p * 8).floor() / 8;                       // nine values only: ties across k
      p.select(1, 0).zero_();
      p = p.to(dt);
      const at::Tensor got = model::top_k_mean(p, c.k);
      ASSERT_EQ(got.sizes(), at::IntArrayRef({c.B, 1}));
      EXPECT_EQ(got.scalar_type(), dt);
      for (int64_t b = 0; b < c.B; ++b) {
        std::vector<double> row(static_cast<size_t>(c.n));
        for (int64_t i = 0; i < c.n; ++i) row[static_cast<size_t>(i)] = p[b][i].item<double>();
        std::sort(row.rbegin(), row.rend());
        double sum = 0;
        for (int64_t i = 0; i < c.k; ++i) sum += row[static_cast<size_t>(i)];
        // bf16 (inference windows): the mean of the bf16 values, rounded to bf16 once (half an ulp).
        const double want = sum / static_cast<double>(c.k);
        const double tol = dt == at::kBFloat16 ? std::ldexp(1.0, std::ilogb(want) - 8) * 1.0001
                                               : dt == at::kFloat ? 1e-7 : 1e-13;
        EXPECT_NEAR(got[b][0].item<double>(), want, tol) << c.n << " " << c.k << " " << c.ties << " " << dt;
      }
    }
  // With autograd (training) and with a NaN: topk, whose gradient reaches the k values.
  at::Tensor p = at::rand({2, 100}).requires_grad_(true);
  model::top_k_mean(p, 5).sum().backward();
  EXPECT_EQ(p.grad().gt(0).sum().item<int64_t>(), 10);
  at::Tensor q = at::rand({1, 10});
  q[0][3] = std::nan("");
  EXPECT_TRUE(std::isnan(model::top_k_mean(q, 2).item<float>()));
  EXPECT_THROW(model::top_k_mean(q, 11), c10::Error);
}

// The decoder's bilinear resize (align_corners false: source = (dst + 0.5) * in / out - 0.5, clamped at
// 0) against that formula in float64, up and down, NCHW and channels_last; in bf16 (inference windows) the
// result is the float64 value of the bf16 inputs rounded once (within one bf16 ulp), in both layouts.
TEST(ModelUnits, ResizeBilinearAgainstFormula) {
  torch::manual_seed(11);
  auto reference = [](const at::Tensor& x, int64_t oh, int64_t ow) {
    Arr a = to_arr(x), o(a.n0, a.n1, oh, ow);
    auto src = [](int64_t d, int64_t in, int64_t out, int64_t& i0, int64_t& i1, double& l) {
      const double s = std::max(0.0, (static_cast<double>(d) + 0.5) * static_cast<double>(in) / static_cast<double>(out) - 0.5);
      i0 = static_cast<int64_t>(s);
      i1 = std::min(i0 + 1, in - 1);
      l = s - static_cast<double>(i0);
    };
    for (int64_t b = 0; b < a.n0; ++b)
      for (int64_t c = 0; c < a.n1; ++c)
        for (int64_t y = 0; y < oh; ++y)
          for (int64_t x = 0; x < ow; ++x) {
            int64_t y0, y1, x0, x1;
            double ly, lx;
            src(y, a.n2, oh, y0, y1, ly);
            src(x, a.n3, ow, x0, x1, lx);
            o.at(b, c, y, x) = (1 - ly) * ((1 - lx) * a.at(b, c, y0, x0) + lx * a.at(b, c, y0, x1)) +
                               ly * ((1 - lx) * a.at(b, c, y1, x0) + lx * a.at(b, c, y1, x1));
          }
    return o;
  };
  struct Case {
    int64_t C, h, w, oh, ow;
  };
  for (const Case& k : {Case{2, 5, 7, 20, 28}, Case{6, 9, 4, 13, 8}, Case{2, 16, 16, 64, 64}})
    for (const auto dt : {at::kFloat, at::kBFloat16})
      for (const bool cl : {false, true}) {
        at::Tensor x = (torch::randn({2, k.C, k.h, k.w}) * 3).to(dt);
        if (cl) x = x.contiguous(at::MemoryFormat::ChannelsLast);
        const at::Tensor got = model::resize_bilinear(x, k.oh, k.ow);
        ASSERT_EQ(got.scalar_type(), dt);
        ASSERT_EQ(got.sizes(), at::IntArrayRef({2, k.C, k.oh, k.ow}));
        const Arr want = reference(x, k.oh, k.ow), g = to_arr(got);
        double worst = 0;  // in units of the tolerance
        for (size_t i = 0; i < want.v.size(); ++i) {
          // Half a bf16 ulp (at most 2^-8 relative), and float32 arithmetic on inputs of up to ~15.
          const double tol = (dt == at::kFloat ? 0 : std::ldexp(std::abs(want.v[i]), -8)) + 1e-5;
          worst = std::max(worst, std::abs(g.v[i] - want.v[i]) / tol);
        }
        EXPECT_LE(worst, 1.0) << k.C << "x" << k.h << "x" << k.w << " -> " << k.oh << "x" << k.ow << " " << dt
                              << (cl ? " channels_last" : " NCHW");
      }
}

TEST(ModelUnits, NormalizeRgb) {
  at::Tensor img = torch::zeros({2, 3, 3}, at::kByte);
  img[1][2][0] = 255;
  img[1][2][1] = 0;
  img[1][2][2] = 128;
  at::Tensor x = normalize_rgb(img);
  ASSERT_EQ(x.sizes(), at::IntArrayRef({1, 3, 2, 3}));
  EXPECT_TRUE(x.is_contiguous(at::MemoryFormat::ChannelsLast));
  EXPECT_NEAR(x[0][0][1][2].item<float>(), (1.0 - 0.485) / 0.229, 1e-5);
  EXPECT_NEAR(x[0][1][1][2].item<float>(), (0.0 - 0.456) / 0.224, 1e-5);
  EXPECT_NEAR(x[0][2][1][2].item<float>(), (128.0 / 255.0 - 0.406) / 0.225, 1e-5);
  EXPECT_NEAR(x[0][0][0][0].item<float>(), -0.485 / 0.229, 1e-5);
  EXPECT_THROW(normalize_rgb(torch::zeros({4, 4}, at::kByte)), Error);
}

TEST(ModelUnits, ConfigJsonRoundTripAndErrors) {
  ModelConfig c = model_preset("base");
  apply_ablation(c, "A11");
  apply_ablation(c, "A3");
  ModelConfig r = model_config_from_json(to_json(c));
  EXPECT_EQ(to_json(r), to_json(c));
  EXPECT_EQ(r.kernel_size, 9);
  EXPECT_FALSE(r.dct_table_bias);
  EXPECT_EQ(r.dims, (std::vector<int64_t>{128, 256, 512, 1024}));
  EXPECT_FALSE(r.line_context);
  EXPECT_TRUE(model_config_from_json(nlohmann::json{{"preset", "atto"}, {"line_context", true}}).line_context);
  // Only the differences from a preset are needed.
  ModelConfig p = model_config_from_json(nlohmann::json{{"preset", "tiny"}, {"kernel_size", 5}});
  EXPECT_EQ(p.disc_dim, 256);
  EXPECT_EQ(p.kernel_size, 5);
  auto expect_error = [](const nlohmann::json& j, const std::string& needle) {
    try {
      model_config_from_json(j);
      ADD_FAILURE() << "no error for " << j.dump();
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  expect_error({{"kernal_size", 5}}, "unknown field 'kernal_size'");
  expect_error({{"kernel_size", 4}}, "kernel_size");
  expect_error({{"kernel_size", "7"}}, "kernel_size");
  expect_error({{"activation", "relu"}}, "activation");
  expect_error({{"depths", {1, 2, 3}}}, "depths");
  expect_error({{"backbone", "giant"}}, "giant");
  EXPECT_THROW(model_preset("huge-net"), Error);
  ModelConfig a = model_preset("atto");
  EXPECT_THROW(apply_ablation(a, "A21"), Error);
  EXPECT_EQ(a.num_free_filters(), 1);
}

TEST(ModelUnits, PartFlopsOfAttoAgainstHandCount) {
  // atto at 256^2, by hand (2 x MACs): stem 4x4/4 conv 3 -> 40 over 64^2 pixels = 15,728,640; a stage-1
  // block at C = 40 over 64^2: depthwise 7x7 2*40*49*4096 = 16,056,320 plus the MLP 2*(40*160 + 160*40)*4096
  // = 104,857,600; two blocks. Stage 2 (part rgb.stage2): the 2x2/2 downsampler 40 -> 80 over 32^2
  // = 26,214,400, two blocks at C = 80 (2*80*49*1024 + 4*80*320*1024 = 112,885,760 each) and the fusion 1x1
  // conv (80 + 64) -> 80 over 32^2 = 23,592,960.
  DiffNet m(model_preset("atto"));
  std::map<std::string, double> part;
  for (const auto& c : model_costs(m, 256, 256)) part[part_of_module(c.name)] += c.flops;
  EXPECT_DOUBLE_EQ(part["rgb.stage1"], 15728640.0 + 2 * (16056320.0 + 104857600.0));
  EXPECT_DOUBLE_EQ(part["rgb.stage2"], 26214400.0 + 2 * 112885760.0 + 23592960.0);
}

TEST(ModelUnits, BackboneFlopsMatchPublishedFigures) {
  // docs/design.md §2.1: forward GFLOP at 512^2 for atto / nano / tiny / base: 5.72 / 25.6 / 46.6 / 160.4.
  const std::pair<const char*, double> cases[] = {{"atto", 5.72}, {"nano", 25.6}, {"tiny", 46.6}, {"base", 160.4}};
  for (const auto& c : cases) {
    std::vector<int64_t> dims, depths;
    convnextv2_variant(c.first, dims, depths);
    EXPECT_NEAR(backbone_flops(dims, depths, 512, 512) / 1e9, c.second, 0.06) << c.first;
  }
}
