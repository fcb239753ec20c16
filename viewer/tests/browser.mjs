// browser.mjs: Debian's Chromium driven by playwright-core for the page's tests and the bench:
// headless, no sandbox when run as root, every console message and page error collected.
import { chromium } from 'playwright-core';
import { existsSync } from 'node:fs';

export const CHROMIUM = process.env.VIEWER_CHROMIUM || '/usr/bin/chromium';

export function chromiumMissing() {
  return !existsSync(CHROMIUM);
}

export async function launch() {
  const args = ['--disable-gpu', '--disable-background-networking', '--disable-dev-shm-usage'];
  if (process.getuid && process.getuid() === 0) args.push('--no-sandbox');
  return chromium.launch({ executablePath: CHROMIUM, headless: true, args });
}

// Opens `file` and waits for the page to say it is ready. `messages` collects every console
// message and page error (a page that loads cleanly has none).
export async function open(browser, file, { width = 1400, height = 1000, timeout = 120000 } = {}) {
  const page = await browser.newPage({ viewport: { width, height } });
  const messages = [];
  page.on('console', (m) => messages.push(`console.${m.type()}: ${m.text()}`));
  page.on('pageerror', (e) => messages.push(`page error: ${e.message}`));
  page.on('requestfailed', (r) => messages.push(`request failed: ${r.url()}`));
  page.on('request', (r) => {
    const u = r.url();
    if (!u.startsWith('file:') && !u.startsWith('data:') && !u.startsWith('blob:'))
      messages.push(`network request: ${u}`);
  });
  await page.goto('file://' + file, { timeout });
  await page.waitForFunction(() => document.body.dataset.ready, null, { timeout });
  const ready = await page.evaluate(() => document.body.dataset.ready);
  if (ready !== '1') messages.push(`page not ready: ${ready}`);
  return { page, messages };
}
