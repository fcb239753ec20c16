// model.js: one device of one run, decoded from the page's tables (DATA.md) into typed arrays:
// allocations with their lives, the other trace entries, segment ranges with their lives, each
// entry's time; the allocated and reserved bytes after every entry; and the state after any entry.
// A state index `at` means "after `at` entries": 0 is the start of the history, count its end.
import { Varints, checkFields } from './data.js';

const ALLOC_FIELDS = ['born+', 'life', 'pending', 'addr~', 'size', 'extra', 'stack', 'free_stack',
  'stream'];
const EVENT_FIELDS = ['entry+', 'action', 'addr~', 'size', 'stack', 'stream'];
const SEGMENT_FIELDS = ['from+', 'life', 'addr~', 'size', 'stream', 'flags'];
export const SEG_SMALL = 1;
export const SEG_EXPANDABLE = 2;
export const SEG_IN_TABLE = 4;

// What an entry is to its allocation (owner & 3).
export const OWN_ALLOC = 0;
export const OWN_FREE_REQUESTED = 1;
export const OWN_FREE_COMPLETED = 2;
export const OWN_EVENT = 3;

export class DeviceModel {
  constructor(run, dev, stacks, blobs, actions) {
    this.run = run;
    this.dev = dev;
    this.device = dev.device;
    this.stacks = stacks;
    this.actions = actions;
    this.count = dev.count;
    this.streams = dev.streams;
    this.hasHistory = !!dev.history;
    this.hasTime = false;
    if (!this.hasHistory) return;
    const h = dev.history;
    this.decodeAllocs(h.allocs, blobs);
    this.decodeEvents(h.events, blobs);
    this.decodeSegments(h.segments, blobs);
    if (h.times) this.decodeTimes(h.times, blobs);
    this.buildSeries();
    this.owner = null; // built when first asked for
  }

  decodeAllocs(t, blobs) {
    checkFields(t, ALLOC_FIELDS, 'allocs');
    const n = (this.nAllocs = t.count);
    const born = (this.born = new Uint32Array(n));
    const died = (this.died = new Uint32Array(n));
    const pendFrom = (this.pendFrom = new Uint32Array(n));
    const addr = (this.addr = new Float64Array(n));
    const size = (this.size = new Float64Array(n));
    const extra = (this.extra = new Float64Array(n));
    const stack = (this.stack = new Uint32Array(n));
    const freeStack = (this.freeStack = new Uint32Array(n));
    const stream = (this.stream = new Uint32Array(n));
    const r = new Varints(blobs, t.at);
    let b = 0;
    let a = 0;
    for (let i = 0; i < n; i++) {
      b += r.uint();
      const life = r.uint();
      const pend = r.uint();
      a += r.sint();
      born[i] = b;
      died[i] = b + life;
      pendFrom[i] = pend ? b + life - pend + 1 : 0;
      addr[i] = a;
      size[i] = r.uint();
      extra[i] = r.uint();
      stack[i] = r.uint();
      freeStack[i] = r.uint();
      stream[i] = r.uint();
    }
  }

  decodeEvents(t, blobs) {
    checkFields(t, EVENT_FIELDS, 'events');
    const n = (this.nEvents = t.count);
    this.evEntry = new Uint32Array(n);
    this.evAction = new Uint8Array(n);
    this.evAddr = new Float64Array(n);
    this.evSize = new Float64Array(n);
    this.evStack = new Uint32Array(n);
    this.evStream = new Uint32Array(n);
    const r = new Varints(blobs, t.at);
    let entry = 0;
    let a = 0;
    for (let i = 0; i < n; i++) {
      entry += r.uint();
      this.evEntry[i] = entry;
      this.evAction[i] = r.uint();
      a += r.sint();
      this.evAddr[i] = a;
      this.evSize[i] = r.uint();
      this.evStack[i] = r.uint();
      this.evStream[i] = r.uint();
    }
  }

  decodeSegments(t, blobs) {
    checkFields(t, SEGMENT_FIELDS, 'segments');
    const n = (this.nSegs = t.count);
    this.segFrom = new Uint32Array(n);
    this.segTo = new Uint32Array(n);
    this.segAddr = new Float64Array(n);
    this.segSize = new Float64Array(n);
    this.segStream = new Uint32Array(n);
    this.segFlags = new Uint8Array(n);
    const r = new Varints(blobs, t.at);
    let from = 0;
    let a = 0;
    for (let i = 0; i < n; i++) {
      from += r.uint();
      this.segFrom[i] = from;
      this.segTo[i] = from + r.uint();
      a += r.sint();
      this.segAddr[i] = a;
      this.segSize[i] = r.uint();
      this.segStream[i] = r.uint();
      this.segFlags[i] = r.uint();
    }
  }

  // Each entry's time in µs since the history's first timed entry, never decreasing (so that a
  // time finds its entries by binary search).
  decodeTimes(t, blobs) {
    checkFields(t, ['time~'], 'times');
    const n = t.count;
    const times = (this.times = new Float64Array(n));
    const r = new Varints(blobs, t.at);
    let v = 0;
    let prev = -Infinity;
    for (let i = 0; i < n; i++) {
      v += r.sint();
      prev = v > prev ? v : prev;
      times[i] = prev;
    }
    this.hasTime = n > 0;
    this.t0 = this.dev.history.t0_us;
  }

  // Allocated (live requested bytes) and reserved (segment bytes) after every entry.
  buildSeries() {
    const n = this.count + 1;
    const live = (this.live = new Float64Array(n + 1));
    const reserved = (this.reserved = new Float64Array(n + 1));
    for (let i = 0; i < this.nAllocs; i++) {
      live[this.born[i]] += this.size[i];
      live[this.died[i]] -= this.size[i];
    }
    for (let i = 0; i < this.nSegs; i++) {
      reserved[this.segFrom[i]] += this.segSize[i];
      reserved[this.segTo[i]] -= this.segSize[i];
    }
    let l = 0;
    let r = 0;
    let peak = -1;
    for (let at = 0; at < n; at++) {
      l += live[at];
      r += reserved[at];
      live[at] = l;
      reserved[at] = r;
      if (l > peak) {
        peak = l;
        this.peakLiveAt = at;
      }
    }
    this.live = live.subarray(0, n);
    this.reserved = reserved.subarray(0, n);
    this.peakLive = peak;
  }

  // owner[i]: entry i's allocation (id * 4 + its OWN_* role) or event (id * 4 + OWN_EVENT).
  owners() {
    if (this.owner) return this.owner;
    const own = (this.owner = new Int32Array(this.count).fill(-1));
    const count = this.count;
    for (let i = 0; i < this.nAllocs; i++) {
      if (this.born[i] > 0) own[this.born[i] - 1] = i * 4 + OWN_ALLOC;
      if (this.pendFrom[i] > 0) own[this.pendFrom[i] - 1] = i * 4 + OWN_FREE_REQUESTED;
    }
    // An alloc that replaced a live allocation ends it without an entry of its own: those
    // deaths are kept apart, as (entry, id) pairs in entry order.
    const extra = [];
    for (let i = 0; i < this.nAllocs; i++) {
      const d = this.died[i];
      if (d > count) continue;
      if (own[d - 1] < 0) own[d - 1] = i * 4 + OWN_FREE_COMPLETED;
      else extra.push([d - 1, i]);
    }
    extra.sort((a, b) => a[0] - b[0] || a[1] - b[1]);
    this.extraDeaths = extra;
    for (let i = 0; i < this.nEvents; i++) own[this.evEntry[i]] = i * 4 + OWN_EVENT;
    return own;
  }

  // The time of state `at`: its last entry's (the first entry's for the start).
  stateTime(at) {
    if (!this.hasTime) return at;
    if (this.count === 0) return 0;
    return this.times[Math.max(0, Math.min(this.count - 1, at - 1))];
  }

  // The first entry whose time is >= t (count when none is).
  lowerTime(t) {
    const times = this.times;
    let lo = 0;
    let hi = this.count;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (times[mid] < t) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  // The state holding at time t: the last state whose time is <= t.
  stateAtTime(t) {
    const times = this.times;
    let lo = 0;
    let hi = this.count;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (times[mid] <= t) lo = mid + 1;
      else hi = mid;
    }
    return lo; // entries 0..lo-1 happened at or before t: the state after lo entries
  }

  // The ids of the allocations live in state `at`, in id (allocation) order.
  liveAt(at) {
    const born = this.born;
    const died = this.died;
    let hi = 0;
    let lo = 0;
    let top = this.nAllocs;
    while (lo < top) {
      const mid = (lo + top) >>> 1;
      if (born[mid] <= at) lo = mid + 1;
      else top = mid;
    }
    hi = lo;
    const out = [];
    for (let i = 0; i < hi; i++) if (died[i] > at) out.push(i);
    return out;
  }

  // The segment ranges in state `at`.
  segmentsAt(at) {
    const out = [];
    for (let i = 0; i < this.nSegs && this.segFrom[i] <= at; i++)
      if (this.segTo[i] > at) out.push(i);
    return out;
  }

  // Entry i: its action's name and what it concerns.
  entry(i) {
    const own = this.owners()[i];
    if (own < 0) return { index: i, action: '?' };
    const id = own >> 2;
    const role = own & 3;
    if (role === OWN_EVENT) {
      return {
        index: i, action: this.actions[this.evAction[id]] || String(this.evAction[id]),
        event: id, addr: this.evAddr[id], size: this.evSize[id], stack: this.evStack[id],
        stream: this.evStream[id],
      };
    }
    const names = ['alloc', 'free_requested', 'free_completed'];
    const stack = role !== OWN_ALLOC && this.freeStack[id] ? this.freeStack[id] - 1 : this.stack[id];
    return {
      index: i, action: names[role], alloc: id, addr: this.addr[id], size: this.size[id],
      stack, stream: this.stream[id],
    };
  }

  siteOf(stack) {
    return stack < this.stacks.siteOf.length ? this.stacks.siteOf[stack] : stack;
  }

  streamName(n) {
    return this.streams && n < this.streams.length ? this.streams[n] : String(n);
  }
}
