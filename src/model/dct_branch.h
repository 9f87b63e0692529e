// DCT branch (docs/design.md §2.2): the frequency-index-aware joint embedding (ours) and DTD's FPH (ablation A1).
// Both map dct (B,H,W) int64 in 0..20 and qt (B,64) int64 in 1..255 to (B, 64*d, H/8, W/8), channels_last.
#pragma once

#include <torch/torch.h>

#include "diffnet/config.h"
#include "diffnet/gelu.h"

namespace diffnet::model {

// (B,H,W) -> (B,H/8,W/8,64): each 8x8 block's coefficients in natural row-major (u,v) order, k = 8u+v.
at::Tensor space_to_depth8(const at::Tensor& x);

// Linear -> GELU -> Linear registered as "0" and "2" (the nn.Sequential names of the Python port).
class TwoLayerMlpImpl : public torch::nn::Module {
 public:
  TwoLayerMlpImpl(int64_t in, int64_t hidden, int64_t out);
  at::Tensor forward(const at::Tensor& x) { return fc2->forward(ops::gelu(fc1->forward(x))); }
  torch::nn::Linear fc1{nullptr}, fc2{nullptr};
};
TORCH_MODULE(TwoLayerMlp);

class DctHead : public torch::nn::Module {
 public:
  virtual at::Tensor forward(const at::Tensor& dct, const at::Tensor& qt) = 0;
  virtual int64_t out_channels() const = 0;
};

// Ours: e_{p,k} = (1 + gamma_k) * v_{p,k} + beta_k + f_k + t, v = E_coef[dct], (gamma, beta) = MLP_q(E_q[Q_k]),
// t = MLP_t(Q/255); channels k*d + j; then cfg.dct_depth ConvNeXt-V2 blocks at 64*d.
// Names: coef_embed, q_embed, q_mlp.{0,2}, freq_embed, table_mlp.{0,2}, blocks.{j} (A7: coef_linear).
class DctEmbed : public DctHead {
 public:
  explicit DctEmbed(const ModelConfig& cfg);
  // The joint embedding before the blocks: dct_blocks (B,h,w,64) int64, qt (B,64) int64 -> (B,h,w,64*d).
  at::Tensor embed(const at::Tensor& dct_blocks, const at::Tensor& qt);
  // The same for inference from the (B,H,W) int64 map: a gather from the (B,1,21,64,d) table of every
  // value's modulated embedding, made by modulate(); bit-identical to embed(space_to_depth8(dct), qt).
  at::Tensor embed_by_table(const at::Tensor& dct, const at::Tensor& qt);
  at::Tensor forward(const at::Tensor& dct, const at::Tensor& qt) override;
  int64_t out_channels() const override { return 64 * d_; }

  torch::nn::Embedding coef_embed{nullptr}, q_embed{nullptr};
  torch::nn::Linear coef_linear{nullptr};
  TwoLayerMlp q_mlp{nullptr}, table_mlp{nullptr};
  at::Tensor freq_embed;
  torch::nn::ModuleList blocks{nullptr};

 private:
  // The window- and frequency-dependent terms (q-table gamma/beta, frequency and table bias) added to an
  // embedding e of shape (B,X,Y,64,d).
  at::Tensor modulate(at::Tensor e, const at::Tensor& qt);
  int64_t d_;
  bool gamma_, beta_;
};

// A1: DTD's Frequency Perception Head (docs/design.md §2.7) with output width 64*d (256 for d = 4, as
// DTD) so the fusion conv keeps its shape. qt is clamped to [0, 63] for the Embedding(64,16) lookup.
// Names: conv1.{0,1}, conv2.{0,1}, qt_embed, conv0.{0,1}, blocks.{0..2}.* (MBConv).
class Fph : public DctHead {
 public:
  explicit Fph(const ModelConfig& cfg);
  at::Tensor forward(const at::Tensor& dct, const at::Tensor& qt) override;
  int64_t out_channels() const override { return out_; }

 private:
  int64_t out_;
  torch::nn::Sequential conv1{nullptr}, conv2{nullptr}, conv0{nullptr};
  torch::nn::Embedding qt_embed{nullptr};
  torch::nn::ModuleList blocks{nullptr};
};

}  // namespace diffnet::model
