// main.js: the report page. Reads the data cuprof put in it (data.js), then lays out: the run's
// header, a device picker, the device's figures, the timeline (always on screen), and tabs for the
// allocator's state, the flame graph, the call sites, memory by library and, for several files,
// the ranks or the two runs compared. Views are built when first shown; a call site highlighted in
// one view is highlighted in all of them.
import { readPage, decodeStacks } from './data.js';
import { DeviceModel } from './model.js';
import { SiteColors } from './colors.js';
import { el, fmtCount, fmtSize } from './format.js';
import { Timeline } from './timeline.js';
import { StateView } from './state.js';
import { FlameView } from './flame.js';
import { SitesView } from './sites.js';
import { librariesView } from './libraries.js';
import { ranksView, sparkline } from './ranks.js';
import { compareView } from './compare.js';
import './style.css';

class App {
  constructor(page) {
    this.page = page;
    this.data = page.data;
    this.highlight = null;
    this.listeners = new Map();
    this.views = {};
    this.runIndex = 0;
    this.stacks = this.data.runs.map((r) => decodeStacks(r, page.blobs));
  }

  on(name, f) {
    if (!this.listeners.has(name)) this.listeners.set(name, []);
    this.listeners.get(name).push(f);
  }

  emit(name, arg) {
    for (const f of this.listeners.get(name) || []) f(arg);
  }

  setHighlight(site) {
    this.highlight = site;
    for (const v of Object.values(this.views)) if (v && v.highlightChanged) v.highlightChanged();
    this.emit('highlight', site);
  }

  // explain's own words, which open with the verdict's kind (the kind alone when they are missing).
  oomVerdict(model, entry) {
    const v = (model.run.oom_verdicts || []).find((x) => x.device === model.device && x.entry === entry);
    return v ? v.text || v.verdict : null;
  }

  // A refusal of the driver's own call that met the state after `at` entries.
  driverOomVerdict(model, at) {
    const v = (model.run.oom_verdicts || []).find((x) => x.device === model.device && x.driver_at === at);
    return v ? v.text || v.verdict : null;
  }

  showState(at) {
    this.selectTab('state');
    this.views.state.show(at + 1);
  }

  // ---- layout

  start(root) {
    root.textContent = '';
    this.root = root;
    const d = this.data;
    const header = el('header');
    const title = d.kind === 'flamegraph' ? 'cuprof flame graph' : 'cuprof report';
    header.appendChild(el('h1', null, `${title}: ${d.file}`));
    this.meta = el('div', { class: 'meta', id: 'meta' });
    header.appendChild(this.meta);
    const pick = el('div', { class: 'pickers' });
    if (d.runs.length > 1) {
      this.runSel = el('select', { id: 'run-select', 'aria-label': 'run' });
      d.runs.forEach((r, i) => this.runSel.appendChild(el('option', { value: i }, `${r.name}: ${r.file}`)));
      this.runSel.addEventListener('change', () => this.selectRun(Number(this.runSel.value)));
      pick.appendChild(el('label', null, 'run '));
      pick.appendChild(this.runSel);
    }
    this.devSel = el('select', { id: 'device-select', 'aria-label': 'device' });
    this.devSel.addEventListener('change', () => this.selectDevice(Number(this.devSel.value)));
    pick.appendChild(el('label', null, ' device '));
    pick.appendChild(this.devSel);
    header.appendChild(pick);
    root.appendChild(header);
    this.main = el('main');
    root.appendChild(this.main);
    const footer = el('footer');
    const about = el('button', { type: 'button', class: 'linkish', id: 'about' }, 'about this page');
    about.addEventListener('click', () => this.about(footer));
    footer.appendChild(el('span', null, `${d.generator} · `));
    footer.appendChild(about);
    root.appendChild(footer);
    this.selectRun(0);
  }

  selectRun(i) {
    this.runIndex = i;
    const run = this.data.runs[i];
    this.meta.textContent = run.meta + (run.warnings.length ? ` · ${run.warnings.length} reader warnings` : '');
    this.devSel.textContent = '';
    for (const dv of run.devices)
      this.devSel.appendChild(el('option', { value: dv.device }, `${dv.device} (${fmtCount(dv.count)} entries)`));
    if (!run.devices.length) {
      this.main.textContent = 'This snapshot holds no device memory.';
      this.ready();
      return;
    }
    // The device with the longest history first, as memory_viz opens.
    const first = run.devices.reduce((a, b) => (b.count > a.count ? b : a));
    this.devSel.value = first.device;
    this.selectDevice(first.device);
  }

  selectDevice(device) {
    const run = this.data.runs[this.runIndex];
    const dev = run.devices.find((d) => d.device === device);
    const actions = this.data.actions;
    this.model = new DeviceModel(run, dev, this.stacks[this.runIndex], this.page.blobs, actions);
    const fields = dev.site_fields;
    const peak = fields.indexOf('peak_bytes');
    const end = fields.indexOf('end_bytes');
    const site = fields.indexOf('site');
    const order = [...dev.sites].sort((a, b) => Math.max(b[peak], b[end]) - Math.max(a[peak], a[end]))
      .map((r) => r[site]);
    this.colors = new SiteColors(order);
    this.highlight = null;
    this.views = {};
    this.layoutDevice();
  }

  layoutDevice() {
    const main = this.main;
    main.textContent = '';
    const m = this.model;
    const d = this.data;
    if (d.kind === 'flamegraph') {
      const box = el('section', { class: 'panel', id: 'flame' });
      main.appendChild(box);
      this.views.flame = new FlameView(this, m, box, d.flame_at);
      this.ready();
      return;
    }
    main.appendChild(this.figures(m.dev));
    const tl = el('section', { class: 'panel', id: 'timeline' });
    tl.appendChild(el('h2', null, 'active memory timeline'));
    const tlBody = el('div');
    tl.appendChild(tlBody);
    main.appendChild(tl);
    const tabs = [['state', 'allocator state'], ['flame', 'flame graph'], ['sites', 'call sites'],
      ['libraries', 'memory by library']];
    if (m.dev.ranges_text || (m.dev.phases && m.dev.phases.length)) tabs.push(['phases', 'phases']);
    if (d.mode === 'ranks' && this.page.ranks) tabs.push(['ranks', 'ranks']);
    if (d.mode === 'compare') tabs.push(['compare', 'A against B']);
    const bar = el('nav', { class: 'tabs', role: 'tablist' });
    this.tabBoxes = {};
    for (const [key, label] of tabs) {
      const b = el('button', { type: 'button', role: 'tab', class: 'tab', id: 'tab-' + key, 'data-tab': key }, label);
      b.addEventListener('click', () => this.selectTab(key));
      bar.appendChild(b);
    }
    main.appendChild(bar);
    for (const [key] of tabs) {
      const box = el('section', { class: 'panel tabpanel', id: 'panel-' + key, role: 'tabpanel' });
      box.style.display = 'none';
      main.appendChild(box);
      this.tabBoxes[key] = box;
    }
    if (m.hasHistory) {
      this.views.timeline = new Timeline(this, m, tlBody);
      this.views.timeline.render();
    } else {
      this.noHistory(tlBody, m);
    }
    const initial = d.mode === 'ranks' ? 'ranks' : d.mode === 'compare' ? 'compare' : m.hasHistory ? 'state' : 'flame';
    this.selectTab(this.currentTab && this.tabBoxes[this.currentTab] ? this.currentTab : initial);
    this.ready();
  }

  selectTab(key) {
    this.currentTab = key;
    for (const [k, box] of Object.entries(this.tabBoxes)) {
      box.style.display = k === key ? '' : 'none';
      document.getElementById('tab-' + k).classList.toggle('on', k === key);
    }
    const box = this.tabBoxes[key];
    if (box.dataset.built) return;
    box.dataset.built = '1';
    const m = this.model;
    if (key === 'state') {
      if (m.hasHistory) this.views.state = new StateView(this, m, box);
      else box.appendChild(el('p', { class: 'empty' }, 'This page was written without the trace history (--no-history).'));
    } else if (key === 'flame') this.views.flame = new FlameView(this, m, box);
    else if (key === 'sites') this.views.sites = new SitesView(this, m, box);
    else if (key === 'libraries') librariesView(m.dev, box);
    else if (key === 'phases') phasesView(m.dev, box);
    else if (key === 'ranks') ranksView(this.page.ranks, box);
    else if (key === 'compare') compareView(this.data, this.page.ranks, box);
  }

  figures(dev) {
    const box = el('section', { class: 'panel figures' });
    const rows = [
      ['peak reserved', 'peak-reserved', dev.text.peak_reserved, dev.peak_reserved_where],
      ['peak allocated (live)', 'peak-live', dev.text.peak_live, dev.peak_live_where],
      ['reserved at the end', 'end-reserved', dev.text.end_reserved, ''],
      ['allocated at the end (live)', 'end-live', dev.text.end_live, ''],
      ['cached free at the end', 'free-total', dev.text.free_total, `largest free block ${dev.text.largest_free}`],
    ];
    const t = el('table', { class: 'facts' });
    for (const [label, id, value, where] of rows) {
      const tr = el('tr');
      tr.appendChild(el('td', null, label));
      tr.appendChild(el('td', { class: 'num', id: `${id}-${dev.device}` }, value));
      tr.appendChild(el('td', null, where));
      t.appendChild(tr);
    }
    const tr = el('tr');
    tr.appendChild(el('td', null, 'trace entries'));
    tr.appendChild(el('td', { class: 'num', id: `entries-${dev.device}` }, String(dev.count)));
    const driverOoms = (dev.driver_ooms || []).length;
    tr.appendChild(el('td', null, `${dev.oom_count} OOM${dev.oom_count === 1 ? '' : 's'}` +
      (driverOoms ? ` and ${driverOoms} in the driver's own calls` : '') +
      (dev.dropped ? `, ${fmtCount(dev.dropped)} older entries dropped (the history starts mid-run)`
        : dev.mid_run ? ', the history starts mid-run' : '')));
    t.appendChild(tr);
    box.appendChild(t);
    return box;
  }

  // A page without the history: the lines alone, from the overview.
  noHistory(box, m) {
    box.appendChild(el('p', { class: 'hint' },
      'This page was written without the trace history (cuprof plot --no-history): allocated and reserved over the run, cut to bucket maxima.'));
    const cell = el('div', { id: 'overview-chart' });
    const o = m.dev.overview;
    sparkline(cell, o, Math.max(400, (box.clientWidth || 1000) - 10), 200, Math.max(1, ...o.reserved, ...o.live), 'overview');
    box.appendChild(cell);
  }

  about(footer) {
    if (footer.querySelector('.aboutbox')) return;
    const box = el('div', { class: 'aboutbox', id: 'about-box' });
    box.appendChild(el('p', null, 'This page draws the data `cuprof plot` wrote into it; it reaches no network. ' +
      'Libraries inside it (their licence texts are at the end of the page\'s source):'));
    const ul = el('ul');
    for (const l of this.page.libraries) ul.appendChild(el('li', null, `${l.name} ${l.version} (${l.license})`));
    box.appendChild(ul);
    footer.appendChild(box);
  }

  ready() {
    if (document.body.dataset.ready) return;
    requestAnimationFrame(() => {
      // The frame after the first paint of the device: what `scripts/bench` times.
      requestAnimationFrame(() => {
        document.body.dataset.paintedMs = performance.now().toFixed(0);
        document.body.dataset.ready = '1';
      });
    });
  }
}

function boot() {
  const root = document.getElementById('app');
  try {
    const page = readPage(document);
    const app = new App(page);
    window.cuprofViewer = app;
    app.start(root);
  } catch (err) {
    root.textContent = '';
    root.appendChild(el('p', { class: 'error' }, `This report could not be drawn: ${err.message}`));
    document.body.dataset.ready = 'error';
    throw err;
  }
}

boot();

// The history's phases: NVTX ranges (summary's section, in its words) and the annotations' phases
// (each annotation up to the next one), with summary's figures.
function phasesView(dev, box) {
  if (dev.ranges_text) {
    box.appendChild(el('h3', null, 'ranges (NVTX, record_function)'));
    box.appendChild(el('pre', { class: 'stack', id: 'phases-ranges' }, dev.ranges_text));
  }
  if (dev.phases && dev.phases.length) {
    box.appendChild(el('h3', null, 'annotations: each one up to the next'));
    const t = el('table', { class: 'facts', id: 'phases-marks' });
    const head = el('tr');
    for (const h of ['entry', 'label', 'live at its start', 'peak live', 'peak reserved', 'growth'])
      head.appendChild(el('th', null, h));
    t.appendChild(head);
    for (const p of dev.phases) {
      const tr = el('tr');
      const growth = (p.growth < 0 ? '-' : '+') + fmtSize(Math.abs(p.growth));
      for (const v of [fmtCount(p.entry), p.label === null ? '(metadata cleared)' : p.label,
        fmtSize(p.live), fmtSize(p.peak_live), fmtSize(p.peak_reserved), growth])
        tr.appendChild(el('td', null, v));
      t.appendChild(tr);
    }
    box.appendChild(t);
  }
}
