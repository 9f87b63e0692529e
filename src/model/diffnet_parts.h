// The DiffNet submodules (docs/design.md §2, names of §7), shared by the model, the weight tools and the tests.
#pragma once

#include <memory>
#include <vector>

#include "diffnet/model.h"
#include "model/convnext.h"
#include "model/dct_branch.h"
#include "model/decoder.h"
#include "model/discrepancy.h"

namespace diffnet {

struct DiffNetParts {
  model::ConvNeXtV2 rgb{nullptr};               // rgb.*
  std::shared_ptr<model::DctHead> dct;          // dct.*   (null when dct_head = none)
  torch::nn::Conv2d fuse{nullptr};              // fuse.*  (null when dct_head = none)
  std::vector<model::Discrepancy> disc;         // disc.{s}.*
  model::InputFilters disc_input{nullptr};      // disc_input.* (A19 only)
  model::Decoder decoder{nullptr};              // decoder.*
  model::ClsHead cls_head{nullptr};             // cls_head.*
};

}  // namespace diffnet
