// consumer FILE...: each page of each document through the installed library's Predictor with the default
// weights; one JSON line per page (the CLI's record) plus the library version and the weights file used.
#include <cstdio>
#include <exception>

#include <nlohmann/json.hpp>

#include "diffnet/document.h"
#include "diffnet/predict.h"
#include "diffnet/version.h"

int main(int argc, char** argv) {
  try {
    diffnet::PredictOptions opt;
    diffnet::Predictor predictor(diffnet::load_weights(""), opt);
    for (int i = 1; i < argc; ++i) {
      diffnet::DocumentReader doc(argv[i]);
      for (int64_t k = 0; k < doc.pages(); ++k) {
        nlohmann::json j = diffnet::prediction_to_json(predictor.predict_page(doc.page(k)));
        j["library_version"] = diffnet::version();
        j["weights_file"] = predictor.model().source;
        std::printf("%s\n", j.dump().c_str());
      }
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "consumer: %s\n", e.what());
    return 1;
  }
  return 0;
}
