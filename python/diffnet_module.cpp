// The `diffnet` Python module (pybind11): the C++ Predictor behind a small API.
//   import diffnet
//   p = diffnet.Predictor(weights=None, threshold=0.5, page_threshold=None, pdf_dpi=200)
//   r = p.predict("scan.jpg")          # or a uint8 numpy array (H, W, 3) RGB
//   r["image_score"], r["decision"], r["regions"], r["prob"]   # prob: float32 numpy (H, W)
// A PDF/TIFF gives {"file", "page_count", "pages": [record per page]} as `diffnet serve` does. Records are
// `diffnet predict --json`'s (docs/eval.md). Errors raise RuntimeError with the one-line message.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <ATen/ATen.h>

#include <cstring>
#include <memory>
#include <optional>
#include <string>

#include "diffnet/common.h"
#include "diffnet/document.h"
#include "diffnet/predict.h"

namespace py = pybind11;
using namespace diffnet;

namespace {

// A JSON value as Python objects (through the json module: exact for every JSON type).
py::object to_python(const nlohmann::json& j) { return py::module_::import("json").attr("loads")(j.dump()); }

py::array_t<float> to_numpy(const at::Tensor& prob) {
  at::Tensor p = prob.to(at::kFloat).contiguous();
  py::array_t<float> out({p.size(0), p.size(1)});
  std::memcpy(out.mutable_data(), p.data_ptr<float>(), size_t(p.numel()) * sizeof(float));
  return out;
}

class PyPredictor {
 public:
  PyPredictor(const std::string& weights, double threshold, std::optional<double> page_threshold, double pdf_dpi,
              int64_t max_pages, int64_t batch, const std::string& precision, const py::object& downscale,
              const std::string& orientation)
      : opt_([&] {
          PredictOptions o;
          o.threshold = threshold;
          o.page_threshold = page_threshold.value_or(-1.0);
          o.batch = batch;
          o.precision = precision;
          // "auto" or an int 1..8 (checked by the Predictor).
          if (py::isinstance<py::str>(downscale)) {
            o.downscale = parse_downscale(downscale.cast<std::string>());
          } else {
            o.downscale = downscale.cast<int64_t>();
            if (o.downscale == kDownscaleAuto) throw Error("downscale", "must be 'auto' or an integer from 1 to 8");
          }
          o.apply_exif_orientation = parse_orientation(orientation);
          return o;
        }()),
        predictor_(load_weights(weights), opt_) {
    docs_.pdf_dpi = pdf_dpi;
    docs_.max_pages = max_pages;
  }

  py::object predict(const py::object& input) {
    if (py::isinstance<py::array>(input)) return predict_array(input.cast<py::array>());
    if (!py::isinstance<py::str>(input) && !py::hasattr(input, "__fspath__"))
      throw py::type_error("predict() takes a file path or a uint8 numpy array (H, W, 3)");
    const std::string path = py::str(py::module_::import("os").attr("fspath")(input));
    std::unique_ptr<DocumentReader> doc;
    {
      py::gil_scoped_release no_gil;  // reading and inference do not touch Python objects
      doc = std::make_unique<DocumentReader>(path, docs_);
    }
    // One page at a time: each page's pixels are let go once its record is made.
    auto page = [&](int64_t i) {
      Prediction p;
      {
        py::gil_scoped_release no_gil;
        p = predictor_.predict_page(doc->page(i));
      }
      return record(p);
    };
    if (doc->format() == "image") return page(0);
    py::list out;
    for (int64_t i = 0; i < doc->pages(); ++i) out.append(page(i));
    py::dict d;
    d["file"] = path;
    d["page_count"] = doc->pages();
    d["pages"] = out;
    return std::move(d);
  }

  double window() const { return double(predictor_.window()); }
  std::string weights() const { return predictor_.model().source; }
  bool calibrated() const { return predictor_.model().calibration.has_value(); }
  const Predictor& predictor() const { return predictor_; }

 private:
  py::object predict_array(py::array a) {
    if (!a.dtype().is(py::dtype::of<uint8_t>()) || a.ndim() != 3 || a.shape(2) != 3)
      throw py::value_error("the array must be uint8 with shape (H, W, 3), RGB");
    auto c = py::array_t<uint8_t, py::array::c_style | py::array::forcecast>::ensure(a);
    at::Tensor rgb = at::empty({int64_t(c.shape(0)), int64_t(c.shape(1)), 3}, at::kByte);
    std::memcpy(rgb.data_ptr<uint8_t>(), c.data(), size_t(rgb.numel()));
    Prediction p;
    {
      py::gil_scoped_release no_gil;
      p = predictor_.predict_rgb(rgb, {}, "array");
    }
    return record(p);
  }

  py::dict record(const Prediction& p) {
    py::dict d = to_python(prediction_to_json(p)).cast<py::dict>();
    d["prob"] = to_numpy(p.prob);
    return d;
  }

  PredictOptions opt_;
  Predictor predictor_;
  DocumentOptions docs_;
};

}  // namespace

PYBIND11_MODULE(diffnet, m) {
  m.doc() = "DiffNet document tampering localisation (the C++ implementation's Predictor)";
  py::register_exception<Error>(m, "Error", PyExc_RuntimeError);
  py::class_<PyPredictor>(m, "Predictor")
      .def(py::init<const std::string&, double, std::optional<double>, double, int64_t, int64_t, const std::string&,
                                    const py::object&, const std::string&>(),
           py::arg("weights") = "", py::arg("threshold") = 0.5, py::arg("page_threshold") = py::none(), py::arg("pdf_dpi") = 200.0, py::arg("max_pages") = 500, py::arg("batch") = 0,
           py::arg("precision") = "f32", py::arg("downscale") = "auto", py::arg("orientation") = "exif",
           "Loads weights (default: the shipped model, found as `diffnet predict` finds it); threshold: the regions' "
           "pixel threshold; page_threshold: the decision's (None: the weights'); precision f32 | bf16 | auto; "
           "downscale: 1..8, the model runs on the page box-averaged by this factor, the map comes back at the "
           "page's size; 'auto' (default): 4 for a page whose shorter side reaches 3,500 px (A4 at 600 dpi), 8 "
           "from 7,500 px, else 1; orientation: 'exif' (default) runs an image file whose EXIF orientation tag "
           "turns it as viewers show it (map and regions back in the stored orientation), 'stored' as stored.")
      .def("predict", &PyPredictor::predict, py::arg("input"),
           "Record of an image file or uint8 (H, W, 3) RGB array, with 'prob' as a float32 (H, W) array; a "
           "PDF/TIFF gives {'file', 'page_count', 'pages': [records]}.")
      .def_property_readonly("window", &PyPredictor::window)
      .def_property_readonly("weights", &PyPredictor::weights)
      .def_property_readonly("calibrated", &PyPredictor::calibrated)
      .def_property_readonly("page_threshold", [](const PyPredictor& p) { return p.predictor().page_threshold(); })
      .def_property_readonly("precision", [](const PyPredictor& p) { return p.predictor().precision(); });
}
