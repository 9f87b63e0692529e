// The sub-commands of the `diffnet` CLI and what they share.
#pragma once

#include <CLI/CLI.hpp>

#include "diffnet/predict.h"

namespace diffnet::cli {

// Each add_*_command(app) creates its sub-command on app (cmd_<name>.cpp), binds its options and sets its
// callback; main() calls them all, in one list. A callback throws diffnet::Error for user-facing failures
// (printed as one line, exit code 2).
void add_bench_command(CLI::App& app);
void add_calibrate_command(CLI::App& app);
void add_convert_command(CLI::App& app);
void add_eval_command(CLI::App& app);
void add_info_command(CLI::App& app);
void add_inspect_command(CLI::App& app);
void add_predict_command(CLI::App& app);
void add_score_command(CLI::App& app);
void add_serve_command(CLI::App& app);
void add_synth_command(CLI::App& app);
void add_train_command(CLI::App& app);

// Help of --precision, the same for predict, eval and serve.
inline constexpr const char* kPrecisionHelp =
    "f32 | bf16 | auto (on a CPU with native bf16, whichever a start-up timing finds faster; else f32)";

// Help of --refine, the same for predict, eval, serve and calibrate.
inline constexpr const char* kRefineHelp =
    "Coarse-to-fine: overlapping windows run only where the first, covering pass reaches this p (0: all run; "
    "default: the pixel threshold)";

// Help of --refine-core, the same for predict, eval, serve and calibrate.
inline constexpr const char* kRefineCoreHelp =
    "Coarse-to-fine: a window runs only when the first pass reaches the level where the window's own blend "
    "weight is at least this (0: anywhere inside it)";

// --downscale, the same for predict, eval, serve and calibrate: binds `target` (PredictOptions::downscale).
inline CLI::Option* add_downscale_option(CLI::App* sub, int64_t& target) {
  return sub
      ->add_option_function<std::string>(
          "--downscale", [&target](const std::string& v) { target = parse_downscale(v); },
          "auto | 1..8: run the model on the page box-averaged by this factor, map, regions and overlay at the "
          "page's size (the model is trained at 150-300 dpi); auto: 4 for a page whose shorter side reaches "
          "3,500 px (A4 at 600 dpi), 8 from 7,500 px, else 1")
      ->default_str("auto");
}

// Help of --batch, the same for predict, eval, serve and calibrate.
inline constexpr const char* kBatchHelp =
    "Windows per forward pass (0: 8 x 256^2 / R^2 of them, i.e. 8 at R = 256, 2 at R = 512)";

// Exit code the running sub-command wants (commands may set it, e.g. 1 for "tampered found" modes).
int& exit_code();

}  // namespace diffnet::cli
