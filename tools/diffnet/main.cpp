// diffnet: document-tampering localisation — one binary, one sub-command per job.
#include <c10/util/Exception.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <exception>
#include <functional>
#include <string>

#include "commands.h"
#include "diffnet/common.h"
#include "diffnet/predict.h"
#include "diffnet/version.h"

namespace diffnet::cli {
std::vector<CommandSpec>& command_registry() {
  static std::vector<CommandSpec> registry;
  return registry;
}
int& exit_code() {
  static int code = 0;
  return code;
}
}  // namespace diffnet::cli

int main(int argc, char** argv) {
  using namespace diffnet;
  // A write past the file-size limit (ulimit -f) fails with EFBIG like a full disk, instead of killing the
  // process: it is reported as an error like any other failed write, and the temporary file is removed.
  std::signal(SIGXFSZ, SIG_IGN);
  CLI::App app{"diffnet: document tampering localisation (DiffNet, C++/LibTorch)", "diffnet"};
  app.require_subcommand(1);
  int threads = 0;
  app.add_option("-t,--threads", threads, "CPU threads (default: $DIFFNET_THREADS or all hardware threads)");
  // The version, and which default weights this binary would use (an installed one: its own prefix's);
  // looked up only when asked for.
  app.set_version_flag("--version", std::function<std::string()>([] {
    return std::string("diffnet ") + version() + "\ndefault weights: " + default_weights_path();
  }));
  auto& registry = cli::command_registry();
  std::sort(registry.begin(), registry.end(),
            [](const cli::CommandSpec& a, const cli::CommandSpec& b) { return a.name < b.name; });
  for (auto& spec : registry) spec.add(app);
  app.parse_complete_callback([&] { init_runtime(threads); });
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int code = app.exit(e);
    return code == 0 ? 0 : 2;
  } catch (const diffnet::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 2;
  } catch (const c10::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what_without_backtrace());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 2;
  }
  return cli::exit_code();
}
