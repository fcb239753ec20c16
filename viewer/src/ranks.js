// ranks.js: a job's ranks side by side (cuprof summary's cross-rank view): every rank's peaks and
// timeline, the ranks more than 10% from the median marked as outliers, and the call sites whose
// live bytes at the end differ most between ranks.
import { select } from 'd3-selection';
import { scaleLinear, scaleBand } from 'd3-scale';
import { axisBottom, axisLeft } from 'd3-axis';
import { el, fmtSize, fmtSizeShort, fmtCount } from './format.js';
import { showTip, hideTip } from './tooltip.js';

export function rankLabel(r) {
  return r.rank >= 0 ? `rank ${r.rank}` : r.file.split('/').pop();
}

// A small chart of one series pair (allocated filled, reserved as a line).
export function sparkline(parent, t, w, h, max, cls) {
  const svg = select(parent).append('svg').attr('width', w).attr('height', h).attr('class', cls || 'spark');
  const n = t.live.length;
  const x = scaleLinear().domain([0, Math.max(1, n - 1)]).range([0, w]);
  const y = scaleLinear().domain([0, max || 1]).range([h - 1, 1]);
  let d = `M0,${h}`;
  t.live.forEach((v, i) => { d += `L${x(i).toFixed(1)},${y(v).toFixed(1)}`; });
  svg.append('path').attr('class', 'spark-allocated').attr('d', d + `L${w},${h}Z`);
  let r = '';
  t.reserved.forEach((v, i) => { r += `${i ? 'L' : 'M'}${x(i).toFixed(1)},${y(v).toFixed(1)}`; });
  svg.append('path').attr('class', 'line-reserved thin').attr('d', r);
  return svg;
}

export function ranksView(ranks, box) {
  box.textContent = '';
  const rows = ranks.rows;
  box.appendChild(el('div', { class: 'paneltitle' },
    `${rows.length} files · median peak allocated ${fmtSize(ranks.median_allocated)}, reserved ` +
    `${fmtSize(ranks.median_reserved)} · outliers: more than ${ranks.outlier_percent}% from the median`));
  if (ranks.unreadable.length)
    box.appendChild(el('div', { class: 'warn' }, `could not be read: ${ranks.unreadable.join(', ')}`));
  // The table.
  const t = el('table', { class: 'grid', id: 'ranks-table' });
  const head = ['rank', 'host', 'pid', 'peak allocated', 'vs median', 'peak reserved', 'vs median', 'OOMs',
    'fragmentation at peak', 'file'];
  const hr = el('tr');
  for (const h of head) hr.appendChild(el('th', null, h));
  t.appendChild(hr);
  for (const r of rows) {
    const tr = el('tr', { class: r.outlier_allocated || r.outlier_reserved ? 'outlier' : '' });
    const off = (v, out) => el('td', { class: 'num' + (out ? ' bad' : '') }, `${v >= 0 ? '+' : ''}${v.toFixed(0)}%`);
    tr.appendChild(el('td', null, r.rank >= 0 ? r.rank : '-'));
    tr.appendChild(el('td', null, r.host));
    tr.appendChild(el('td', { class: 'num' }, r.pid));
    tr.appendChild(el('td', { class: 'num' }, fmtSize(r.peak_allocated)));
    tr.appendChild(off(r.off_median_allocated, r.outlier_allocated));
    tr.appendChild(el('td', { class: 'num' }, fmtSize(r.peak_reserved)));
    tr.appendChild(off(r.off_median_reserved, r.outlier_reserved));
    tr.appendChild(el('td', { class: 'num' }, r.ooms));
    tr.appendChild(el('td', { class: 'num' }, fmtSize(r.fragmentation)));
    tr.appendChild(el('td', null, r.file));
    t.appendChild(tr);
  }
  box.appendChild(t);
  // Peaks by rank, the median as a line.
  const width = Math.max(500, Math.floor(box.clientWidth || 1000) - 10);
  const H = 180;
  const L = 70;
  const x = scaleBand().domain(rows.map((r, i) => i)).range([L, width - 10]).padding(0.2);
  const max = Math.max(1, ...rows.map((r) => r.peak_reserved));
  const y = scaleLinear().domain([0, max]).range([H, 10]);
  const svg = select(box).append('svg').attr('id', 'ranks-peaks').attr('width', width).attr('height', H + 40);
  rows.forEach((r, i) => {
    svg.append('rect').attr('x', x(i)).attr('width', x.bandwidth()).attr('y', y(r.peak_reserved))
      .attr('height', H - y(r.peak_reserved)).attr('class', 'bar-reserved' + (r.outlier_reserved ? ' outlier' : ''))
      .on('mousemove', (ev) => showTip(ev, `${rankLabel(r)}: peak reserved ${fmtSize(r.peak_reserved)}`)).on('mouseleave', hideTip);
    svg.append('rect').attr('x', x(i) + x.bandwidth() * 0.2).attr('width', x.bandwidth() * 0.6)
      .attr('y', y(r.peak_allocated)).attr('height', H - y(r.peak_allocated))
      .attr('class', 'bar-allocated' + (r.outlier_allocated ? ' outlier' : ''))
      .on('mousemove', (ev) => showTip(ev, `${rankLabel(r)}: peak allocated ${fmtSize(r.peak_allocated)} (${r.off_median_allocated >= 0 ? '+' : ''}${r.off_median_allocated.toFixed(0)}% from the median)`))
      .on('mouseleave', hideTip);
  });
  svg.append('line').attr('class', 'median').attr('x1', L).attr('x2', width - 10)
    .attr('y1', y(ranks.median_allocated)).attr('y2', y(ranks.median_allocated));
  svg.append('g').attr('transform', `translate(${L},0)`).call(axisLeft(y).ticks(5).tickFormat(fmtSizeShort));
  svg.append('g').attr('transform', `translate(0,${H})`)
    .call(axisBottom(x).tickFormat((i) => (rows[i].rank >= 0 ? rows[i].rank : i)));
  box.appendChild(el('div', { class: 'hint' },
    'bars: peak reserved (wide) and peak allocated (narrow) per rank; line: median peak allocated; red: outlier'));
  // Every rank's timeline, on one scale.
  box.appendChild(el('div', { class: 'paneltitle' }, 'every rank\'s timeline (allocated filled, reserved as a line; one scale)'));
  const grid = el('div', { class: 'sparkgrid', id: 'ranks-timelines' });
  let tmax = 1;
  for (const r of rows) for (const tl of r.timelines) for (const v of tl.reserved) tmax = Math.max(tmax, v);
  for (const r of rows) {
    for (const tl of r.timelines) {
      const cell = el('div', { class: 'sparkcell' + (r.outlier_allocated || r.outlier_reserved ? ' outlier' : '') });
      cell.appendChild(el('div', { class: 'sparklabel' },
        `${rankLabel(r)}${r.timelines.length > 1 ? ' device ' + tl.device : ''} · ${fmtSize(r.peak_allocated)}`));
      sparkline(cell, tl, 220, 54, tmax);
      grid.appendChild(cell);
    }
  }
  box.appendChild(grid);
  sitesDifferences(ranks, box, rows.map(rankLabel));
}

// The call sites whose live bytes at the end differ most, with every row's bytes.
export function sitesDifferences(ranks, box, labels) {
  box.appendChild(el('div', { class: 'paneltitle' }, 'call sites whose live bytes at the end differ most'));
  if (!ranks.sites.length) {
    box.appendChild(el('p', { class: 'empty' }, 'none: every call site holds the same bytes everywhere'));
    return;
  }
  const t = el('table', { class: 'grid', id: 'ranks-sites' });
  const hr = el('tr');
  hr.appendChild(el('th', null, 'call site'));
  hr.appendChild(el('th', { class: 'num' }, 'difference'));
  const many = labels.length > 8;
  if (!many) for (const l of labels) hr.appendChild(el('th', { class: 'num' }, l));
  else {
    hr.appendChild(el('th', null, 'most'));
    hr.appendChild(el('th', null, 'least'));
  }
  t.appendChild(hr);
  for (const s of ranks.sites) {
    const tr = el('tr');
    const name = el('td', { class: 'sitename' }, s.name);
    name.addEventListener('mousemove', (ev) => showTip(ev, s.frames));
    name.addEventListener('mouseleave', hideTip);
    tr.appendChild(name);
    const hi = Math.max(...s.bytes);
    const lo = Math.min(...s.bytes);
    tr.appendChild(el('td', { class: 'num' }, fmtSize(hi - lo)));
    if (!many) for (const b of s.bytes) tr.appendChild(el('td', { class: 'num' }, fmtSize(b)));
    else {
      tr.appendChild(el('td', null, `${labels[s.bytes.indexOf(hi)]}: ${fmtSize(hi)}`));
      tr.appendChild(el('td', null, `${labels[s.bytes.indexOf(lo)]}: ${fmtSize(lo)}`));
    }
    t.appendChild(tr);
  }
  box.appendChild(t);
  box.appendChild(el('div', { class: 'hint' }, `${fmtCount(ranks.sites.length)} sites shown`));
}
