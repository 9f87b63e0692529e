// The HTML page served at GET / by `diffnet serve`: upload an image, see the overlay and the record.
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
</style>
</head>
<body>
<h1>DiffNet: document tampering check</h1>
<p>Choose a JPEG or PNG document. The overlay leaves the page as it is wherever the model is not
confident; where the tampering probability p reaches the threshold it is coloured from amber to red,
and every detected region gets a blue box labelled with its peak probability.</p>
<form id="form">
  <input type="file" id="file" accept="image/jpeg,image/png" required>
  <button type="submit">Check</button>
</form>
<div id="verdict"></div>
<div id="scorenote" class="note"></div>
<div id="legend" hidden><span>tampering p:</span><span id="lo">0.50</span><span id="ramp"></span><span>1.00</span>
  <span class="box"></span><span>region (label = peak p)</span></div>
<img id="overlay" alt="" hidden>
<table id="regions" hidden><thead><tr><th>#</th><th>x</th><th>y</th><th>w</th><th>h</th><th>peak p</th><th>mean p</th></tr></thead><tbody></tbody></table>
<pre id="record" hidden></pre>
<script>
document.getElementById('form').addEventListener('submit', async (ev) => {
  ev.preventDefault();
  const file = document.getElementById('file').files[0];
  if (!file) return;
  const verdict = document.getElementById('verdict');
  verdict.textContent = 'Checking ' + file.name + ' ...';
  verdict.className = '';
  const res = await fetch('/predict?maps=1&name=' + encodeURIComponent(file.name), {method: 'POST', body: file});
  const rec = await res.json();
  if (!res.ok) { verdict.textContent = 'Error: ' + rec.error; return; }
  verdict.textContent = rec.decision + ' (page probability ' + rec.image_score.toFixed(3) + ', ' +
                        rec.regions.length + ' region(s), ' + Math.round(rec.timings_ms.total) + ' ms)';
  verdict.className = rec.decision;
  document.getElementById('scorenote').textContent = rec.score_kind === 'calibrated'
      ? 'Calibrated page probability; decision at threshold ' + rec.threshold + '.'
      : 'Uncalibrated score (these weights carry no calibration): rank pages by it, do not read it as a probability.';
  document.getElementById('lo').textContent = rec.threshold.toFixed(2);
  document.getElementById('legend').hidden = false;
  const tbody = document.querySelector('#regions tbody');
  tbody.innerHTML = '';
  rec.regions.slice(0, 50).forEach((r, i) => {
    const tr = document.createElement('tr');
    [i + 1, r.bbox[0], r.bbox[1], r.bbox[2], r.bbox[3], r.peak.toFixed(2), r.mean.toFixed(2)].forEach(v => {
      const td = document.createElement('td'); td.textContent = v; tr.appendChild(td);
    });
    tbody.appendChild(tr);
  });
  document.getElementById('regions').hidden = rec.regions.length === 0;
  const img = document.getElementById('overlay');
  img.src = 'data:image/png;base64,' + rec.maps.overlay_png;
  img.hidden = false;
  delete rec.maps;
  const pre = document.getElementById('record');
  pre.textContent = JSON.stringify(rec, null, 2);
  pre.hidden = false;
});
</script>
</body>
</html>
)HTML";

}  // namespace diffnet::serve
