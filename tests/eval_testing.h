// Helpers shared by the eval and serve tests: a small random-init model file and document-like images.
#pragma once

#include <torch/torch.h>

#include <string>

#include "diffnet/model.h"
#include "testing.h"

namespace diffnet::testutil {

// A random-init atto model (the DCT half of the fusion non-zero so the DCT input matters), saved once
// per process with metadata train_size 64 so that predict uses 64 x 64 windows.
struct TinyModel {
  std::string path;
  DiffNet model{nullptr};
  TinyModel() {
    torch::manual_seed(3);
    ModelConfig cfg = model_preset("atto");
    cfg.fuse_dct_init = 0.05;
    model = DiffNet(cfg);
    model->eval();
    path = temp_dir("tiny-model") + "/tiny.safetensors";
    save_model(model, path, at::kFloat, {{"train_size", "64"}});
  }
};
inline TinyModel& tiny_model() {
  static TinyModel t;
  return t;
}

// Light page (values 200..255) with dark horizontal strokes every 12 rows; seeded. Black and white by
// black_and_white_warning's rule (no grey between the strokes and the paper).
inline at::Tensor test_page(int64_t H, int64_t W, int seed) {
  at::Generator gen = at::detail::createCPUGenerator(uint64_t(seed));
  at::Tensor img = at::randint(200, 256, {H, W, 3}, gen, at::TensorOptions().dtype(at::kByte));
  for (int64_t y = 4; y + 3 < H; y += 12) img.slice(0, y, y + 3).slice(1, 3, W - 3).fill_(20);
  return img;
}

}  // namespace diffnet::testutil
