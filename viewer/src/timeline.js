// timeline.js: the active memory timeline. Every allocation is a band stacked over time (the
// oldest at the bottom), coloured by call site, with the allocated and reserved lines over them,
// annotations as labelled ranges and OOMs as markers. Wheel zooms, drag pans, shift+drag zooms to
// a range, the strip below moves the view; hover a band for its sizes, times and stack, click to
// pin it and highlight its call site. Drawn per pixel column (layout.js) on a canvas; axes and
// marks are SVG (d3).
import { select, pointer } from 'd3-selection';
import { scaleLinear } from 'd3-scale';
import { axisBottom, axisLeft } from 'd3-axis';
import { zoom, zoomIdentity } from 'd3-zoom';
import { brushX } from 'd3-brush';
import { columnRanges, sampleColumns, sweep } from './layout.js';
import { COLORS, fade, packRGB } from './colors.js';
import { el, fmtSize, fmtSizeShort, fmtTime, fmtCount } from './format.js';
import { showTip, hideTip } from './tooltip.js';
import { siteLines, stackPanel } from './stack.js';

const MARGIN = { left: 64, right: 12, top: 22, bottom: 26 };
const HEIGHT = 340;
const STRIP = 46;

export class Timeline {
  constructor(app, model, box) {
    this.app = app;
    this.m = model;
    this.box = box;
    this.useTime = model.hasTime;
    this.pinned = -1;
    this.build();
  }

  // The whole history in the current axis's units.
  fullDomain() {
    const m = this.m;
    if (this.useTime) {
      const t0 = m.times[0];
      const t1 = m.times[m.count - 1];
      return [t0, t1 > t0 ? t1 : t0 + 1];
    }
    return [0, m.count + 1];
  }

  build() {
    const m = this.m;
    this.box.textContent = '';
    const head = el('div', { class: 'tlhead' });
    this.info = el('span', { class: 'tlinfo', id: 'timeline-range' });
    head.appendChild(this.info);
    const axisSel = el('select', { id: 'timeline-axis', title: 'what the x axis counts' });
    axisSel.appendChild(el('option', { value: 'time' }, 'x: time'));
    axisSel.appendChild(el('option', { value: 'index' }, 'x: trace entry'));
    if (!m.hasTime) axisSel.querySelector('option').disabled = true;
    axisSel.value = this.useTime ? 'time' : 'index';
    axisSel.addEventListener('change', () => {
      this.useTime = axisSel.value === 'time';
      this.resetScales();
      this.render();
    });
    head.appendChild(axisSel);
    // The height: allocated bytes only (memory_viz's choice: the bands fill the chart) or up to
    // the reserved line too.
    const ySel = el('select', { id: 'timeline-y', title: 'what the y axis spans' });
    ySel.appendChild(el('option', { value: 'allocated' }, 'y: allocated'));
    ySel.appendChild(el('option', { value: 'reserved' }, 'y: allocated and reserved'));
    ySel.value = this.yReserved ? 'reserved' : 'allocated';
    ySel.addEventListener('change', () => {
      this.yReserved = ySel.value === 'reserved';
      this.render();
    });
    head.appendChild(ySel);
    const reset = el('button', { type: 'button', id: 'timeline-reset' }, 'whole run');
    reset.addEventListener('click', () => this.setView(this.fullDomain()));
    head.appendChild(reset);
    head.appendChild(el('span', { class: 'hint' },
      'wheel: zoom · drag: pan · shift+drag: zoom to a range · click a band: pin it'));
    this.box.appendChild(head);

    const width = Math.max(480, Math.floor(this.box.clientWidth || 1100));
    this.W = width - MARGIN.left - MARGIN.right;
    this.H = HEIGHT - MARGIN.top - MARGIN.bottom;
    const stage = el('div', { class: 'tlstage' });
    stage.style.width = width + 'px';
    stage.style.height = HEIGHT + STRIP + 'px';
    this.canvas = el('canvas', { id: 'timeline-canvas', width: this.W, height: this.H });
    this.canvas.style.left = MARGIN.left + 'px';
    this.canvas.style.top = MARGIN.top + 'px';
    stage.appendChild(this.canvas);
    this.ctx = this.canvas.getContext('2d');
    const NS = 'http://www.w3.org/2000/svg';
    this.svgNode = document.createElementNS(NS, 'svg');
    this.svgNode.setAttribute('width', width);
    this.svgNode.setAttribute('height', HEIGHT + STRIP);
    this.svgNode.setAttribute('id', 'timeline-svg');
    stage.appendChild(this.svgNode);
    this.box.appendChild(stage);
    this.details = el('div', { class: 'tldetails', id: 'timeline-details' });
    this.box.appendChild(this.details);

    const svg = select(this.svgNode);
    this.gPlot = svg.append('g').attr('transform', `translate(${MARGIN.left},${MARGIN.top})`);
    this.gMarks = this.gPlot.append('g').attr('class', 'marks');
    this.gLines = this.gPlot.append('g').attr('class', 'lines');
    this.pathRes = this.gLines.append('path').attr('class', 'line-reserved');
    this.pathLive = this.gLines.append('path').attr('class', 'line-allocated');
    this.resNote = this.gLines.append('text').attr('class', 'reserved-note').attr('x', this.W - 4)
      .attr('y', 12).attr('text-anchor', 'end');
    this.gPin = this.gPlot.append('g').attr('class', 'pin');
    this.gX = svg.append('g').attr('transform', `translate(${MARGIN.left},${MARGIN.top + this.H})`);
    this.gY = svg.append('g').attr('transform', `translate(${MARGIN.left},${MARGIN.top})`);
    this.selRect = this.gPlot.append('rect').attr('class', 'selection-range')
      .attr('y', 0).attr('height', this.H).style('display', 'none');
    // The pointer surface on top of the plot.
    this.surface = this.gPlot.append('rect').attr('class', 'surface')
      .attr('width', this.W).attr('height', this.H);
    this.gOom = this.gPlot.append('g').attr('class', 'ooms');
    this.buildStrip(svg);
    this.resetScales();
    this.bindPointer();
    this.legend();
  }

  legend() {
    const lg = el('div', { class: 'legend' });
    const item = (cls, text) => {
      const s = el('span', { class: 'legenditem' });
      s.appendChild(el('span', { class: 'swatch ' + cls }));
      s.appendChild(document.createTextNode(text));
      lg.appendChild(s);
    };
    item('sw-allocated', 'allocated (live requested bytes)');
    item('sw-reserved', 'reserved (segments)');
    item('sw-small', 'allocations under half a pixel, summed');
    if (this.m.dev.mid_run) item('sw-before', 'live before the history began (hatched)');
    if (this.m.dev.ooms.length || (this.m.dev.driver_ooms || []).length) item('sw-oom', 'OOM');
    this.box.insertBefore(lg, this.details);
  }

  resetScales() {
    this.x0 = scaleLinear().domain(this.fullDomain()).range([0, this.W]);
    this.x = this.x0.copy();
    const fullRange = this.x0.domain()[1] - this.x0.domain()[0];
    const minRange = this.useTime ? 1 : Math.min(8, fullRange);
    this.maxK = Math.max(1, fullRange / minRange);
    this.zoomer = zoom()
      .scaleExtent([1, this.maxK])
      .translateExtent([[0, 0], [this.W, this.H]])
      .extent([[0, 0], [this.W, this.H]])
      .filter((ev) => (ev.type === 'wheel' || !ev.shiftKey) && !ev.button)
      .on('zoom', (ev) => {
        this.x = ev.transform.rescaleX(this.x0);
        this.scheduleRender();
      });
    this.surface.call(this.zoomer).on('dblclick.zoom', null);
    this.surface.call(this.zoomer.transform, zoomIdentity);
    this.stripScale = this.x0.copy();
    this.drawStrip();
  }

  setView(domain) {
    const [a, b] = domain;
    const full = this.x0.domain();
    const k = Math.min(this.maxK, (full[1] - full[0]) / Math.max(1e-9, b - a));
    const tx = -this.x0(a) * k;
    this.surface.call(this.zoomer.transform, zoomIdentity.translate(tx, 0).scale(k));
  }

  scheduleRender() {
    if (this.pending) return;
    this.pending = requestAnimationFrame(() => {
      this.pending = 0;
      this.render();
    });
  }

  // ---- drawing

  render() {
    const t0 = performance.now();
    const m = this.m;
    const [x0, x1] = this.x.domain();
    const W = this.W;
    const H = this.H;
    const ranges = columnRanges(m, this.useTime, x0, x1, W);
    const samples = sampleColumns(m, ranges);
    let yMax = 1;
    let resTop = 0;
    for (let c = 0; c < W; c++) {
      if (samples.liveMax[c] > yMax) yMax = samples.liveMax[c];
      if (samples.resMax[c] > resTop) resTop = samples.resMax[c];
    }
    if (this.yReserved) yMax = Math.max(yMax, resTop);
    yMax *= 1.04;
    this.resAbove = resTop > yMax ? resTop : 0;
    this.y = scaleLinear().domain([0, yMax]).range([H, 0]);
    const theta = (0.5 * yMax) / H;
    const lay = sweep(m, samples, theta);
    this.ranges = ranges;
    this.samples = samples;
    this.lay = lay;
    this.yScale = H / yMax;
    this.paintBands();
    this.drawLines();
    this.drawAxes();
    this.drawMarks();
    this.drawPin();
    this.moveStripBrush();
    const lo = ranges.lo[0];
    const hi = ranges.hi[W - 1] - 1;
    const span = this.useTime ? `${fmtTime(x0 - m.times[0])} to ${fmtTime(x1 - m.times[0])}`
      : `entries ${fmtCount(Math.max(0, x0))} to ${fmtCount(Math.min(m.count, x1))}`;
    const perPixel = (hi - lo + 1) / W;
    this.info.textContent = `${span} · states ${fmtCount(lo)}–${fmtCount(hi)} · ` +
      (perPixel > 1 ? `${perPixel.toFixed(1)} entries a pixel (each column shows its highest point; zoom in for every allocation)`
        : 'every entry drawn');
    this.renderMs = performance.now() - t0;
    this.box.dataset.renderMs = this.renderMs.toFixed(1);
    this.app.emit('timeline-view', this);
  }

  siteColor(id) {
    const m = this.m;
    const site = m.siteOf(m.stack[id]);
    let c = this.app.colors.rgb(site);
    const hl = this.app.highlight;
    if (hl !== null && hl !== undefined && hl !== site) c = fade(c);
    return packRGB(c);
  }

  paintBands() {
    const { W, H } = this;
    const m = this.m;
    const img = this.ctx.createImageData(W, H);
    const px = new Uint32Array(img.data.buffer);
    px.fill(packRGB([255, 255, 255]));
    const small = packRGB(COLORS.small);
    const { colStart, bandId, bandY0, top } = this.lay;
    const s = this.yScale;
    const midRun = !!m.dev.mid_run;
    const colorCache = new Map();
    const color = (id) => {
      let c = colorCache.get(id);
      if (c === undefined) {
        c = this.siteColor(id);
        colorCache.set(id, c);
      }
      return c;
    };
    const fill = (x, r0, r1, c) => {
      if (r0 < 0) r0 = 0;
      if (r1 > H) r1 = H;
      for (let r = r0; r < r1; r++) px[r * W + x] = c;
    };
    const row = (y) => Math.round(H - y * s);
    for (let x = 0; x < W; x++) {
      let y = 0;
      for (let k = colStart[x]; k < colStart[x + 1]; k++) {
        const id = bandId[k];
        const y0 = bandY0[k];
        if (y0 > y) fill(x, row(y0), row(y), small);
        const y1 = y0 + m.size[id];
        const c = color(id);
        const r0 = row(y1);
        const r1 = row(y0);
        if (midRun && m.born[id] === 0) {
          // Live before the history began: hatched.
          const dark = ((c & 0xfefefe) >>> 1) | 0xff000000;
          for (let r = Math.max(0, r0); r < Math.min(H, r1); r++)
            px[r * W + x] = (x + r) % 6 < 2 ? dark : c;
        } else {
          fill(x, r0, r1, c);
        }
        y = y1;
      }
      if (top[x] > y) fill(x, row(top[x]), row(y), small);
    }
    this.ctx.putImageData(img, 0, 0);
  }

  drawLines() {
    const { W } = this;
    const { liveMax, resMax } = this.samples;
    const y = this.y;
    const path = (v) => {
      let d = `M0,${y(v[0]).toFixed(1)}`;
      for (let c = 1; c < W; c++) d += `H${c}V${y(v[c]).toFixed(1)}`;
      return d + `H${W}`;
    };
    const clip = (v) => {
      const top = this.y.domain()[1];
      return Float64Array.from(v, (x) => (x > top ? top : x));
    };
    this.pathRes.attr('d', path(clip(resMax)));
    this.pathLive.attr('d', path(liveMax));
    this.resNote.text(this.resAbove ? `reserved up to ${fmtSize(this.resAbove)} (above the chart: y: allocated and reserved shows it)` : '');
  }

  drawAxes() {
    const t0 = this.m.hasTime ? this.m.times[0] : 0;
    const n = Math.max(2, Math.floor(this.W / 110));
    const ax = axisBottom(this.x).ticks(n);
    if (this.useTime) ax.tickFormat((v) => fmtTime(v - t0));
    else ax.tickValues(this.x.ticks(n).filter(Number.isInteger)).tickFormat((v) => fmtCount(v));
    this.gX.call(ax);
    this.gY.call(axisLeft(this.y).ticks(6).tickFormat((v) => fmtSizeShort(v)));
  }

  // The x of state `at` in the plot.
  stateX(at) {
    if (this.useTime) return this.x(this.m.stateTime(at));
    return this.x(at + 0.5);
  }

  drawMarks() {
    const m = this.m;
    const anns = m.dev.annotations;
    const g = this.gMarks;
    g.selectAll('*').remove();
    if (m.dev.ranges && m.dev.ranges.ranges.length) {
      this.drawRanges(g);
      this.drawOoms();
      return;
    }
    // Annotations: each labels the range up to the next one (or the end). Too many to read at
    // this zoom: ticks, and a word to zoom in.
    const W = this.W;
    const lane = -MARGIN.top + 2;
    const [lo, hi] = [this.ranges.lo[0], this.ranges.hi[W - 1]];
    let first = 0;
    let last = anns.length;
    while (first < last) {
      const mid = (first + last) >>> 1;
      if (anns[mid].entry + 1 < lo) first = mid + 1;
      else last = mid;
    }
    first = Math.max(0, first - 1);
    let end = first;
    while (end < anns.length && anns[end].entry + 1 <= hi) end++;
    const shown = end - first;
    if (shown > W / 8) {
      let d = '';
      let prev = -1;
      for (let i = first; i < end; i++) {
        const x = Math.round(this.stateX(anns[i].entry + 1));
        if (x === prev || x < 0 || x > W) continue;
        d += `M${x},${lane}v8`;
        prev = x;
      }
      g.append('path').attr('class', 'annotation-tick').attr('d', d);
      g.append('text').attr('class', 'annotation-label').attr('x', 4).attr('y', lane + 17)
        .text(`${shown} annotations here: zoom in to read them`);
    } else {
      for (let i = first; i < end; i++) {
        const a = anns[i];
        const from = this.stateX(a.entry + 1);
        const to = i + 1 < anns.length ? this.stateX(anns[i + 1].entry + 1) : this.stateX(m.count);
        if (to < 0 || from > W) continue;
        const x0 = Math.max(0, from);
        const x1 = Math.min(W, Math.max(from + 1, to));
        g.append('rect').attr('class', 'annotation ' + (i % 2 ? 'odd' : 'even'))
          .attr('x', x0).attr('width', x1 - x0).attr('y', lane).attr('height', 14)
          .on('mousemove', (ev) => showTip(ev, `${a.text} (from entry ${fmtCount(a.entry)})`))
          .on('mouseleave', hideTip);
        if (from >= 0 && x1 - x0 >= 6)
          g.append('line').attr('class', 'annotation-edge').attr('x1', from).attr('x2', from)
            .attr('y1', lane).attr('y2', this.H);
        if (x1 - x0 > 30) {
          const room = Math.floor((x1 - x0) / 6);
          g.append('text').attr('class', 'annotation-label').attr('x', x0 + 3).attr('y', lane + 11)
            .text(a.text.length > room ? a.text.slice(0, Math.max(1, room - 1)) + '…' : a.text);
        }
      }
    }
    this.drawOoms();
  }

  // NVTX ranges in the lane above the plot: the outermost ones as labelled bands (nested ranges
  // as thinner bars under them); hover names every range open there, outermost first.
  drawRanges(g) {
    const m = this.m;
    const rs = m.dev.ranges;
    const W = this.W;
    const lane = -MARGIN.top + 2;
    const end = (r) => (r[2] < 0 ? m.count : r[2] + 1);
    for (let i = 0; i < rs.ranges.length; i++) {
      const r = rs.ranges[i];
      const depth = r[6] || 0;
      if (depth > 2) continue;
      const from = this.stateX(Math.max(0, r[1]) + (r[1] < 0 ? 0 : 1));
      const to = this.stateX(end(r));
      if (to < 0 || from > W) continue;
      const x0 = Math.max(0, from);
      const x1 = Math.min(W, Math.max(from + 1, to));
      const y = depth === 0 ? lane : lane + 10 + 2 * depth;
      const h = depth === 0 ? 10 : 2;
      const name = rs.names[r[0]] ? rs.names[r[0]].name : '';
      const open = rs.ranges.filter((q) => q[1] <= r[1] && end(q) >= end(r))
        .sort((p, q) => (p[6] || 0) - (q[6] || 0)).map((q) => rs.names[q[0]].name).join(' > ');
      g.append('rect').attr('class', 'range depth' + depth).attr('x', x0).attr('width', x1 - x0)
        .attr('y', y).attr('height', h)
        .on('mousemove', (ev) => showTip(ev, `${open}: peak ${fmtSize(r[4])} live inside, ` +
          `${fmtSize(r[3])} at its start, ${fmtSize(r[5])} at its end` +
          (r[2] < 0 ? ' (still open at the end)' : '')))
        .on('mouseleave', hideTip);
      if (depth === 0 && x1 - x0 > 30) {
        const room = Math.floor((x1 - x0) / 6);
        g.append('text').attr('class', 'annotation-label').attr('x', x0 + 3).attr('y', lane + 8)
          .text(name.length > room ? name.slice(0, Math.max(1, room - 1)) + '…' : name);
      }
    }
  }

  drawOoms() {
    const m = this.m;
    const W = this.W;
    // OOMs: a marker at the entry, hover for what happened and the verdict when there is one.
    const og = this.gOom;
    og.selectAll('*').remove();
    for (const o of m.dev.ooms) {
      const x = this.stateX(o.entry + 1);
      if (x < -5 || x > W + 5) continue;
      og.append('line').attr('class', 'oom-line').attr('x1', x).attr('x2', x).attr('y1', 0).attr('y2', this.H);
      og.append('path').attr('class', 'oom-marker').attr('d', `M${x - 6},0L${x + 6},0L${x},10Z`)
        .on('mousemove', (ev) => showTip(ev, this.oomTip(o)))
        .on('mouseleave', hideTip);
    }
    // The driver's own calls refused (kernel code, arrays, stacks): no entry, the state they met.
    for (const o of m.dev.driver_ooms || []) {
      const x = this.stateX(o.at);
      if (x < -5 || x > W + 5) continue;
      og.append('line').attr('class', 'oom-line').attr('x1', x).attr('x2', x).attr('y1', 0).attr('y2', this.H);
      og.append('path').attr('class', 'oom-marker driver').attr('d', `M${x - 6},0L${x + 6},0L${x},10Z`)
        .on('mousemove', (ev) => showTip(ev, this.driverOomTip(o)))
        .on('mouseleave', hideTip);
    }
  }

  driverOomTip(o) {
    const box = el('div');
    box.appendChild(el('div', { class: 'tiptitle' },
      `OOM in ${o.call} (the driver's own memory) after ${fmtCount(o.at)} entries`));
    box.appendChild(el('div', null, o.message));
    const verdict = this.app.driverOomVerdict(this.m, o.at);
    if (verdict) box.appendChild(el('div', { class: 'verdict' }, verdict));
    return box;
  }

  oomTip(o) {
    const m = this.m;
    const box = el('div');
    box.appendChild(el('div', { class: 'tiptitle' }, `OOM at entry ${fmtCount(o.entry)}`));
    box.appendChild(el('div', null, `asked for ${fmtSize(o.size)} on stream ${m.streamName(o.stream)}; ` +
      `the device had ${fmtSize(o.device_free)} free`));
    const verdict = this.app.oomVerdict(m, o.entry);
    if (verdict) box.appendChild(el('div', { class: 'verdict' }, verdict));
    box.appendChild(el('pre', { class: 'stack' }, siteLines(m.stacks, m.siteOf(o.stack), 10).join('\n')));
    return box;
  }

  // ---- the strip: the whole run, with the view as a brush

  buildStrip(svg) {
    const top = HEIGHT + 4;
    this.gStrip = svg.append('g').attr('transform', `translate(${MARGIN.left},${top})`);
    this.stripH = STRIP - 10;
    this.gStrip.append('rect').attr('class', 'strip-bg').attr('width', this.W).attr('height', this.stripH);
    this.stripRes = this.gStrip.append('path').attr('class', 'line-reserved thin');
    this.stripLive = this.gStrip.append('path').attr('class', 'strip-allocated');
    this.brush = brushX().extent([[0, 0], [this.W, this.stripH]])
      .on('end', (ev) => {
        if (!ev.sourceEvent) return; // moved by the view itself
        if (!ev.selection) {
          this.setView(this.fullDomain());
          return;
        }
        const [a, b] = ev.selection.map((v) => this.stripScale.invert(v));
        if (b > a) this.setView([a, b]);
      });
    this.gBrush = this.gStrip.append('g').attr('class', 'strip-brush').call(this.brush);
  }

  drawStrip() {
    const m = this.m;
    const W = this.W;
    const ranges = columnRanges(m, this.useTime, ...this.stripScale.domain(), W);
    const s = sampleColumns(m, ranges);
    let max = 1;
    for (let c = 0; c < W; c++) max = Math.max(max, s.resMax[c], s.liveMax[c]);
    const y = scaleLinear().domain([0, max]).range([this.stripH, 0]);
    let dl = `M0,${this.stripH}`;
    let dr = '';
    for (let c = 0; c < W; c++) {
      dl += `L${c},${y(s.liveMax[c]).toFixed(1)}`;
      dr += `${c ? 'L' : 'M'}${c},${y(s.resMax[c]).toFixed(1)}`;
    }
    dl += `L${W},${this.stripH}Z`;
    this.stripLive.attr('d', dl);
    this.stripRes.attr('d', dr);
  }

  moveStripBrush() {
    const [a, b] = this.x.domain();
    const full = this.x0.domain();
    const sel = a <= full[0] && b >= full[1] ? null : [this.stripScale(a), this.stripScale(b)];
    this.gBrush.call(this.brush.move, sel);
  }

  // ---- pointer: hover, pin, shift+drag

  bindPointer() {
    const surface = this.surface;
    let dragFrom = null;
    surface.on('mousemove.hover', (ev) => {
      const [mx, my] = pointer(ev);
      if (dragFrom !== null) {
        const a = Math.max(0, Math.min(dragFrom, mx));
        const b = Math.min(this.W, Math.max(dragFrom, mx));
        this.selRect.style('display', null).attr('x', a).attr('width', b - a);
        return;
      }
      const hit = this.hit(mx, my);
      if (hit === null) hideTip();
      else showTip(ev, this.tipFor(hit));
    });
    surface.on('mouseleave.hover', () => hideTip());
    surface.on('mousedown.range', (ev) => {
      if (!ev.shiftKey || ev.button) return;
      dragFrom = pointer(ev)[0];
      ev.preventDefault();
      const up = (e2) => {
        window.removeEventListener('mouseup', up);
        const [mx] = pointer(e2, this.surface.node());
        const a = Math.min(dragFrom, mx);
        const b = Math.max(dragFrom, mx);
        dragFrom = null;
        this.selRect.style('display', 'none');
        if (b - a >= 3) this.setView([this.x.invert(Math.max(0, a)), this.x.invert(Math.min(this.W, b))]);
      };
      window.addEventListener('mouseup', up);
    });
    surface.on('click.pin', (ev) => {
      if (ev.defaultPrevented) return; // the end of a pan
      const [mx, my] = pointer(ev);
      const hit = this.hit(mx, my);
      if (hit !== null && hit.id >= 0) this.pin(hit.id);
      else this.pin(-1);
    });
  }

  // What is under plot point (mx, my): {id} for a band, {id: -1, bytes} for the small sum.
  hit(mx, my) {
    if (!this.lay) return null;
    const x = Math.floor(mx);
    if (x < 0 || x >= this.W) return null;
    const yb = (this.H - my) / this.yScale;
    const { colStart, bandId, bandY0, top } = this.lay;
    let below = 0;
    for (let k = colStart[x]; k < colStart[x + 1]; k++) {
      const id = bandId[k];
      const y0 = bandY0[k];
      if (yb < y0) return { id: -1, bytes: y0 - below, column: x };
      if (yb < y0 + this.m.size[id]) return { id, column: x };
      below = y0 + this.m.size[id];
    }
    if (yb < top[x]) return { id: -1, bytes: top[x] - below, column: x };
    return null;
  }

  describeTime(at) {
    const m = this.m;
    if (!m.hasTime) return `after entry ${fmtCount(at - 1)}`;
    return `${fmtTime(m.stateTime(at) - m.times[0])} (entry ${fmtCount(at - 1)})`;
  }

  tipFor(hit) {
    const m = this.m;
    const box = el('div');
    if (hit.id < 0) {
      const at = this.samples.sample[hit.column];
      box.appendChild(el('div', { class: 'tiptitle' }, `small allocations: ${fmtSize(hit.bytes)}`));
      box.appendChild(el('div', null, `each under half a pixel here (after ${fmtCount(at)} entries); zoom in to see them`));
      return box;
    }
    const id = hit.id;
    const site = m.siteOf(m.stack[id]);
    box.appendChild(el('div', { class: 'tiptitle' },
      `${fmtSize(m.size[id])} requested, ${fmtSize(m.size[id] + m.extra[id])} block`));
    const lines = [
      `address 0x${m.addr[id].toString(16)}, stream ${m.streamName(m.stream[id])}`,
      m.born[id] === 0 ? (m.dev.mid_run ? 'allocated before the history began' : 'live at the start')
        : `allocated ${this.describeTime(m.born[id])}`,
      m.died[id] > m.count ? 'still allocated at the end'
        : `freed ${this.describeTime(m.died[id])}`,
    ];
    if (m.pendFrom[id]) lines.push(`free requested ${this.describeTime(m.pendFrom[id])}`);
    for (const l of lines) box.appendChild(el('div', null, l));
    box.appendChild(el('pre', { class: 'stack' }, siteLines(m.stacks, site, 10).join('\n')));
    box.appendChild(el('div', { class: 'hint' }, 'click: pin it, highlight its call site, all frames'));
    return box;
  }

  pin(id) {
    const m = this.m;
    this.pinned = id;
    this.details.textContent = '';
    if (id < 0) {
      this.app.setHighlight(null);
      return;
    }
    const site = m.siteOf(m.stack[id]);
    const head = el('div', { class: 'pinhead' });
    head.appendChild(el('b', null, `pinned: ${fmtSize(m.size[id])} at 0x${m.addr[id].toString(16)}`));
    head.appendChild(document.createTextNode(
      ` · ${m.born[id] === 0 ? 'from the start' : 'allocated ' + this.describeTime(m.born[id])} · ` +
      `${m.died[id] > m.count ? 'live at the end' : 'freed ' + this.describeTime(m.died[id])}`));
    const st = el('button', { type: 'button', class: 'linkish' }, 'allocator state at its allocation');
    st.addEventListener('click', () => this.app.showState(Math.max(0, m.born[id] - 1)));
    head.appendChild(st);
    const unpin = el('button', { type: 'button', class: 'linkish' }, 'unpin');
    unpin.addEventListener('click', () => this.pin(-1));
    head.appendChild(unpin);
    this.details.appendChild(head);
    this.details.appendChild(stackPanel(m.stacks, m.stack[id], site, 'its stack (call site first)'));
    if (m.freeStack[id]) {
      const fs = m.freeStack[id] - 1;
      this.details.appendChild(stackPanel(m.stacks, fs, m.siteOf(fs), 'where it was freed'));
    }
    this.app.setHighlight(site);
  }

  drawPin() {
    const g = this.gPin;
    g.selectAll('*').remove();
    if (this.pinned < 0 || !this.lay) return;
    const { colStart, bandId, bandY0 } = this.lay;
    const id = this.pinned;
    let d = '';
    let start = -1;
    let prevBot = 0;
    for (let x = 0; x <= this.W; x++) {
      let found = -1;
      if (x < this.W)
        for (let k = colStart[x]; k < colStart[x + 1]; k++) if (bandId[k] === id) { found = k; break; }
      if (found >= 0) {
        const top = this.y(bandY0[found] + this.m.size[id]);
        const bot = this.y(bandY0[found]);
        if (start < 0) { start = x; d += `M${x},${bot}V${top}`; }
        else d += `V${top}`;
        d += `H${x + 1}`;
        prevBot = bot;
      } else if (start >= 0) {
        d += `V${prevBot}`;
        start = -1;
      }
    }
    if (d) g.append('path').attr('class', 'pinned-band').attr('d', d);
  }

  // ---- for tests and the other views

  visible() {
    const [x0, x1] = this.x.domain();
    return { x0, x1, useTime: this.useTime, lo: this.ranges.lo[0], hi: this.ranges.hi[this.W - 1] };
  }

  // The allocations drawn as bands somewhere in the view: their alloc entries (-1: live before
  // the history), addresses and sizes.
  drawnBands() {
    const seen = new Set();
    const { bandId, n } = this.lay;
    for (let k = 0; k < n; k++) seen.add(bandId[k]);
    const m = this.m;
    return [...seen].sort((a, b) => a - b)
      .map((id) => ({ entry: m.born[id] - 1, addr: m.addr[id], size: m.size[id] }));
  }

  // The client position of the middle of allocation `id`'s band in its tallest column.
  bandPoint(id) {
    const { colStart, bandId, bandY0 } = this.lay;
    let best = null;
    for (let x = 0; x < this.W; x++)
      for (let k = colStart[x]; k < colStart[x + 1]; k++)
        if (bandId[k] === id) {
          const h = this.m.size[id] * this.yScale;
          if (!best || h > best.h) best = { x, h, y: this.H - (bandY0[k] + this.m.size[id] / 2) * this.yScale };
        }
    if (!best) return null;
    const r = this.canvas.getBoundingClientRect();
    return { x: r.left + best.x + 0.5, y: r.top + best.y };
  }

  highlightChanged() {
    if (this.lay) {
      this.paintBands();
      this.drawPin();
    }
  }
}
