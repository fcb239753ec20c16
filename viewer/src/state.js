// state.js: the allocator's state after any trace entry. A slider (and the arrow keys, Page Up and
// Down, Home and End) steps through every entry; the page rebuilds the state from the history's
// tables: the segments then, each with its blocks (allocated: the request and the rounding past
// it; pending free; inactive split; whole free segments; an expandable segment's mapped runs and
// unmapped pages), the entry itself with its stack, and the counters there.
import { COLORS, fade } from './colors.js';
import { el, fmtSize, fmtCount, fmtTime } from './format.js';
import { showTip, hideTip } from './tooltip.js';
import { siteLines, stackPanel } from './stack.js';
import { SEG_SMALL, SEG_EXPANDABLE, SEG_IN_TABLE } from './model.js';

const ROW = 16;
const MAX_ROWS = 400;
const MAX_TABLE = 500;
const EXPANDABLE_GAP = 64 * 2 ** 30; // runs closer than this on one stream and pool: one reservation

export class StateView {
  constructor(app, model, box) {
    this.app = app;
    this.m = model;
    this.box = box;
    this.at = Math.min(model.count, model.dev.peak_live_at);
    this.build();
  }

  build() {
    const m = this.m;
    this.box.textContent = '';
    const ctl = el('div', { class: 'statectl' });
    this.slider = el('input', {
      type: 'range', min: 0, max: m.count, step: 1, id: 'state-slider',
      'aria-label': 'state after this many trace entries',
    });
    this.slider.value = this.at;
    this.slider.addEventListener('input', () => this.show(Number(this.slider.value)));
    ctl.appendChild(this.slider);
    const prev = el('button', { type: 'button', title: 'previous entry (←)' }, '◀');
    prev.addEventListener('click', () => this.show(this.at - 1));
    const next = el('button', { type: 'button', title: 'next entry (→)' }, '▶');
    next.addEventListener('click', () => this.show(this.at + 1));
    ctl.appendChild(prev);
    ctl.appendChild(next);
    ctl.appendChild(el('label', { for: 'state-entry' }, 'after entry'));
    this.entryBox = el('input', { type: 'number', min: -1, max: m.count - 1, id: 'state-entry' });
    this.entryBox.addEventListener('change', () => this.show(Number(this.entryBox.value) + 1));
    ctl.appendChild(this.entryBox);
    const jumps = [['start', () => 0], ['peak allocated', () => m.dev.peak_live_at],
      ['peak reserved', () => m.dev.peak_reserved_at], ['end', () => m.count]];
    // Every OOM as the state it shows: an oom entry's, or the one a driver's own call met.
    const oomStates = [...m.dev.ooms.map((o) => o.entry + 1),
      ...(m.dev.driver_ooms || []).map((o) => o.at)].sort((a, b) => a - b);
    if (oomStates.length) jumps.push(['next OOM', () => oomStates.find((at) => at > this.at) ?? oomStates[0]]);
    for (const [label, at] of jumps) {
      const b = el('button', { type: 'button', class: 'jump' }, label);
      b.addEventListener('click', () => this.show(at()));
      ctl.appendChild(b);
    }
    this.box.appendChild(ctl);
    this.box.appendChild(el('div', { class: 'hint' },
      '← → one entry · Page Up / Page Down 100 · Home / End · the state shown is after the entry'));
    const cols = el('div', { class: 'statecols' });
    this.left = el('div', { class: 'stateleft' });
    this.right = el('div', { class: 'stateright' });
    cols.appendChild(this.left);
    cols.appendChild(this.right);
    this.box.appendChild(cols);
    this.eventBox = el('div', { class: 'panel', id: 'state-event' });
    this.counterBox = el('div', { class: 'panel', id: 'state-counters' });
    this.eventList = el('div', { class: 'panel eventlist', id: 'state-events' });
    this.left.appendChild(this.eventBox);
    this.left.appendChild(this.counterBox);
    this.left.appendChild(this.eventList);
    this.mapHead = el('div', { class: 'maphead', id: 'state-maphead' });
    this.right.appendChild(this.mapHead);
    this.mapWrap = el('div', { class: 'mapwrap' });
    this.canvas = el('canvas', { id: 'state-canvas' });
    this.mapWrap.appendChild(this.canvas);
    this.right.appendChild(this.mapWrap);
    this.tableBox = el('div', { class: 'segtable' });
    this.right.appendChild(this.tableBox);
    this.canvas.addEventListener('mousemove', (ev) => this.hover(ev));
    this.canvas.addEventListener('mouseleave', hideTip);
    this.keys = (ev) => this.key(ev);
    document.addEventListener('keydown', this.keys);
    this.show(this.at);
  }

  key(ev) {
    if (!this.box.offsetParent) return; // not on screen
    const t = ev.target;
    if (t && t !== this.slider && (t.tagName === 'INPUT' || t.tagName === 'SELECT' || t.tagName === 'TEXTAREA')) return;
    const step = { ArrowLeft: -1, ArrowRight: 1, PageUp: -100, PageDown: 100 }[ev.key];
    if (step !== undefined) this.show(this.at + step);
    else if (ev.key === 'Home') this.show(0);
    else if (ev.key === 'End') this.show(this.m.count);
    else return;
    ev.preventDefault();
  }

  // State `at` (after `at` entries).
  show(at) {
    const m = this.m;
    at = Math.max(0, Math.min(m.count, Math.round(at)));
    this.at = at;
    this.slider.value = at;
    this.entryBox.value = at - 1;
    this.state = this.compute(at);
    this.showEvent();
    this.showCounters();
    this.showEventList();
    this.drawMap();
    this.showTable();
    this.box.dataset.at = String(at);
    this.app.emit('state', at);
  }

  // The segments (expandable runs grouped by reservation) with their blocks, in address order.
  compute(at) {
    const m = this.m;
    const segIds = m.segmentsAt(at).sort((a, b) => m.segAddr[a] - m.segAddr[b]);
    const live = m.liveAt(at).sort((a, b) => m.addr[a] - m.addr[b]);
    const segs = segIds.map((i) => ({
      id: i, addr: m.segAddr[i], size: m.segSize[i], stream: m.segStream[i], flags: m.segFlags[i],
      blocks: [], allocated: 0, requested: 0, pending: 0, free: 0, largestFree: 0,
    }));
    const orphans = [];
    let k = 0;
    for (const id of live) {
      const a = m.addr[id];
      while (k < segs.length && segs[k].addr + segs[k].size <= a) k++;
      if (k < segs.length && segs[k].addr <= a) segs[k].blocks.push(id);
      else orphans.push(id);
    }
    for (const s of segs) {
      let cursor = s.addr;
      const end = s.addr + s.size;
      s.gaps = [];
      for (let j = 0; j < s.blocks.length; j++) {
        const id = s.blocks[j];
        const a = m.addr[id];
        const next = j + 1 < s.blocks.length ? m.addr[s.blocks[j + 1]] : end;
        const block = Math.min(m.size[id] + m.extra[id], next - a, end - a);
        if (a > cursor) s.gaps.push([cursor, a - cursor]);
        s.allocated += block;
        s.requested += m.size[id];
        if (m.pendFrom[id] && m.pendFrom[id] <= at) s.pending++;
        cursor = Math.max(cursor, a + block);
      }
      if (end > cursor) s.gaps.push([cursor, end - cursor]);
      for (const g of s.gaps) {
        s.free += g[1];
        s.largestFree = Math.max(s.largestFree, g[1]);
      }
    }
    return { at, segs, live, orphans, rows: this.groupRows(segs) };
  }

  // Map rows: one per segment, the mapped runs of one expandable reservation sharing a row.
  groupRows(segs) {
    const rows = [];
    let cur = null;
    for (const s of segs) {
      const exp = (s.flags & SEG_EXPANDABLE) !== 0;
      if (exp && cur && cur.expandable && cur.stream === s.stream &&
          (cur.flags & SEG_SMALL) === (s.flags & SEG_SMALL) &&
          s.addr - (cur.addr + cur.size) < EXPANDABLE_GAP) {
        cur.runs.push(s);
        cur.size = s.addr + s.size - cur.addr;
        continue;
      }
      cur = { addr: s.addr, size: s.size, stream: s.stream, flags: s.flags, expandable: exp, runs: [s] };
      rows.push(cur);
    }
    for (const r of rows) r.mapped = r.runs.reduce((t, s) => t + s.size, 0);
    return rows;
  }

  describeAt(at) {
    const m = this.m;
    if (at === 0) return 'at the start of the history';
    const e = m.entry(at - 1);
    const t = m.hasTime ? `, ${fmtTime(m.stateTime(at) - m.times[0])}` : '';
    return `after entry ${fmtCount(at - 1)} (${e.action}${t})`;
  }

  showEvent() {
    const m = this.m;
    const box = this.eventBox;
    box.textContent = '';
    const at = this.at;
    box.appendChild(el('div', { class: 'paneltitle' }, this.describeAt(at)));
    if (at === 0) {
      box.appendChild(el('div', null, m.dev.mid_run
        ? 'The history starts mid-run: the blocks live here were allocated before it began.'
        : 'Nothing has happened yet.'));
      return;
    }
    const e = m.entry(at - 1);
    const rows = [['action', e.action]];
    if (e.addr !== undefined)
      rows.push([e.action === 'oom' ? 'device free' : 'address', e.action === 'oom' ? fmtSize(e.addr) : '0x' + e.addr.toString(16)]);
    if (e.size !== undefined) rows.push(['size', `${fmtSize(e.size)} (${fmtCount(e.size)} bytes)`]);
    if (e.stream !== undefined) rows.push(['stream', m.streamName(e.stream)]);
    if (e.alloc !== undefined) {
      const id = e.alloc;
      rows.push(['allocation', `${fmtSize(m.size[id])}, ` +
        (m.born[id] ? `allocated at entry ${fmtCount(m.born[id] - 1)}` : 'allocated before the history') +
        (m.died[id] <= m.count ? `, freed at entry ${fmtCount(m.died[id] - 1)}` : ', live at the end')]);
    }
    const verdict = e.action === 'oom' ? this.app.oomVerdict(m, at - 1) : null;
    if (verdict) rows.push(['verdict', verdict]);
    // A driver's own call refused right after this entry (no entry of its own).
    for (const o of (m.dev.driver_ooms || []).filter((x) => x.at === at)) {
      rows.push(['out of memory', `in ${o.call}, the driver's own memory: ${o.message}`]);
      const v = this.app.driverOomVerdict(m, at);
      if (v) rows.push(['verdict', v]);
    }
    const t = el('table', { class: 'facts' });
    for (const [k, v] of rows) {
      const tr = el('tr');
      tr.appendChild(el('td', null, k));
      tr.appendChild(el('td', null, v));
      t.appendChild(tr);
    }
    box.appendChild(t);
    if (e.stack !== undefined) box.appendChild(stackPanel(m.stacks, e.stack, m.siteOf(e.stack), 'its stack'));
  }

  showCounters() {
    const m = this.m;
    const st = this.state;
    let allocated = 0;
    let requested = 0;
    let pending = 0;
    let split = 0;
    let splitN = 0;
    let cached = 0;
    let cachedN = 0;
    let largest = 0;
    let expandable = 0;
    for (const s of st.segs) {
      allocated += s.allocated;
      requested += s.requested;
      pending += s.pending;
      if (s.blocks.length) {
        split += s.free;
        splitN += s.gaps.length;
      } else {
        cached += s.size;
        cachedN++;
      }
      largest = Math.max(largest, s.largestFree);
      if (s.flags & SEG_EXPANDABLE) expandable += s.size;
    }
    const rows = [
      ['allocated (requested)', fmtSize(m.live[st.at]), 'counter-allocated'],
      ['allocated blocks', `${fmtSize(allocated)} in ${fmtCount(st.live.length)} blocks`, 'counter-blocks'],
      ['reserved', `${fmtSize(m.reserved[st.at])} in ${fmtCount(st.segs.length)} segments`, 'counter-reserved'],
      ['inactive split', `${fmtSize(split)} in ${fmtCount(splitN)} free blocks of split segments`, 'counter-split'],
      ['cached free segments', `${fmtSize(cached)} in ${fmtCount(cachedN)} segments`, 'counter-cached'],
      ['largest free block', fmtSize(largest), 'counter-largest'],
      ['pending frees', fmtCount(pending), 'counter-pending'],
    ];
    if (expandable) rows.push(['expandable, mapped', fmtSize(expandable), 'counter-expandable']);
    if (st.orphans.length)
      rows.push(['blocks outside every segment', `${fmtCount(st.orphans.length)} (a history the segments do not explain)`, 'counter-orphans']);
    void requested;
    const box = this.counterBox;
    box.textContent = '';
    box.appendChild(el('div', { class: 'paneltitle' }, 'counters here'));
    const t = el('table', { class: 'facts' });
    for (const [k, v, id] of rows) {
      const tr = el('tr');
      tr.appendChild(el('td', null, k));
      tr.appendChild(el('td', { id }, v));
      t.appendChild(tr);
    }
    box.appendChild(t);
  }

  showEventList() {
    const m = this.m;
    const box = this.eventList;
    box.textContent = '';
    box.appendChild(el('div', { class: 'paneltitle' }, 'entries around it'));
    const from = Math.max(0, this.at - 9);
    const to = Math.min(m.count, this.at + 8);
    for (let i = from; i < to; i++) {
      const e = m.entry(i);
      const row = el('div', { class: 'evrow' + (i === this.at - 1 ? ' current' : '') });
      const size = e.size !== undefined && e.action !== 'oom' ? ' ' + fmtSize(e.size) : '';
      row.textContent = `${fmtCount(i)}  ${e.action}${size}`;
      row.addEventListener('click', () => this.show(i + 1));
      box.appendChild(row);
    }
  }

  // The map: one row per segment (largest first, as memory_viz draws them), blocks at their
  // offsets. A row's length grows with its segment's size.
  drawMap() {
    const m = this.m;
    const st = this.state;
    const rows = [...st.rows].sort((a, b) => b.size - a.size || a.addr - b.addr).slice(0, MAX_ROWS);
    this.drawnRows = rows;
    const W = Math.max(300, Math.floor(this.mapWrap.clientWidth || 700) - 4);
    const H = Math.max(ROW, rows.length * ROW);
    this.canvas.width = W;
    this.canvas.height = H;
    this.mapW = W;
    const ctx = this.canvas.getContext('2d');
    ctx.clearRect(0, 0, W, H);
    const maxSize = rows.length ? rows[0].size : 1;
    const label = 170;
    const avail = W - label - 4;
    const css = (c) => `rgb(${c[0]},${c[1]},${c[2]})`;
    const hl = this.app.highlight;
    ctx.font = '11px system-ui, sans-serif';
    ctx.textBaseline = 'middle';
    rows.forEach((row, r) => {
      const y = r * ROW + 2;
      const w = Math.max(6, avail * (0.2 + (0.8 * row.size) / maxSize));
      row.px = { x: label, y, w, h: ROW - 4 };
      const scale = w / row.size;
      ctx.fillStyle = '#333';
      const kind = row.expandable ? 'expandable' : row.runs[0].flags & SEG_IN_TABLE ? (row.flags & SEG_SMALL ? 'small' : 'large') : 'freed later';
      ctx.fillText(`${fmtSize(row.size)} ${kind}`, 2, y + (ROW - 4) / 2);
      // Unmapped pages of a reservation, then each mapped run with its blocks.
      ctx.fillStyle = css(COLORS.unmapped);
      ctx.fillRect(label, y, w, ROW - 4);
      for (const s of row.runs) {
        const x0 = label + (s.addr - row.addr) * scale;
        const sw = Math.max(1, s.size * scale);
        ctx.fillStyle = css(s.blocks.length ? COLORS.split : COLORS.cached);
        ctx.fillRect(x0, y, sw, ROW - 4);
        for (const id of s.blocks) {
          const bx = x0 + (m.addr[id] - s.addr) * scale;
          const req = Math.max(1, m.size[id] * scale);
          const blk = Math.max(req, (m.size[id] + m.extra[id]) * scale);
          const pending = m.pendFrom[id] && m.pendFrom[id] <= st.at;
          const site = m.siteOf(m.stack[id]);
          let c = pending ? COLORS.pending : this.app.colors.rgb(site);
          if (!pending && hl !== null && hl !== undefined && hl !== site) c = fade(c);
          ctx.fillStyle = css(COLORS.waste);
          ctx.fillRect(bx, y, blk, ROW - 4);
          ctx.fillStyle = css(c);
          ctx.fillRect(bx, y, req, ROW - 4);
        }
        if (row.expandable) {
          // Page boundaries (2 MiB small pool, 20 MiB large pool), as PyTorch maps them.
          const page = row.flags & SEG_SMALL ? 2 * 2 ** 20 : 20 * 2 ** 20;
          if (page * scale >= 4) {
            ctx.fillStyle = 'rgba(0,0,0,0.25)';
            for (let p = s.addr + page; p < s.addr + s.size; p += page)
              ctx.fillRect(label + (p - row.addr) * scale, y, 1, ROW - 4);
          }
        }
      }
      ctx.strokeStyle = '#888';
      ctx.strokeRect(label + 0.5, y + 0.5, w - 1, ROW - 5);
    });
    const total = st.rows.length;
    this.mapHead.textContent = `${fmtCount(st.segs.length)} segments, ${fmtSize(m.reserved[st.at])} reserved` +
      (total > rows.length ? ` (the largest ${rows.length} drawn)` : '') +
      ' · colour: call site; pale red: rounding; red: pending free; grey: free';
  }

  hover(ev) {
    const m = this.m;
    const r = this.canvas.getBoundingClientRect();
    const x = ev.clientX - r.left;
    const y = ev.clientY - r.top;
    const row = this.drawnRows && this.drawnRows[Math.floor(y / ROW)];
    if (!row || !row.px || x < row.px.x || x > row.px.x + row.px.w) {
      hideTip();
      return;
    }
    const addr = row.addr + ((x - row.px.x) / row.px.w) * row.size;
    const box = el('div');
    const run = row.runs.find((s) => addr >= s.addr && addr < s.addr + s.size);
    if (!run) {
      box.appendChild(el('div', { class: 'tiptitle' }, 'unmapped pages of an expandable segment'));
      showTip(ev, box);
      return;
    }
    const id = run.blocks.find((b) => addr >= m.addr[b] && addr < m.addr[b] + Math.max(m.size[b] + m.extra[b], row.size / row.px.w));
    box.appendChild(el('div', { class: 'tiptitle' },
      `segment 0x${run.addr.toString(16)}: ${fmtSize(run.size)}, stream ${m.streamName(run.stream)}`));
    if (id === undefined) {
      box.appendChild(el('div', null, run.blocks.length ? 'free (inactive split)' : 'free: a cached segment with no live block'));
    } else {
      const pending = m.pendFrom[id] && m.pendFrom[id] <= this.at;
      box.appendChild(el('div', null, `block 0x${m.addr[id].toString(16)}: ${fmtSize(m.size[id])} requested, ` +
        `${fmtSize(m.size[id] + m.extra[id])} block${pending ? ', free requested, pending' : ''}`));
      box.appendChild(el('pre', { class: 'stack' }, siteLines(m.stacks, m.siteOf(m.stack[id]), 10).join('\n')));
    }
    showTip(ev, box);
  }

  showTable() {
    const m = this.m;
    const st = this.state;
    const box = this.tableBox;
    box.textContent = '';
    const t = el('table', { class: 'grid', id: 'state-segments' });
    const head = ['address', 'size', 'stream', 'pool', 'live blocks', 'allocated', 'free'];
    const hr = el('tr');
    for (const h of head) hr.appendChild(el('th', null, h));
    t.appendChild(hr);
    for (const s of st.segs.slice(0, MAX_TABLE)) {
      const tr = el('tr', { 'data-addr': String(s.addr), 'data-size': String(s.size) });
      const pool = s.flags & SEG_EXPANDABLE ? 'expandable' : s.flags & SEG_IN_TABLE ? (s.flags & SEG_SMALL ? 'small' : 'large') : '(freed later)';
      for (const v of ['0x' + s.addr.toString(16), fmtSize(s.size), m.streamName(s.stream), pool,
        fmtCount(s.blocks.length), fmtSize(s.allocated), fmtSize(s.free)])
        tr.appendChild(el('td', null, v));
      t.appendChild(tr);
    }
    box.appendChild(t);
    if (st.segs.length > MAX_TABLE)
      box.appendChild(el('div', { class: 'hint' }, `… and ${fmtCount(st.segs.length - MAX_TABLE)} more segments`));
  }

  highlightChanged() {
    if (this.state) this.drawMap();
  }

  // For tests: the segments listed now, as [address, size].
  segments() {
    return this.state.segs.map((s) => [s.addr, s.size]);
  }
}
