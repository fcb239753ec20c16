// format.js: numbers as cuprof prints them.

// PyTorch's format_size, as `cuprof summary` prints sizes.
export function fmtSize(b) {
  if (b === undefined || b === null || Number.isNaN(b)) return '?';
  const sign = b < 0 ? '-' : '';
  b = Math.abs(b);
  if (b < 1024) return sign + Math.round(b) + ' bytes';
  if (b < 1048576) return sign + (b / 1024).toFixed(2) + ' KiB';
  if (b < 1073741824) return sign + (b / 1048576).toFixed(2) + ' MiB';
  return sign + (b / 1073741824).toFixed(2) + ' GiB';
}

// Short axis labels: 0, 512 B, 1.5 KiB, 20 MiB, 3 GiB.
export function fmtSizeShort(b) {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let u = 0;
  while (Math.abs(b) >= 1024 && u < units.length - 1) {
    b /= 1024;
    u++;
  }
  if (b === 0) return '0';
  const digits = Math.abs(b) >= 100 || Number.isInteger(b) ? 0 : 1;
  return b.toFixed(digits) + ' ' + units[u];
}

// Microseconds since the history began, for axes and hover text.
export function fmtTime(us) {
  if (us === undefined || us === null || Number.isNaN(us)) return '?';
  const s = us / 1e6;
  if (Math.abs(s) >= 100) return s.toFixed(1) + ' s';
  if (Math.abs(s) >= 1) return s.toFixed(3) + ' s';
  if (Math.abs(us) >= 1000) return (us / 1000).toFixed(3) + ' ms';
  return Math.round(us) + ' µs';
}

export function fmtCount(n) {
  return Math.round(n).toLocaleString('en-US');
}

export function fmtPercent(part, whole) {
  if (!whole) return '0%';
  const p = (100 * part) / whole;
  return (p >= 10 || p === 0 ? p.toFixed(0) : p.toFixed(1)) + '%';
}

// An element with attributes and text (never HTML: every text from a snapshot stays text).
export function el(tag, attrs, text) {
  const e = document.createElement(tag);
  if (attrs) for (const k of Object.keys(attrs)) e.setAttribute(k, attrs[k]);
  if (text !== undefined && text !== null) e.textContent = String(text);
  return e;
}
