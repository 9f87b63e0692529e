// Devices: --device parsing, bf16 autocast (CPU here; CUDA where built), and, when a CUDA device is there,
// the model on the GPU checked against the CPU (forward, every gradient, an AdamW step, fused vs dense,
// autocast, CUDA-graph replay). The CUDA cases are skipped (not passed) on machines without one.
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "diffnet/common.h"
#include "diffnet/depthwise.h"
#include "diffnet/device.h"
#include "diffnet/embedding.h"
#include "diffnet/gelu.h"
#include "diffnet/grn.h"
#include "diffnet/model.h"
#include "diffnet/train.h"
#include "testing.h"
#include <nlohmann/json.hpp>

using namespace diffnet;

namespace {

struct Inputs {
  at::Tensor rgb, dct, qt, mask;
  Inputs to(const at::Device& d) const { return {rgb.to(d), dct.to(d), qt.to(d), mask.to(d)}; }
};

Inputs make_inputs(int64_t B, int64_t S, uint64_t seed) {
  torch::manual_seed(seed);
  Inputs in{torch::randn({B, 3, S, S}), torch::randint(0, 21, {B, S, S}, at::kLong),
            torch::randint(1, 256, {B, 64}, at::kLong), at::zeros({B, S, S}, at::kLong)};
  in.mask.slice(1, S / 4, S / 2).slice(2, S / 4, S / 2).fill_(1);
  return in;
}

ModelConfig no_drop_atto() {
  ModelConfig c = model_preset("atto");
  c.drop_path_rate = 0.0;  // no randomness in training mode: CPU and GPU compute the same function
  return c;
}

// ||a - b|| / max(||b||, tiny), in float64 on the CPU.
double rel_err(const at::Tensor& a, const at::Tensor& b) {
  at::Tensor x = a.detach().to(at::kCPU, at::kDouble), y = b.detach().to(at::kCPU, at::kDouble);
  return (x - y).norm().item<double>() / std::max(y.norm().item<double>(), 1e-30);
}

// Full-precision CUDA maths for exact comparisons (TF32 convolutions and matmuls differ from the CPU in
// the 4th digit); restores the previous settings.
struct NoTf32 {
  bool conv = at::globalContext().allowTF32CuDNN(), mm = at::globalContext().allowTF32CuBLAS();
  NoTf32() {
    at::globalContext().setAllowTF32CuDNN(false);
    at::globalContext().setAllowTF32CuBLAS(false);
  }
  ~NoTf32() {
    at::globalContext().setAllowTF32CuDNN(conv);
    at::globalContext().setAllowTF32CuBLAS(mm);
  }
};

#define SKIP_WITHOUT_CUDA() \
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device (or a build without -DDIFFNET_CUDA=ON)"

}  // namespace

TEST(Device, ParseNamesAndErrors) {
  EXPECT_TRUE(parse_device("cpu").is_cpu());
  EXPECT_THROW(parse_device("gpu"), Error);
  EXPECT_THROW(parse_device(""), Error);
  if (!cuda_available()) {
    try {
      parse_device("cuda");
      FAIL() << "cuda accepted without CUDA";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("device: "), std::string::npos) << e.what();
    }
  } else {
    EXPECT_TRUE(parse_device("cuda").is_cuda());
    EXPECT_EQ(parse_device("cuda:0").index(), 0);
    EXPECT_THROW(parse_device("cuda:99"), Error);
    EXPECT_THROW(parse_device("cuda:x"), Error);
  }
  EXPECT_EQ(peak_memory_bytes(at::Device(at::kCPU)), 0);
  EXPECT_NE(device_description(at::Device(at::kCPU)).find("cpu"), std::string::npos);
}

// cpu_flags() against the shell's own reading of /proc/cpuinfo; precision names and auto's rule.
TEST(Device, CpuFlagsAndPrecision) {
  const std::vector<std::string> flags = cpu_flags();
  std::set<std::string> want;
  {
    FILE* f = popen("grep -m1 '^flags' /proc/cpuinfo | cut -d: -f2", "r");
    ASSERT_NE(f, nullptr);
    char buf[8192];
    std::string line;
    while (std::fgets(buf, sizeof buf, f)) line += buf;
    pclose(f);
    std::istringstream in(line);
    for (std::string w; in >> w;) want.insert(w);
  }
  EXPECT_EQ(std::set<std::string>(flags.begin(), flags.end()), want);
  EXPECT_FALSE(flags.empty());
  EXPECT_EQ(cpu_has_native_bf16(), want.count("avx512_bf16") + want.count("amx_bf16") > 0);

  const at::Device cpu(at::kCPU), gpu(at::kCUDA, 0);  // a device name only: nothing runs on it
  EXPECT_EQ(resolve_precision("f32", cpu, true), "f32");
  EXPECT_EQ(resolve_precision("bf16", cpu, false), "bf16");
  EXPECT_EQ(resolve_precision("auto", cpu, true), "measure");
  EXPECT_EQ(resolve_precision("auto", cpu, false), "f32");
  EXPECT_EQ(resolve_precision("auto", gpu, true), "f32");
  try {
    resolve_precision("fp16", cpu, true);
    FAIL() << "fp16 accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("precision: "), std::string::npos) << e.what();
  }
}

TEST(Device, AutocastGuardCastsMatmulAndRestores) {
  at::Tensor a = at::randn({8, 8}), b = at::randn({8, 8});
  {
    AutocastGuard g(at::kCPU, true);
    EXPECT_EQ(at::matmul(a, b).scalar_type(), at::kBFloat16);
    {
      AutocastGuard off(at::kCPU, false);  // a disabled guard changes nothing
      EXPECT_EQ(at::matmul(a, b).scalar_type(), at::kBFloat16);
    }
    // Reductions stay in float32 where the inputs are float32.
    EXPECT_EQ(a.sum().scalar_type(), at::kFloat);
  }
  EXPECT_EQ(at::matmul(a, b).scalar_type(), at::kFloat);
}

TEST(Device, AutocastForwardAndLossStayCloseToFloat32) {
  torch::manual_seed(3);
  DiffNet m(no_drop_atto());
  m->eval();
  Inputs in = make_inputs(1, 64, 5);
  torch::NoGradGuard ng;
  DiffNetOutput ref = m->forward(in.rgb, in.dct, in.qt);
  DiffNetOutput amp;
  {
    AutocastGuard g(at::kCPU, true);
    amp = m->forward(in.rgb, in.dct, in.qt);
  }
  EXPECT_EQ(amp.seg_logits.scalar_type(), at::kFloat);
  const double d = testutil::max_abs_diff(at::softmax(ref.seg_logits, 1), at::softmax(amp.seg_logits, 1));
  EXPECT_LT(d, 0.03);
  EXPECT_GT(d, 0.0);  // bf16 really ran
  for (const auto& p : m->parameters()) ASSERT_EQ(p.scalar_type(), at::kFloat);  // master weights untouched
}

TEST(Device, GraphErrorsWithoutGpu) {
  if (cuda_available()) GTEST_SKIP() << "CUDA present: covered by Cuda.GraphReplayMatchesEager";
  CudaGraph g;
  EXPECT_THROW(g.capture([] {}), Error);
  EXPECT_THROW(g.replay(), Error);
}

// Names of the timed events of one category ("cpu_op", "kernel") in a Chrome trace file. A Kineto trace
// is {"traceEvents": [...]} with a "cat" on every event; the legacy profiler's is a plain array of CPU
// operator spans with no "cat" (cpu_op).
static std::vector<std::string> trace_names(const std::string& path, const std::string& category) {
  std::ifstream f(path);
  const nlohmann::json j = nlohmann::json::parse(f);
  const bool legacy = j.is_array();
  std::vector<std::string> names;
  for (const auto& e : legacy ? j : j.at("traceEvents"))
    if (e.value("cat", legacy ? "cpu_op" : "") == category && e.value("ph", "") == "X" && e.contains("dur"))
      names.push_back(e.value("name", ""));
  return names;
}

static bool contains(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

TEST(Device, ProfileTraceOnCpu) {
  // Every LibTorch can profile the CPU: with Kineto its trace, without (Debian's 1.13) the legacy
  // profiler's. Either way the operators that ran are in it as timed spans.
  const std::string path = testutil::temp_dir("profile") + "/trace.json";
  const at::Tensor a = torch::randn({64, 64});
  write_profile_trace(path, false, [&] {
    (void)at::mm(a, a).relu();
  });
  const auto ops = trace_names(path, "cpu_op");
  EXPECT_TRUE(contains(ops, "aten::mm"));
  EXPECT_TRUE(contains(ops, "aten::relu"));
  EXPECT_THROW(write_profile_trace("/nonexistent-dir/t.json", false, [] {}), Error);
}

TEST(Device, ProfileTraceNamesOurOps) {
  // Our CPU kernels run outside ATen's dispatcher at inference; each records its own name, so a profile
  // attributes their time (before, a quarter of an `atto` forward was in no operator of the trace).
  torch::manual_seed(3);
  torch::NoGradGuard no_grad;
  const int64_t C = 8;
  const at::Tensor x = torch::randn({1, C, 12, 12}).contiguous(at::MemoryFormat::ChannelsLast);
  const at::Tensor w = torch::randn({C, 1, 7, 7}), b = torch::randn({C}), g = torch::ones({C}), be = torch::zeros({C});
  const at::Tensor h = torch::randn({1, 12, 12, C});
  const std::string path = testutil::temp_dir("profile-ours") + "/trace.json";
  write_profile_trace(path, false, [&] {
    (void)diffnet::ops::depthwise_layer_norm(x, w, b, g, be, 1e-6);
    (void)diffnet::ops::depthwise_conv(x, w, b);
    (void)diffnet::ops::gelu_grn(h, g, be);
    (void)diffnet::ops::grn(h, g, be);
    (void)diffnet::ops::gelu(h);
    (void)diffnet::ops::embedding(torch::randn({5, 3}), torch::tensor({0, 4, 2}, at::kLong));
  });
  const auto ops = trace_names(path, "cpu_op");
  for (const char* name : {"diffnet::depthwise_layer_norm", "diffnet::depthwise_conv", "diffnet::gelu_grn",
                           "diffnet::grn", "diffnet::gelu", "diffnet::embedding"})
    EXPECT_TRUE(contains(ops, name)) << name;
}

TEST(Cuda, ProfileTraceHasKernels) {
  SKIP_WITHOUT_CUDA();
  const std::string path = testutil::temp_dir("profile-cuda") + "/trace.json";
  const at::Tensor a = torch::randn({256, 256}).to(parse_device("cuda"));
  write_profile_trace(path, true, [&] {
    (void)at::mm(a, a).relu();
    synchronize(a.device());
  });
  EXPECT_TRUE(contains(trace_names(path, "cpu_op"), "aten::mm"));
  EXPECT_GE(trace_names(path, "kernel").size(), 2u);  // the matmul's and the relu's kernels
}

TEST(Cuda, ForwardMatchesCpu) {
  SKIP_WITHOUT_CUDA();
  NoTf32 exact;
  const at::Device cuda = parse_device("cuda");
  torch::manual_seed(21);
  DiffNet m(no_drop_atto());
  m->eval();
  Inputs in = make_inputs(2, 96, 22);
  torch::NoGradGuard ng;
  DiffNetOutput c = m->forward(in.rgb, in.dct, in.qt);
  m->to(cuda);
  Inputs g = in.to(cuda);
  DiffNetOutput o = m->forward(g.rgb, g.dct, g.qt);
  ASSERT_TRUE(o.seg_logits.is_cuda());
  EXPECT_LT(rel_err(o.seg_logits, c.seg_logits), 1e-4);
  EXPECT_LT(rel_err(o.cls_logits, c.cls_logits), 1e-4);
  // Fused and dense discrepancy on the GPU agree with each other too.
  m->set_disc_impl("dense");
  EXPECT_LT(rel_err(m->forward(g.rgb, g.dct, g.qt).seg_logits, c.seg_logits), 1e-4);
}

TEST(Cuda, GradientsAndAdamWStepMatchCpu) {
  SKIP_WITHOUT_CUDA();
  NoTf32 exact;
  const at::Device cuda = parse_device("cuda");
  torch::manual_seed(31);
  DiffNet a(no_drop_atto()), b(no_drop_atto());
  load_model_state(b, model_state(a));
  b->to(cuda);
  a->train();
  b->train();
  TrainConfig tc;
  Inputs in = make_inputs(2, 64, 32);
  Inputs g = in.to(cuda);
  LossParts la = diffnet_loss(a->forward(in.rgb, in.dct, in.qt), in.mask, tc);
  LossParts lb = diffnet_loss(b->forward(g.rgb, g.dct, g.qt), g.mask, tc);
  EXPECT_NEAR(lb.total.item<double>(), la.total.item<double>(), 1e-4 * std::abs(la.total.item<double>()));
  la.total.backward();
  lb.total.backward();
  auto pa = a->named_parameters(), pb = b->named_parameters();
  double max_norm = 0;
  for (const auto& item : pa)
    if (item.value().grad().defined()) max_norm = std::max(max_norm, item.value().grad().norm().item<double>());
  std::vector<std::string> signal;  // gradients well above rounding noise
  for (const auto& item : pa) {
    const at::Tensor& ga = item.value().grad();
    const at::Tensor& gb = pb[item.key()].grad();
    ASSERT_EQ(ga.defined(), gb.defined()) << item.key();
    if (!ga.defined()) continue;
    ASSERT_TRUE(gb.is_cuda()) << item.key();
    // Some gradients are zero up to rounding (e.g. the bias before a zero-sum filter, which removes
    // constants): their CPU and GPU values are both noise and cannot be compared relatively.
    if (ga.norm().item<double>() < 1e-6 * max_norm) continue;
    EXPECT_LT(rel_err(gb, ga), 2e-3) << item.key();
    signal.push_back(item.key());
  }
  EXPECT_GT(signal.size(), 50u);
  // AdamW on the GPU against the CPU from identical gradients (Adam's first step is about lr * sign(g),
  // so gradients that differ by rounding near zero would flip single elements).
  for (const auto& item : pa)
    if (item.value().grad().defined()) pb[item.key()].mutable_grad() = item.value().grad().to(cuda);
  AdamW oa(optimizer_params(a, tc), 0.9, 0.999, 1e-8), ob(optimizer_params(b, tc), 0.9, 0.999, 1e-8);
  for (int step = 0; step < 2; ++step) {
    oa.step(1e-3);
    ob.step(1e-3);
  }
  for (const auto& item : pa) EXPECT_LT(testutil::max_abs_diff(pb[item.key()], item.value()), 1e-6) << item.key();
}

TEST(Cuda, AutocastIsCloseToFloat32) {
  SKIP_WITHOUT_CUDA();
  const at::Device cuda = parse_device("cuda");
  torch::manual_seed(41);
  DiffNet m(no_drop_atto());
  m->to(cuda);
  m->eval();
  Inputs g = make_inputs(1, 128, 42).to(cuda);
  torch::NoGradGuard ng;
  at::Tensor ref = m->forward(g.rgb, g.dct, g.qt).seg_logits;
  at::Tensor amp;
  {
    AutocastGuard guard(at::kCUDA, true);
    amp = m->forward(g.rgb, g.dct, g.qt).seg_logits;
  }
  const double d = testutil::max_abs_diff(at::softmax(ref, 1), at::softmax(amp, 1));
  EXPECT_LT(d, 0.03);
  EXPECT_GT(d, 0.0);
}

TEST(Cuda, GraphReplayMatchesEager) {
  SKIP_WITHOUT_CUDA();
  const at::Device cuda = parse_device("cuda");
  torch::manual_seed(51);
  DiffNet m(model_preset("atto"));
  m->to(cuda);
  m->eval();
  Inputs g = make_inputs(1, 128, 52).to(cuda);
  torch::NoGradGuard ng;
  at::Tensor eager = m->forward(g.rgb, g.dct, g.qt).seg_logits.clone();
  at::Tensor out;
  CudaGraph graph;
  graph.capture([&] {
    torch::NoGradGuard inner;
    out = m->forward(g.rgb, g.dct, g.qt).seg_logits;
  });
  // New input values in the captured input tensors: the replay must see them.
  Inputs g2 = make_inputs(1, 128, 53).to(cuda);
  g.rgb.copy_(g2.rgb);
  graph.replay();
  synchronize(cuda);
  at::Tensor eager2 = m->forward(g2.rgb, g.dct, g.qt).seg_logits;
  EXPECT_LT(testutil::max_abs_diff(out, eager2), 1e-4);
  EXPECT_GT(testutil::max_abs_diff(out, eager), 1e-3);  // it is not the first input's output
}
