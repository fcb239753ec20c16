// colors.js: one colour per call site, stable across the page's views, and the colours of
// what is not a call site.

// Distinct hues for the largest sites first (golden-angle steps), then a hash for the rest.
// Reds are left out: red marks pending frees, rounding and OOMs.
const PALETTE = [];
for (let i = 0; PALETTE.length < 48; i++) {
  const h = (205 + i * 137.508) % 360;
  if (h < 18 || h > 338) continue;
  const l = 50 + (i % 3) * 8;
  PALETTE.push(hsl(h, 60 + (i % 2) * 12, l));
}

function notRed(h) {
  return h < 18 ? h + 36 : h > 338 ? h - 36 : h;
}

function hsl(h, s, l) {
  s /= 100;
  l /= 100;
  const k = (n) => (n + h / 30) % 12;
  const a = s * Math.min(l, 1 - l);
  const f = (n) => l - a * Math.max(-1, Math.min(k(n) - 3, Math.min(9 - k(n), 1)));
  return [Math.round(255 * f(0)), Math.round(255 * f(8)), Math.round(255 * f(4))];
}

export const COLORS = {
  small: [205, 205, 212], // allocations too small to draw alone at this zoom
  pending: [226, 88, 88], // freed, waiting for their stream's events
  waste: [240, 160, 160], // a block's bytes past its request
  split: [232, 232, 236], // inactive split: free bytes in a segment with live blocks
  cached: [245, 245, 247], // a whole free segment
  unmapped: [252, 252, 252],
  allocated: '#2b6cd9',
  reserved: '#d9822b',
  oom: '#d62728',
};

// The colour of each site, by its rank in `order` (a list of site ids, largest first).
export class SiteColors {
  constructor(order) {
    this.rank = new Map();
    order.forEach((site, i) => this.rank.set(site, i));
    this.cache = new Map();
  }
  rgb(site) {
    let c = this.cache.get(site);
    if (c) return c;
    const r = this.rank.get(site);
    if (r !== undefined && r < PALETTE.length) c = PALETTE[r];
    else {
      let h = (site * 2654435761) >>> 0;
      c = hsl(notRed(h % 360), 55 + ((h >>> 9) % 20), 48 + ((h >>> 14) % 18));
    }
    this.cache.set(site, c);
    return c;
  }
  css(site) {
    const c = this.rgb(site);
    return `rgb(${c[0]},${c[1]},${c[2]})`;
  }
}

// A colour faded towards white (sites other than the highlighted one).
export function fade(c, amount = 0.78) {
  return [
    Math.round(c[0] + (255 - c[0]) * amount),
    Math.round(c[1] + (255 - c[1]) * amount),
    Math.round(c[2] + (255 - c[2]) * amount),
  ];
}

// Packs an [r, g, b] colour into the little-endian RGBA word of an ImageData's Uint32Array.
export function packRGB(c) {
  return (255 << 24) | (c[2] << 16) | (c[1] << 8) | c[0];
}
