// Loads an offwake-perf SVG in headless Chromium, as a user would open
// it, and reports what rendered: each frame's title and colour family,
// whether a click on the frame named by ZOOM zoomed in on it, and what a
// search for SEARCH matched. Usage: node check-svg.mjs FILE.svg ZOOM
// SEARCH [SCREENSHOT.png]. Prints one JSON object.
import { chromium } from 'playwright-core';
import { resolve } from 'node:path';

const [file, zoomName, searchTerm, screenshot] = process.argv.slice(2);
if (!file || !zoomName || !searchTerm) {
  console.error('usage: node check-svg.mjs FILE.svg ZOOM SEARCH [SCREENSHOT.png]');
  process.exit(2);
}

// Chromium as root, on a machine whose network may be closed: the flags
// that keep it from trying to reach anything. Playwright gives it a new,
// empty profile.
const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  args: [
    '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
    '--disable-background-networking', '--disable-component-update',
    '--disable-sync',
  ],
});
try {
  const page = await browser.newPage({ viewport: { width: 1200, height: 900 } });
  const errors = [];
  page.on('pageerror', (e) => errors.push(String(e)));
  await page.goto('file://' + resolve(file));

  // Every frame: its title, colour family and width on screen.
  const frames = () => page.evaluate(() => {
    const family = (fill) => {
      const m = /rgb\((\d+),\s*(\d+),\s*(\d+)\)/.exec(fill);
      if (!m) return 'none';
      const [r, g, b] = m.slice(1).map(Number);
      if (r === g && g === b) return 'grey';
      if (r === g && b > r + 60) return 'blue';
      if (g === b && g > r + 60) return 'aqua';
      return 'other';
    };
    return [...document.querySelectorAll('#frames > g')].map((g) => {
      const rect = g.querySelector('rect');
      const box = rect.getBoundingClientRect();
      return {
        title: g.querySelector('title').textContent,
        family: family(getComputedStyle(rect).fill),
        width: box.width,
        height: box.height,
        hidden: g.classList.contains('hide'),
      };
    });
  });
  const before = await frames();
  const families = {};
  for (const f of before) families[f.family] = (families[f.family] || 0) + 1;
  const rendered = before.filter((f) => f.width > 0 && f.height > 0).length;

  // Zoom: click the widest frame whose title names ZOOM.
  const index = before
    .map((f, i) => [f, i])
    .filter(([f]) => f.title.startsWith(zoomName + ' ('))
    .sort((a, b) => b[0].width - a[0].width)[0]?.[1];
  let zoom = null;
  if (index !== undefined) {
    await page.locator('#frames > g').nth(index).locator('rect').click();
    const after = await frames();
    zoom = {
      title: before[index].title,
      widthBefore: before[index].width,
      widthAfter: after[index].width,
      resetShown: await page.evaluate(
        () => !document.getElementById('unzoom').classList.contains('hide')),
      hiddenAfter: after.filter((f) => f.hidden).length,
    };
  }

  // Search, as the Search button does once its prompt is answered.
  await page.evaluate(() => unzoom());
  await page.evaluate((t) => search(t), searchTerm);
  const matched = await page.evaluate(
    () => document.getElementById('matched').textContent);
  if (screenshot) {
    await page.evaluate(() => reset_search());
    await page.screenshot({ path: screenshot });
  }
  console.log(JSON.stringify({ frames: before, families, rendered, zoom, matched, errors }));
} finally {
  await browser.close();
}
