// The upload page of `diffnet serve` in a real browser: headless Chromium (Debian's chromium-headless-shell)
// driven over the DevTools protocol on a pipe (no npm package). Checks: an image gives a verdict and an
// overlay; a PDF gives one tab per page and the tabs switch pages; a bad file replaces the previous result
// with its error; a server that is down is said so.
// Several files at once form a queue checked in order; the opacity slider, the JSON download and the
// region list work. On an edited letter (the shipped weights find its regions): the region list has a
// crop of the page per region, "side by side" puts the overlay beside the page, and the report download
// is the server's HTML report of that file. A born-digital PDF page shows its warning under the verdict. A
// JPEG with an EXIF orientation tag is shown as stored under its overlay.
// Usage: node test_web_page.js DIFFNET_CLI DATA_DIR (exit 77 = skipped: no browser).
'use strict';
const { spawn } = require('child_process');
const fs = require('fs');
const os = require('os');
const path = require('path');

const [cli, dataDirArg] = process.argv.slice(2);
const dataDir = path.resolve(dataDirArg);  // the browser takes absolute file paths only
const browserPath = ['/usr/bin/chromium-headless-shell', '/usr/bin/chromium'].find(p => fs.existsSync(p));
if (!browserPath) {
  console.log('SKIPPED: no chromium-headless-shell or chromium (apt install chromium-headless-shell)');
  process.exit(77);
}

let failures = 0;
function check(ok, what) {
  console.log((ok ? 'ok   ' : 'FAIL ') + what);
  if (!ok) failures++;
}
const sleep = (ms) => new Promise(r => setTimeout(r, ms));
// Calls `probe` every 100 ms, at most `tries` times, until it returns something truthy; returns that, or
// undefined when it never did.
const pollUntil = async (probe, tries) => {
  for (let i = 0; i < tries; i++) {
    const v = await probe();
    if (v) return v;
    await sleep(100);
  }
};

// A plain RGB PNG of a white page with a few dark bars, written here (zlib and the PNG chunk layout).
function writePng(file, w, h) {
  const zlib = require('zlib');
  const crcTable = Array.from({ length: 256 }, (_, n) => {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
    return c >>> 0;
  });
  const crc = (buf) => { let c = 0xffffffff; for (const b of buf) c = crcTable[(c ^ b) & 0xff] ^ (c >>> 8); return (c ^ 0xffffffff) >>> 0; };
  const chunk = (type, data) => {
    const len = Buffer.alloc(4); len.writeUInt32BE(data.length);
    const body = Buffer.concat([Buffer.from(type), data]);
    const c = Buffer.alloc(4); c.writeUInt32BE(crc(body));
    return Buffer.concat([len, body, c]);
  };
  const raw = Buffer.alloc((3 * w + 1) * h, 255);
  for (let y = 0; y < h; y++) {
    raw[y * (3 * w + 1)] = 0;  // filter: none
    if (y % 400 >= 200 && y % 400 < 240 && y < 2000)  // a few dark bars, like lines of large print
      raw.fill(30, y * (3 * w + 1) + 1 + 3 * 600, y * (3 * w + 1) + 1 + 3 * 2400);
  }
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(w, 0); ihdr.writeUInt32BE(h, 4); ihdr[8] = 8; ihdr[9] = 2;
  fs.writeFileSync(file, Buffer.concat([Buffer.from([137, 80, 78, 71, 13, 10, 26, 10]), chunk('IHDR', ihdr),
                                        chunk('IDAT', zlib.deflateSync(raw)), chunk('IEND', Buffer.alloc(0))]));
}

// The server on a free port, with the shipped weights (the examples' regions are known to be found), every
// page at full size (--downscale 1, so that a page as fine as a 600 dpi scan gets the warning and the button).
function startServer() {
  return new Promise((resolve, reject) => {
    const srv = spawn(cli, ['-t', '1', 'serve', '--port', '0', '--downscale', '1'], { stdio: ['ignore', 'ignore', 'pipe'] });
    let err = '';
    srv.stderr.on('data', d => {
      err += d;
      if (process.env.DIFFNET_WEB_DEBUG) process.stderr.write('[serve] ' + d);
      const m = err.match(/listening on (http:\/\/[^/ ]+\/)/);
      if (m) resolve({ srv, url: m[1] });
    });
    srv.on('exit', code => reject(new Error('serve exited with ' + code + ': ' + err)));
    setTimeout(() => reject(new Error('serve did not start: ' + err)), 60000).unref();
  });
}

// DevTools protocol over --remote-debugging-pipe: JSON messages separated by NUL, fd 3 in, fd 4 out.
class Browser {
  constructor() {
    this.profile = fs.mkdtempSync(path.join(os.tmpdir(), 'diffnet-web-'));
    this.proc = spawn(browserPath, ['--headless', '--no-sandbox', '--disable-gpu', '--remote-debugging-pipe',
                                     '--user-data-dir=' + this.profile, 'about:blank'],
                      { stdio: ['ignore', 'ignore', 'ignore', 'pipe', 'pipe'], detached: true });  // own group
    this.next = 1;
    this.pending = new Map();
    let buf = '';
    this.proc.stdio[4].on('data', d => {
      buf += d.toString('utf8');
      let i;
      while ((i = buf.indexOf('\0')) >= 0) {
        const msg = JSON.parse(buf.slice(0, i));
        buf = buf.slice(i + 1);
        const p = msg.id && this.pending.get(msg.id);
        if (p) {
          this.pending.delete(msg.id);
          msg.error ? p.reject(new Error(JSON.stringify(msg.error))) : p.resolve(msg.result);
        }
      }
    });
  }
  send(method, params = {}, sessionId = undefined) {
    const id = this.next++;
    const msg = { id, method, params };
    if (sessionId) msg.sessionId = sessionId;
    this.proc.stdio[3].write(JSON.stringify(msg) + '\0');
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      setTimeout(() => reject(new Error('no answer to ' + method)), 30000).unref();
    });
  }
  async page(url) {
    const { targetId } = await this.send('Target.createTarget', { url: 'about:blank' });
    const { sessionId } = await this.send('Target.attachToTarget', { targetId, flatten: true });
    const s = (m, p) => this.send(m, p, sessionId);
    await s('Page.enable');
    await s('Page.navigate', { url });
    const page = {
      // A PNG of the page (DIFFNET_WEB_SHOT=FILE.png saves one after the PDF upload, and FILE-side.png of
      // the letter side by side, to look at).
      shot: async (file) => fs.writeFileSync(file, Buffer.from((await s('Page.captureScreenshot', { format: 'png' })).data, 'base64')),
      eval: async (expr) => {
        const r = await s('Runtime.evaluate', { expression: expr, awaitPromise: true, returnByValue: true });
        if (r.exceptionDetails) throw new Error(expr + ': ' + JSON.stringify(r.exceptionDetails));
        return r.result.value;
      },
      // Chooses `file` in the form's file input and submits, then waits until the verdict is no longer
      // "Checking ..." (at most 60 s). Returns the page's state.
      // Chooses `files` (one path or several) and submits; waits until every file of the queue is checked
      // (at most 60 s). Returns the page's state (what is on screen: the first file of this upload).
      upload: async (files) => {
        const { root } = await s('DOM.getDocument', { depth: -1 });
        const { nodeId } = await s('DOM.querySelector', { nodeId: root.nodeId, selector: '#file' });
        await s('DOM.setFileInputFiles', { nodeId, files: [].concat(files) });
        await page.eval("document.getElementById('form').requestSubmit()");
        const done = await pollUntil(async () => {
          const st = await page.state();
          return st.queue.length && st.queue.every(q => !/ - (waiting|checking)/.test(q)) && !st.verdict.endsWith(' ...') && st;
        }, 600);
        return done || page.state();
      },
      state: () => page.eval(`(() => {
        const $ = (id) => document.getElementById(id);
        return { verdict: $('verdict').textContent, cls: $('verdict').className,
                 overlay: !$('view').hidden && ($('overlay').getAttribute('src') || '').startsWith('data:image/png;base64,'),
                 original: $('original').getAttribute('src') || '',
                 record: !$('record').hidden, legend: !$('legend').hidden, note: $('scorenote').textContent,
                 tabs: Array.from(document.querySelectorAll('#tabs button')).map(b => b.textContent),
                 queue: Array.from(document.querySelectorAll('#queue li')).map(li => li.textContent),
                 uploaded: Array.from(document.querySelectorAll('#queue li')).map(li => li.dataset.uploaded || ''),
                 regions: document.querySelectorAll('#regions tbody tr').length,
                 download: $('download').getAttribute('href') || '' };
      })()`),
    };
    await pollUntil(async () => {  // wait for the page's script
      try {
        return await page.eval("document.readyState === 'complete' && !!document.getElementById('form')");
      } catch (e) { return false; /* navigating */ }
    }, 100);
    return page;
  }
  close() {
    try { process.kill(-this.proc.pid, 'SIGKILL'); } catch (e) { /* already gone */ }  // its helpers too
    fs.rmSync(this.profile, { recursive: true, force: true });
  }
}

(async () => {
  const { srv, url } = await startServer();
  const browser = new Browser();
  try {
    const page = await browser.page(url);

    let st = await page.upload(path.join(dataDir, 'io/doc_q80_420.jpg'));
    check(/^doc_q80_420\.jpg: (tampered|pristine) \(page probability [0-9.]+/.test(st.verdict), 'an image gives its verdict: ' + st.verdict);
    check(st.cls === 'tampered' || st.cls === 'pristine', 'the verdict is coloured by the decision');
    check(st.overlay && st.record && st.legend, 'overlay, legend and record are shown');
    check(st.original.startsWith('blob:'), 'the uploaded image itself lies under the overlay');
    check(st.tabs.length === 0, 'an image has no page tabs');
    check(st.download.startsWith('blob:'), 'the JSON can be downloaded');
    check(st.uploaded[0] === '100', 'the upload progress reached 100 %: ' + JSON.stringify(st.uploaded));
    const opacity = await page.eval(`(() => { const o = document.getElementById('opacity'); o.value = 30;
      o.dispatchEvent(new Event('input')); return document.getElementById('overlay').style.opacity; })()`);
    check(opacity === '0.3', 'the slider sets the overlay opacity: ' + opacity);
    if (st.regions > 0) {
      const mark = await page.eval(`(() => { document.querySelector('#regions tbody tr').click();
        return !document.getElementById('mark').hidden; })()`);
      check(mark, 'clicking a region outlines it');
    }

    st = await page.upload(path.join(dataDir, 'io/scan2.pdf'));
    check(st.queue.length === 2 && /^scan2\.pdf - 2 pages, /.test(st.queue[1]), 'the PDF joins the queue: ' + JSON.stringify(st.queue));
    check(st.tabs.length === 2 && /^page 1: /.test(st.tabs[0]) && /^page 2: /.test(st.tabs[1]),
          'a 2-page PDF gives two page tabs: ' + JSON.stringify(st.tabs));
    check(st.verdict.startsWith('scan2.pdf#1: '), 'the first page is shown first: ' + st.verdict);
    check(st.original.startsWith('data:image/png;base64,'), "a PDF page's own pixels lie under the overlay");
    check(!st.note.includes('Warning'), 'a scanned page has no warning: ' + st.note);
    if (process.env.DIFFNET_WEB_SHOT) await page.shot(process.env.DIFFNET_WEB_SHOT);
    await page.eval("document.querySelectorAll('#tabs button')[1].click()");
    st = await page.state();
    check(st.verdict.startsWith('scan2.pdf#2: ') && st.overlay, 'the second tab shows page 2: ' + st.verdict);
    await page.eval("document.querySelectorAll('#queue li')[0].click()");
    st = await page.state();
    check(st.verdict.startsWith('doc_q80_420.jpg: ') && st.tabs.length === 0, 'the queue switches back to the first file');

    st = await page.upload([path.join(dataDir, 'io/README.md'), path.join(dataDir, 'io/doc_q90_444.jpg')]);
    check(st.queue.length === 4 && / - done$/.test(st.queue[3]) === false && /doc_q90_444\.jpg - (tampered|pristine)/.test(st.queue[3]),
          'two files at once are both checked: ' + JSON.stringify(st.queue));
    check(st.cls === 'error' && /^Error: .*README\.md/.test(st.verdict), 'a bad file shows its error: ' + st.verdict);
    check(!st.overlay && !st.record && !st.legend && st.tabs.length === 0, 'the error replaces the previous result');

    st = await page.upload(path.join(dataDir, '..', '..', 'examples', '10-letter-tampered.jpg'));
    check(/^10-letter-tampered\.jpg: /.test(st.verdict) && st.regions > 0, 'the edited letter has its regions listed: ' + st.verdict);
    // The page draws the crops when the image under the overlay has loaded, which can come after the
    // verdict: wait (at most 5 s) until it has loaded and no crop canvas is still at the HTML default size
    // of 300 x 150 (a drawn crop is at most 160 px), then measure.
    await pollUntil(() => page.eval(`(() => { const img = document.getElementById('original');
      return img.complete && img.naturalWidth > 0 && Array.from(document.querySelectorAll('#regions tbody canvas'))
        .every(c => !(c.width === 300 && c.height === 150)); })()`), 50);
    // Each crop: the region's box plus a margin of max(8, a quarter of its larger side), at most 160 px; at
    // full size (these are), every pixel away from the blue outline is the page's own at that place.
    const crops = await page.eval(`(() => {
      const img = document.getElementById('original'), full = document.createElement('canvas');
      full.width = img.naturalWidth; full.height = img.naturalHeight;
      const fg = full.getContext('2d'); fg.drawImage(img, 0, 0);
      return Array.from(document.querySelectorAll('#regions tbody canvas')).map(c => {
        const [x, y, w, h] = JSON.parse(c.dataset.box), m = Math.max(8, Math.floor(Math.max(w, h) / 4));
        const x0 = Math.max(0, x - m), y0 = Math.max(0, y - m);
        const got = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
        const want = fg.getImageData(x0, y0, c.width, c.height).data;
        let compared = 0, differ = 0, ink = 0, blue = 0;
        for (let py = 0; py < c.height; py++) for (let px = 0; px < c.width; px++) {
          const i = 4 * (py * c.width + px), bx = px + x0 - x, by = py + y0 - y;
          blue += got[i + 3] === 255 && got[i + 2] - got[i] > 100;
          const nearOutline = bx >= -3 && bx <= w + 2 && by >= -3 && by <= h + 2 &&
                              (bx <= 2 || bx >= w - 3 || by <= 2 || by >= h - 3);
          if (nearOutline) continue;
          compared++;
          ink += want[i] + want[i + 1] + want[i + 2] < 450;
          differ += Math.abs(want[i] - got[i]) + Math.abs(want[i + 1] - got[i + 1]) + Math.abs(want[i + 2] - got[i + 2]) > 6;
        }
        return { w: c.width, h: c.height, full: c.width === Math.min(full.width, x + w + m) - x0, compared, differ, ink, blue };
      });
    })()`);
    check(crops.length === st.regions && crops.every(c => c.w > 8 && c.h > 8 && c.w <= 160 && c.h <= 160),
          'each region has a crop of at most 160 px: ' + JSON.stringify(crops.map(c => [c.w, c.h])));
    check(crops.length > 0 && crops.every(c => c.full && c.compared > 100 && c.ink > 0 && c.differ === 0 && c.blue > 0),
          'the crops are the page at the region with its blue outline: ' + JSON.stringify(crops));
    const side = await page.eval(`(() => { const m = document.getElementById('mode'); m.value = 'side';
      m.dispatchEvent(new Event('change'));
      const o = document.getElementById('original').getBoundingClientRect(), v = document.getElementById('overlay').getBoundingClientRect();
      const view = document.getElementById('view').getBoundingClientRect();
      return { beside: v.left >= o.right - 1 && Math.abs(v.top - o.top) < 2, inside: v.right <= view.right + 1,
               opacity: document.getElementById('overlay').style.opacity }; })()`);
    if (process.env.DIFFNET_WEB_SHOT) await page.shot(process.env.DIFFNET_WEB_SHOT.replace(/\.png$/, '') + '-side.png');
    check(side.beside && side.inside && side.opacity === '1', 'side by side puts the full overlay beside the page, both in view: ' + JSON.stringify(side));
    const report = await page.eval(`(async () => { const a = document.getElementById('report');
      if (a.hidden || !a.href.startsWith('blob:')) return 'no link';
      return a.download + '|' + await (await fetch(a.href)).text(); })()`);
    check(report.startsWith('10-letter-tampered.jpg.diffnet-report.html|<!DOCTYPE html>') &&
          report.includes('10-letter-tampered.jpg') && report.includes('data:image/png;base64,'),
          'the report downloads as the HTML report of the file: ' + report.slice(0, 80));

    st = await page.upload(path.join(dataDir, 'io/text.pdf'));
    check(st.verdict.startsWith('text.pdf#1: ') && st.note.includes('Warning: born-digital page'),
          'a born-digital PDF page shows its warning: ' + st.note);

    // A page as fine as a 600 dpi scan (shorter side >= 3,500 px): the server's warning, and a button that
    // checks the same file again at a quarter of the size (?downscale=4).
    const fine = path.join(os.tmpdir(), 'diffnet-web-fine-' + process.pid + '.png');
    writePng(fine, 3600, 3600);
    st = await page.upload(fine);  // the file stays until the second check has read it again
    const rescale = () => page.eval("(() => { const b = document.getElementById('rescale'); return !b.hidden; })()");
    check(st.note.includes('Warning: page of 3600 x 3600 px') && await rescale(),
          'a 600 dpi-sized page shows the warning and the button: ' + st.note);
    await page.eval("document.getElementById('rescale').click()");
    const again = await pollUntil(async () => {
      const t = await page.eval("document.getElementById('record').hidden ? '' : document.getElementById('record').textContent");
      return t.includes('"downscale": 4') && t;
    }, 600);
    const note = (await page.state()).note;
    check(!!again && !(await rescale()) && !note.includes('Warning: page of') &&
          note.includes('Analysed at 1/4 of its size (as asked)'),
          'the button checks it again at a quarter of the size, without the warning: ' + note);
    fs.rmSync(fine, { force: true });

    // A JPEG whose EXIF orientation tag (6: viewers turn it 90 degrees clockwise) turns it: the server runs it
    // turned and returns the overlay in the stored orientation (48 x 64 px), so the page under it is shown as
    // stored too, not turned by the browser (which would put the overlay's boxes on other pixels): the page
    // asks for that (image-orientation: none), and the page under the overlay is 64 high for 48 wide.
    // (Debian's chromium-headless-shell 2026 was measured to show this file as stored even without the rule.)
    const stored = fs.readFileSync(path.join(dataDir, 'io/turn_stored_o6.jpg'));
    const tiff = Buffer.from([0x4d, 0x4d, 0, 42, 0, 0, 0, 8, 0, 1, 0x01, 0x12, 0, 3, 0, 0, 0, 1, 0, 6, 0, 0, 0, 0, 0, 0]);
    const app1 = Buffer.concat([Buffer.from('Exif\0\0', 'binary'), tiff]);
    const len = Buffer.from([(app1.length + 2) >> 8, (app1.length + 2) & 0xff]);
    const tagged = path.join(os.tmpdir(), `diffnet-web-turned-${process.pid}.jpg`);
    fs.writeFileSync(tagged, Buffer.concat([stored.subarray(0, 2), Buffer.from([0xff, 0xe1]), len, app1, stored.subarray(2)]));
    st = await page.upload(tagged);
    const shape = await page.eval(`(() => { const o = document.getElementById('original').getBoundingClientRect();
      const v = document.getElementById('overlay');
      return [o.width, o.height, v.naturalWidth, getComputedStyle(document.getElementById('original')).imageOrientation]; })()`);
    check(st.overlay && Math.abs(shape[1] / shape[0] - 64 / 48) < 0.05 && shape[2] === 48 && shape[3] === 'none',
          'a page with an EXIF orientation tag is shown as stored under its overlay: ' + JSON.stringify(shape));
    fs.rmSync(tagged, { force: true });

    srv.kill('SIGTERM');
    await new Promise(r => srv.on('exit', r));
    st = await page.upload(path.join(dataDir, 'io/doc_q80_420.jpg'));
    check(st.cls === 'error' && st.verdict.includes('did not answer'), 'a server that is down is said so: ' + st.verdict);
  } finally {
    browser.close();
    srv.kill('SIGKILL');
  }
  if (failures) {
    console.log(failures + ' check(s) failed');
    process.exit(1);
  }
  console.log('all checks passed');
  process.exit(0);  // the browser's pipes must not keep Node alive
})().catch(e => {
  console.log('FAIL ' + e.stack);
  process.exit(1);
});
