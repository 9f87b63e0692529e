// Sub-command registry of the `diffnet` CLI: each cmd_*.cpp registers itself with a static Registrar.
#pragma once

#include <CLI/CLI.hpp>

#include <functional>
#include <string>
#include <vector>

namespace diffnet::cli {

// add(app) creates the sub-command on app, binds its options and sets its callback. The callback
// throws diffnet::Error for user-facing failures (printed as one line, exit code 2).
struct CommandSpec {
  std::string name;
  std::function<void(CLI::App&)> add;
};

std::vector<CommandSpec>& command_registry();

struct Registrar {
  Registrar(std::string name, std::function<void(CLI::App&)> add) {
    command_registry().push_back({std::move(name), std::move(add)});
  }
};

// Help of --precision, the same for predict, eval and serve.
inline constexpr const char* kPrecisionHelp =
    "f32 | bf16 | auto (on a CPU with native bf16, whichever a start-up timing finds faster; else f32)";

// Exit code the running sub-command wants (commands may set it, e.g. 1 for "tampered found" modes).
int& exit_code();

}  // namespace diffnet::cli
