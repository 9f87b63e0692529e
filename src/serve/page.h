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
</style>
</head>
<body>
<h1>DiffNet: document tampering check</h1>
<p>Choose a JPEG or PNG document. The overlay shows the tampering probability in red to yellow, with
blue boxes around the detected regions.</p>
<form id="form">
  <input type="file" id="file" accept="image/jpeg,image/png" required>
  <button type="submit">Check</button>
</form>
<div id="verdict"></div>
<img id="overlay" alt="" hidden>
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
  verdict.textContent = rec.decision + ' (score ' + rec.image_score.toFixed(3) + ', ' +
                        rec.regions.length + ' region(s), ' + Math.round(rec.timings_ms.total) + ' ms)';
  verdict.className = rec.decision;
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
