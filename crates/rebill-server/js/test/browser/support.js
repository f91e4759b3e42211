// Shared set-up of the browser tests: headless Chromium through playwright-core, a merchant
// page server on its own origin, and calls to rebill's API.
//
// Environment (set by crates/rebill-cli/tests/js_library.rs, which starts `rebill serve`):
// REBILL_URL, REBILL_PUBLIC_KEY, REBILL_PRIVATE_KEY, REBILL_SCREENSHOTS.
'use strict';
const fs = require('node:fs');
const http = require('node:http');
const path = require('node:path');
const { chromium } = require(path.join(__dirname, '../../node_modules/playwright-core'));

const REBILL = process.env.REBILL_URL;
const PUBLIC_KEY = process.env.REBILL_PUBLIC_KEY;
const PRIVATE_KEY = process.env.REBILL_PRIVATE_KEY;
const SCREENSHOTS = process.env.REBILL_SCREENSHOTS || '';
if (!REBILL || !PUBLIC_KEY || !PRIVATE_KEY) {
  throw new Error('REBILL_URL, REBILL_PUBLIC_KEY and REBILL_PRIVATE_KEY must be set (run through cargo test -p rebill-cli --test js_library)');
}

const CHROMIUM_ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--no-first-run',
];

function launch() {
  return chromium.launch({ executablePath: '/usr/bin/chromium', args: CHROMIUM_ARGS, headless: true });
}

/** A merchant checkout page: `body` inside a form, rebill's script, and a log of every message the page receives. */
function merchantPage(body) {
  return `<!doctype html>
<html><head><meta charset="utf-8"><title>Merchant checkout</title>
<link rel="stylesheet" href="${REBILL}/js/v4/service.css">
<style>
  body { font-family: sans-serif; margin: 24px; max-width: 520px; }
  label { display: block; font-size: 13px; color: #444; margin: 10px 0 4px; }
  .row { display: flex; gap: 10px; } .row > div { flex: 1; }
  input[data-service] { box-sizing: border-box; width: 100%; height: 42px; padding: 0 10px; border: 1px solid #c6c6cc; border-radius: 4px; font-size: 16px; }
</style></head>
<body>
<form id="checkout" onsubmit="return false">
${body}
<input type="hidden" name="service-token" data-service="token">
<button id="pay" type="submit">Pay</button>
</form>
<script>
  window.received = [];
  window.addEventListener('message', function (e) { window.received.push({ origin: e.origin, data: JSON.stringify(e.data) }); });
</script>
<script src="${REBILL}/js/v4/service.js"></script>
</body></html>`;
}

const NAME_INPUTS = `
<div class="row"><div><label for="fn">First name</label><input id="fn" data-service="first_name" value="Verena"></div>
<div><label for="ln">Last name</label><input id="ln" data-service="last_name" value="Example"></div></div>`;

const PAGES = {
  individual: merchantPage(`${NAME_INPUTS}
<label for="number">Card number</label><div id="number" data-service="number"></div>
<div class="row"><div><label>Month</label><div data-service="month"></div></div>
<div><label>Year</label><div data-service="year"></div></div>
<div><label>CVV</label><div data-service="cvv"></div></div></div>
<input id="outside" placeholder="after the fields">`),
  card: merchantPage(`${NAME_INPUTS}
<label>Card</label><div id="card" data-service="card"></div>
<label for="postal">Postal code</label><input id="postal" data-service="postal_code" value="94105">
<input type="hidden" data-service="country" value="US">`),
  bank: merchantPage(`
<label>Name on account</label><input data-service="name_on_account" value="Verena Example">
<label>Routing number</label><input data-service="routing_number" value="123456780">
<label>Account number</label><input data-service="account_number" value="111111111">
<label>Confirm account number</label><input data-service="account_number_confirmation" value="111111111">
<label>Type</label><select data-service="account_type"><option value="checking">Checking</option><option value="savings">Savings</option></select>
<input type="hidden" data-service="country" value="US">`),
  cvvOnly: merchantPage(`<div data-service="cvv"></div>`),
};

/** Scripts the test pages load from the merchant's origin (`/assets/<name>.js`). */
const ASSETS = path.join(__dirname, 'assets');

/**
 * Serves PAGES (and the suites' own pages added to it) on 127.0.0.1, another port, so another
 * origin than rebill; `/assets/*.js` from `test/browser/assets`.
 */
function startMerchant() {
  const server = http.createServer((req, res) => {
    const name = req.url.replace(/^\//, '').split('?')[0];
    const asset = name.match(/^assets\/([\w-]+\.js)$/);
    if (asset) {
      fs.readFile(path.join(ASSETS, asset[1]), (err, body) => {
        if (err) res.writeHead(404).end();
        else res.writeHead(200, { 'Content-Type': 'application/javascript; charset=utf-8' }).end(body);
      });
      return;
    }
    if (name === 'favicon.ico') {
      res.writeHead(204).end();
      return;
    }
    const page = PAGES[name];
    if (!page) {
      res.writeHead(404).end();
      return;
    }
    res.writeHead(200, { 'Content-Type': 'text/html; charset=utf-8' }).end(page);
  });
  return new Promise((resolve) => {
    server.listen(0, '127.0.0.1', () => resolve({ server, url: `http://127.0.0.1:${server.address().port}` }));
  });
}

/** A call to rebill's API with the private key. */
async function api(method, route, body) {
  const response = await fetch(`${REBILL}${route}`, {
    method,
    headers: {
      Authorization: 'Basic ' + Buffer.from(`${PRIVATE_KEY}:`).toString('base64'),
      Accept: 'application/xml',
      'Content-Type': 'application/xml; charset=utf-8',
      'X-Api-Version': '2.11',
    },
    body,
  });
  return { status: response.status, body: await response.text() };
}

/** The text of the first `<name>` element. */
function tag(xml, name) {
  const m = xml.match(new RegExp(`<${name}(?: [^>]*)?>([^<]*)</${name}>`));
  return m ? m[1] : null;
}

/** The content frame of the iframe inside `[data-service=type]`. */
async function fieldFrame(page, type) {
  const handle = await page.waitForSelector(`[data-service=${type}] iframe`);
  const frame = await handle.contentFrame();
  await frame.waitForSelector('.field');
  return frame;
}

/** Configures the library on the page and waits for `ready`. */
async function configure(page, options) {
  await page.evaluate(
    (options) =>
      new Promise((resolve, reject) => {
        window.changes = [];
        service.on('change', (state) => window.changes.push(JSON.parse(JSON.stringify(state))));
        service.once('ready', resolve);
        service.once('error', reject);
        service.configure(options);
      }),
    options,
  );
}

/** `service.token(form)` on the page: `{err, token}` as plain objects. */
function token(page) {
  return page.evaluate(
    () =>
      new Promise((resolve) =>
        service.token(document.getElementById('checkout'), (err, token) =>
          resolve({ err: err ? { name: err.name, code: err.code, message: err.message, fields: err.fields, details: err.details, isServiceError: err instanceof ServiceError } : null, token }),
        ),
      ),
  );
}

/**
 * Opens `url` in a fresh browser context. `page.problems` collects page errors and console
 * errors (except failed loads from the web-font catalogue with `ignoreFontErrors`: an offline
 * machine cannot reach it); `before(page, problems)` runs before the page loads.
 */
async function openPage(browser, url, { ignoreFontErrors = false, before } = {}) {
  const context = await browser.newContext();
  const page = await context.newPage();
  const problems = [];
  page.on('pageerror', (e) => problems.push(String(e)));
  page.on('console', (m) => {
    if (m.type() !== 'error') return;
    if (ignoreFontErrors && (m.location().url || '').startsWith('https://fonts.')) return;
    problems.push(m.text());
  });
  if (before) before(page, problems);
  await page.goto(url);
  page.problems = problems;
  return page;
}

/** Polls `probe` until it returns a truthy value (or fails after `ms`). */
async function eventually(probe, ms = 10000) {
  const deadline = Date.now() + ms;
  let last;
  while (Date.now() < deadline) {
    last = await probe();
    if (last) return last;
    await new Promise((r) => setTimeout(r, 25));
  }
  throw new Error(`condition not met within ${ms} ms (last: ${JSON.stringify(last)})`);
}

module.exports = { REBILL, PUBLIC_KEY, PRIVATE_KEY, SCREENSHOTS, PAGES, launch, startMerchant, api, tag, fieldFrame, configure, token, eventually, openPage };
