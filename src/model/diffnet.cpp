// DiffNet (docs/design.md §2): RGB ConvNeXt-V2 + DCT branch with early fusion, discrepancy at every stage,
// FPN + refinement decoder, pixel and image heads.
#include <string>

#include "diffnet/common.h"
#include "model/diffnet_parts.h"

namespace diffnet {

at::Tensor normalize_rgb(const at::Tensor& rgb_u8) {
  at::Tensor x = rgb_u8;
  if (x.dim() == 3) x = x.unsqueeze(0);
  if (x.dim() != 4 || x.size(3) != 3)
    throw Error("normalize_rgb", "expected (B,H,W,3) or (H,W,3) RGB, got " + c10::str(rgb_u8.sizes()));
  const auto opts = at::TensorOptions().dtype(at::kFloat).device(x.device());
  at::Tensor mean = at::tensor(at::ArrayRef<double>(kRgbMean, 3), opts).mul(255.0);
  at::Tensor inv_std = at::tensor(at::ArrayRef<double>(kRgbStd, 3), opts).mul(255.0).reciprocal();
  // NHWC contiguous -> permuted view = NCHW in channels_last memory.
  return ((x.to(at::kFloat) - mean) * inv_std).contiguous().permute({0, 3, 1, 2});
}

DiffNetImpl::DiffNetImpl(const ModelConfig& cfg) : cfg_(cfg), parts_(std::make_shared<DiffNetParts>()) {
  cfg_.validate();
  auto& p = *parts_;
  const auto& dims = cfg_.dims;
  p.rgb = register_module("rgb", model::ConvNeXtV2(dims, cfg_.depths, cfg_.drop_path_rate));
  model::init_conv_linear(*p.rgb);
  if (cfg_.disc_on_input) p.disc_input = register_module("disc_input", model::InputFilters(cfg_, dims[0]));
  if (cfg_.dct_head != "none") {
    if (cfg_.dct_head == "embed") p.dct = std::make_shared<model::DctEmbed>(cfg_);
    else p.dct = std::make_shared<model::Fph>(cfg_);
    register_module("dct", p.dct);
    const int64_t c2 = dims[1], cd = p.dct->out_channels();
    p.fuse = register_module("fuse", torch::nn::Conv2d(torch::nn::Conv2dOptions(c2 + cd, c2, 1)));
    // [identity | fuse_dct_init]: the RGB half passes x through unchanged; the DCT half starts at
    // trunc_normal(std = fuse_dct_init) (all zeros when 0).
    torch::NoGradGuard no_grad;
    auto w = p.fuse->weight.view({c2, c2 + cd});
    w.zero_();
    w.narrow(1, 0, c2).copy_(torch::eye(c2));
    if (cfg_.fuse_dct_init > 0) {
      at::Tensor dct_half = torch::empty({c2, cd});
      model::trunc_normal_(dct_half, cfg_.fuse_dct_init);
      w.narrow(1, c2, cd).copy_(dct_half);
    }
    p.fuse->bias.zero_();
  }
  torch::nn::ModuleList disc;
  for (int s = 0; s < 4; ++s) {
    p.disc.push_back(model::Discrepancy(cfg_, dims[s]));
    disc->push_back(p.disc.back());
  }
  register_module("disc", disc);
  p.decoder = register_module("decoder", model::Decoder(cfg_));
  p.cls_head = register_module("cls_head", model::ClsHead(cfg_.disc_dim));
}

void DiffNetImpl::set_disc_impl(const std::string& impl) {
  if (impl != "dense" && impl != "fused") throw Error("disc_impl", "unknown implementation '" + impl + "' (dense|fused)");
  cfg_.disc_impl = impl;
  for (auto& d : parts_->disc) d->set_impl(impl);
  if (parts_->disc_input) parts_->disc_input->set_impl(impl);
}

namespace {

at::Tensor as_index(const at::Tensor& t, const char* what) {
  if (at::isFloatingType(t.scalar_type()) || t.scalar_type() == at::kBool)
    throw Error("DiffNet", std::string(what) + " must be an integer tensor, got " + c10::str(t.scalar_type()));
  return t.to(at::kLong);
}

}  // namespace

DiffNetOutput DiffNetImpl::forward(const at::Tensor& rgb, const at::Tensor& dct_in, const at::Tensor& qt_in) {
  auto& p = *parts_;
  if (!rgb.defined() || rgb.dim() != 4 || rgb.size(1) != 3)
    throw Error("DiffNet", "rgb must be (B,3,H,W), got " + (rgb.defined() ? c10::str(rgb.sizes()) : "undefined"));
  const int64_t B = rgb.size(0), H = rgb.size(2), W = rgb.size(3);
  if (H <= 0 || W <= 0 || H % 32 != 0 || W % 32 != 0)
    throw Error("DiffNet", "input size " + std::to_string(H) + "x" + std::to_string(W) +
                               " is not a positive multiple of 32 (pad the input)");
  // The model's dtype (float32, or bfloat16 after model->to(at::kBFloat16) for faster inference).
  const at::ScalarType dtype = p.rgb->stem->conv->weight.scalar_type();
  at::Tensor x = rgb.to(dtype).contiguous(at::MemoryFormat::ChannelsLast);
  at::Tensor dct, qt;
  if (p.dct) {
    if (!dct_in.defined() || dct_in.dim() != 3 || dct_in.size(0) != B || dct_in.size(1) != H || dct_in.size(2) != W)
      throw Error("DiffNet", "dct must be (B,H,W) = (" + std::to_string(B) + "," + std::to_string(H) + "," +
                                 std::to_string(W) + "), got " + (dct_in.defined() ? c10::str(dct_in.sizes()) : "undefined"));
    if (!qt_in.defined() || qt_in.dim() != 2 || qt_in.size(0) != B || qt_in.size(1) != 64)
      throw Error("DiffNet", "qt must be (B,64), got " + (qt_in.defined() ? c10::str(qt_in.sizes()) : "undefined"));
    dct = as_index(dct_in, "dct");
    qt = as_index(qt_in, "qt");
  }
  // Value ranges are checked on the CPU only: on a GPU the check would stall the host (and break CUDA
  // graph capture); GPU callers move inputs that were built, and checked, on the CPU.
  if (p.dct && dct.is_cpu() && qt.is_cpu()) {
    auto dmm = at::aminmax(dct);
    if (std::get<0>(dmm).item<int64_t>() < 0 || std::get<1>(dmm).item<int64_t>() > 20)
      throw Error("DiffNet", "dct values must be in [0, 20]");
    auto qmm = at::aminmax(qt);
    if (std::get<0>(qmm).item<int64_t>() < 1 || std::get<1>(qmm).item<int64_t>() > 255)
      throw Error("DiffNet", "qt values must be in [1, 255]");
  }

  auto& st = p.rgb->stages;
  auto mark = [this](const char* part) {
    if (trace_) trace_(part);
  };
  mark("start");
  x = p.rgb->stem->forward(x);
  if (p.disc_input) x = x + p.disc_input->forward(rgb.to(dtype));
  at::Tensor f1 = st[0]->forward_blocks(x);
  mark("rgb.stage1");
  // The DCT branch before stage 2's downsampling, so that each traced part is whole modules
  // (part_of_module in model/model_info.h); the two are independent.
  at::Tensor fd;
  if (p.dct) {
    fd = p.dct->forward(dct, qt);
    mark("dct");
  }
  x = st[1]->forward_downsample(f1);
  if (p.dct)
    x = model::pointwise_conv(at::cat({x, fd}, 1).contiguous(at::MemoryFormat::ChannelsLast), p.fuse->weight, p.fuse->bias);
  at::Tensor f2 = st[1]->forward_blocks(x);
  mark("rgb.stage2");
  at::Tensor f3 = st[2]->forward(f2);
  mark("rgb.stage3");
  at::Tensor f4 = st[3]->forward(f3);
  mark("rgb.stage4");

  std::vector<at::Tensor> t;
  const at::Tensor* feats[4] = {&f1, &f2, &f3, &f4};
  for (int s = 0; s < 4; ++s) t.push_back(p.disc[s]->forward(*feats[s]));
  mark("discrepancy");
  model::DecoderOutput dec = p.decoder->forward(t, H, W);
  mark("decoder");
  at::Tensor cls = p.cls_head->forward(dec.p2, dec.seg_logits);
  mark("cls_head");
  return {dec.seg_logits.to(at::kFloat), cls.to(at::kFloat)};
}

}  // namespace diffnet
