// libraries.js: device memory by library (cuprof's cache: requested and reserved; pass-through)
// and the device's own footprint, as bar charts. cuprof's snapshots only: PyTorch's have neither.
import { select } from 'd3-selection';
import { scaleLinear } from 'd3-scale';
import { axisBottom } from 'd3-axis';
import { el, fmtSize, fmtSizeShort } from './format.js';
import { showTip, hideTip } from './tooltip.js';

const PARTS = [
  ['cache_reserved', 'cache: segments reserved', '#4e79a7'],
  ['passthrough', 'pass-through', '#f28e2b'],
];

export function librariesView(dev, box) {
  box.textContent = '';
  const libs = dev.libraries || [];
  if (!libs.length && !dev.footprint) {
    box.appendChild(el('p', { class: 'empty' },
      'This snapshot has no library breakdown or device footprint (PyTorch writes neither; cuprof does).'));
    return;
  }
  const width = Math.max(500, Math.floor(box.clientWidth || 1000) - 10);
  if (libs.length) {
    box.appendChild(el('div', { class: 'paneltitle' },
      'device memory by library (the first caller outside the CUDA libraries): bars live, ticks peak'));
    const rows = [...libs].sort((a, b) => b.device_bytes_peak - a.device_bytes_peak);
    const label = 220;
    const rowH = 26;
    const max = Math.max(1, ...rows.map((r) => Math.max(r.device_bytes_peak, r.cache_requested_peak)));
    const x = scaleLinear().domain([0, max]).range([0, width - label - 20]);
    const svg = select(box).append('svg').attr('id', 'libraries-chart')
      .attr('width', width).attr('height', rows.length * rowH + 30);
    rows.forEach((r, i) => {
      const g = svg.append('g').attr('transform', `translate(0,${i * rowH})`);
      g.append('text').attr('x', 0).attr('y', 16).attr('class', 'barlabel')
        .text((r.name + (r.is_program ? ' (program)' : '')).slice(0, 34));
      let x0 = label;
      for (const [key, name, color] of PARTS) {
        const w = x(r[key]);
        g.append('rect').attr('x', x0).attr('y', 4).attr('width', w).attr('height', 16).attr('fill', color)
          .on('mousemove', (ev) => showTip(ev, `${r.name}: ${name} ${fmtSize(r[key])} (peak ${fmtSize(r[key + '_peak'])})`))
          .on('mouseleave', hideTip);
        x0 += w;
      }
      // What the library asked for, inside its reserved bar.
      g.append('rect').attr('x', label).attr('y', 9).attr('width', x(r.cache_requested)).attr('height', 6)
        .attr('class', 'requested')
        .on('mousemove', (ev) => showTip(ev, `${r.name}: cache requested ${fmtSize(r.cache_requested)} (peak ${fmtSize(r.cache_requested_peak)})`))
        .on('mouseleave', hideTip);
      g.append('line').attr('class', 'peaktick').attr('x1', label + x(r.device_bytes_peak))
        .attr('x2', label + x(r.device_bytes_peak)).attr('y1', 1).attr('y2', 23)
        .on('mousemove', (ev) => showTip(ev, `${r.name}: device peak ${fmtSize(r.device_bytes_peak)}`))
        .on('mouseleave', hideTip);
    });
    svg.append('g').attr('transform', `translate(${label},${rows.length * rowH + 4})`)
      .call(axisBottom(x).ticks(6).tickFormat(fmtSizeShort));
    const legend = el('div', { class: 'legend' });
    for (const [, name, color] of PARTS) {
      const s = el('span', { class: 'legenditem' });
      s.appendChild(el('span', { class: 'swatch', style: `background:${color}` }));
      s.appendChild(document.createTextNode(name));
      legend.appendChild(s);
    }
    const s = el('span', { class: 'legenditem' });
    s.appendChild(el('span', { class: 'swatch sw-requested' }));
    s.appendChild(document.createTextNode('cache: requested'));
    legend.appendChild(s);
    box.appendChild(legend);
  }
  if (dev.footprint) footprint(dev.footprint, box, width);
}

function footprint(fp, box, width) {
  box.appendChild(el('div', { class: 'paneltitle' },
    'device footprint (device-wide: other processes and contexts count too)'));
  const unknown = fp.used_at_dump < 0;
  const parts = [
    ['cuprof reserved', fp.reserved, '#4e79a7'],
    ['pass-through', fp.passthrough, '#f28e2b'],
  ];
  if (!unknown) parts.push(['not seen by cuprof', Math.max(0, fp.used_at_dump - fp.reserved - fp.passthrough), '#bab0ac']);
  const total = fp.total > 0 ? fp.total : Math.max(1, fp.used_at_dump, fp.reserved + fp.passthrough);
  if (fp.total > 0 && !unknown) parts.push(['free', Math.max(0, fp.total - fp.used_at_dump), '#eef2f5']);
  const x = scaleLinear().domain([0, total]).range([0, width - 20]);
  const svg = select(box).append('svg').attr('id', 'footprint-chart').attr('width', width).attr('height', 64);
  let x0 = 0;
  for (const [name, bytes, color] of parts) {
    const w = x(bytes);
    svg.append('rect').attr('x', x0).attr('y', 4).attr('width', w).attr('height', 22).attr('fill', color)
      .attr('stroke', '#fff')
      .on('mousemove', (ev) => showTip(ev, `${name}: ${fmtSize(bytes)}`)).on('mouseleave', hideTip);
    x0 += w;
  }
  if (fp.used_at_start >= 0)
    svg.append('line').attr('class', 'peaktick').attr('x1', x(fp.used_at_start)).attr('x2', x(fp.used_at_start))
      .attr('y1', 0).attr('y2', 30).on('mousemove', (ev) => showTip(ev, `used at start: ${fmtSize(fp.used_at_start)}`))
      .on('mouseleave', hideTip);
  svg.append('g').attr('transform', 'translate(0,32)').call(axisBottom(x).ticks(6).tickFormat(fmtSizeShort));
  const legend = el('div', { class: 'legend' });
  for (const [name, bytes, color] of parts) {
    const s = el('span', { class: 'legenditem' });
    s.appendChild(el('span', { class: 'swatch', style: `background:${color}` }));
    s.appendChild(document.createTextNode(`${name} ${fmtSize(bytes)}`));
    legend.appendChild(s);
  }
  box.appendChild(legend);
  const facts = [`at start ${fp.used_at_start >= 0 ? fmtSize(fp.used_at_start) : 'unknown'}`,
    `at dump ${unknown ? 'unknown' : fmtSize(fp.used_at_dump)}`];
  if (fp.total > 0) facts.push(`of ${fmtSize(fp.total)}`);
  if (fp.graph_reserved_at_dump > 0) facts.push(`CUDA graphs' memory nodes hold ${fmtSize(fp.graph_reserved_at_dump)}`);
  box.appendChild(el('div', { class: 'hint', id: 'footprint-facts' }, facts.join(', ')));
}
