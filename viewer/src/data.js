// data.js: what `cuprof plot` put in the page (DATA.md): the JSON values, and the binary part
// (base64) holding the stacks and history tables as rows of LEB128 varints.

export const SCHEMA = 1;

export function readPage(doc) {
  const json = (id) => {
    const node = doc.getElementById(id);
    return node ? JSON.parse(node.textContent) : null;
  };
  const data = json('cuprof-data');
  if (!data) throw new Error('this page holds no cuprof data');
  if (data.cuprof_report !== SCHEMA)
    throw new Error(`data of layout ${data.cuprof_report}; this page reads layout ${SCHEMA}`);
  const blobNode = doc.getElementById('cuprof-blobs');
  return {
    data,
    ranks: json('cuprof-ranks'),
    libraries: json('cuprof-libraries') || [],
    blobs: decodeBase64(blobNode ? blobNode.textContent : ''),
  };
}

const B64 = new Uint8Array(128);
'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/'
  .split('').forEach((c, i) => { B64[c.charCodeAt(0)] = i; });

export function decodeBase64(text) {
  // The browser's own decoder where it has one (Chromium 140 and later): 10^7 entries are ~80 MB.
  if (typeof Uint8Array.fromBase64 === 'function') {
    try {
      return Uint8Array.fromBase64(text.trim());
    } catch {
      // not base64 as this decoder wants it: the plain loop below says what it can
    }
  }
  let n = text.length;
  while (n > 0 && text.charCodeAt(n - 1) <= 32) n--; // trailing white space
  let start = 0;
  while (start < n && text.charCodeAt(start) <= 32) start++;
  const len = n - start;
  if (len === 0) return new Uint8Array(0);
  let pad = 0;
  if (text.charCodeAt(n - 1) === 61) pad++;
  if (text.charCodeAt(n - 2) === 61) pad++;
  const out = new Uint8Array((len / 4) * 3 - pad);
  let o = 0;
  for (let i = start; i < n; i += 4) {
    const v = (B64[text.charCodeAt(i)] << 18) | (B64[text.charCodeAt(i + 1)] << 12) |
      (B64[text.charCodeAt(i + 2)] << 6) | B64[text.charCodeAt(i + 3)];
    out[o++] = v >>> 16;
    if (o < out.length) out[o++] = (v >>> 8) & 255;
    if (o < out.length) out[o++] = v & 255;
  }
  return out;
}

// A reader of one table's varints. uint() is exact up to 2^53 (sizes and addresses are below).
export class Varints {
  constructor(bytes, at) {
    this.b = bytes;
    this.pos = at ? at[0] : 0;
    this.end = at ? at[0] + at[1] : bytes.length;
  }
  uint() {
    const b = this.b;
    let x = b[this.pos++];
    if (x < 128) return x;
    let v = x & 127;
    let mul = 128;
    do {
      x = b[this.pos++];
      v += (x & 127) * mul;
      mul *= 128;
    } while (x >= 128);
    return v;
  }
  // A zigzag value: 2n for n >= 0, 2|n| - 1 for n < 0.
  sint() {
    const v = this.uint();
    return v % 2 === 0 ? v / 2 : -(v + 1) / 2;
  }
}

// Checks that a table has the fields this page reads, in that order.
export function checkFields(table, expected, what) {
  const got = table.fields.join(',');
  if (got !== expected.join(','))
    throw new Error(`${what}: fields ${got}, this page reads ${expected.join(',')}`);
}

// The stacks (frame indices, innermost first) and each stack's call site.
export function decodeStacks(run, blobs) {
  checkFields(run.stacks, ['count', 'frame...'], 'stacks');
  const n = run.stacks.count;
  const r = new Varints(blobs, run.stacks.at);
  const first = new Uint32Array(n + 1);
  const frames = [];
  for (let s = 0; s < n; s++) {
    first[s] = frames.length;
    const count = r.uint();
    for (let k = 0; k < count; k++) frames.push(r.uint());
  }
  first[n] = frames.length;
  const siteOf = new Uint32Array(n);
  const sr = new Varints(blobs, run.site_of.at);
  for (let s = 0; s < n; s++) siteOf[s] = sr.uint();
  return { first, frames: Uint32Array.from(frames), siteOf, texts: run.frames };
}
