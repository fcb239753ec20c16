// readme_screenshot.mjs: the README's picture of the report page (cli/report-screenshot.png):
// the demo's report (scripts/demo writes out/report.html) with a band pinned, another hovered,
// and the allocator's state at the live peak. Usage: node readme_screenshot.mjs PAGE OUT.png
import { launch, open } from './browser.mjs';

const [file, out] = process.argv.slice(2);
const browser = await launch();
try {
  const { page, messages } = await open(browser, file, { width: 1360, height: 1160 });
  if (messages.length) throw new Error(messages.join('\n'));
  const box = await page.evaluate(() => {
    const r = document.getElementById('timeline-canvas').getBoundingClientRect();
    return { x: r.x, y: r.y, w: r.width, h: r.height };
  });
  // Pin the tallest band at 30% of the run, then hover one at 55%.
  const pick = (fx) => page.evaluate((fx) => {
    const t = window.cuprofViewer.views.timeline;
    const x = Math.floor(t.W * fx);
    const { colStart, bandId } = t.lay;
    let best = -1;
    for (let k = colStart[x]; k < colStart[x + 1]; k++)
      if (best < 0 || t.m.size[bandId[k]] > t.m.size[best]) best = bandId[k];
    return best >= 0 ? t.bandPoint(best) : null;
  }, fx);
  const pin = await pick(0.3);
  if (pin) await page.mouse.click(pin.x, pin.y);
  const hover = await pick(0.58);
  if (hover) await page.mouse.move(hover.x, hover.y);
  await page.waitForTimeout(200);
  await page.screenshot({ path: out, clip: { x: 0, y: 0, width: 1360, height: 1160 } });
} finally {
  await browser.close();
}
