// Per-module parameter counts and analytic FLOPs.
#include "model/model_info.h"

#include <map>

#include "diffnet/common.h"
#include "model/line_context.h"

namespace diffnet {
namespace {

// 2 * MACs of a conv producing `out_px` output pixels.
double conv_flops(int64_t cin, int64_t cout, int64_t k, int64_t groups, double out_px) {
  return 2.0 * static_cast<double>(cout) * static_cast<double>(cin / groups) * static_cast<double>(k * k) * out_px;
}

double block_flops(int64_t c, double px) {
  return conv_flops(c, c, 7, c, px) + 2.0 * 2.0 * 4.0 * static_cast<double>(c) * static_cast<double>(c) * px;
}

double mbconv_flops(int64_t c, double px) {
  const int64_t e = 6 * c, s = std::max<int64_t>(1, c / 4);
  return conv_flops(c, e, 1, 1, px) + conv_flops(e, e, 3, e, px) + conv_flops(e, s, 1, 1, 1) +
         conv_flops(s, e, 1, 1, 1) + conv_flops(e, c, 1, 1, px);
}

// Filter bank on C channels at `px` pixels: M depthwise KxK filters + per-channel projection.
double bank_flops(const ModelConfig& c, int64_t channels, double px) {
  const double cm = static_cast<double>(channels * c.num_filters);
  return 2.0 * cm * static_cast<double>(c.kernel_size * c.kernel_size) * px + 2.0 * cm * px;
}

}  // namespace

double backbone_flops(const std::vector<int64_t>& dims, const std::vector<int64_t>& depths, int64_t H, int64_t W) {
  double total = conv_flops(3, dims[0], 4, 1, static_cast<double>((H / 4) * (W / 4)));
  for (int s = 0; s < 4; ++s) {
    const double px = static_cast<double>((H >> (s + 2)) * (W >> (s + 2)));
    if (s > 0) total += conv_flops(dims[s - 1], dims[s], 2, 1, px);
    total += static_cast<double>(depths[s]) * block_flops(dims[s], px);
  }
  return total;
}

int64_t count_parameters(DiffNet& model, const std::string& prefix) {
  int64_t n = 0;
  for (const auto& kv : model->named_parameters(true))
    if (kv.key().compare(0, prefix.size(), prefix) == 0) n += kv.value().numel();
  return n;
}

std::vector<ModuleCost> model_costs(DiffNet& model, int64_t H, int64_t W) {
  const ModelConfig& c = model->config();
  const auto& dims = c.dims;
  auto px = [&](int s) { return static_cast<double>((H >> (s + 2)) * (W >> (s + 2))); };  // stage s: stride 4*2^s
  std::vector<ModuleCost> out;
  auto add = [&](const std::string& name, const std::string& prefix, double flops) {
    out.push_back({name, count_parameters(model, prefix), flops});
  };
  add("rgb.stem", "rgb.stem.", conv_flops(3, dims[0], 4, 1, px(0)));
  for (int s = 0; s < 4; ++s) {
    double f = static_cast<double>(c.depths[s]) * block_flops(dims[s], px(s));
    if (s > 0) f += conv_flops(dims[s - 1], dims[s], 2, 1, px(s));
    add("rgb.stages." + std::to_string(s), "rgb.stages." + std::to_string(s) + ".", f);
  }
  if (c.disc_on_input) {
    const double full = static_cast<double>(H * W);
    add("disc_input", "disc_input.", bank_flops(c, 3, full) + conv_flops(3, dims[0], 4, 1, px(0)));
  }
  if (c.dct_head != "none") {
    const int64_t cd = 64 * c.dct_dim;
    double f = 0;
    if (c.dct_head == "embed") {
      const double d = static_cast<double>(c.dct_dim);
      f += 2.0 * 64.0 * (d * 2 * d + 2 * d * 2 * d) + 2.0 * (64.0 * 64.0 + 64.0 * d);  // q_mlp, table_mlp
      if (c.dct_linear) f += 2.0 * d * static_cast<double>(H * W);
      f += static_cast<double>(c.dct_depth) * block_flops(cd, px(1));
    } else {  // fph
      const double full = static_cast<double>(H * W);
      f += conv_flops(21, 64, 3, 1, full) + conv_flops(64, 16, 1, 1, full) + conv_flops(35, cd, 8, 1, px(1));
      f += 3.0 * mbconv_flops(cd, px(1));
    }
    add("dct", "dct.", f);
    add("fuse", "fuse.", conv_flops(dims[1] + cd, dims[1], 1, 1, px(1)));
  }
  for (int s = 0; s < 4; ++s) {
    double f = conv_flops(dims[s], c.disc_dim, 1, 1, px(s));
    if (!c.disc_on_input) f += bank_flops(c, c.disc_dim, px(s));
    add("disc." + std::to_string(s), "disc." + std::to_string(s) + ".", f);
  }
  add("decoder.refine", "decoder.refine.", static_cast<double>(c.refine_depth) * block_flops(c.disc_dim, px(1)));
  if (c.line_context) {  // attn 1x1 to one channel, the weighted row sums and the broadcast add, two row convs
    const double D = static_cast<double>(c.disc_dim), rows = static_cast<double>(H >> 2);
    const double k = static_cast<double>(model::LineContextImpl::kRowKernel);
    add("decoder.line", "decoder.line.", conv_flops(c.disc_dim, 1, 1, 1, px(0)) + 3.0 * D * px(0) +
                                             2.0 * (2.0 * D + 1.0) * D * k * rows + 2.0 * D * D * rows);
  }
  add("decoder.head", "decoder.head.",
      conv_flops(c.disc_dim, c.disc_dim, 3, 1, px(0)) + conv_flops(c.disc_dim, 2, 1, 1, px(0)));
  add("cls_head", "cls_head.", 2.0 * ((2.0 * static_cast<double>(c.disc_dim) + 3.0) * 512.0 + 512.0 * 2.0));
  return out;
}

std::string part_of_module(const std::string& name) {
  auto starts = [&](const char* prefix) { return name.rfind(prefix, 0) == 0; };
  if (name == "rgb.stem" || name == "rgb.stages.0" || name == "disc_input") return "rgb.stage1";
  if (name == "dct") return "dct";
  if (name == "fuse" || name == "rgb.stages.1") return "rgb.stage2";  // the fusion conv runs at stage 2's input
  if (name == "rgb.stages.2") return "rgb.stage3";
  if (name == "rgb.stages.3") return "rgb.stage4";
  if (starts("disc.")) return "discrepancy";
  if (starts("decoder.")) return "decoder";
  if (name == "cls_head") return "cls_head";
  throw Error("part_of_module", "no traced part holds module '" + name + "'");
}

}  // namespace diffnet
