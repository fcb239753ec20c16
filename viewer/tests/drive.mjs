// drive.mjs: one scenario on one report page in Chromium, what the page showed printed as one
// JSON line for test_viewer.py to check against the snapshot. Screenshots go to SHOTDIR.
// Usage: node drive.mjs SCENARIO PAGE SHOTDIR [ARGS_JSON]
import { launch, open } from './browser.mjs';
import { join, basename } from 'node:path';

const [scenario, file, shots, argText] = process.argv.slice(2);
const args = argText ? JSON.parse(argText) : {};
const name = basename(file, '.html');
const shot = (page, what, opts = {}) => page.screenshot({ path: join(shots, `${name}-${what}.png`), ...opts });
const settle = (page) => page.evaluate(() => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r))));

async function figures(page) {
  return page.evaluate(() => {
    const app = window.cuprofViewer;
    const m = app.model;
    const d = m.device;
    const text = (id) => (document.getElementById(`${id}-${d}`) || {}).textContent;
    let maxRes = 0;
    if (m.reserved) for (const v of m.reserved) maxRes = Math.max(maxRes, v);
    return {
      device: d,
      devices: [...document.querySelectorAll('#device-select option')].map((o) => Number(o.value)),
      shown: { 'peak-reserved': text('peak-reserved'), 'peak-live': text('peak-live'),
        'end-reserved': text('end-reserved'), 'end-live': text('end-live'), entries: text('entries') },
      model: m.hasHistory ? { peakLive: m.peakLive, peakLiveAt: m.peakLiveAt, peakReserved: maxRes,
        endLive: m.live[m.count], endReserved: m.reserved[m.count], allocs: m.nAllocs } : null,
      dev: { peak_live: m.dev.peak_live, peak_live_at: m.dev.peak_live_at, peak_reserved: m.dev.peak_reserved,
        end_live: m.dev.end_live, end_reserved: m.dev.end_reserved },
      painted: Number(document.body.dataset.paintedMs),
      kind: app.data.kind,
    };
  });
}

const timelineState = (page) => page.evaluate(() => {
  const t = window.cuprofViewer.views.timeline;
  return { visible: t.visible(), bands: t.drawnBands(), range: document.getElementById('timeline-range').textContent };
});

async function hoverBand(page, entry) {
  const p = await page.evaluate((entry) => {
    const t = window.cuprofViewer.views.timeline;
    const m = t.m;
    for (let id = 0; id < m.nAllocs; id++) if (m.born[id] - 1 === entry) return t.bandPoint(id);
    return null;
  }, entry);
  if (!p) return { point: null };
  await page.mouse.move(p.x, p.y);
  await settle(page);
  const tip = await page.evaluate(() => {
    const t = document.getElementById('tip');
    return t.style.display === 'block' ? t.textContent : '';
  });
  return { point: p, tip };
}

async function timeline(page) {
  const out = {};
  await page.evaluate((useIndex) => {
    if (useIndex) {
      const sel = document.getElementById('timeline-axis');
      sel.value = 'index';
      sel.dispatchEvent(new Event('change'));
    }
  }, !!args.index);
  await settle(page);
  out.full = await timelineState(page);
  await shot(page, 'timeline', { clip: await page.evaluate(() => {
    const r = document.getElementById('timeline').getBoundingClientRect();
    return { x: r.x, y: r.y + window.scrollY, width: r.width, height: r.height };
  }) });
  if (args.hover !== undefined) {
    out.hover = await hoverBand(page, args.hover);
    const t0 = Date.now();
    await page.mouse.move(out.hover.point.x + 1, out.hover.point.y);
    await settle(page);
    out.hoverMs = Date.now() - t0;
  }
  // Wheel: zoom in around the middle of the plot.
  const box = await page.evaluate(() => {
    const r = document.getElementById('timeline-canvas').getBoundingClientRect();
    return { x: r.x, y: r.y, w: r.width, h: r.height };
  });
  const x = box.x + box.w * (args.zoomAt ?? 0.5);
  const y = box.y + box.h / 2;
  await page.mouse.move(x, y);
  const t0 = Date.now();
  for (let k = 0; k < (args.wheels ?? 3); k++) await page.mouse.wheel(0, -300);
  await page.waitForTimeout(100);
  await settle(page);
  out.zoomMs = Date.now() - t0;
  out.renderMs = await page.evaluate(() => Number(document.querySelector('#timeline > div').dataset.renderMs));
  out.zoomed = await timelineState(page);
  // Drag: pan to the left by a quarter of the plot.
  await page.mouse.move(x, y);
  await page.mouse.down();
  await page.mouse.move(x + box.w / 4, y, { steps: 5 });
  await page.mouse.up();
  await settle(page);
  out.panned = await timelineState(page);
  // Shift+drag: zoom to a range.
  await page.keyboard.down('Shift');
  await page.mouse.move(box.x + box.w * 0.25, y);
  await page.mouse.down();
  await page.mouse.move(box.x + box.w * 0.5, y, { steps: 5 });
  await page.mouse.up();
  await page.keyboard.up('Shift');
  await settle(page);
  out.ranged = await timelineState(page);
  await shot(page, 'timeline-zoomed');
  // Back to the whole run, then pin the hovered band.
  await page.click('#timeline-reset');
  await settle(page);
  if (args.hover !== undefined) {
    const h = await hoverBand(page, args.hover);
    await page.mouse.click(h.point.x, h.point.y);
    await settle(page);
    out.pinned = await page.evaluate(() => ({
      details: document.getElementById('timeline-details').textContent,
      highlight: window.cuprofViewer.highlight,
    }));
    const all = await page.$('#timeline-details button.linkish[data-all], #timeline-details .stackpanel button');
    if (all) {
      await all.click();
      out.pinned.all = await page.evaluate(() => document.querySelector('#timeline-details pre.stack').textContent);
    }
  }
  return out;
}

// Each OOM marker on the timeline hovered: its tooltip's text.
async function oomTips(page) {
  const marks = await page.evaluate(() => [...document.querySelectorAll('.oom-marker')].map((p) => {
    const r = p.getBoundingClientRect();
    return { x: r.x + r.width / 2, y: r.y + 2, driver: p.classList.contains('driver') };
  }));
  const tips = [];
  for (const m of marks) {
    await page.mouse.move(m.x, m.y);
    await settle(page);
    tips.push({ driver: m.driver, tip: await page.evaluate(() => {
      const t = document.getElementById('tip');
      return t.style.display === 'block' ? t.textContent : '';
    }) });
  }
  return tips;
}

async function state(page) {
  const tips = args.oomTips ? await oomTips(page) : undefined;
  await page.click('#tab-state');
  const out = { steps: [], tips };
  for (const n of args.entries || []) {
    await page.fill('#state-entry', String(n));
    await page.press('#state-entry', 'Enter');
    await settle(page);
    out.steps.push(await page.evaluate(() => ({
      at: Number(document.getElementById('panel-state').dataset.at),
      segments: [...document.querySelectorAll('#state-segments tr[data-addr]')]
        .map((tr) => [Number(tr.dataset.addr), Number(tr.dataset.size)]),
      event: document.getElementById('state-event').textContent,
      allocated: document.getElementById('counter-allocated').textContent,
      reserved: document.getElementById('counter-reserved').textContent,
      verdict: [...document.querySelectorAll('#state-event table.facts tr')]
        .filter((tr) => tr.firstChild.textContent === 'verdict')
        .map((tr) => tr.lastChild.textContent)[0] || null,
      outOfMemory: [...document.querySelectorAll('#state-event table.facts tr')]
        .filter((tr) => tr.firstChild.textContent === 'out of memory')
        .map((tr) => tr.lastChild.textContent)[0] || null,
      driverMarkers: document.querySelectorAll('.oom-marker.driver').length,
    })));
  }
  await shot(page, 'state', { fullPage: true });
  // The arrow keys step one entry.
  await page.fill('#state-entry', '10');
  await page.press('#state-entry', 'Enter');
  await page.focus('#state-slider');
  const before = await page.evaluate(() => Number(document.getElementById('panel-state').dataset.at));
  await page.keyboard.press('ArrowRight');
  await page.keyboard.press('ArrowRight');
  await page.keyboard.press('ArrowLeft');
  await settle(page);
  out.arrows = [before, await page.evaluate(() => Number(document.getElementById('panel-state').dataset.at))];
  return out;
}

async function flame(page) {
  const kind = await page.evaluate(() => window.cuprofViewer.data.kind);
  if (kind !== 'flamegraph') await page.click('#tab-flame');
  const out = {};
  const folded = async () => page.evaluate(() => {
    const f = window.cuprofViewer.views.flame;
    const lines = {};
    const walk = (n, path) => {
      const kids = n.children || [];
      const below = kids.reduce((t, k) => t + k.value, 0);
      if (path.length && n.value > below) lines[path.join(';')] = n.value - below;
      for (const k of kids) walk(k, path.concat([k.name]));
    };
    walk(f.tree, []);
    return lines;
  });
  for (const measure of ['peak', 'end', 'total']) {
    await page.click(`button.measure[data-measure="${measure}"]`);
    await settle(page);
    out[measure] = await folded();
  }
  await page.click('button.measure[data-measure="peak"]');
  await page.fill('#flame-search', args.search || '');
  await settle(page);
  out.search = await page.evaluate(() => ({
    status: document.getElementById('flame-status').textContent,
    found: window.cuprofViewer.views.flame.highlighted(),
    colored: [...document.querySelectorAll('#flame-chart g.frame rect')].filter((r) => r.getAttribute('fill') === '#e600e6').length,
  }));
  // Hover the first frame that matched: bytes and share.
  const g = await page.$('#flame-chart g.frame:has(rect[fill="#e600e6"])');
  if (g) {
    await g.hover();
    await settle(page);
    out.hoverTip = await page.evaluate(() => document.getElementById('tip').textContent);
    await g.click();
    await page.waitForTimeout(400);
    out.zoomed = await page.evaluate(() => document.querySelectorAll('#flame-chart g.frame.fade').length);
  }
  await shot(page, 'flame', { fullPage: true });
  return out;
}

async function sites(page) {
  await page.click('#tab-sites');
  const rows = () => page.evaluate(() => [...document.querySelectorAll('#sites-table tr.site')].map((tr) => ({
    site: Number(tr.dataset.site),
    values: [...tr.querySelectorAll('td.num')].map((td) => Number(td.dataset.value)),
    name: tr.querySelector('td.sitename').textContent,
    highlighted: tr.classList.contains('highlighted'),
  })));
  const out = { byEnd: await rows() };
  await page.click('#sites-table th[data-key="total_bytes"]');
  out.byTotal = await rows();
  await page.click('#sites-table th[data-key="total_count"]');
  out.byCount = await rows();
  await page.fill('#sites-search', args.search || '');
  out.searched = await rows();
  await page.click('#sites-table tr.site');
  await settle(page);
  out.after = await rows();
  out.highlight = await page.evaluate(() => window.cuprofViewer.highlight);
  await shot(page, 'sites', { fullPage: true });
  return out;
}

async function ranks(page) {
  const tab = args.tab || 'ranks';
  await page.click(`#tab-${tab}`);
  await settle(page);
  const out = await page.evaluate((tab) => {
    const table = document.getElementById(tab === 'ranks' ? 'ranks-table' : 'compare-peaks');
    return {
      rows: [...table.querySelectorAll('tr')].slice(1).map((tr) => ({
        cells: [...tr.querySelectorAll('td')].map((td) => td.textContent), outlier: tr.classList.contains('outlier'),
      })),
      sparks: document.querySelectorAll('#ranks-timelines .sparkcell').length,
      sites: [...document.querySelectorAll('#ranks-sites tr')].slice(1).map((tr) => [...tr.querySelectorAll('td')].map((td) => td.textContent)),
      runs: [...document.querySelectorAll('#run-select option')].map((o) => o.textContent),
      charts: document.querySelectorAll('.compare-chart, #ranks-peaks').length,
      diff: document.querySelector('#compare-diff pre')?.textContent || null,
    };
  }, tab);
  await shot(page, tab, { fullPage: true });
  if (out.runs.length > 1) {
    await page.selectOption('#run-select', '1');
    await settle(page);
    out.second = await figures(page);
  }
  return out;
}

async function main() {
  const browser = await launch();
  let result;
  try {
    const { page, messages } = await open(browser, file, { width: args.width || 1400, height: 1000 });
    result = { figures: await figures(page) };
    if (scenario === 'load') await shot(page, 'page', { fullPage: true });
    else if (scenario === 'timeline') result.timeline = await timeline(page);
    else if (scenario === 'state') result.state = await state(page);
    else if (scenario === 'flame') result.flame = await flame(page);
    else if (scenario === 'sites') result.sites = await sites(page);
    else if (scenario === 'ranks') result.ranks = await ranks(page);
    else throw new Error(`no scenario ${scenario}`);
    result.messages = messages;
  } finally {
    await browser.close();
  }
  process.stdout.write(JSON.stringify(result) + '\n');
}

main().catch((e) => {
  console.error(e.stack || String(e));
  process.exit(2);
});
