// diffnet: document-tampering localisation — one binary, one sub-command per job.
#include <c10/util/Exception.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <exception>
#include <functional>
#include <string>
#include <vector>

#include "commands.h"
#include "diffnet/common.h"
#include "diffnet/cpu_isa.h"
#include "diffnet/predict.h"
#include "diffnet/version.h"

namespace diffnet::cli {
int& exit_code() {
  static int code = 0;
  return code;
}

namespace {

// The library's errors name the field of an option ("max_queue: must be >= 0", "request_timeout_s: ...");
// on the command line that option is a flag, so the message names the running command's flag of the same
// name (underscores as dashes, a unit suffix "_s" dropped) where there is one, else stays as it is.
std::string with_flag_name(const CLI::App& app, const std::string& message) {
  const size_t colon = message.find(": ");
  if (colon == 0 || colon == std::string::npos) return message;
  std::string dashed = message.substr(0, colon);
  if (dashed.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789_") != std::string::npos) return message;
  std::replace(dashed.begin(), dashed.end(), '_', '-');
  std::vector<std::string> flags = {"--" + dashed};
  if (dashed.size() > 2 && dashed.compare(dashed.size() - 2, 2, "-s") == 0)
    flags.push_back("--" + dashed.substr(0, dashed.size() - 2));
  std::vector<const CLI::App*> scopes = {&app};
  for (const CLI::App* sub : app.get_subcommands()) scopes.push_back(sub);
  for (const CLI::App* scope : scopes)
    for (const std::string& flag : flags)
      if (scope->get_option_no_throw(flag) != nullptr) return flag + message.substr(colon);
  return message;
}

}  // namespace
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
  // The version, which default weights this binary would use (an installed one: its own prefix's) and the
  // vector level its kernels run with here (include/diffnet/cpu_isa.h); looked up only when asked for.
  app.set_version_flag("--version", std::function<std::string()>([] {
    std::string kernels;
    try {
      kernels = cpu_isa_name(cpu_isa());
    } catch (const Error& e) {
      kernels = e.what();
    }
    return std::string("diffnet ") + version() + "\ndefault weights: " + default_weights_path() +
           "\nkernels: " + kernels + " (this CPU and build: up to " + cpu_isa_name(cpu_isa_supported()) + ")";
  }));
  // Every sub-command, in the order of the help text.
  for (auto add : {cli::add_bench_command, cli::add_calibrate_command, cli::add_convert_command,
                   cli::add_eval_command, cli::add_info_command, cli::add_inspect_command, cli::add_predict_command,
                   cli::add_score_command, cli::add_serve_command, cli::add_synth_command, cli::add_train_command})
    add(app);
  app.parse_complete_callback([&] { init_runtime(threads); });
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int code = app.exit(e);
    return code == 0 ? 0 : 2;
  } catch (const diffnet::Error& e) {
    std::fprintf(stderr, "error: %s\n", cli::with_flag_name(app, e.what()).c_str());
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
