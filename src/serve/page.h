// The HTML page served at GET / by `diffnet serve`: a queue of uploaded files (images, PDFs, TIFFs; pick or
// drop several), and for the chosen file/page its verdict, the page under the overlay (opacity slider) or
// beside it, zoom, the legend, the region list with crops (click: scroll to the region), and the JSON and
// the HTML report (the one `diffnet predict --report` writes, asked for with ?report=1) to download.
#pragma once

namespace diffnet::serve {

inline constexpr const char* kIndexPage = R"HTML(<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>DiffNet: document tampering check</title>
<style>
  body { font-family: sans-serif; margin: 1.5em; max-width: 90em; }
  #drop { border: 2px dashed #999; padding: 1em; margin: 0.6em 0; color: #444; }
  #drop.over { border-color: #06f; background: #eef4ff; }
  #queue { list-style: none; padding: 0; margin: 0.4em 0; }
  #queue li { padding: 0.2em 0.4em; cursor: pointer; } #queue li.on { background: #e8e8e8; font-weight: bold; }
  #verdict { font-size: 1.3em; margin: 0.6em 0; }
  .tampered { color: #b00; } .pristine { color: #070; } .error { color: #b00; } .waiting, .checking { color: #666; }
  #tabs button { margin: 0 0.3em 0.4em 0; } #tabs button.on { font-weight: bold; border-width: 2px; }
  #controls { display: flex; gap: 1.2em; align-items: center; margin: 0.4em 0; font-size: 0.9em; }
  #view { position: relative; overflow: auto; max-height: 75vh; border: 1px solid #ccc; }
  #stack { position: relative; display: inline-block; }
  #stack img { display: block; } #original { image-orientation: none; } #overlay { position: absolute; left: 0; top: 0; }
  #stack.side { display: flex; gap: 8px; } #stack.side #overlay { position: static; }
  #regions canvas { display: block; border: 1px solid #ccc; }
  #legend { display: flex; align-items: center; gap: 0.6em; margin: 0.4em 0; font-size: 0.9em; }
  #ramp { width: 14em; height: 0.9em; border: 1px solid #999;
          background: linear-gradient(to right, rgba(255,190,0,0.35), rgba(225,0,0,0.8)); }
  .box { display: inline-block; width: 1.2em; height: 0.8em; border: 3px solid rgb(0,110,255); }
  #mark { position: absolute; border: 3px dashed #06f; pointer-events: none; }
  table { border-collapse: collapse; } td, th { padding: 0.2em 0.8em; text-align: right; }
  #regions tbody tr { cursor: pointer; } #regions tbody tr:hover { background: #eef4ff; }
  pre { background: #f4f4f4; padding: 0.8em; overflow: auto; max-height: 20em; }
  .note { color: #555; font-size: 0.9em; }
</style>
</head>
<body>
<h1>DiffNet: document tampering check</h1>
<p>Choose or drop JPEG, PNG, PDF or TIFF documents (every page of a PDF or TIFF is checked). The overlay
leaves the page as it is wherever the model is not confident; where the tampering probability p reaches
the threshold it is coloured from amber to red, and every detected region gets a blue box labelled with
its peak probability.</p>
<form id="form">
  <input type="file" id="file" multiple accept="image/jpeg,image/png,application/pdf,image/tiff,.pdf,.tif,.tiff" required>
  <button type="submit">Check</button>
</form>
<div id="drop">Drop files here</div>
<ul id="queue"></ul>
<div id="tabs"></div>
<div id="verdict"></div>
<div id="scorenote" class="note"></div>
<button type="button" id="rescale" hidden>check again at a quarter of the size</button>
<div id="legend" hidden><span>tampering p:</span><span id="lo">0.50</span><span id="ramp"></span><span>1.00</span>
  <span class="box"></span><span>region (label = peak p)</span></div>
<div id="controls" hidden>
  <label>view <select id="mode"><option value="over">overlay on the page</option>
    <option value="side">side by side</option></select></label>
  <label>overlay <input type="range" id="opacity" min="0" max="100" value="100"></label>
  <label>zoom <select id="zoom"><option value="fit">fit</option><option value="1">100 %</option>
    <option value="2">200 %</option><option value="4">400 %</option></select></label>
  <a id="download" download="diffnet.json" href="#">download the JSON</a>
  <a id="report" download="diffnet-report.html" href="#" hidden>download the report</a>
</div>
<div id="view" hidden><div id="stack"><img id="original" alt=""><img id="overlay" alt=""><div id="mark" hidden></div></div></div>
<table id="regions" hidden><thead><tr><th>#</th><th>crop</th><th>x</th><th>y</th><th>w</th><th>h</th><th>peak p</th><th>mean p</th></tr></thead><tbody></tbody></table>
<pre id="record" hidden></pre>
<script>
const $ = (id) => document.getElementById(id);
const jobs = [];   // {file, li, status, body (server answer), pages, url (original image), error, downscale}
let shown = null;  // the job on screen
let running = false;

// Clears every result on screen, so an error never sits above a stale overlay.
function clearResult() {
  $('tabs').innerHTML = ''; $('scorenote').textContent = ''; $('legend').hidden = true; $('rescale').hidden = true;
  $('controls').hidden = true; $('view').hidden = true; $('mark').hidden = true;
  $('overlay').removeAttribute('src'); $('original').removeAttribute('src');
  $('regions').hidden = true; document.querySelector('#regions tbody').innerHTML = ''; $('record').hidden = true;
}
function showError(text) { clearResult(); $('verdict').textContent = text; $('verdict').className = 'error'; }

// The crops of the region list, drawn from the page under the overlay once it has loaded: the region's
// box plus a margin of max(8, a quarter of its larger side), as in the HTML report; at most 160 px.
function drawCrops() {
  const img = $('original');
  const draw = () => document.querySelectorAll('#regions canvas').forEach(c => {
    const [x, y, w, h] = JSON.parse(c.dataset.box), m = Math.max(8, Math.floor(Math.max(w, h) / 4));
    const x0 = Math.max(0, x - m), y0 = Math.max(0, y - m);
    const x1 = Math.min(img.naturalWidth, x + w + m), y1 = Math.min(img.naturalHeight, y + h + m);
    const s = Math.min(1, 160 / Math.max(x1 - x0, y1 - y0, 1));
    c.width = Math.max(1, Math.round((x1 - x0) * s)); c.height = Math.max(1, Math.round((y1 - y0) * s));
    const g = c.getContext('2d');
    g.drawImage(img, x0, y0, x1 - x0, y1 - y0, 0, 0, c.width, c.height);
    g.strokeStyle = 'rgb(0,110,255)'; g.lineWidth = 2; g.strokeRect((x - x0) * s, (y - y0) * s, w * s, h * s);
  });
  if (img.complete && img.naturalWidth) draw(); else img.addEventListener('load', draw, {once: true});
}

function applyMode() {
  const side = $('mode').value === 'side';
  $('stack').classList.toggle('side', side);
  $('opacity').disabled = side;
  $('overlay').style.opacity = side ? 1 : $('opacity').value / 100;
  applyZoom();
}

// "fit": the page (both pages, side by side) as wide as the view at most.
function applyZoom() {
  const z = $('zoom').value, w = $('overlay').naturalWidth, side = $('mode').value === 'side';
  const room = $('view').clientWidth ? (side ? ($('view').clientWidth - 8) / 2 : $('view').clientWidth) : w;
  const width = z === 'fit' ? Math.min(w, room) : w * Number(z);
  $('original').style.width = $('overlay').style.width = width + 'px';
  return width / (w || 1);
}

function showPage(job, rec) {
  const verdict = $('verdict');
  verdict.textContent = rec.file + ': ' + rec.decision + ' (page probability ' + rec.image_score.toFixed(3) + ', ' +
                        rec.regions.length + ' region(s), ' + Math.round(rec.timings_ms.total) + ' ms)';
  verdict.className = rec.decision;
  $('scorenote').textContent = rec.score_kind === 'calibrated'
      ? 'Calibrated page probability; decision at threshold ' + rec.page_threshold.toFixed(3) + '.'
      : 'Uncalibrated score (these weights carry no calibration): rank pages by it, do not read it as a probability.';
  if (rec.downscale > 1)
    $('scorenote').textContent += ' Analysed at 1/' + rec.downscale + ' of its size (' +
        (rec.downscale_rule === 'auto' ? 'a scan finer than the model\'s 150-300 dpi' : 'as asked') + ').';
  (rec.warnings || []).forEach(w => { $('scorenote').textContent += ' Warning: ' + w + '.'; });
  // A scan far finer than the model's 150-300 dpi (the server's warning names --downscale 4): offer the
  // same upload again at a quarter of the size (?downscale=4).
  const fine = (rec.warnings || []).some(w => w.includes('--downscale 4'));
  $('rescale').hidden = !(fine && !job.downscale);
  $('rescale').onclick = () => { job.downscale = 4; setStatus(job, 'waiting'); drain(); };
  $('lo').textContent = rec.threshold.toFixed(2);
  $('legend').hidden = false;
  $('controls').hidden = false;
  $('view').hidden = false;
  $('mark').hidden = true;
  // The page itself under the overlay: the server's rendering for a PDF/TIFF page, else the file.
  $('original').src = rec.maps.image_png ? 'data:image/png;base64,' + rec.maps.image_png : job.url;
  $('overlay').onload = applyZoom;
  $('overlay').src = 'data:image/png;base64,' + rec.maps.overlay_png;
  applyMode();
  const tbody = document.querySelector('#regions tbody');
  tbody.innerHTML = '';
  rec.regions.slice(0, 100).forEach((r, i) => {
    const tr = document.createElement('tr');
    const num = document.createElement('td'); num.textContent = i + 1; tr.appendChild(num);
    const crop = document.createElement('td'), canvas = document.createElement('canvas');
    canvas.dataset.box = JSON.stringify(r.bbox); crop.appendChild(canvas); tr.appendChild(crop);
    [r.bbox[0], r.bbox[1], r.bbox[2], r.bbox[3], r.peak.toFixed(2), r.mean.toFixed(2)].forEach(v => {
      const td = document.createElement('td'); td.textContent = v; tr.appendChild(td);
    });
    tr.addEventListener('click', () => {  // outline the region and scroll it into the middle of the view
      const s = applyZoom(), m = $('mark'), [x, y, w, h] = r.bbox;
      Object.assign(m.style, {left: x * s - 3 + 'px', top: y * s - 3 + 'px', width: w * s + 'px', height: h * s + 'px'});
      m.hidden = false;
      $('view').scrollLeft = x * s - $('view').clientWidth / 2;
      $('view').scrollTop = y * s - $('view').clientHeight / 2;
    });
    tbody.appendChild(tr);
  });
  $('regions').hidden = rec.regions.length === 0;
  drawCrops();
  const plain = Object.assign({}, rec);
  delete plain.maps;
  $('record').textContent = JSON.stringify(plain, null, 2);
  $('record').hidden = false;
}

function showJob(job) {
  shown = job;
  document.querySelectorAll('#queue li').forEach(li => li.classList.toggle('on', li === job.li));
  clearResult();
  if (job.status === 'error') return showError(job.error);
  if (job.status !== 'done') { $('verdict').textContent = job.file.name + ': ' + job.status + ' ...'; $('verdict').className = ''; return; }
  const pages = job.pages;
  const json = pages.map(r => { const c = Object.assign({}, r); delete c.maps; return c; });
  $('download').href = URL.createObjectURL(new Blob([JSON.stringify(json.length === 1 ? json[0] : json, null, 2)],
                                                    {type: 'application/json'}));
  $('download').download = job.file.name + '.diffnet.json';
  $('report').hidden = !job.report;
  if (job.report) {
    $('report').href = URL.createObjectURL(new Blob([job.report], {type: 'text/html'}));
    $('report').download = job.file.name + '.diffnet-report.html';
  }
  if (pages.length > 1) {
    pages.forEach((rec, i) => {
      const b = document.createElement('button');
      b.type = 'button';
      b.textContent = 'page ' + (i + 1) + ': ' + rec.decision + ' ' + rec.image_score.toFixed(2);
      b.className = rec.decision;
      b.addEventListener('click', () => {
        document.querySelectorAll('#tabs button').forEach(x => x.classList.remove('on'));
        b.classList.add('on');
        showPage(job, rec);
      });
      $('tabs').appendChild(b);
    });
    $('tabs').firstChild.classList.add('on');
  }
  showPage(job, pages[0]);
}

function setStatus(job, status, detail) {
  job.status = status;
  job.li.className = (job === shown ? 'on ' : '') + status;
  job.li.textContent = job.file.name + ' - ' + (detail || status);
  if (job === shown || (!shown && status !== 'waiting')) showJob(job);
}

// POST with upload progress (fetch has none): onUpload(fraction sent); resolves {ok, status, text}.
function post(url, body, onUpload) {
  return new Promise((resolve, reject) => {
    const x = new XMLHttpRequest();
    x.open('POST', url);
    x.upload.onprogress = (e) => { if (e.lengthComputable && e.total > 0) onUpload(e.loaded / e.total); };
    x.upload.onload = () => onUpload(1);
    x.onload = () => resolve({ok: x.status >= 200 && x.status < 300, status: x.status, text: x.responseText});
    x.onerror = () => reject(new Error('no connection'));
    x.send(body);
  });
}

async function check(job) {
  setStatus(job, 'checking', 'checking: uploading');
  let res, body;
  try {
    const scale = job.downscale ? '&downscale=' + job.downscale : '';
    res = await post('/predict?maps=1&report=1' + scale + '&name=' + encodeURIComponent(job.file.name), job.file, (f) => {
      job.uploaded = Math.max(job.uploaded || 0, Math.round(100 * f));
      job.li.dataset.uploaded = job.uploaded;
      if (job.status === 'checking')
        setStatus(job, 'checking', job.uploaded < 100 ? 'checking: uploading ' + job.uploaded + ' %' : 'checking: the server is working');
    });
  } catch (e) {
    job.error = 'The server did not answer (is diffnet serve running?): ' + e.message;
    return setStatus(job, 'error', 'error: the server did not answer');
  }
  try { body = JSON.parse(res.text); } catch (e) { body = {error: 'HTTP ' + res.status + ' without a JSON body'}; }
  if (!res.ok) {
    job.error = 'Error: ' + (body.error || ('HTTP ' + res.status));
    return setStatus(job, 'error', job.error);
  }
  job.pages = body.pages || [body];  // a PDF/TIFF answers {file, page_count, pages: [...]}
  job.report = body.report_html;
  job.pages.forEach(r => delete r.report_html);
  const worst = job.pages.reduce((a, r) => Math.max(a, r.image_score), 0);
  const flagged = job.pages.filter(r => r.decision === 'tampered').length;
  setStatus(job, 'done', (job.pages.length > 1 ? job.pages.length + ' pages, ' + flagged + ' tampered, ' : '') +
                         (flagged ? 'tampered' : 'pristine') + ' ' + worst.toFixed(2));
}

// Files are checked one after another, in the order they were added.
async function drain() {
  if (running) return;
  running = true;
  for (let job; (job = jobs.find(j => j.status === 'waiting'));) await check(job);
  running = false;
}

function add(files) {
  let first = null;
  for (const file of files) {
    const li = document.createElement('li');
    const job = {file, li, status: 'waiting', url: URL.createObjectURL(file)};
    li.addEventListener('click', () => showJob(job));
    $('queue').appendChild(li);
    jobs.push(job);
    setStatus(job, 'waiting');
    first = first || job;
  }
  if (first) showJob(first);
  drain();
}

$('form').addEventListener('submit', (ev) => { ev.preventDefault(); add($('file').files); });
const drop = $('drop');
drop.addEventListener('dragover', (ev) => { ev.preventDefault(); drop.classList.add('over'); });
drop.addEventListener('dragleave', () => drop.classList.remove('over'));
drop.addEventListener('drop', (ev) => { ev.preventDefault(); drop.classList.remove('over'); add(ev.dataTransfer.files); });
$('opacity').addEventListener('input', applyMode);
$('mode').addEventListener('change', applyMode);
$('zoom').addEventListener('change', applyZoom);
</script>
</body>
</html>
)HTML";

}  // namespace diffnet::serve
