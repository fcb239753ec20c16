// stack.js: a stack as the page shows it: the call site's frames (the user's, innermost first)
// and, on demand, every frame the snapshot recorded.
import { el } from './format.js';

export function frameTexts(stacks, stack) {
  const out = [];
  if (stack >= stacks.first.length - 1) return out;
  for (let k = stacks.first[stack]; k < stacks.first[stack + 1]; k++)
    out.push(stacks.texts[stacks.frames[k]] ?? '?');
  return out;
}

// The site's frames (at most `max`), as lines of text.
export function siteLines(stacks, site, max = 12) {
  const f = frameTexts(stacks, site);
  if (f.length === 0) return ['[no stack recorded]'];
  const shown = f.slice(0, max);
  if (f.length > max) shown.push(`… ${f.length - max} more frames`);
  return shown;
}

// A stack panel: the call site's frames, then a button that shows all of the stack's frames.
export function stackPanel(stacks, stack, site, title) {
  const box = el('div', { class: 'stackpanel' });
  if (title) box.appendChild(el('div', { class: 'stacktitle' }, title));
  const user = frameTexts(stacks, site);
  const all = frameTexts(stacks, stack);
  const pre = el('pre', { class: 'stack' });
  pre.textContent = user.length ? user.join('\n') : '[no stack recorded]';
  box.appendChild(pre);
  if (all.length > user.length) {
    const btn = el('button', { type: 'button', class: 'linkish' },
      `show all ${all.length} frames (${all.length - user.length} of the allocation machinery)`);
    btn.addEventListener('click', () => {
      const showingAll = btn.dataset.all === '1';
      pre.textContent = showingAll ? user.join('\n') : all.join('\n');
      btn.dataset.all = showingAll ? '0' : '1';
      btn.textContent = showingAll
        ? `show all ${all.length} frames (${all.length - user.length} of the allocation machinery)`
        : 'show the call site\'s frames only';
    });
    box.appendChild(btn);
  }
  return box;
}
