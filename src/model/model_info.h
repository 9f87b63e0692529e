// Per-module parameter counts and analytic forward FLOPs (2 x multiply-accumulates over convolutions,
// linear layers and the discrepancy filters/projections; norms, activations, resizes and pooling are ignored).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "diffnet/model.h"

namespace diffnet {

struct ModuleCost {
  std::string name;    // rgb.stem, rgb.stages.0, ..., dct, fuse, disc.0, ..., decoder.refine, decoder.head, cls_head
  int64_t params = 0;  // counted on the built model (parameters only, not buffers)
  double flops = 0;    // analytic forward FLOPs for one image of H x W
};

// Costs grouped by module (in forward order); parameters counted from `model`, FLOPs from its config.
std::vector<ModuleCost> model_costs(DiffNet& model, int64_t H, int64_t W);

// The part of DiffNet::forward's trace (set_trace: rgb.stage1, dct, rgb.stage2, rgb.stage3, rgb.stage4,
// discrepancy, decoder, cls_head) whose time holds the module `name` of model_costs. Error for another name.
std::string part_of_module(const std::string& name);

// Analytic FLOPs of the ConvNeXt-V2 backbone alone (stem + 4 stages) for one H x W image.
double backbone_flops(const std::vector<int64_t>& dims, const std::vector<int64_t>& depths, int64_t H, int64_t W);

// Total number of parameters with names starting with `prefix` ("" = all).
int64_t count_parameters(DiffNet& model, const std::string& prefix = "");

}  // namespace diffnet
