// Training checkpoints: weights + AdamW state + RNG + position in one verified safetensors file.
#include <ATen/CPUGeneratorImpl.h>

#include <cstdio>
#include <cstring>
#include <mutex>

#include "diffnet/common.h"
#include "diffnet/safetensors.h"
#include "diffnet/train.h"

namespace diffnet {
namespace {

constexpr const char* kFormat = "diffnet-checkpoint";
constexpr const char* kVersion = "1";

// 64-bit hash over names, dtypes, shapes and bytes of every tensor (sorted by name): catches bit rot
// and partial overwrites that keep the safetensors structure valid.
uint64_t mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9E3779B97F4A7C15ull + (h << 6) + (h >> 2);
  h *= 0xFF51AFD7ED558CCDull;
  return h ^ (h >> 33);
}

uint64_t hash_bytes(uint64_t h, const uint8_t* p, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t w;
    std::memcpy(&w, p + i, 8);
    h = mix(h, w);
  }
  uint64_t tail = 0;
  if (n > i) std::memcpy(&tail, p + i, n - i);
  return mix(mix(h, tail), n);
}

std::string checksum(const std::map<std::string, at::Tensor>& tensors) {
  uint64_t h = 0x6469666E6574ull;
  for (const auto& [name, t0] : tensors) {
    at::Tensor t = t0.contiguous().cpu();
    h = hash_bytes(h, reinterpret_cast<const uint8_t*>(name.data()), name.size());
    h = mix(h, static_cast<uint64_t>(t.scalar_type()));
    for (int64_t d : t.sizes()) h = mix(h, static_cast<uint64_t>(d));
    h = hash_bytes(h, static_cast<const uint8_t*>(t.data_ptr()), t.numel() * t.element_size());
  }
  char buf[20];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

}  // namespace

void save_checkpoint(const std::string& path, DiffNet& model, const AdamW& opt, const TrainState& state) {
  std::map<std::string, at::Tensor> tensors;
  for (const auto& [name, t] : model_state(model)) tensors["model." + name] = t.detach().to(at::kFloat).contiguous();
  for (const auto& [name, t] : opt.state()) tensors["optim." + name] = t.detach().contiguous();
  {
    auto gen = at::detail::getDefaultCPUGenerator();
    std::lock_guard<std::mutex> lock(gen.mutex());
    tensors["rng.cpu"] = gen.get_state();
  }
  std::map<std::string, std::string> meta;
  meta["format"] = kFormat;
  meta["version"] = kVersion;
  meta["step"] = std::to_string(state.step);
  meta["data_position"] = std::to_string(state.data_position);
  meta["world_size"] = std::to_string(state.world);
  if (!state.linear_backend.empty()) meta["linear_backend"] = state.linear_backend;
  if (!state.conv_weight_grad.empty()) meta["conv_weight_grad"] = state.conv_weight_grad;
  if (state.export_fp16) meta["export_fp16"] = "1";
  meta["config"] = state.config.dump();
  meta["checksum"] = checksum(tensors);
  save_safetensors(path, tensors, meta);
}

CheckpointData read_checkpoint(const std::string& path) {
  SafeTensors st = load_safetensors(path);
  auto meta = [&](const std::string& key) -> const std::string& {
    auto it = st.metadata.find(key);
    if (it == st.metadata.end()) throw Error(path, "not a diffnet checkpoint (metadata '" + key + "' missing)");
    return it->second;
  };
  if (meta("format") != kFormat) throw Error(path, "not a diffnet checkpoint (format '" + meta("format") + "')");
  if (meta("version") != kVersion) throw Error(path, "unsupported checkpoint version " + meta("version"));
  if (checksum(st.tensors) != meta("checksum")) throw Error(path, "checksum mismatch: the checkpoint is corrupt");
  CheckpointData ck;
  try {
    ck.state.step = std::stoll(meta("step"));
    ck.state.data_position = std::stoll(meta("data_position"));
    if (auto w = st.metadata.find("world_size"); w != st.metadata.end()) ck.state.world = std::stoll(w->second);
    if (auto l = st.metadata.find("linear_backend"); l != st.metadata.end()) ck.state.linear_backend = l->second;
    if (auto c = st.metadata.find("conv_weight_grad"); c != st.metadata.end()) ck.state.conv_weight_grad = c->second;
    ck.state.export_fp16 = st.metadata.count("export_fp16") > 0;
    ck.state.config = nlohmann::json::parse(meta("config"));
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    throw Error(path, std::string("bad checkpoint metadata: ") + e.what());
  }
  for (auto& [name, t] : st.tensors) {
    if (name.rfind("model.", 0) == 0)
      ck.model[name.substr(6)] = t;
    else if (name.rfind("optim.", 0) == 0)
      ck.optim[name.substr(6)] = t;
    else if (name == "rng.cpu")
      ck.rng_state = t;
    else
      throw Error(path, "unexpected tensor " + name);
  }
  if (!ck.rng_state.defined()) throw Error(path, "checkpoint has no rng.cpu state");
  return ck;
}

void restore_checkpoint(const CheckpointData& ck, DiffNet& model, AdamW& opt) {
  load_model_state(model, ck.model);
  opt.load_state(ck.optim);
  auto gen = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(gen.mutex());
  gen.set_state(ck.rng_state);
}

}  // namespace diffnet
