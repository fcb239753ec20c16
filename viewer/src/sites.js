// sites.js: the call sites of a device, one row each: live bytes and allocations at the end and
// at the peak, bytes and allocations over the run. Sort by any column (click its header), search
// the frames, click a row to highlight the site in the timeline, the allocator's state and the
// flame graph (click again to clear).
import { el, fmtSize, fmtCount } from './format.js';
import { frameTexts } from './stack.js';
import { showTip, hideTip } from './tooltip.js';

const MAX_ROWS = 300;
const COLUMNS = [
  ['end_bytes', 'live at end', fmtSize],
  ['end_count', 'blocks at end', fmtCount],
  ['peak_bytes', 'live at peak', fmtSize],
  ['peak_count', 'blocks at peak', fmtCount],
  ['total_bytes', 'allocated over run', fmtSize],
  ['total_count', 'allocations', fmtCount],
];

export class SitesView {
  constructor(app, model, box) {
    this.app = app;
    this.m = model;
    this.box = box;
    this.sortKey = 'end_bytes';
    this.query = '';
    const dev = model.dev;
    this.col = Object.fromEntries(dev.site_fields.map((f, i) => [f, i]));
    this.rows = dev.sites.map((r) => {
      const frames = frameTexts(model.stacks, r[this.col.site]);
      return { row: r, site: r[this.col.site], frames, text: frames.join('\n').toLowerCase() };
    });
    this.build();
  }

  build() {
    this.box.textContent = '';
    const ctl = el('div', { class: 'sitesctl' });
    this.searchBox = el('input', { type: 'search', id: 'sites-search', placeholder: 'search call sites…',
      'aria-label': 'search call sites' });
    this.searchBox.addEventListener('input', () => {
      this.query = this.searchBox.value.toLowerCase();
      this.render();
    });
    ctl.appendChild(this.searchBox);
    this.count = el('span', { class: 'hint', id: 'sites-count' });
    ctl.appendChild(this.count);
    this.box.appendChild(ctl);
    this.table = el('table', { class: 'grid sites', id: 'sites-table' });
    this.box.appendChild(this.table);
    this.render();
  }

  render() {
    const c = this.col;
    const key = c[this.sortKey];
    let rows = this.rows;
    if (this.query) rows = rows.filter((r) => r.text.includes(this.query));
    rows = [...rows].sort((a, b) => b.row[key] - a.row[key] || a.site - b.site);
    this.count.textContent = `${fmtCount(rows.length)} of ${fmtCount(this.rows.length)} call sites` +
      (rows.length > MAX_ROWS ? ` (the first ${MAX_ROWS} shown)` : '');
    const t = this.table;
    t.textContent = '';
    const hr = el('tr');
    hr.appendChild(el('th', null, ''));
    for (const [k, label] of COLUMNS) {
      const th = el('th', { class: 'num sortable' + (k === this.sortKey ? ' sorted' : ''), 'data-key': k },
        label + (k === this.sortKey ? ' ▾' : ''));
      th.addEventListener('click', () => {
        this.sortKey = k;
        this.render();
      });
      hr.appendChild(th);
    }
    hr.appendChild(el('th', null, 'call site (innermost frame first)'));
    t.appendChild(hr);
    const hl = this.app.highlight;
    for (const r of rows.slice(0, MAX_ROWS)) {
      const tr = el('tr', { class: 'site' + (hl === r.site ? ' highlighted' : ''), 'data-site': String(r.site) });
      const sw = el('td');
      sw.appendChild(el('span', { class: 'swatch', style: `background:${this.app.colors.css(r.site)}` }));
      tr.appendChild(sw);
      for (const [k, , fmt] of COLUMNS) tr.appendChild(el('td', { class: 'num', 'data-value': String(r.row[c[k]]) }, fmt(r.row[c[k]])));
      const name = r.frames.length ? r.frames[0] + (r.frames.length > 1 ? `  < ${r.frames[1]}` : '') : '[no stack recorded]';
      tr.appendChild(el('td', { class: 'sitename' }, name));
      tr.addEventListener('click', () => this.app.setHighlight(hl === r.site ? null : r.site));
      tr.addEventListener('mousemove', (ev) => {
        const box = el('div');
        box.appendChild(el('pre', { class: 'stack' }, r.frames.length ? r.frames.slice(0, 24).join('\n') : '[no stack recorded]'));
        box.appendChild(el('div', { class: 'hint' }, 'click: highlight it in the timeline, the state and the flame graph'));
        showTip(ev, box);
      });
      tr.addEventListener('mouseleave', hideTip);
      t.appendChild(tr);
    }
  }

  highlightChanged() {
    this.render();
  }
}
