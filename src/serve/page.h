// The HTML page served at GET / by `diffnet serve`: upload an image, a PDF or a TIFF, see each page's
// overlay, verdict, regions and record (pages of a document as tabs).
#pragma once

namespace diffnet::serve {

inline constexpr const char* kIndexPage = R"HTML(<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>DiffNet: document tampering check</title>
<style>
  body { font-family: sans-serif; margin: 2em; max-width: 70em; }
  #verdict { font-size: 1.4em; margin: 0.6em 0; }
  .tampered { color: #b00; } .pristine { color: #070; }
  img { max-width: 100%; border: 1px solid #ccc; }
  pre { background: #f4f4f4; padding: 0.8em; overflow: auto; max-height: 20em; }
  #legend { display: flex; align-items: center; gap: 0.6em; margin: 0.4em 0; font-size: 0.9em; }
  #ramp { width: 14em; height: 0.9em; border: 1px solid #999;
          background: linear-gradient(to right, rgba(255,190,0,0.35), rgba(225,0,0,0.8)); }
  .box { display: inline-block; width: 1.2em; height: 0.8em; border: 3px solid rgb(0,110,255); }
  table { border-collapse: collapse; } td, th { padding: 0.2em 0.8em; text-align: right; }
  .note { color: #555; font-size: 0.9em; }
  #tabs button { margin: 0 0.3em 0.4em 0; } #tabs button.on { font-weight: bold; border-width: 2px; }
  .error { color: #b00; }
</style>
</head>
<body>
<h1>DiffNet: document tampering check</h1>
<p>Choose a JPEG, PNG, PDF or TIFF document (each page of a PDF or TIFF is checked). The overlay leaves the page as it is wherever the model is not
confident; where the tampering probability p reaches the threshold it is coloured from amber to red,
and every detected region gets a blue box labelled with its peak probability.</p>
<form id="form">
  <input type="file" id="file" accept="image/jpeg,image/png,application/pdf,image/tiff,.pdf,.tif,.tiff" required>
  <button type="submit">Check</button>
</form>
<div id="tabs"></div>
<div id="verdict"></div>
<div id="scorenote" class="note"></div>
<div id="legend" hidden><span>tampering p:</span><span id="lo">0.50</span><span id="ramp"></span><span>1.00</span>
  <span class="box"></span><span>region (label = peak p)</span></div>
<img id="overlay" alt="" hidden>
<table id="regions" hidden><thead><tr><th>#</th><th>x</th><th>y</th><th>w</th><th>h</th><th>peak p</th><th>mean p</th></tr></thead><tbody></tbody></table>
<pre id="record" hidden></pre>
<script>
const $ = (id) => document.getElementById(id);
// Clears every result of the previous upload, so an error never sits above a stale overlay.
function clearResult() {
  $('tabs').innerHTML = ''; $('scorenote').textContent = ''; $('legend').hidden = true;
  $('overlay').hidden = true; $('overlay').removeAttribute('src'); $('regions').hidden = true;
  document.querySelector('#regions tbody').innerHTML = ''; $('record').hidden = true;
}
function showError(text) { clearResult(); $('verdict').textContent = text; $('verdict').className = 'error'; }
function showPage(rec) {
  const verdict = $('verdict');
  verdict.textContent = rec.file + ': ' + rec.decision + ' (page probability ' + rec.image_score.toFixed(3) + ', ' +
                        rec.regions.length + ' region(s), ' + Math.round(rec.timings_ms.total) + ' ms)';
  verdict.className = rec.decision;
  $('scorenote').textContent = rec.score_kind === 'calibrated'
      ? 'Calibrated page probability; decision at threshold ' + rec.threshold + '.'
      : 'Uncalibrated score (these weights carry no calibration): rank pages by it, do not read it as a probability.';
  $('lo').textContent = rec.threshold.toFixed(2);
  $('legend').hidden = false;
  const tbody = document.querySelector('#regions tbody');
  tbody.innerHTML = '';
  rec.regions.slice(0, 50).forEach((r, i) => {
    const tr = document.createElement('tr');
    [i + 1, r.bbox[0], r.bbox[1], r.bbox[2], r.bbox[3], r.peak.toFixed(2), r.mean.toFixed(2)].forEach(v => {
      const td = document.createElement('td'); td.textContent = v; tr.appendChild(td);
    });
    tbody.appendChild(tr);
  });
  $('regions').hidden = rec.regions.length === 0;
  const img = $('overlay');
  img.src = 'data:image/png;base64,' + rec.maps.overlay_png;
  img.hidden = false;
  const shown = Object.assign({}, rec);
  delete shown.maps;
  $('record').textContent = JSON.stringify(shown, null, 2);
  $('record').hidden = false;
}
$('form').addEventListener('submit', async (ev) => {
  ev.preventDefault();
  const file = $('file').files[0];
  if (!file) return;
  clearResult();
  $('verdict').textContent = 'Checking ' + file.name + ' ...';
  $('verdict').className = '';
  let res, body;
  try {
    res = await fetch('/predict?maps=1&name=' + encodeURIComponent(file.name), {method: 'POST', body: file});
  } catch (e) {
    return showError('The server did not answer (is diffnet serve running?): ' + e.message);
  }
  try { body = await res.json(); } catch (e) { return showError('Error: HTTP ' + res.status + ' without a JSON body'); }
  if (!res.ok) return showError('Error: ' + (body.error || ('HTTP ' + res.status)));
  const pages = body.pages || [body];  // a PDF/TIFF answers {file, page_count, pages: [...]}
  if (pages.length > 1) {
    pages.forEach((rec, i) => {
      const b = document.createElement('button');
      b.type = 'button';
      b.textContent = 'page ' + (i + 1) + ': ' + rec.decision + ' ' + rec.image_score.toFixed(2);
      b.className = rec.decision;
      b.addEventListener('click', () => {
        document.querySelectorAll('#tabs button').forEach(x => x.classList.remove('on'));
        b.classList.add('on');
        showPage(rec);
      });
      $('tabs').appendChild(b);
    });
    $('tabs').firstChild.classList.add('on');
  }
  showPage(pages[0]);
});
</script>
</body>
</html>
)HTML";

}  // namespace diffnet::serve
