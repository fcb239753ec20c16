// layout.js: the timeline's level of detail. The view is cut into pixel columns; each column
// shows one state (the one with the most live bytes among the states it covers, so no peak is
// lost) as memory_viz stacks it: every live allocation a band, the oldest at the bottom. One
// sweep from the first column's state to the last keeps the live allocations that are tall
// enough to see (at least `theta` bytes, about half a pixel) in allocation order, with the bytes
// of the smaller ones between them summed: a column then costs the visible bands alone, at most
// two per pixel row, whatever the number of allocations.
import { OWN_ALLOC, OWN_FREE_COMPLETED } from './model.js';

// The states each of W columns covers, [lo[c], hi[c]), for a view [x0, x1) in time (µs since
// the history's first entry) or in state index.
export function columnRanges(m, useTime, x0, x1, W) {
  const lo = new Uint32Array(W);
  const hi = new Uint32Array(W);
  const dx = (x1 - x0) / W;
  const n = m.count;
  for (let c = 0; c < W; c++) {
    const a = x0 + c * dx;
    const b = a + dx;
    let l;
    let h;
    if (useTime) {
      // State k holds from entry k-1's time until entry k's.
      l = m.lowerTime(a);
      h = m.lowerTime(b) + 1;
    } else {
      l = Math.floor(a);
      h = Math.max(l + 1, Math.ceil(b));
    }
    l = Math.max(0, Math.min(n, l));
    h = Math.max(l + 1, Math.min(n + 1, h));
    lo[c] = l;
    hi[c] = h;
  }
  return { lo, hi };
}

// The sampled state of each column (the most allocated bytes; ties: the first), and the most
// reserved bytes in each column.
export function sampleColumns(m, ranges) {
  const W = ranges.lo.length;
  const sample = new Uint32Array(W);
  const resMax = new Float64Array(W);
  const liveMax = new Float64Array(W);
  const live = m.live;
  const reserved = m.reserved;
  for (let c = 0; c < W; c++) {
    let best = ranges.lo[c];
    let bv = live[best];
    let rv = reserved[best];
    for (let at = best + 1; at < ranges.hi[c]; at++) {
      if (live[at] > bv) {
        bv = live[at];
        best = at;
      }
      if (reserved[at] > rv) rv = reserved[at];
    }
    sample[c] = best;
    liveMax[c] = bv;
    resMax[c] = rv;
  }
  return { sample, liveMax, resMax };
}

// Live allocations of at least `theta` bytes in allocation order ("bigs"), each with the bytes of
// the smaller live allocations just below it ("gap"); `tail` is the small bytes above the last.
class Stack {
  constructor(m, theta) {
    this.m = m;
    this.theta = theta;
    this.ids = new Int32Array(64);
    this.gap = new Float64Array(64);
    this.n = 0;
    this.tail = 0;
  }
  grow() {
    const ids = new Int32Array(this.ids.length * 2);
    ids.set(this.ids);
    const gap = new Float64Array(this.gap.length * 2);
    gap.set(this.gap);
    this.ids = ids;
    this.gap = gap;
  }
  // The position of the first big with an id greater than `id`.
  after(id) {
    let lo = 0;
    let hi = this.n;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (this.ids[mid] <= id) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }
  // Allocation `id` is newer than every live one: it goes on top.
  push(id) {
    const s = this.m.size[id];
    if (s < this.theta) {
      this.tail += s;
      return;
    }
    if (this.n === this.ids.length) this.grow();
    this.ids[this.n] = id;
    this.gap[this.n] = this.tail;
    this.n++;
    this.tail = 0;
  }
  remove(id) {
    const s = this.m.size[id];
    const k = this.after(id);
    if (s < this.theta) {
      if (k === this.n) this.tail -= s;
      else this.gap[k] -= s;
      return;
    }
    const at = k - 1; // ids[at] === id
    if (at < 0 || this.ids[at] !== id) return;
    if (at + 1 < this.n) this.gap[at + 1] += this.gap[at];
    else this.tail += this.gap[at];
    this.ids.copyWithin(at, at + 1, this.n);
    this.gap.copyWithin(at, at + 1, this.n);
    this.n--;
  }
}

// Lays out every column: for column c, bands colStart[c]..colStart[c+1] of bandId (allocation)
// and bandY0 (bytes below it); top[c] is the column's allocated bytes.
export function sweep(m, samples, theta) {
  const W = samples.sample.length;
  const colStart = new Uint32Array(W + 1);
  let bandId = new Int32Array(1024);
  let bandY0 = new Float64Array(1024);
  let nb = 0;
  const top = new Float64Array(W);
  if (W === 0 || m.nAllocs === 0) return { colStart, bandId, bandY0, top, n: 0 };
  const st = new Stack(m, theta);
  const owner = m.owners();
  const extra = m.extraDeaths;
  // The state of the first column, from the allocations themselves.
  let cur = samples.sample[0];
  for (const id of m.liveAt(cur)) st.push(id);
  let ex = 0;
  while (ex < extra.length && extra[ex][0] < cur) ex++;
  for (let c = 0; c < W; c++) {
    const target = samples.sample[c];
    // Entry i turns state i into state i + 1.
    for (let i = cur; i < target; i++) {
      const own = owner[i];
      if (own >= 0) {
        const role = own & 3;
        if (role === OWN_ALLOC) st.push(own >> 2);
        else if (role === OWN_FREE_COMPLETED) st.remove(own >> 2);
      }
      while (ex < extra.length && extra[ex][0] === i) st.remove(extra[ex++][1]);
    }
    cur = target > cur ? target : cur;
    colStart[c] = nb;
    if (nb + st.n > bandId.length) {
      let cap = bandId.length * 2;
      while (cap < nb + st.n) cap *= 2;
      const ids = new Int32Array(cap);
      ids.set(bandId.subarray(0, nb));
      const ys = new Float64Array(cap);
      ys.set(bandY0.subarray(0, nb));
      bandId = ids;
      bandY0 = ys;
    }
    let y = 0;
    for (let k = 0; k < st.n; k++) {
      y += st.gap[k];
      bandId[nb] = st.ids[k];
      bandY0[nb] = y;
      nb++;
      y += m.size[st.ids[k]];
    }
    top[c] = y + st.tail;
  }
  colStart[W] = nb;
  return { colStart, bandId, bandY0, top, n: nb };
}
