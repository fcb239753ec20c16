// compare.js: two runs side by side (cuprof plot --compare A B): their peaks, their allocated and
// reserved bytes over their histories on one scale, and the call sites whose live bytes at the
// end changed most. When the data carries `cuprof diff`'s answer ("diff"), its summary comes
// first.
import { select } from 'd3-selection';
import { scaleLinear } from 'd3-scale';
import { axisBottom, axisLeft } from 'd3-axis';
import { el, fmtSize, fmtSizeShort, fmtCount } from './format.js';
import { sitesDifferences } from './ranks.js';

const COLORS = ['#2b6cd9', '#d62728'];

function change(a, b) {
  if (a === b) return 'same';
  const d = b - a;
  const pct = a ? ` (${d > 0 ? '+' : ''}${((100 * d) / a).toFixed(1)}%)` : '';
  return `${d > 0 ? '+' : '-'}${fmtSize(Math.abs(d))}${pct}`;
}

// The cross-rank view's rows come by rank, then path: put them in the runs' order (A, B).
function inRunOrder(ranks, runs) {
  const used = new Set();
  const order = runs.map((r) => {
    const i = ranks.rows.findIndex((row, k) => !used.has(k) && row.file === r.file);
    used.add(i);
    return i;
  });
  if (order.some((i) => i < 0)) return ranks;
  return { ...ranks, rows: order.map((i) => ranks.rows[i]),
    sites: ranks.sites.map((s) => ({ ...s, bytes: order.map((i) => s.bytes[i]) })) };
}

export function compareView(data, ranks, box) {
  box.textContent = '';
  const [A, B] = data.runs;
  if (data.diff) {
    const d = el('div', { class: 'panel', id: 'compare-diff' });
    d.appendChild(el('div', { class: 'paneltitle' }, 'cuprof diff'));
    d.appendChild(el('pre', { class: 'stack' }, data.diff.summary || JSON.stringify(data.diff, null, 2)));
    box.appendChild(d);
  }
  box.appendChild(el('div', { class: 'paneltitle' }, `A: ${A.file} · B: ${B.file}`));
  const t = el('table', { class: 'grid', id: 'compare-peaks' });
  const hr = el('tr');
  for (const h of ['device', 'figure', 'A', 'B', 'B against A']) hr.appendChild(el('th', null, h));
  t.appendChild(hr);
  const devices = [...new Set([...A.devices, ...B.devices].map((d) => d.device))].sort((a, b) => a - b);
  const figures = [['peak_live', 'peak allocated', fmtSize], ['peak_reserved', 'peak reserved', fmtSize],
    ['end_live', 'allocated at the end', fmtSize], ['end_reserved', 'reserved at the end', fmtSize],
    ['count', 'trace entries', fmtCount], ['oom_count', 'OOMs', fmtCount]];
  for (const dn of devices) {
    const da = A.devices.find((d) => d.device === dn);
    const db = B.devices.find((d) => d.device === dn);
    for (const [key, label, fmt] of figures) {
      const a = da ? da[key] : 0;
      const b = db ? db[key] : 0;
      const tr = el('tr');
      tr.appendChild(el('td', null, dn));
      tr.appendChild(el('td', null, label));
      tr.appendChild(el('td', { class: 'num' }, da ? fmt(a) : '-'));
      tr.appendChild(el('td', { class: 'num' }, db ? fmt(b) : '-'));
      tr.appendChild(el('td', { class: 'num' + (b > a ? ' bad' : b < a ? ' good' : '') },
        fmt === fmtSize ? change(a, b) : b === a ? 'same' : `${b > a ? '+' : ''}${fmtCount(b - a)}`));
      t.appendChild(tr);
    }
  }
  box.appendChild(t);
  // Both runs on one scale, each over its own history.
  const width = Math.max(500, Math.floor(box.clientWidth || 1000) - 10);
  for (const dn of devices) {
    const runs = [A, B].map((r) => r.devices.find((d) => d.device === dn));
    box.appendChild(el('div', { class: 'paneltitle' },
      `device ${dn}: allocated (filled) and reserved (line) over each run's history`));
    const H = 200;
    const L = 70;
    let max = 1;
    for (const d of runs) if (d) for (const v of d.overview.reserved.concat(d.overview.live)) max = Math.max(max, v);
    const x = scaleLinear().domain([0, 1]).range([L, width - 10]);
    const y = scaleLinear().domain([0, max]).range([H, 8]);
    const svg = select(box).append('svg').attr('class', 'compare-chart').attr('width', width).attr('height', H + 30);
    runs.forEach((d, k) => {
      if (!d) return;
      const n = d.overview.live.length;
      const pos = (i) => x(n > 1 ? i / (n - 1) : 0).toFixed(1);
      let live = `M${x(0)},${H}`;
      d.overview.live.forEach((v, i) => { live += `L${pos(i)},${y(v).toFixed(1)}`; });
      svg.append('path').attr('d', live + `L${x(1)},${H}Z`).attr('fill', COLORS[k]).attr('fill-opacity', 0.18)
        .attr('stroke', COLORS[k]).attr('stroke-width', 1);
      let res = '';
      d.overview.reserved.forEach((v, i) => { res += `${i ? 'L' : 'M'}${pos(i)},${y(v).toFixed(1)}`; });
      svg.append('path').attr('d', res).attr('fill', 'none').attr('stroke', COLORS[k]).attr('stroke-dasharray', '4,3');
    });
    svg.append('g').attr('transform', `translate(${L},0)`).call(axisLeft(y).ticks(5).tickFormat(fmtSizeShort));
    svg.append('g').attr('transform', `translate(0,${H})`)
      .call(axisBottom(x).ticks(5).tickFormat((v) => `${Math.round(v * 100)}%`));
    const legend = el('div', { class: 'legend' });
    ['A', 'B'].forEach((n, k) => {
      const s = el('span', { class: 'legenditem' });
      s.appendChild(el('span', { class: 'swatch', style: `background:${COLORS[k]}` }));
      s.appendChild(document.createTextNode(`${n} (x: share of its history)`));
      legend.appendChild(s);
    });
    box.appendChild(legend);
  }
  if (ranks) sitesDifferences(inRunOrder(ranks, data.runs), box, ['A', 'B']);
}
