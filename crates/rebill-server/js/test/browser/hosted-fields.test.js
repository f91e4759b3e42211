// The library in headless Chromium: a merchant page on its own origin loads rebill's script,
// the hosted fields render as iframes, card data stays in them, tokens work in the API.
'use strict';
const test = require('node:test');
const assert = require('node:assert/strict');
const path = require('node:path');
const { REBILL, PUBLIC_KEY, SCREENSHOTS, launch, startMerchant, api, tag, fieldFrame, configure, token, eventually, openPage } = require('./support.js');

const CARD = '4111111111111111';
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
  return openPage(browser, `${merchant.url}/${name}`);
}

async function typeIn(page, type, text, selector = '.field') {
  const frame = await fieldFrame(page, type);
  await frame.locator(selector).first().pressSequentially(text);
  return frame;
}

async function fillIndividual(page, number) {
  await typeIn(page, 'number', number);
  await typeIn(page, 'month', '12');
  await typeIn(page, 'year', '2031');
  await typeIn(page, 'cvv', '123');
}

/** A new account (its code made unique, so a suite may run twice against one server); its code. */
async function newAccount(prefix) {
  const code = `${prefix}-${Date.now().toString(36)}${Math.random().toString(36).slice(2, 6)}`;
  const created = await api('POST', '/v2/accounts', `<account><account_code>${code}</account_code><email>${code}@example.com</email></account>`);
  assert.equal(created.status, 201, created.body);
  return code;
}

test('misuse throws ServiceErrors synchronously', async () => {
  const page = await open('individual');
  const codes = await page.evaluate(() => {
    const code = (fn) => {
      try {
        fn();
        return 'no error';
      } catch (e) {
        return `${e instanceof ServiceError}:${e.code}`;
      }
    };
    return [
      code(() => service.token(document.forms[0], () => {})),
      code(() => service.configure()),
      code(() => service.configure({ fields: {} })),
      code(() => {
        service.configure('pk-x');
        service.token(document.forms[0]);
      }),
    ];
  });
  assert.deepEqual(codes, ['true:not-configured', 'true:config-missing-public-key', 'true:config-missing-public-key', 'true:missing-callback']);
  const cvvOnly = await open('cvvOnly');
  const missing = await cvvOnly.evaluate((key) => {
    service.configure(key);
    try {
      service.token(document.forms[0], () => {});
    } catch (e) {
      return { code: e.code, type: e.type, selector: e.selector };
    }
    return null;
  }, PUBLIC_KEY);
  assert.deepEqual(missing, { code: 'missing-hosted-field-target', type: 'number', selector: '[data-service=number]' });
});

test('individual fields render as iframes styled inside the frame; typing formats; state and classes follow', async () => {
  const page = await open('individual');
  await configure(page, { publicKey: PUBLIC_KEY, fields: { all: { style: { fontSize: '20px' } }, number: { style: { fontColor: 'rgb(200, 0, 0)', placeholder: { content: 'Card number', color: 'rgb(0, 0, 200)' } } } } });
  const src = await page.getAttribute('[data-service=number] iframe', 'src');
  assert.ok(src.startsWith(`${REBILL}/js/v1/field.html#config=`), src);
  assert.equal(await page.getAttribute('[data-service=number] iframe', 'title'), 'Secure card number input');
  for (const type of ['number', 'month', 'year', 'cvv']) {
    const classes = await page.getAttribute(`[data-service=${type}] > div`, 'class');
    assert.ok(classes.split(' ').includes('service-hosted-field') && classes.includes(`service-hosted-field-${type}`), classes);
  }
  const frame = await fieldFrame(page, 'number');
  const style = await frame.evaluate(() => {
    const input = document.querySelector('.field');
    const s = getComputedStyle(input);
    return { color: s.color, fontSize: s.fontSize, fontFamily: s.fontFamily, placeholder: input.placeholder, placeholderColor: getComputedStyle(input, '::placeholder').color, autocomplete: input.autocomplete, label: input.getAttribute('aria-label') };
  });
  assert.deepEqual(style, { color: 'rgb(200, 0, 0)', fontSize: '20px', fontFamily: 'Helvetica, sans-serif', placeholder: 'Card number', placeholderColor: 'rgb(0, 0, 200)', autocomplete: 'cc-number', label: 'Card number' });
  const monthSize = await (await fieldFrame(page, 'month')).evaluate(() => getComputedStyle(document.querySelector('.field')).fontSize);
  assert.equal(monthSize, '20px', 'fields.all reaches every individual field');

  await frame.locator('.field').pressSequentially(CARD);
  assert.equal(await frame.locator('.field').inputValue(), '4111 1111 1111 1111');
  await eventually(async () => (await page.getAttribute('[data-service=number] > div', 'class')).includes('service-hosted-field-focus'));
  const state = await eventually(() => page.evaluate(() => window.changes.map((c) => c.fields.number).find((n) => n && n.valid)));
  assert.equal(state.brand, 'visa');
  assert.equal(state.firstSix, '411111');
  assert.equal(state.lastFour, '1111');
  assert.equal(state.length, 16);
  assert.equal(state.focus, true);
  await (await fieldFrame(page, 'cvv')).locator('.field').click();
  await eventually(async () => {
    const classes = await page.getAttribute('[data-service=number] > div', 'class');
    return classes.includes('service-hosted-field-valid') && !classes.includes('service-hosted-field-focus');
  });
  // An invalid number is marked once the field is left.
  await frame.locator('.field').fill('4111 1111 1111 1112');
  await (await fieldFrame(page, 'cvv')).locator('.field').click();
  await eventually(async () => (await page.getAttribute('[data-service=number] > div', 'class')).includes('service-hosted-field-invalid'));
  assert.equal(await frame.locator('.field').getAttribute('aria-invalid'), 'true');
  assert.deepEqual(page.problems, []);
});

test('a token fills the hidden input and works in PUT billing_info; the card number never reaches the page', async () => {
  const page = await open('individual');
  await configure(page, PUBLIC_KEY);
  await fillIndividual(page, CARD);
  const { err, token: result } = await token(page);
  assert.equal(err, null);
  assert.match(result.id, /^[\w-]{21,23}$/);
  assert.equal(result.type, 'credit_card');
  assert.equal(await page.inputValue('[data-service=token]'), result.id);

  // Nothing on the merchant page holds the number.
  const exposure = await page.evaluate(() => {
    const values = [...document.querySelectorAll('input, select, textarea')].map((i) => i.value);
    const frames = [...document.querySelectorAll('iframe')].map((f) => {
      try {
        return f.contentDocument ? 'readable' : 'closed';
      } catch (_) {
        return 'closed';
      }
    });
    return { values, frames, received: window.received, html: document.documentElement.outerHTML };
  });
  const digits = (s) => s.replace(/\D/g, '');
  assert.ok(exposure.frames.every((f) => f === 'closed'), 'the field documents are another origin');
  assert.ok(exposure.values.every((v) => !digits(v).includes(CARD)), JSON.stringify(exposure.values));
  assert.ok(!digits(exposure.html).includes(CARD));
  assert.ok(exposure.received.length > 5, 'the page saw the bus messages');
  assert.ok(exposure.received.every((m) => m.origin === REBILL), 'only rebill talks on the bus');
  assert.ok(exposure.received.some((m) => m.data.includes(`token:done:`) && m.data.includes(result.id)));
  for (const m of exposure.received) {
    assert.ok(!digits(m.data).includes(CARD), `a message carried the number: ${m.data}`);
    assert.ok(!m.data.includes('"cvv":"123"') && !m.data.includes('"number":"4'), m.data);
  }

  const code = await newAccount('browser-1');
  const updated = await api('PUT', `/v2/accounts/${code}/billing_info`, `<billing_info><token_id>${result.id}</token_id></billing_info>`);
  assert.equal(updated.status, 200, updated.body);
  assert.equal(tag(updated.body, 'last_four'), '1111');
  assert.equal(tag(updated.body, 'first_name'), 'Verena');
  assert.equal(tag(updated.body, 'card_type'), 'Visa');
  assert.deepEqual(page.problems, []);
});

test('validation errors name their fields; server errors pass through', async () => {
  const page = await open('individual');
  await configure(page, PUBLIC_KEY);
  await typeIn(page, 'number', '4111111111111112');
  await typeIn(page, 'month', '13');
  const { err, token: none } = await token(page);
  assert.ok(!none, 'no token with an error');
  assert.equal(err.isServiceError, true);
  assert.equal(err.code, 'validation');
  assert.deepEqual(err.fields, ['number', 'month', 'year']);
  assert.deepEqual(err.details[0], { field: 'number', messages: ['is invalid'] });
  assert.equal(await page.inputValue('[data-service=token]'), '');
  // A CVV the server refuses for the brand (American Express takes four digits).
  await (await fieldFrame(page, 'number')).locator('.field').fill('378282246310005');
  await (await fieldFrame(page, 'month')).locator('.field').fill('12');
  await typeIn(page, 'year', '2031');
  await typeIn(page, 'cvv', '123');
  const server = await token(page);
  assert.equal(server.err.name, 'api-error');
  assert.equal(server.err.code, 'invalid-parameter');
  assert.deepEqual(server.err.fields, ['cvv']);
});

test('messages from the merchant origin are not taken for the fields', async () => {
  const page = await open('individual');
  await configure(page, PUBLIC_KEY);
  const before = await page.evaluate(() => window.changes.length);
  await page.evaluate(() => {
    const groupId = service.groupId;
    window.postMessage({ event: 'hostedField:state:change', body: { type: 'number', valid: true, empty: false }, groupId }, '*');
    window.postMessage({ event: 'hostedField:ready', body: { type: 'number' }, groupId }, '*');
  });
  // A real change afterwards proves the listener ran past the forged ones.
  await typeIn(page, 'cvv', '1');
  await eventually(() => page.evaluate((n) => window.changes.length > n, before));
  const numberState = await page.evaluate(() => window.changes[window.changes.length - 1].fields.number);
  assert.equal(numberState.valid, false);
  assert.equal(numberState.empty, true);
});

test('the page takes the JSON-string form from its own frames only', async () => {
  const page = await open('individual');
  await configure(page, PUBLIC_KEY);
  await page.evaluate(() => {
    window.submits = [];
    service.on('field:submit', (e) => window.submits.push(e.type));
  });
  const message = JSON.stringify({ service_event: 'hostedField:submit', service_message: { type: 'cvv' } });
  // From the page itself (the merchant's origin): dropped. From the month field's frame: taken.
  await page.evaluate((m) => window.postMessage(m, '*'), message);
  await (await fieldFrame(page, 'month')).evaluate((m) => parent.postMessage(m, '*'), message);
  await eventually(() => page.evaluate(() => window.submits.length > 0));
  assert.deepEqual(await page.evaluate(() => window.submits), ['month'], 'named by the frame it came from');
});

test('the combined card field with select expiry tokenizes; the screenshot shows it', async () => {
  const page = await open('card');
  await page.setViewportSize({ width: 640, height: 420 });
  await configure(page, { publicKey: PUBLIC_KEY, fields: { card: { inputType: 'select', style: { fontColor: 'rgb(20, 20, 90)', fontFamily: 'Helvetica' } } } });
  const frame = await fieldFrame(page, 'card');
  const layout = await frame.evaluate(() => ({
    inputs: [...document.querySelectorAll('.field')].map((i) => `${i.tagName.toLowerCase()}:${i.name}`),
    container: !!document.querySelector('.service-hosted-field-container-expiry'),
    color: getComputedStyle(document.querySelector('#service-number')).color,
    placeholder: document.querySelector('#service-number').placeholder,
  }));
  assert.deepEqual(layout, { inputs: ['input:number', 'select:month', 'select:year', 'input:cvv'], container: true, color: 'rgb(20, 20, 90)', placeholder: 'Card number' });
  await frame.locator('#service-number').pressSequentially('371144371144376');
  assert.equal(await frame.locator('#service-number').inputValue(), '3711 443711 44376');
  await frame.locator('#service-month').selectOption('12');
  await frame.locator('#service-year').selectOption('2031');
  await frame.locator('#service-cvv').pressSequentially('1234');
  const state = await eventually(() => page.evaluate(() => window.changes.map((c) => c.fields.card).find((c) => c && c.valid)));
  assert.equal(state.brand, 'american_express');
  assert.deepEqual(state.expiry, { valid: true, empty: false, focus: false });
  if (SCREENSHOTS) await page.screenshot({ path: path.join(SCREENSHOTS, 'card-field.png') });
  const { err, token: result } = await token(page);
  assert.equal(err, null);
  const code = await newAccount('browser-2');
  const updated = await api('PUT', `/v2/accounts/${code}/billing_info`, `<billing_info><token_id>${result.id}</token_id></billing_info>`);
  assert.equal(updated.status, 200, updated.body);
  assert.equal(tag(updated.body, 'last_four'), '4376');
  assert.equal(tag(updated.body, 'zip'), '94105', 'the form inputs travel with the card');
  assert.equal(tag(updated.body, 'country'), 'US');
});

test('the combined card field formats expiry as MM / YY', async () => {
  const page = await open('card');
  await configure(page, PUBLIC_KEY);
  const frame = await fieldFrame(page, 'card');
  await frame.locator('#service-number').pressSequentially(CARD);
  await eventually(() => frame.evaluate(() => document.activeElement.id === 'service-expiry'));
  await frame.locator('#service-expiry').pressSequentially('1231');
  assert.equal(await frame.locator('#service-expiry').inputValue(), '12 / 31');
  await eventually(() => frame.evaluate(() => document.activeElement.id === 'service-cvv'));
  const style = await frame.evaluate(() => getComputedStyle(document.querySelector('#service-number')).color);
  assert.equal(style, 'rgb(84, 84, 87)', 'the card default #545457');
  if (SCREENSHOTS) await page.screenshot({ path: path.join(SCREENSHOTS, 'card-text.png') });
});

test('configure again restyles without re-injecting; destroy and configure after a re-render', async () => {
  const page = await open('individual');
  await configure(page, { publicKey: PUBLIC_KEY, fields: { number: { style: { fontColor: 'rgb(1, 2, 3)' } } } });
  await page.evaluate(() => {
    window.firstFrame = document.querySelector('[data-service=number] iframe');
  });
  await page.evaluate((key) => service.configure({ publicKey: key, fields: { number: { style: { fontColor: 'rgb(9, 8, 7)' } } } }), PUBLIC_KEY);
  const frame = await fieldFrame(page, 'number');
  await eventually(() => frame.evaluate(() => getComputedStyle(document.querySelector('.field')).color === 'rgb(9, 8, 7)'));
  assert.equal(await page.evaluate(() => window.firstFrame === document.querySelector('[data-service=number] iframe')), true);

  // A framework re-renders the form: new placeholders, the old ones gone.
  await page.evaluate(() => {
    service.destroy();
    for (const el of document.querySelectorAll('[data-service=number], [data-service=month], [data-service=year], [data-service=cvv]')) {
      const fresh = document.createElement('div');
      fresh.setAttribute('data-service', el.getAttribute('data-service'));
      el.replaceWith(fresh);
    }
  });
  assert.equal(await page.locator('iframe').count(), 0, 'destroy removes the fields');
  await assert.rejects(page.evaluate(() => service.token(document.forms[0], () => {})), /not-configured|Not configured/);
  await configure(page, PUBLIC_KEY);
  assert.equal(await page.locator('iframe').count(), 4);
  await fillIndividual(page, '5555555555554444');
  const { err, token: result } = await token(page);
  assert.equal(err, null);
  assert.match(result.id, /^[\w-]{21,23}$/);
});

test('Tab moves through the field frames in page order', async () => {
  const page = await open('individual');
  await configure(page, PUBLIC_KEY);
  // Keyboard focus follows the page in front; the suite's earlier pages stay open behind it.
  await page.bringToFront();
  await page.focus('#ln');
  const order = [];
  let last = 'ln';
  const moved = (last) =>
    page.evaluate((last) => {
      const el = document.activeElement;
      const now = el.tagName === 'IFRAME' ? el.parentElement.parentElement.getAttribute('data-service') : el.id || el.tagName;
      return now !== last && now;
    }, last);
  for (let i = 0; i < 5; i++) {
    await page.keyboard.press('Tab');
    // Leaving a frame goes through the bus (hostedField:tab:next), so wait for the focus to move.
    // A key event the browser dropped while busy (the focus still where it was after 3 s) is
    // pressed again; a press that was only slow would then skip a field, which the order below
    // would show.
    let now = await eventually(() => moved(last), 3000).catch(() => null);
    if (!now) {
      await page.keyboard.press('Tab');
      now = await eventually(() => moved(last), 20000).catch((e) => {
        throw new Error(`Tab ${i + 1} after ${JSON.stringify(order)} did not move the focus from ${last}: ${e.message}`);
      });
    }
    last = now;
    order.push(last);
  }
  assert.deepEqual(order, ['number', 'month', 'year', 'cvv', 'outside']);
  // Shift-Tab goes back into the last field, then out of it to the one before.
  await page.keyboard.press('Shift+Tab');
  const cvv = await fieldFrame(page, 'cvv');
  await eventually(() => cvv.evaluate(() => document.hasFocus() && document.activeElement === document.querySelector('.field')));
  await page.keyboard.press('Shift+Tab');
  const year = await fieldFrame(page, 'year');
  await eventually(() => year.evaluate(() => document.hasFocus() && document.activeElement === document.querySelector('.field')));
});

test('bank accounts tokenize from the page over CORS and JSONP', async () => {
  for (const cors of [true, false]) {
    const page = await open('bank');
    await page.evaluate((options) => service.configure(options), { publicKey: PUBLIC_KEY, cors });
    const result = await page.evaluate(
      () => new Promise((resolve) => service.bankAccount.token(document.forms[0], (err, token) => resolve({ err: err && { code: err.code, fields: err.fields }, token }))),
    );
    assert.equal(result.err, null, `cors: ${cors}`);
    assert.equal(result.token.type, 'bank_account');
    assert.equal(await page.inputValue('[data-service=token]'), result.token.id);
    const scripts = await page.evaluate(() => [...document.scripts].map((s) => s.src).filter((s) => s.includes('callback=')));
    assert.deepEqual(scripts, [], 'the JSONP script is removed');
    const mismatch = await page.evaluate(
      () =>
        new Promise((resolve) =>
          service.bankAccount.token(
            { routing_number: '123456780', account_number: '111111111', account_number_confirmation: '2', account_type: 'checking', name_on_account: 'V', country: 'US' },
            (err) => resolve({ code: err.code, fields: err.fields }),
          ),
        ),
    );
    assert.deepEqual(mismatch, { code: 'validation', fields: ['account_number_confirmation'] });
    const unknownBank = await page.evaluate(
      () =>
        new Promise((resolve) =>
          service.bankAccount.token(
            { routing_number: '111111111', account_number: '111111111', account_number_confirmation: '111111111', account_type: 'checking', name_on_account: 'V', country: 'US' },
            (err) => resolve({ name: err.name, code: err.code, fields: err.fields }),
          ),
        ),
    );
    assert.deepEqual(unknownBank, { name: 'api-error', code: 'invalid-routing-number', fields: ['routing_number'] });
    assert.deepEqual(page.problems.filter((p) => !p.includes('422')), [], `cors: ${cors}`);
  }
});

test('tokens from the fields create subscriptions; a decline card is declined at subscription time', async () => {
  const plan = `js-plan-${Date.now().toString(36)}`;
  const created = await api('POST', '/v2/plans', `<plan><plan_code>${plan}</plan_code><name>Gold</name><unit_amount_in_cents><USD>1500</USD></unit_amount_in_cents></plan>`);
  assert.equal(created.status, 201, created.body);
  const subscribe = async (number) => {
    const page = await open('individual');
    await configure(page, { publicKey: PUBLIC_KEY, fields: { month: { inputType: 'select' }, year: { inputType: 'select' } } });
    const month = await fieldFrame(page, 'month');
    assert.equal(await month.evaluate(() => document.querySelector('.field').tagName), 'SELECT', "inputType: 'select'");
    await typeIn(page, 'number', number);
    await month.locator('.field').selectOption('12');
    await (await fieldFrame(page, 'year')).locator('.field').selectOption('2031');
    await typeIn(page, 'cvv', '123');
    const { err, token: result } = await token(page);
    assert.equal(err, null);
    const code = `js-sub-${Date.now().toString(36)}${Math.random().toString(36).slice(2, 6)}`;
    return api(
      'POST',
      '/v2/subscriptions',
      `<subscription><plan_code>${plan}</plan_code><currency>USD</currency><account><account_code>${code}</account_code>` +
        `<email>${code}@example.com</email><billing_info><token_id>${result.id}</token_id></billing_info></account></subscription>`,
    );
  };
  const approved = await subscribe(CARD);
  assert.equal(approved.status, 201, approved.body);
  assert.equal(tag(approved.body, 'state'), 'active');
  const declined = await subscribe('4000000000000002');
  assert.equal(declined.status, 422, declined.body);
  assert.match(declined.body, /<error_code>declined<\/error_code>/);
});

test('the individual expiry advances month → year → cvv, typed and selected', async () => {
  const page = await open('individual');
  await configure(page, PUBLIC_KEY);
  const month = await fieldFrame(page, 'month');
  const year = await fieldFrame(page, 'year');
  const cvv = await fieldFrame(page, 'cvv');
  const focusedIn = (frame) => frame.evaluate(() => document.hasFocus() && document.activeElement === document.querySelector('.field'));
  await month.locator('.field').click();
  await page.keyboard.type('1');
  assert.equal(await focusedIn(month), true, '1 may still become 10, 11 or 12');
  await page.keyboard.type('1');
  await eventually(() => focusedIn(year));
  await page.keyboard.type('20');
  assert.equal(await focusedIn(year), true, '20 may still become 2031');
  await page.keyboard.type('31');
  await eventually(() => focusedIn(cvv));
  await page.keyboard.type('123');
  assert.deepEqual([await month.locator('.field').inputValue(), await year.locator('.field').inputValue()], ['11', '2031']);
  const { err } = await token(page);
  assert.equal(err.code, 'validation', 'no number yet');
  assert.deepEqual(err.fields, ['number']);

  // Selects advance once a value is chosen.
  const selects = await open('individual');
  await configure(selects, { publicKey: PUBLIC_KEY, fields: { month: { inputType: 'select' }, year: { inputType: 'select' } } });
  const monthSelect = await fieldFrame(selects, 'month');
  await monthSelect.locator('.field').selectOption('04');
  await eventually(() => fieldFrame(selects, 'year').then(focusedIn));
});

/** A page whose field frames reach the web-font catalogue only through `handler`. */
async function openWithFonts(handler) {
  const context = await browser.newContext();
  await context.route('https://fonts.googleapis.com/**', handler);
  await context.route('https://fonts.gstatic.com/**', handler);
  const page = await context.newPage();
  await page.goto(`${merchant.url}/individual`);
  return page;
}

/** The number frame's font state (`data-font`: unset while waiting, `loaded` or `fallback`) and its computed family. */
async function fontOf(page) {
  const frame = await fieldFrame(page, 'number');
  return frame.evaluate(() => ({
    font: document.documentElement.getAttribute('data-font'),
    family: getComputedStyle(document.querySelector('.field')).fontFamily,
    links: document.querySelectorAll('link[href^="https://fonts.googleapis.com"]').length,
  }));
}

test('a web font the catalogue never delivers falls back to the next font of the stack; the field does not wait for it', async () => {
  const hanging = [];
  const page = await openWithFonts((route) => {
    hanging.push(route.request().url()); // never answered: an unreachable catalogue that hangs
  });
  await configure(page, { publicKey: PUBLIC_KEY, fields: { all: { style: { fontFamily: 'Open Sans, Georgia' } } } });
  const atReady = await fontOf(page);
  assert.equal(atReady.font, null, 'ready came while the font was still on its way');
  assert.equal(atReady.family, '"Open Sans", Georgia');
  assert.ok(hanging.some((u) => u.startsWith('https://fonts.googleapis.com/css?family=Open+Sans&display=swap')), hanging.join('\n'));
  const after = await eventually(async () => {
    const now = await fontOf(page);
    return now.font === 'fallback' && now;
  }, 10000);
  assert.deepEqual(after, { font: 'fallback', family: 'Georgia, sans-serif', links: 0 });
  // The field works on in the fallback font.
  await fillIndividual(page, CARD);
  const { err, token: result } = await token(page);
  assert.equal(err, null);
  assert.match(result.id, /^[\w-]{21,23}$/);
});

test('a web font the catalogue refuses falls back at once; one it delivers is used', async () => {
  const refused = await openWithFonts((route) => route.abort('internetdisconnected'));
  await configure(refused, { publicKey: PUBLIC_KEY, fields: { all: { style: { fontFamily: 'Lato' } } } });
  assert.deepEqual(await eventually(async () => {
    const now = await fontOf(refused);
    return now.font === 'fallback' && now;
  }), { font: 'fallback', family: 'sans-serif', links: 0 });

  const fontFile = findFontFile('/usr/share/fonts');
  assert.ok(fontFile, 'a font file under /usr/share/fonts (Chromium installs some)');
  const delivered = await openWithFonts((route) => {
    const url = route.request().url();
    if (url.startsWith('https://fonts.googleapis.com/')) {
      return route.fulfill({ status: 200, contentType: 'text/css', body: "@font-face { font-family: 'Lato'; font-style: normal; font-weight: 400; font-display: swap; src: url(https://fonts.gstatic.com/s/lato/v1/lato.ttf) format('truetype'); }" });
    }
    return route.fulfill({ status: 200, contentType: 'font/ttf', body: require('node:fs').readFileSync(fontFile) });
  });
  await configure(delivered, { publicKey: PUBLIC_KEY, fields: { all: { style: { fontFamily: 'Lato' } } } });
  assert.deepEqual(await eventually(async () => {
    const now = await fontOf(delivered);
    return now.font === 'loaded' && now;
  }), { font: 'loaded', family: 'Lato, sans-serif', links: 1 });
});

/** The first TrueType or OpenType file below `dir`. */
function findFontFile(dir) {
  const fs = require('node:fs');
  let entries;
  try {
    entries = fs.readdirSync(dir, { withFileTypes: true });
  } catch (_) {
    return null;
  }
  for (const entry of entries) {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) {
      const found = findFontFile(full);
      if (found) return found;
    } else if (/\.(ttf|otf)$/i.test(entry.name)) {
      return full;
    }
  }
  return null;
}

test('Tab stays native for a service.js of before the tab messages (browsers keep it for a day)', async () => {
  const page = await open('cvvOnly');
  const prevented = {};
  for (const parentVersion of ['4.10.0-rebill.1', '4.10.0-rebill.2']) {
    const config = { type: 'number', busGroupId: `g-${parentVersion}`, service: { publicKey: PUBLIC_KEY, parentVersion } };
    await page.evaluate(
      (src) =>
        new Promise((resolve) => {
          const frame = document.createElement('iframe');
          frame.src = src;
          frame.onload = resolve;
          document.body.append(frame);
        }),
      `${REBILL}/js/v1/field.html#config=${encodeURIComponent(JSON.stringify(config))}`,
    );
    const frame = page.frames().find((f) => f.url().includes(encodeURIComponent(config.busGroupId)));
    await frame.locator('.field').focus();
    const seen = frame.evaluate(() => new Promise((resolve) => document.addEventListener('keydown', (e) => resolve(e.defaultPrevented), { once: true })));
    await frame.locator('.field').press('Tab');
    prevented[parentVersion] = await seen;
  }
  assert.deepEqual(prevented, { '4.10.0-rebill.1': false, '4.10.0-rebill.2': true });
});
