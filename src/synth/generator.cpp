#include "synth/generator.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>

#include "diffnet/common.h"
#include "diffnet/image_io.h"
#include "synth/content.h"
#include "synth/degrade.h"

namespace diffnet::synth {

bool BadSources::is_bad(size_t i) {
  std::lock_guard<std::mutex> lock(m_);
  return bad_.count(i) > 0;
}

void BadSources::report(size_t i, const std::string& path, const std::string& reason, bool quiet) {
  std::lock_guard<std::mutex> lock(m_);
  if (bad_.count(i)) return;
  bad_[i] = {path, reason};
  if (!quiet) std::fprintf(stderr, "warning: skipping source %s\n", reason.c_str());
}

std::vector<std::pair<std::string, std::string>> BadSources::list() {
  std::lock_guard<std::mutex> lock(m_);
  std::vector<std::pair<std::string, std::string>> out;
  for (auto& kv : bad_) out.push_back(kv.second);
  return out;
}

Plan make_plan(const SynthOptions& opt) {
  Plan p;
  p.opt = opt;
  if (opt.out.empty()) throw Error("out", "an output folder is required");
  if (opt.count < 0) throw Error("count", "must be >= 0");
  auto prob = [](double v, const char* name) {
    if (!(v >= 0 && v <= 1)) throw Error(name, "must be a probability in [0, 1]");
  };
  prob(opt.jpeg_fraction, "--jpeg-fraction");
  prob(opt.q1_prob, "--q1-prob");
  prob(opt.pristine_prob, "--pristine-prob");
  prob(opt.conceal_prob, "--conceal-prob");
  prob(opt.insert_overlay_prob, "--insert-overlay-prob");
  prob(opt.overlay_letter_prob, "--overlay-letter-prob");
  prob(opt.text_overlay_prob, "--text-overlay-prob");
  prob(opt.print_scan_prob, "--print-scan-prob");
  prob(opt.degrade_after_edit_prob, "--degrade-after-edit-prob");
  prob(opt.rendered_fraction, "--rendered-fraction");
  auto qrange = [](int lo, int hi, const char* name) {
    if (lo < 1 || hi > 100 || lo > hi) throw Error(name, "quality range must satisfy 1 <= min <= max <= 100");
  };
  qrange(opt.q1_min, opt.q1_max, "--q1");
  qrange(opt.q2_min, opt.q2_max, "--q2");
  if (opt.dpi_min < 36 || opt.dpi_max > 1200 || opt.dpi_min > opt.dpi_max)
    throw Error("dpi", "range must satisfy 36 <= min <= max <= 1200");
  if (opt.output_format != "png" && opt.output_format != "jpeg" && opt.output_format != "mixed")
    throw Error("output_format", "must be png, jpeg or mixed");
  if (opt.max_edits < 0 || opt.max_edits > 50) throw Error("max_edits", "must be in 0..50");
  if (opt.max_side != 0 && opt.max_side < 64) throw Error("max_side", "must be 0 (off) or >= 64");
  if (opt.crop != 0 && opt.crop < 64) throw Error("crop", "must be 0 (off) or >= 64");
  p.weights = parse_op_weights(opt.ops);
  for (auto& l : opt.layouts.empty() ? layout_names() : opt.layouts) p.layouts.push_back(parse_layout(l));
  p.fonts = select_fonts(opt.fonts.empty() ? std::vector<std::string>{"all"} : opt.fonts);
  if (!opt.sources.empty()) {
    p.sources = list_sources(opt.sources);
    p.order.resize(p.sources.size());
    for (size_t i = 0; i < p.order.size(); ++i) p.order[i] = i;
    Rng r(derive_seed(opt.seed, 0, 0x50524345ull));
    r.shuffle(p.order);
  }
  p.edit.conceal_prob = opt.conceal_prob;
  p.edit.insert_overlay_prob = opt.insert_overlay_prob;
  p.edit.overlay_letter_prob = opt.overlay_letter_prob;
  p.edit.text_overlay_prob = opt.text_overlay_prob;
  p.edit.fonts = p.fonts;
  return p;
}

namespace {

nlohmann::json box_json(const Box& b) { return {b.x0, b.y0, b.x1, b.y1}; }

// Loads source `order[(start + k) % n]` for the first k that is usable.
bool load_usable(const Plan& plan, size_t start, BadSources& bad, Page* page, nlohmann::json* info,
                 size_t* used, size_t skip = SIZE_MAX) {
  const size_t n = plan.sources.size();
  for (size_t k = 0; k < n; ++k) {
    size_t idx = plan.order[(start + k) % n];
    if (idx == skip || bad.is_bad(idx)) continue;
    try {
      *page = load_source(plan.sources[idx], info);
      *used = idx;
      return true;
    } catch (const std::exception& e) {
      bad.report(idx, plan.sources[idx].image, e.what(), plan.opt.quiet);
    }
  }
  return false;
}

void fit_max_side(Page& page, int max_side, nlohmann::json& src) {
  int side = std::max(page.img.w, page.img.h);
  if (max_side > 0 && side > max_side) {
    double s = double(max_side) / side;
    scale_page(page, s);
    src["scale"] = s;
  }
}

// Donor sheet for splicing onto a rendered (or word-less) target: words shaped like the target's text
// in another family at about the same size, with its own print-scan and JPEG history.
std::unique_ptr<Page> rendered_donor(const Plan& plan, const Word& t, const std::string& page_family, int page_w,
                                     Rng& r, nlohmann::json* info) {
  FontFace f = r.pick(plan.fonts);
  for (int i = 0; i < 4 && f.family == page_family && plan.fonts.size() > 1; ++i) f = r.pick(plan.fonts);
  double size = t.style.known ? t.style.size_px * r.uniform(0.93, 1.07) : std::max(6.0, (t.box.h() - 2) * 1.3);
  std::vector<std::string> texts;
  for (int i = 0; i < 8; ++i)
    texts.push_back(t.text.empty() ? content::amount(r, 1, 9999) : content::randomize_like(r, t.text));
  int w = std::max(64, std::min(std::max(page_w, 64), static_cast<int>(size * 40)));
  int h = std::max(64, static_cast<int>(size * 1.9 * 6));
  RenderedPage rp = render_word_sheet(texts, f, size, w, h, r);
  auto d = std::make_unique<Page>();
  d->img = std::move(rp.image);
  d->words = std::move(rp.words);
  nlohmann::json j = {{"kind", "rendered-sheet"}, {"font", f.family}, {"size_px", size}};
  if (r.bernoulli(0.5)) {
    PrintScan ps = sample_print_scan(r);
    ps.angle_deg = 0;
    apply_print_scan(*d, ps, r);
    j["print_scan"] = ps.to_json();
  }
  if (r.bernoulli(0.7)) {
    int q = static_cast<int>(r.randint(60, 95));
    jpeg_round_trip(*d, q);
    j["jpeg_quality"] = q;
  }
  *info = j;
  return d;
}

}  // namespace

Sample make_sample(const Plan& plan, int64_t index, BadSources& bad) {
  const SynthOptions& opt = plan.opt;
  Sample out;
  uint64_t sample_seed = derive_seed(opt.seed, static_cast<uint64_t>(index));
  Rng rng(sample_seed);
  double t0 = now_seconds();
  Page page;
  nlohmann::json src, history = nlohmann::json::array(), family;
  bool rendered = plan.sources.empty() || rng.bernoulli(opt.rendered_fraction);
  std::string page_family;
  size_t source_idx = SIZE_MAX;
  if (rendered) {
    LayoutKind kind = rng.pick(plan.layouts);
    const FontFace& font = rng.pick(plan.fonts);
    double dpi = static_cast<double>(rng.randint(opt.dpi_min, opt.dpi_max));
    // A4 pages: render directly at the resolution that fits max_side.
    if (opt.max_side > 0 && kind != LayoutKind::Receipt) dpi = std::min(dpi, std::floor(opt.max_side * 25.4 / 297.0));
    RenderedPage rp = render_document(kind, font, dpi, rng);
    page.img = std::move(rp.image);
    page.words = std::move(rp.words);
    page_family = font.family;
    src = {{"kind", "rendered"}, {"layout", layout_name(kind)}, {"font", font.family},
           {"font_class", font_class_name(font.cls)}, {"dpi", dpi}};
    family = {{"source", "rendered"}, {"layout", layout_name(kind)}, {"font_class", font_class_name(font.cls)}};
  } else {
    size_t start = static_cast<size_t>(index) % plan.sources.size();
    if (!load_usable(plan, start, bad, &page, &src, &source_idx))
      throw Error("sources", "no usable source page (all were skipped)");
    family = {{"source", "files"}, {"layout", "file"}, {"font_class", "unknown"}};
    if (src.value("format", "") == "jpeg")
      history.push_back({{"stage", "source"}, {"format", "jpeg"}, {"quality", src["quality"]}});
  }
  fit_max_side(page, opt.max_side, src);
  if (opt.crop > 0 && (page.img.w > opt.crop || page.img.h > opt.crop)) {
    int cw = std::min(opt.crop, page.img.w), ch = std::min(opt.crop, page.img.h);
    Box best;
    int best_n = -1;
    for (int k = 0; k < 8; ++k) {
      int x = 8 * static_cast<int>(rng.randint(0, (page.img.w - cw) / 8));
      int y = 8 * static_cast<int>(rng.randint(0, (page.img.h - ch) / 8));
      Box b{x, y, x + cw, y + ch};
      int n = 0;
      for (auto& w : page.words) n += b.contains(w.box);
      if (n > best_n) best_n = n, best = b;
    }
    crop_page(page, best);
    src["crop"] = box_json(best);
  }
  double t1 = now_seconds();
  // Drawn only when asked for, so that P = 0 keeps the random stream of earlier versions.
  const bool after_edit = rendered && opt.degrade_after_edit_prob > 0 && rng.bernoulli(opt.degrade_after_edit_prob);
  if (rendered && !after_edit && rng.bernoulli(opt.print_scan_prob)) {
    PrintScan ps = sample_print_scan(rng);
    apply_print_scan(page, ps, rng);
    src["print_scan"] = ps.to_json();
  }
  family["print_scan"] = src.contains("print_scan") || after_edit;
  if (!after_edit && rng.bernoulli(opt.q1_prob)) {
    int q1 = static_cast<int>(rng.randint(opt.q1_min, opt.q1_max));
    jpeg_round_trip(page, q1);
    history.push_back({{"stage", "before-edit"}, {"format", "jpeg"}, {"quality", q1}});
  }
  if (opt.keep_pristine) out.pristine = page.img;
  double t2 = now_seconds();

  // Edits.
  int n_edits = sample_edit_count(rng, opt.pristine_prob, opt.max_edits);
  if (n_edits > 0) n_edits = std::min(n_edits, std::max(1, static_cast<int>(page.words.size()) / 4));
  EditState st(page);
  std::unique_ptr<Page> donor_page;
  nlohmann::json donor_info;
  bool file_donor_tried = false;
  DonorFn donor = [&](const Word& t, Rng& r) -> const Page* {
    if (!rendered && !file_donor_tried) {
      file_donor_tried = true;
      if (plan.sources.size() > 1) {
        auto p = std::make_unique<Page>();
        size_t used;
        nlohmann::json info;
        size_t start = static_cast<size_t>(r.randint(0, static_cast<int64_t>(plan.sources.size()) - 1));
        if (load_usable(plan, start, bad, p.get(), &info, &used, source_idx)) {
          nlohmann::json dummy;
          fit_max_side(*p, opt.max_side, dummy);
          donor_page = std::move(p);
          donor_info = info;
        }
      }
    }
    if (!rendered && donor_page) return donor_page.get();
    donor_page = rendered_donor(plan, t, page_family, page.img.w, r, &donor_info);
    return donor_page.get();
  };
  nlohmann::json ops = nlohmann::json::array();
  std::vector<std::string> op_names;
  for (int e = 0; e < n_edits; ++e) {
    std::array<bool, kNumOps> allowed;
    allowed.fill(true);
    nlohmann::json failed = nlohmann::json::array();
    while (true) {
      int k = sample_op(rng, plan.weights, allowed);
      if (k < 0) break;
      nlohmann::json rec;
      if (apply_op(static_cast<OpKind>(k), st, plan.edit, rng, donor, &rec)) {
        if (k == static_cast<int>(OpKind::Splice)) rec["donor"] = donor_info;
        if (!failed.empty()) rec["infeasible_first"] = failed;
        ops.push_back(rec);
        op_names.push_back(op_name(static_cast<OpKind>(k)));
        break;
      }
      allowed[k] = false;
      failed.push_back(op_name(static_cast<OpKind>(k)));
    }
  }
  if (after_edit) {
    // The look from a stream of its own, applied alike to the edited page and to the pristine copy; no
    // rotation, so the mask stays where the edits are.
    Rng look(derive_seed(opt.seed, static_cast<uint64_t>(index), 0x4146544552ull));
    PrintScan ps = sample_print_scan(look);
    ps.angle_deg = 0;
    if (opt.keep_pristine) {
      Page pristine{out.pristine, {}, false};
      Rng same = look;
      apply_print_scan(pristine, ps, same);
      out.pristine = std::move(pristine.img);
    }
    apply_print_scan(page, ps, look);
    src["print_scan"] = ps.to_json();
    src["print_scan_after_edit"] = true;
  }
  double t3 = now_seconds();

  // Output format.
  bool jpeg = opt.output_format == "jpeg" || (opt.output_format == "mixed" && rng.bernoulli(opt.jpeg_fraction));
  int q2 = jpeg ? static_cast<int>(rng.randint(opt.q2_min, opt.q2_max)) : 0;
  if (jpeg) history.push_back({{"stage", "output"}, {"format", "jpeg"}, {"quality", q2}});
  else history.push_back({{"stage", "output"}, {"format", "png"}});

  int64_t mask_pixels = 0;
  for (uint8_t v : st.mask.data) mask_pixels += v != 0;
  std::vector<std::string> uniq = op_names;
  std::sort(uniq.begin(), uniq.end());
  uniq.erase(std::unique(uniq.begin(), uniq.end()), uniq.end());
  family["ops"] = uniq;
  family["output"] = jpeg ? "jpeg" : "png";
  family["q1"] = history.size() >= 2 && history[history.size() - 2].value("stage", "") == "before-edit";
  out.record = {{"index", index},      {"seed", sample_seed}, {"width", page.img.w},
                {"height", page.img.h}, {"source", src},      {"compression", history},
                {"ops", ops},          {"tampered", !ops.empty()}, {"mask_pixels", mask_pixels},
                {"family", family}};
  out.image = std::move(page.img);
  out.mask = std::move(st.mask);
  out.jpeg = jpeg;
  out.quality = q2;
  out.seconds = {{"source", t1 - t0}, {"degrade", t2 - t1}, {"edit", t3 - t2}};
  return out;
}

}  // namespace diffnet::synth

namespace diffnet {

SynthSummary run_synth(const SynthOptions& opt) {
  using namespace synth;
  Plan plan = make_plan(opt);
  make_dirs(opt.out + "/images");
  make_dirs(opt.out + "/masks");
  if (opt.keep_pristine) make_dirs(opt.out + "/pristine");
  BadSources bad;
  SynthSummary sum;
  std::vector<std::string> lines(static_cast<size_t>(opt.count));
  Progress progress("synth", opt.count, opt.quiet);
  std::string fatal;
  double start = now_seconds();
  const int64_t n = opt.count;
#pragma omp parallel for schedule(dynamic, 1)
  for (int64_t i = 0; i < n; ++i) {
    {
      bool stop;
#pragma omp critical(synth_state)
      stop = !fatal.empty();
      if (stop) continue;
    }
    int64_t index = opt.first_index + i;
    char stem[32];
    std::snprintf(stem, sizeof stem, "%08lld", static_cast<long long>(index));
    Sample s;
    std::string err;
    bool generated = false;
    try {
      s = make_sample(plan, index, bad);
      generated = true;
    } catch (const Error& e) {
      err = e.what();
    } catch (const std::exception& e) {
      err = std::string("sample ") + stem + ": " + e.what();
    }
    std::string write_err;
    double tw = now_seconds();
    if (generated) {
      try {
        std::string image_rel = std::string("images/") + stem + (s.jpeg ? ".jpg" : ".png");
        std::string mask_rel = std::string("masks/") + stem + ".png";
        if (s.jpeg) write_file_atomic(opt.out + "/" + image_rel, encode_jpeg(to_tensor(s.image), s.quality));
        else write_file_atomic(opt.out + "/" + image_rel, encode_png(to_tensor(s.image)));
        write_file_atomic(opt.out + "/" + mask_rel, encode_png(to_tensor(s.mask)));
        s.record["id"] = stem;
        s.record["image"] = image_rel;
        s.record["mask"] = mask_rel;
        if (opt.keep_pristine) {
          std::string pr = std::string("pristine/") + stem + ".png";
          write_file_atomic(opt.out + "/" + pr, encode_png(to_tensor(s.pristine)));
          s.record["pristine"] = pr;
        }
        lines[static_cast<size_t>(i)] = s.record.dump();
      } catch (const std::exception& e) {
        write_err = e.what();
      }
    }
    s.seconds["write"] = now_seconds() - tw;
#pragma omp critical(synth_state)
    {
      if (!write_err.empty() && fatal.empty()) fatal = write_err;
      if (!generated) {
        // No usable source at all is fatal; anything else loses this sample only.
        if (err.rfind("sources: ", 0) == 0) {
          if (fatal.empty()) fatal = err;
        } else {
          sum.failed++;
          if (!opt.quiet) std::fprintf(stderr, "warning: sample %s failed: %s\n", stem, err.c_str());
        }
      } else if (write_err.empty()) {
        sum.written++;
        if (s.record["tampered"].get<bool>()) sum.tampered++;
        else sum.pristine++;
        for (auto& op : s.record["ops"]) sum.op_counts[op["op"].get<std::string>()]++;
        for (auto& kv : s.seconds) sum.stage_seconds[kv.first] += kv.second;
      }
      progress.step(1, bad.list().empty() ? "" : "skipped sources " + std::to_string(bad.list().size()));
    }
  }
  progress.finish();
  if (!fatal.empty()) throw Error(fatal);
  std::string manifest;
  for (auto& l : lines)
    if (!l.empty()) manifest += l + "\n";
  write_file_atomic(opt.out + "/manifest.jsonl", manifest.data(), manifest.size());
  sum.skipped = bad.list();
  sum.seconds = now_seconds() - start;
  return sum;
}

}  // namespace diffnet
