// flame.js: flame graphs drawn as icicles (d3-flame-graph): the bytes live at the peak, at the
// end, and the bytes allocated over the whole run, per device; each call site a path from its
// outermost frame down to its innermost. Click a frame to zoom, search to highlight the frames
// whose text matches, hover for bytes and share. The numbers are cuprof's (the device's "sites").
import { select } from 'd3-selection';
import flamegraph from 'd3-flame-graph';
import { el, fmtSize, fmtPercent, fmtCount } from './format.js';
import { frameTexts } from './stack.js';
import { showTip, hideTip } from './tooltip.js';

export const MEASURES = [
  ['peak', 'live at the peak', 'peak_bytes', 'peak_count'],
  ['end', 'live at the end', 'end_bytes', 'end_count'],
  ['total', 'allocated over the run', 'total_bytes', 'total_count'],
];

// The tree of one measure: inclusive values, children by frame text.
export function flameTree(model, measure) {
  const dev = model.dev;
  const col = dev.site_fields.indexOf(MEASURES.find((x) => x[0] === measure)[2]);
  const siteCol = dev.site_fields.indexOf('site');
  const root = { name: 'all', value: 0, children: [], sites: new Set() };
  for (const row of dev.sites) {
    const bytes = row[col];
    if (!bytes) continue;
    const site = row[siteCol];
    const frames = frameTexts(model.stacks, site).reverse();
    if (frames.length === 0) frames.push('[no stack recorded]');
    root.value += bytes;
    root.sites.add(site);
    let node = root;
    for (const f of frames) {
      node.kids = node.kids || new Map();
      let next = node.kids.get(f);
      if (!next) {
        next = { name: f, value: 0, children: [], sites: new Set() };
        node.kids.set(f, next);
        node.children.push(next);
      }
      next.value += bytes;
      next.sites.add(site);
      node = next;
    }
  }
  const strip = (n) => {
    delete n.kids;
    n.children.forEach(strip);
  };
  strip(root);
  return root;
}

export class FlameView {
  constructor(app, model, box, measure) {
    this.app = app;
    this.m = model;
    this.box = box;
    this.measure = measure || 'peak';
    this.build();
  }

  build() {
    this.box.textContent = '';
    const ctl = el('div', { class: 'flamectl' });
    for (const [key, label] of MEASURES) {
      const b = el('button', { type: 'button', class: 'measure', 'data-measure': key }, label);
      b.addEventListener('click', () => {
        this.measure = key;
        this.draw();
      });
      ctl.appendChild(b);
    }
    this.search = el('input', { type: 'search', id: 'flame-search', placeholder: 'search frames…',
      'aria-label': 'search frames' });
    this.search.addEventListener('input', () => this.find(this.search.value));
    ctl.appendChild(this.search);
    const reset = el('button', { type: 'button', id: 'flame-reset' }, 'reset zoom');
    reset.addEventListener('click', () => this.chart && this.chart.resetZoom());
    ctl.appendChild(reset);
    this.box.appendChild(ctl);
    this.status = el('div', { class: 'flamestatus', id: 'flame-status' });
    this.box.appendChild(this.status);
    this.holder = el('div', { class: 'flameholder', id: 'flame-chart' });
    this.box.appendChild(this.holder);
    this.draw();
  }

  draw() {
    const m = this.m;
    for (const b of this.box.querySelectorAll('button.measure'))
      b.classList.toggle('on', b.dataset.measure === this.measure);
    const tree = flameTree(m, this.measure);
    this.tree = tree;
    this.holder.textContent = '';
    const label = MEASURES.find((x) => x[0] === this.measure)[1];
    if (!tree.value) {
      this.holder.appendChild(el('p', { class: 'empty' }, `No bytes ${label} on this device.`));
      this.chart = null;
      this.status.textContent = '';
      return;
    }
    tree.name = `all: ${fmtSize(tree.value)} ${label}`;
    const width = Math.max(400, Math.floor(this.box.clientWidth || 1100) - 8);
    const total = tree.value;
    const tip = () => {};
    tip.show = (ev, d) => {
      const box = el('div');
      box.appendChild(el('div', { class: 'tiptitle' }, d.data.name));
      box.appendChild(el('div', null, `${fmtSize(d.data.value)}, ${fmtPercent(d.data.value, total)} of ${fmtSize(total)} ${label}`));
      box.appendChild(el('div', null, `${fmtCount(d.data.sites.size)} call site${d.data.sites.size === 1 ? '' : 's'} through here · click to zoom`));
      showTip(ev, box);
    };
    tip.hide = hideTip;
    const hl = () => this.app.highlight;
    this.chart = flamegraph()
      .width(width)
      .cellHeight(18)
      .inverted(true)
      .minFrameSize(1)
      .transitionDuration(150)
      .sort(true)
      .tooltip(tip)
      .setSearchMatch((d, term) => !!term && d.data.name.toLowerCase().includes(term.toLowerCase()))
      .setColorMapper((d, original) => {
        if (d.highlight) return '#e600e6';
        const site = hl();
        if (site !== null && site !== undefined && d.data.sites.has(site)) return this.app.colors.css(site);
        return original;
      })
      .setSearchHandler((results, sum) => {
        this.found = results;
        this.status.textContent = this.search.value
          ? `search "${this.search.value}": ${fmtCount(results.length)} frames, ${fmtSize(sum)} (${fmtPercent(sum, total)})`
          : '';
      });
    select(this.holder).datum(tree).call(this.chart);
    if (this.search.value) this.find(this.search.value);
    this.app.emit('flame', this);
  }

  find(term) {
    if (!this.chart) return;
    if (term) this.chart.search(term);
    else {
      this.chart.clear();
      this.found = [];
      this.status.textContent = '';
    }
  }

  highlightChanged() {
    if (this.chart) this.chart.update();
  }

  // For tests: the frames highlighted by the search.
  highlighted() {
    return (this.found || []).map((d) => d.data.name);
  }
}
