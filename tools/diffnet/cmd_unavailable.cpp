// Sub-commands whose module this build leaves out (configured with -DDIFFNET_SERVE=OFF or
// -DDIFFNET_SYNTH=OFF, e.g. a GPU build without cpp-httplib or Pango): the command still exists, and says
// why it cannot run and how to get it, instead of being unknown or failing the link.
#include <string>

#include "commands.h"
#include "diffnet/common.h"

namespace diffnet::cli {
namespace {

void add_unavailable(CLI::App& app, const std::string& name, const std::string& how) {
  CLI::App* sub = app.add_subcommand(name, "(not in this build: " + how + ")");
  sub->allow_extras();
  sub->callback([name, how] { throw Error(name, "not in this build (" + how + ")"); });
}

}  // namespace

#ifdef DIFFNET_NO_SERVE
void add_serve_command(CLI::App& app) {
  add_unavailable(app, "serve", "configure with -DDIFFNET_SERVE=ON; it needs cpp-httplib");
}
#endif

#ifdef DIFFNET_NO_SYNTH
void add_synth_command(CLI::App& app) {
  add_unavailable(app, "synth", "configure with -DDIFFNET_SYNTH=ON; it needs Cairo and Pango");
}
#endif

}  // namespace diffnet::cli
