// tooltip.js: the one floating tooltip of the page.
const tip = () => document.getElementById('tip');

export function showTip(ev, node) {
  const t = tip();
  t.textContent = '';
  if (typeof node === 'string') t.textContent = node;
  else t.appendChild(node);
  t.style.display = 'block';
  const pad = 14;
  const w = t.offsetWidth;
  const h = t.offsetHeight;
  let x = ev.clientX + pad;
  let y = ev.clientY + pad;
  if (x + w > window.innerWidth - 4) x = Math.max(4, ev.clientX - pad - w);
  if (y + h > window.innerHeight - 4) y = Math.max(4, ev.clientY - pad - h);
  t.style.left = x + 'px';
  t.style.top = y + 'px';
}

export function hideTip() {
  tip().style.display = 'none';
}
