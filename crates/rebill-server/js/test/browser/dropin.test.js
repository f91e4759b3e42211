// Drop-in compatibility (token-library reference §9): rebill's field page serves merchant pages
// that run the original v4 library unchanged with `api` pointed at rebill's `/js/v1`. That
// library cannot be installed here, so the merchant pages below run `assets/v4-page.js`, a
// hand-written page side speaking exactly its protocol (config key `recurly`, `data-recurly`
// placeholders, messages fanned out to every frame with target `*`, `token:init {id, inputs}`
// with `fraud` and `browser` inside `inputs`, Elements on a bus of their own), and drive hosted
// fields and Elements to tokens that work in the API.
'use strict';
const test = require('node:test');
const assert = require('node:assert/strict');
const path = require('node:path');
const { REBILL, PUBLIC_KEY, SCREENSHOTS, PAGES, launch, startMerchant, api, tag, eventually, openPage } = require('./support.js');

const CARD = '4111111111111111';
const API = `${REBILL}/js/v1`;

function v4Page(body) {
  return `<!doctype html>
<html><head><meta charset="utf-8"><title>Checkout (v4 library)</title>
<style>
  body { font-family: sans-serif; margin: 24px; max-width: 520px; }
  label { display: block; font-size: 13px; color: #444; margin: 10px 0 4px; }
  .row { display: flex; gap: 10px; } .row > div { flex: 1; }
  input[data-recurly] { box-sizing: border-box; width: 100%; height: 42px; padding: 0 10px; border: 1px solid #c6c6cc; border-radius: 4px; font-size: 16px; }
  .recurly-hosted-field, .recurly-element { position: relative; height: 42px; padding: 0 10px; border: 1px solid #c6c6cc; border-radius: 4px; background: #fff; }
  .recurly-hosted-field-focus, .recurly-element-focus { border-color: #2c6ecb; }
  .recurly-element-invalid { border-color: #d0342c; }
</style></head>
<body>
<form id="checkout" onsubmit="return false">
<div class="row"><div><label for="fn">First name</label><input id="fn" data-recurly="first_name" value="Verena"></div>
<div><label for="ln">Last name</label><input id="ln" data-recurly="last_name" value="Example"></div></div>
${body}
<input type="hidden" name="recurly-token" data-recurly="token">
<button id="pay" type="submit">Pay</button>
</form>
<script>
  window.received = [];
  window.addEventListener('message', function (e) { window.received.push({ origin: e.origin, data: JSON.stringify(e.data) }); });
</script>
<script src="/assets/v4-page.js"></script>
</body></html>`;
}

Object.assign(PAGES, {
  'v4-fields': v4Page(`
<label for="number">Card number</label><div id="number" data-recurly="number"></div>
<div class="row"><div><label>Month</label><div data-recurly="month"></div></div>
<div><label>Year</label><div data-recurly="year"></div></div>
<div><label>CVV</label><div data-recurly="cvv"></div></div></div>
<input id="outside" placeholder="after the fields">`),
  'v4-card': v4Page(`<label>Card</label><div data-recurly="card"></div>
<label for="postal">Postal code</label><input id="postal" data-recurly="postal_code" value="10115">
<input type="hidden" data-recurly="country" value="DE">`),
  'v4-elements': v4Page(`<label>Card</label><div id="card-element"></div>
<label>Card number</label><div id="number-element"></div>
<div class="row"><div><label>Month</label><div id="month-element"></div></div>
<div><label>Year</label><div id="year-element"></div></div>
<div><label>CVV</label><div id="cvv-element"></div></div></div>`),
  // A frame of a third origin on the merchant page: it knows the group id and posts to the fields.
  intruder: `<!doctype html><html><body><script>
    window.got = [];
    window.addEventListener('message', function (e) { window.got.push(JSON.stringify(e.data)); });
  </script></body></html>`,
});

let browser;
let merchant;

test.before(async () => {
  browser = await launch();
  merchant = await startMerchant();
});

test.after(async () => {
  if (browser) await browser.close();
  if (merchant) merchant.server.close();
});

function open(name) {
  return openPage(browser, `${merchant.url}/${name}`, {
    // The card field's default font comes from the web-font catalogue (the fonts tests cover an
    // unreachable one): its failed loads are not the page's problem.
    ignoreFontErrors: true,
    before(page, problems) {
      page.requests = [];
      page.posted = [];
      page.on('request', (r) => {
        page.requests.push(`${r.method()} ${r.url()}`);
        if (r.method() === 'POST') page.posted.push(new URLSearchParams(r.postData() || ''));
      });
      page.on('response', (r) => {
        if (r.status() >= 400) problems.push(`${r.status()} ${r.url()}`);
      });
    },
  });
}

/** The field frame inside `selector` (a placeholder or an Element's container). */
async function frameIn(page, selector) {
  const handle = await page.waitForSelector(`${selector} iframe`);
  const frame = await handle.contentFrame();
  await frame.waitForSelector('.field');
  return frame;
}

const hosted = (type) => `[data-recurly=${type}]`;

/** `recurlyV4.configure(…)` with `api` at rebill; resolves on `ready`. */
function configureV4(page, options) {
  return page.evaluate(
    (options) =>
      new Promise((resolve) => {
        window.changes = [];
        recurlyV4.on('change', (state) => window.changes.push(JSON.parse(JSON.stringify(state))));
        recurlyV4.once('ready', resolve);
        recurlyV4.configure(options);
      }),
    Object.assign({ publicKey: PUBLIC_KEY, api: API }, options),
  );
}

/** `recurlyV4.token(form, cb)` (or `token(elements, form, cb)`): `{err, token}`. */
function tokenV4(page, withElements) {
  return page.evaluate(
    (withElements) =>
      new Promise((resolve) => {
        const form = document.getElementById('checkout');
        const done = (err, token) => resolve({ err: err ? JSON.parse(JSON.stringify(err)) : null, errIsPlain: err ? Object.getPrototypeOf(err) === Object.prototype : null, token });
        if (withElements) recurlyV4.token(window.elements, form, done);
        else recurlyV4.token(form, done);
      }),
    withElements,
  );
}

async function newAccount(prefix) {
  const code = `${prefix}-${Date.now().toString(36)}${Math.random().toString(36).slice(2, 6)}`;
  const created = await api('POST', '/v2/accounts', `<account><account_code>${code}</account_code><email>${code}@example.com</email></account>`);
  assert.equal(created.status, 201, created.body);
  return code;
}

async function billWith(tokenId, prefix) {
  const code = await newAccount(prefix);
  const updated = await api('PUT', `/v2/accounts/${code}/billing_info`, `<billing_info><token_id>${tokenId}</token_id></billing_info>`);
  assert.equal(updated.status, 200, updated.body);
  return updated.body;
}

/** The page's bus log holds no card number, no cvv, and only rebill's origin. */
async function assertNoCardData(page, number, cvv) {
  const seen = await page.evaluate(() => ({ received: window.received, values: [...document.querySelectorAll('input')].map((i) => i.value), html: document.documentElement.outerHTML }));
  const digits = (s) => s.replace(/\D/g, '');
  assert.ok(seen.received.length > 5, 'the page saw the bus');
  for (const m of seen.received) {
    assert.equal(m.origin, REBILL, m.data);
    assert.ok(!digits(m.data).includes(number), `a message carried the number: ${m.data}`);
    assert.ok(!m.data.includes(`"cvv":"${cvv}"`), m.data);
  }
  assert.ok(seen.values.every((v) => !digits(v).includes(number)));
  assert.ok(!digits(seen.html).includes(number));
}

test('v4 hosted fields: the recurly config key, styles over the defaults, state, auto-advance, a token that bills', async () => {
  const page = await open('v4-fields');
  await configureV4(page, { fields: { all: { style: { fontSize: '18px' } }, number: { style: { fontColor: 'rgb(200, 0, 0)', placeholder: { content: 'Card number' } } } } });
  const src = await page.getAttribute(`${hosted('number')} iframe`, 'src');
  assert.ok(src.startsWith(`${API}/field.html#config=`), src);
  const config = JSON.parse(decodeURIComponent(src.split('#config=')[1]));
  assert.equal(config.recurly.publicKey, PUBLIC_KEY);
  assert.equal(config.service, undefined, 'the page library is the original one');

  const number = await frameIn(page, hosted('number'));
  const style = await number.evaluate(() => {
    const s = getComputedStyle(document.querySelector('.field'));
    return { color: s.color, fontSize: s.fontSize, fontFamily: s.fontFamily, placeholder: document.querySelector('.field').placeholder };
  });
  assert.deepEqual(style, { color: 'rgb(200, 0, 0)', fontSize: '18px', fontFamily: 'Helvetica, sans-serif', placeholder: 'Card number' }, 'the field adds the defaults the original page leaves out');

  await number.locator('.field').pressSequentially(CARD);
  assert.equal(await number.locator('.field').inputValue(), '4111 1111 1111 1111');
  const state = await eventually(() => page.evaluate(() => window.changes.map((c) => c.fields.number).find((n) => n && n.valid)));
  assert.deepEqual([state.brand, state.firstSix, state.lastFour], ['visa', '411111', '1111']);

  // Focus by container click (hostedField:<type>:focus!), then auto-advance month → year → cvv.
  const month = await frameIn(page, hosted('month'));
  await page.click(`${hosted('month')} > div`, { position: { x: 3, y: 3 } });
  await eventually(() => month.evaluate(() => document.activeElement === document.querySelector('.field') && document.hasFocus()));
  await page.keyboard.type('12');
  const year = await frameIn(page, hosted('year'));
  await eventually(() => year.evaluate(() => document.hasFocus() && document.activeElement === document.querySelector('.field')));
  await page.keyboard.type('2031');
  const cvv = await frameIn(page, hosted('cvv'));
  await eventually(() => cvv.evaluate(() => document.hasFocus() && document.activeElement === document.querySelector('.field')));
  await page.keyboard.type('123');
  assert.equal(await year.locator('.field').inputValue(), '2031');
  assert.equal(await cvv.locator('.field').inputValue(), '123');
  // Tab out of the last field: hostedField:tab:next, the page moves on past the frames.
  await page.keyboard.press('Tab');
  await eventually(() => page.evaluate(() => document.activeElement.id === 'outside'));

  const before = page.requests.length;
  const { err, token } = await tokenV4(page);
  assert.equal(err, null);
  assert.match(token.id, /^[\w-]{21,23}$/);
  assert.equal(token.type, 'credit_card');
  assert.equal(await page.inputValue('[data-recurly=token]'), token.id);
  const calls = page.requests.slice(before).filter((r) => r.includes('/js/v1/'));
  assert.equal(calls.length, 2, calls.join('\n'));
  assert.match(calls[0], new RegExp(`^GET ${API}/risk/preflights\\?.*key=`));
  assert.equal(calls[1], `POST ${API}/token`);
  // The broker sent what the original field page sends: the page's key and version, the device
  // and session ids of the field config, the browser data and the fraud list of `inputs`.
  const sent = page.posted[page.posted.length - 1];
  assert.equal(sent.get('key'), PUBLIC_KEY);
  assert.equal(sent.get('parentVersion'), '4.43.0');
  assert.equal(sent.get('deviceId'), config.deviceId);
  assert.equal(sent.get('sessionId'), config.sessionId);
  assert.equal(sent.get('instanceId'), config.busGroupId);
  assert.match(sent.get('browser[user_agent]'), /Chrome/);
  assert.ok(sent.has('browser[screen_width]') && sent.has('browser[time_zone_offset]'));
  assert.equal(sent.has('token'), false, 'the empty token input stays behind');
  assert.deepEqual([sent.get('month'), sent.get('year'), sent.get('first_name')], ['12', '2031', 'Verena']);
  await assertNoCardData(page, CARD, '123');
  const billing = await billWith(token.id, 'v4-fields');
  assert.equal(tag(billing, 'last_four'), '1111');
  assert.equal(tag(billing, 'first_name'), 'Verena');
  assert.deepEqual(page.problems, []);
});

test('v4 hosted fields: validation and server errors arrive as plain objects with code, fields and details', async () => {
  const page = await open('v4-fields');
  await configureV4(page, {});
  await (await frameIn(page, hosted('number'))).locator('.field').pressSequentially('4111111111111112');
  const cvv = await frameIn(page, hosted('cvv'));
  await eventually(() => cvv.evaluate(() => document.querySelector('.field').maxLength === 3), 10000);
  await (await frameIn(page, hosted('month'))).locator('.field').fill('13');
  const invalid = await tokenV4(page);
  assert.equal(invalid.errIsPlain, true, 'a plain object survives postMessage whole');
  assert.equal(invalid.err.code, 'validation');
  assert.deepEqual(invalid.err.fields, ['number', 'month', 'year']);
  assert.deepEqual(invalid.err.details[0], { field: 'number', messages: ['is invalid'] });
  await (await frameIn(page, hosted('number'))).locator('.field').fill('378282246310005');
  // The page's hostedFields:state:change (the state by type) tells the cvv field the brand.
  await eventually(() => cvv.evaluate(() => document.querySelector('.field').maxLength === 4));
  await (await frameIn(page, hosted('month'))).locator('.field').fill('12');
  await (await frameIn(page, hosted('year'))).locator('.field').fill('2031');
  await (await frameIn(page, hosted('cvv'))).locator('.field').fill('123');
  const server = await tokenV4(page);
  assert.equal(server.err.code, 'invalid-parameter');
  assert.deepEqual(server.err.fields, ['cvv']);
  assert.equal(await page.inputValue('[data-recurly=token]'), '');
});

test('v4 hosted fields: configure again restyles through hostedFields:configure; the JSON-string form; destroy', async () => {
  const page = await open('v4-card');
  await configureV4(page, {});
  const card = await frameIn(page, hosted('card'));
  assert.equal(await card.evaluate(() => getComputedStyle(document.querySelector('#service-number')).color), 'rgb(84, 84, 87)', 'the card default');
  const frameBefore = await page.evaluate(() => (window.firstFrame = document.querySelector('iframe')) && true);
  assert.ok(frameBefore);
  await page.evaluate(({ key, api }) => recurlyV4.configure({ publicKey: key, api, fields: { card: { style: { fontColor: 'rgb(0, 90, 0)' } } } }), { key: PUBLIC_KEY, api: API });
  await eventually(() => card.evaluate(() => getComputedStyle(document.querySelector('#service-number')).color === 'rgb(0, 90, 0)'));
  assert.equal(await page.evaluate(() => window.firstFrame === document.querySelector('iframe')), true, 'restyled in place');

  // A message in the JSON-string form focuses the field.
  await page.evaluate(() => document.querySelector('iframe').contentWindow.postMessage(JSON.stringify({ recurly_event: 'hostedField:card:focus!', recurly_message: {} }), '*'));
  await eventually(() => card.evaluate(() => document.activeElement.id === 'service-number'));
  await page.keyboard.type(CARD);
  await eventually(() => card.evaluate(() => document.activeElement.id === 'service-expiry'));
  await page.keyboard.type('1231');
  await eventually(() => card.evaluate(() => document.activeElement.id === 'service-cvv'));
  await page.keyboard.type('321');
  const { err, token } = await tokenV4(page);
  assert.equal(err, null);
  const billing = await billWith(token.id, 'v4-card');
  assert.equal(tag(billing, 'last_four'), '1111');
  assert.equal(tag(billing, 'zip'), '10115');
  assert.equal(tag(billing, 'country'), 'DE');
  if (SCREENSHOTS) await page.screenshot({ path: path.join(SCREENSHOTS, 'v4-card.png') });

  await page.evaluate(() => recurlyV4.destroy());
  assert.equal(await page.locator('iframe').count(), 0);
  assert.deepEqual(page.problems, []);
});

test('v4 Elements: a CardElement tokenizes on the Elements bus', async () => {
  const page = await open('v4-elements');
  await page.evaluate(
    ({ key, api }) =>
      new Promise((resolve) => {
        recurlyV4.configure({ publicKey: key, api });
        window.elements = recurlyV4.Elements();
        window.elementChanges = [];
        const card = elements.CardElement({ style: { fontColor: 'rgb(10, 20, 30)' } });
        card.on('change', (s) => window.elementChanges.push(s));
        card.on('attach', resolve);
        card.attach(document.getElementById('card-element'));
      }),
    { key: PUBLIC_KEY, api: API },
  );
  const frame = await frameIn(page, '#card-element');
  const config = JSON.parse(decodeURIComponent((await page.getAttribute('#card-element iframe', 'src')).split('#config=')[1]));
  assert.ok(config.elementId && config.busGroupId && config.recurly.api === API);
  assert.equal(await frame.evaluate(() => getComputedStyle(document.querySelector('#service-number')).color), 'rgb(10, 20, 30)');
  // element:<id>:configure! restyles.
  await page.evaluate(() => elements.elements[0].configure({ style: { fontColor: 'rgb(30, 20, 10)' } }));
  await eventually(() => frame.evaluate(() => getComputedStyle(document.querySelector('#service-number')).color === 'rgb(30, 20, 10)'));
  await page.click('#card-element .recurly-element', { position: { x: 3, y: 3 } });
  await eventually(() => frame.evaluate(() => document.activeElement.id === 'service-number'));
  await page.keyboard.type('5555555555554444');
  await page.keyboard.type('1130');
  await eventually(() => frame.evaluate(() => document.activeElement.id === 'service-cvv'));
  await page.keyboard.type('999');
  const state = await eventually(() => page.evaluate(() => window.elementChanges.find((s) => s.valid)));
  assert.equal(state.brand, 'master');
  assert.equal(state.lastFour, '4444');
  assert.match(await page.getAttribute('#card-element .recurly-element', 'class'), /recurly-element-card/);
  const { err, token } = await tokenV4(page, true);
  assert.equal(err, null);
  assert.equal(await page.inputValue('[data-recurly=token]'), token.id);
  await assertNoCardData(page, '5555555555554444', '999');
  const billing = await billWith(token.id, 'v4-card-element');
  assert.equal(tag(billing, 'last_four'), '4444');
  assert.equal(tag(billing, 'last_name'), 'Example');
  assert.deepEqual(page.problems, []);
});

test('v4 Elements: the single-field elements share the card through their set; cvv follows the brand', async () => {
  const page = await open('v4-elements');
  await page.evaluate(
    ({ key, api }) => {
      recurlyV4.configure({ publicKey: key, api });
      window.elements = recurlyV4.Elements();
      const attached = [];
      for (const [make, id] of [['CardNumberElement', 'number-element'], ['CardMonthElement', 'month-element'], ['CardYearElement', 'year-element'], ['CardCvvElement', 'cvv-element']]) {
        const element = elements[make]();
        attached.push(new Promise((resolve) => element.on('attach', resolve)));
        element.attach(document.getElementById(id));
      }
      return Promise.all(attached);
    },
    { key: PUBLIC_KEY, api: API },
  );
  // The cvv element learns the brand from the number element's state, relayed by the page's bus
  // to the elements it announced as peers.
  const number = await frameIn(page, '#number-element');
  const cvv = await frameIn(page, '#cvv-element');
  await number.locator('.field').pressSequentially('4');
  await eventually(() => cvv.evaluate(() => document.querySelector('.field').maxLength === 3), 10000);
  await number.locator('.field').fill('');
  await number.locator('.field').pressSequentially('371144371144376');
  assert.equal(await number.locator('.field').inputValue(), '3711 443711 44376');
  await eventually(() => cvv.evaluate(() => document.querySelector('.field').maxLength === 4), 10000);
  const month = await frameIn(page, '#month-element');
  await month.locator('.field').click();
  await page.keyboard.type('7');
  const year = await frameIn(page, '#year-element');
  await eventually(() => year.evaluate(() => document.hasFocus() && document.activeElement === document.querySelector('.field')));
  await page.keyboard.type('33');
  await eventually(() => cvv.evaluate(() => document.hasFocus() && document.activeElement === document.querySelector('.field')));
  await page.keyboard.type('1234');
  if (SCREENSHOTS) await page.screenshot({ path: path.join(SCREENSHOTS, 'v4-elements.png') });
  const { err, token } = await tokenV4(page, true);
  assert.equal(err, null);
  const billing = await billWith(token.id, 'v4-elements');
  assert.equal(tag(billing, 'last_four'), '4376');
  assert.equal(tag(billing, 'month'), '7');
  assert.equal(tag(billing, 'year'), '2033');
  await assertNoCardData(page, '371144371144376', '1234');
});

test('origins stay pinned: a third-origin frame on the merchant page gets nothing from the fields', async () => {
  const page = await open('v4-fields');
  await configureV4(page, {});
  await (await frameIn(page, hosted('number'))).locator('.field').pressSequentially(CARD);
  await (await frameIn(page, hosted('month'))).locator('.field').fill('12');
  await (await frameIn(page, hosted('year'))).locator('.field').fill('2031');
  // The intruder is served from `localhost`: another origin than the page (127.0.0.1) and rebill.
  const intruderUrl = merchant.url.replace('127.0.0.1', 'localhost') + '/intruder';
  await page.evaluate(
    (src) =>
      new Promise((resolve) => {
        const frame = document.createElement('iframe');
        frame.src = src;
        frame.onload = resolve;
        document.body.append(frame);
      }),
    intruderUrl,
  );
  const intruder = page.frames().find((f) => f.url() === intruderUrl);
  const groupId = await page.evaluate(() => recurlyV4.bus.groupId);
  await intruder.evaluate((groupId) => {
    for (let i = 0; i < parent.frames.length; i++) {
      if (parent.frames[i] === window) continue;
      parent.frames[i].postMessage({ event: 'token:init', body: { id: 'stolen', inputs: { first_name: 'A', last_name: 'B' } }, groupId }, '*');
      parent.frames[i].postMessage({ event: 'hostedField:number:focus!', body: {}, groupId }, '*');
      parent.frames[i].postMessage(JSON.stringify({ recurly_event: 'token:init', recurly_message: { id: 'stolen-string' } }), '*');
    }
  }, groupId);
  // A real token afterwards: the only token:done the page sees is its own, and only one token was asked for.
  const before = page.requests.length;
  const { err, token } = await tokenV4(page);
  assert.equal(err, null);
  assert.ok(token.id);
  const seen = await page.evaluate(() => window.received.map((m) => m.data).filter((d) => d.includes('token:done')));
  assert.equal(seen.length, 1, seen.join('\n'));
  assert.ok(!seen[0].includes('stolen'));
  assert.equal(page.requests.slice(before).filter((r) => r.startsWith('POST') && r.endsWith('/js/v1/token')).length, 1);
  assert.deepEqual(await intruder.evaluate(() => window.got), [], 'the fields post only to the page origin');
  assert.equal(await (await frameIn(page, hosted('number'))).evaluate(() => document.hasFocus()), false, 'the forged focus! was not taken');
});
