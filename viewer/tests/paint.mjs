// paint.mjs: how fast a report page is in Chromium, for scripts/bench (bench_plot): the time
// from navigation to the first paint of its device (the page's own data-painted-ms), then the
// timeline's render of the whole run and of a zoomed view, and a hover's answer, each the best
// of three, in ms. Prints one JSON line. Usage: node paint.mjs PAGE
import { launch, open } from './browser.mjs';

const browser = await launch();
try {
  const { page, messages } = await open(browser, process.argv[2], { timeout: 600000 });
  const out = await page.evaluate(() => {
    const r = { painted: Number(document.body.dataset.paintedMs) };
    const t = window.cuprofViewer.views.timeline;
    if (!t) return r;
    const best = (f) => {
      let b = Infinity;
      for (let k = 0; k < 3; k++) {
        const t0 = performance.now();
        f(k);
        b = Math.min(b, performance.now() - t0);
      }
      return b;
    };
    const full = t.x.domain();
    r.render = best(() => t.render());
    // A view of a tenth of the run around its middle, as a wheel zoom sets it.
    const mid = (full[0] + full[1]) / 2;
    const span = (full[1] - full[0]) / 20;
    t.x.domain([mid - span, mid + span]);
    r.zoom = best(() => t.render());
    t.x.domain(full);
    t.render();
    // A hover: the handler finds the band under the pointer and fills the tooltip.
    const rect = t.surface.node().getBoundingClientRect();
    r.hover = best((k) => {
      const ev = new MouseEvent('mousemove', {
        clientX: rect.left + rect.width * (0.3 + 0.2 * k), clientY: rect.bottom - 20, bubbles: true,
      });
      t.surface.node().dispatchEvent(ev);
    });
    r.bands = t.lay.n;
    return r;
  });
  out.messages = messages;
  process.stdout.write(JSON.stringify(out) + '\n');
} finally {
  await browser.close();
}
