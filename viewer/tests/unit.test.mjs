// unit.test.mjs: the page's pure parts under node's test runner: the varint and base64 readers,
// and the timeline's level of detail (layout.js) against a plain restacking of every column.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { decodeBase64, Varints } from '../src/data.js';
import { DeviceModel } from '../src/model.js';
import { columnRanges, sampleColumns, sweep } from '../src/layout.js';

function leb(values) {
  const out = [];
  for (let v of values) {
    while (v >= 128) {
      out.push((v % 128) | 128);
      v = Math.floor(v / 128);
    }
    out.push(v);
  }
  return Uint8Array.from(out);
}

test('varints: unsigned and zigzag, up to 2^53', () => {
  const values = [0, 1, 127, 128, 300, 2 ** 31, 2 ** 40 + 5, 2 ** 53 - 1];
  const r = new Varints(leb(values));
  for (const v of values) assert.equal(r.uint(), v);
  const z = new Varints(leb([0, 1, 2, 3, 2 ** 41 - 1]));
  assert.deepEqual([z.sint(), z.sint(), z.sint(), z.sint(), z.sint()], [0, -1, 1, -2, -(2 ** 40)]);
});

test('base64: every length and padding', () => {
  for (let n = 0; n < 40; n++) {
    const bytes = Uint8Array.from({ length: n }, (_, i) => (i * 37 + n) & 255);
    const text = Buffer.from(bytes).toString('base64');
    assert.deepEqual(decodeBase64(text), bytes);
    assert.deepEqual(decodeBase64(' ' + text + '\n'), bytes);
  }
});

// A random history: allocations pushed and freed at random, some live at the start, some
// replaced by an alloc at their address (their death has no entry of its own).
function randomModel(seed, entries) {
  let s = seed;
  const rnd = (n) => {
    s = (s * 1103515245 + 12345) % 2147483648;
    return s % n;
  };
  const allocs = [];
  const live = [];
  for (let k = 0; k < 20; k++) {
    const id = allocs.length;
    allocs.push({ born: 0, died: 0, size: 1 + rnd(1 << 20) });
    live.push(id);
  }
  let i = 0;
  const extra = [];
  while (i < entries) {
    if (live.length && rnd(3) === 0) {
      const id = live.splice(rnd(live.length), 1)[0];
      allocs[id].died = i + 1;
      allocs[id].freeEntry = i;
      i++;
    } else {
      const id = allocs.length;
      const size = rnd(10) === 0 ? 1 + rnd(64) : 1 + rnd(4 << 20);
      allocs.push({ born: i + 1, died: 0, size });
      if (live.length && rnd(25) === 0) {
        // the alloc replaces a live allocation at its address
        const old = live.splice(rnd(live.length), 1)[0];
        allocs[old].died = i + 1;
        extra.push(old);
      }
      live.push(id);
      i++;
    }
  }
  for (const id of live) allocs[id].died = entries + 1;
  const m = Object.create(DeviceModel.prototype);
  m.count = entries;
  m.nAllocs = allocs.length;
  m.born = Uint32Array.from(allocs, (a) => a.born);
  m.died = Uint32Array.from(allocs, (a) => a.died);
  m.pendFrom = new Uint32Array(allocs.length);
  m.size = Float64Array.from(allocs, (a) => a.size);
  m.nSegs = 0;
  m.nEvents = 0;
  m.evEntry = new Uint32Array(0);
  m.buildSeries();
  return m;
}

function naiveColumn(m, at, theta) {
  const bands = [];
  let y = 0;
  for (let id = 0; id < m.nAllocs; id++) {
    if (m.born[id] <= at && m.died[id] > at) {
      if (m.size[id] >= theta) bands.push([id, y]);
      y += m.size[id];
    }
  }
  return { bands, top: y };
}

test('layout: every column is the sampled state, restacked', () => {
  for (const [seed, entries, W] of [[1, 300, 700], [7, 5000, 300], [42, 20000, 97], [5, 2000, 2000]]) {
    const m = randomModel(seed, entries);
    for (const [x0, x1] of [[0, entries + 1], [entries / 3, entries / 2], [entries - 10, entries + 1]]) {
      const ranges = columnRanges(m, false, x0, x1, W);
      const samples = sampleColumns(m, ranges);
      let yMax = 1;
      for (let c = 0; c < W; c++) yMax = Math.max(yMax, samples.liveMax[c]);
      const theta = yMax / 600;
      const lay = sweep(m, samples, theta);
      for (let c = 0; c < W; c++) {
        const at = samples.sample[c];
        // The sample is the state with the most live bytes in the column.
        for (let k = ranges.lo[c]; k < ranges.hi[c]; k++) assert.ok(m.live[k] <= m.live[at]);
        const want = naiveColumn(m, at, theta);
        const got = [];
        for (let k = lay.colStart[c]; k < lay.colStart[c + 1]; k++) got.push([lay.bandId[k], lay.bandY0[k]]);
        assert.deepEqual(got, want.bands, `seed ${seed} column ${c} state ${at}`);
        assert.equal(lay.top[c], want.top);
        assert.equal(lay.top[c], m.live[at]);
      }
    }
  }
});

test('layout: a view narrower than a column per state shows every state', () => {
  const m = randomModel(3, 400);
  const ranges = columnRanges(m, false, 0, m.count + 1, 1000);
  const seen = new Set();
  for (let c = 0; c < 1000; c++) for (let k = ranges.lo[c]; k < ranges.hi[c]; k++) seen.add(k);
  assert.equal(seen.size, m.count + 1);
});
