// Unit tests of the library's pure parts (core.js) with Node's built-in test runner:
// `node --test crates/rebill-server/js/test/unit/`.
'use strict';
const test = require('node:test');
const assert = require('node:assert/strict');
const core = require('../../core.js');

test('Luhn needs a zero remainder and a non-zero sum', () => {
  assert.equal(core.luhn('4111111111111111'), true);
  assert.equal(core.luhn('4111111111111112'), false);
  assert.equal(core.luhn('0000000000000000'), false, 'a zero sum is invalid');
  assert.equal(core.luhn('41111111a1111111'), false);
});

test('card numbers are 12 to 19 digits after spaces and dashes go', () => {
  assert.equal(core.validate.cardNumber('4111 1111-1111 1111'), true);
  assert.equal(core.validate.cardNumber('4111.1111.1111.1111'), false, 'nothing else is stripped');
  assert.equal(core.validate.cardNumber('42424242426'), false, '11 digits');
  assert.equal(core.validate.cardNumber('378282246310005'), true);
  assert.equal(core.numberReason(''), 'empty');
  assert.equal(core.numberReason('4111'), 'too_short');
  assert.equal(core.numberReason('4111111111111112'), 'luhn');
  assert.equal(core.numberReason('4111111111111111'), '');
});

test('brands follow the table in order; partial numbers match by prefix', () => {
  const cases = {
    '6011111111111117': 'discover',
    '6221260000000000': 'discover',
    '5555555555554444': 'master',
    '2223003122003222': 'master',
    '378282246310005': 'american_express',
    '4111111111111111': 'visa',
    '4222222222222': 'visa',
    '3530111333300000': 'jcb',
    '30569309025904': 'diners_club',
  };
  for (const [number, brand] of Object.entries(cases)) assert.equal(core.cardType(number), brand, number);
  assert.equal(core.cardType('4'), 'unknown', 'length counts unless partial');
  assert.equal(core.cardType('4', true), 'visa');
  assert.equal(core.cardType('37', true), 'american_express');
  assert.equal(core.cardType('9999999999999995'), 'unknown');
});

test('numbers format by brand and drop non-digits', () => {
  assert.equal(core.formatNumber('4111111111111111'), '4111 1111 1111 1111');
  assert.equal(core.formatNumber('4111-1111 11a1'), '4111 1111 111');
  assert.equal(core.formatNumber('371144371144376'), '3711 443711 44376');
  assert.equal(core.formatNumber('36438936438936'), '3643 893643 8936');
  assert.equal(core.formatNumber('4111111111111111111'), '4111 1111 1111 1111 111');
  assert.equal(core.formatNumber(''), '');
});

test('expiry formats as MM / YY and parses back', () => {
  assert.equal(core.formatExpiry('1028'), '10 / 28');
  assert.equal(core.formatExpiry('4'), '04');
  assert.equal(core.formatExpiry('0428'), '04 / 28');
  assert.equal(core.formatExpiry('10/2'), '10 / 2');
  assert.deepEqual(core.parseExpiry('10 / 28'), { month: '10', year: '28' });
  assert.deepEqual(core.parseExpiry('1028'), { month: '10', year: '28' });
  assert.deepEqual(core.parseExpiry('10/2028'), { month: '10', year: '2028' });
  assert.deepEqual(core.parseExpiry('1'), { month: '', year: '' });
});

test('an expiry is valid until the first of the next month; two-digit years are 20YY', () => {
  const now = new Date(2027, 0, 15);
  assert.equal(core.validate.expiry(1, 27, now), true);
  assert.equal(core.validate.expiry('12', '2026', now), false);
  assert.equal(core.validate.expiry('13', '2030', now), false);
  assert.equal(core.validate.expiry('0', '2030', now), false);
  assert.equal(core.validate.expiry('1', '2027', new Date(2027, 1, 1)), false);
  assert.equal(core.validate.expiry('1', '', now), false);
});

test('cvv is three or four digits', () => {
  assert.equal(core.validate.cvv('123'), true);
  assert.equal(core.validate.cvv(' 1234 '), true);
  assert.equal(core.validate.cvv('12'), false);
  assert.equal(core.validate.cvv('12a'), false);
});

test('card validation lists fields in the library order with its messages', () => {
  const now = new Date(2027, 0, 15);
  assert.equal(core.validateCard({ number: '4111111111111111', month: '12', year: '30', cvv: '123', first_name: 'A', last_name: 'B' }, [], now), null);
  const err = core.validateCard({ number: '4111111111111112', month: '12', year: '20', cvv: '12', first_name: ' ', last_name: 'B' }, ['postal_code'], now);
  assert.deepEqual(err, {
    code: 'validation',
    message: 'There was an error validating your request.',
    fields: ['number', 'month', 'year', 'first_name', 'cvv', 'postal_code'],
    details: [
      { field: 'number', messages: ['is invalid'] },
      { field: 'month', messages: ['is invalid'] },
      { field: 'year', messages: ['is invalid'] },
      { field: 'first_name', messages: ["can't be blank"] },
      { field: 'cvv', messages: ['is invalid'] },
      { field: 'postal_code', messages: ["can't be blank"] },
    ],
  });
  const blankCvv = core.validateCard({ number: '4111111111111111', month: '12', year: '30', first_name: 'A', last_name: 'B' }, ['cvv'], now);
  assert.deepEqual(blankCvv.fields, ['cvv']);
  assert.deepEqual(blankCvv.details, [{ field: 'cvv', messages: ["can't be blank"] }]);
});

test('bank validation: every field required, confirmation must match', () => {
  const good = { routing_number: '123456780', account_number: '111111111', account_number_confirmation: '111111111', account_type: 'checking', name_on_account: 'V E', country: 'US' };
  assert.equal(core.validateBank(good), null);
  const err = core.validateBank({ ...good, account_number_confirmation: '222', country: '', account_type: 'gold', name_on_account: 5 });
  assert.deepEqual(err.fields, ['name_on_account', 'country', 'account_number_confirmation', 'account_type']);
  assert.deepEqual(err.details[2], { field: 'account_number_confirmation', messages: ['does not match'] });
  assert.deepEqual(err.details[0], { field: 'name_on_account', messages: ['is invalid'] });
});

test('configure options: a key alone, legacy selectors and styles, defaults', () => {
  const byKey = core.normalizeConfig('pk-1', { api: 'https://r.example/js/v1/' });
  assert.equal(byKey.publicKey, 'pk-1');
  assert.equal(byKey.api, 'https://r.example/js/v1');
  assert.equal(byKey.timeout, 60000);
  assert.equal(byKey.cors, true);
  const c = core.normalizeConfig(
    { publicKey: 'pk', cors: false, timeout: 5, required: ['cvv'], fields: { number: '#num', all: { style: { fontSize: '12px' } } }, style: { number: { fontColor: 'red' } } },
    { api: 'https://r/js/v1' },
  );
  assert.equal(c.cors, false);
  assert.equal(c.timeout, 5);
  assert.deepEqual(c.required, ['cvv']);
  assert.equal(c.fields.number.selector, '#num');
  assert.deepEqual(c.fields.number.style, { fontColor: 'red' });
  const number = core.fieldConfig(c, 'number');
  assert.equal(number.selector, '#num');
  assert.equal(number.style.fontColor, 'red', 'field style wins');
  assert.equal(number.style.fontSize, '12px', 'all applies');
  assert.equal(number.style.fontFamily, 'Helvetica', 'common default');
  assert.equal(number.format, true);
  assert.equal(number.tabIndex, 0);
  const month = core.fieldConfig(core.normalizeConfig({ publicKey: 'k', fields: { all: { format: false, tabIndex: 3 }, month: { inputType: 'select', tabIndex: 5 } } }), 'month');
  assert.equal(month.format, false);
  assert.equal(month.tabIndex, 5, 'field-level tabIndex wins over all');
  assert.equal(month.inputType, 'select');
  assert.equal(month.selector, '[data-service=month]');
  const card = core.fieldConfig(core.normalizeConfig({ publicKey: 'k', fields: { all: { style: { fontColor: 'red' } }, card: { displayIcon: false, style: { placeholder: { content: { cvv: 'CVC' } } } } } }), 'card');
  assert.equal(card.displayIcon, false);
  assert.equal(card.style.fontColor, '#545457', 'all does not reach the card field; its defaults apply');
  assert.equal(card.style.fontFamily, 'Source Sans Pro');
  assert.deepEqual(card.style.placeholder, { color: '#a3a3a7', content: { number: 'Card number', expiry: 'MM / YY', cvv: 'CVC' } });
  assert.deepEqual(card.style.invalid, { fontColor: '#a3a3a7' });
});

test('merging is deep and ignores prototype keys', () => {
  const merged = core.merge({ a: { b: 1, c: 2 } }, JSON.parse('{"a": {"c": 3}, "__proto__": {"polluted": true}}'));
  assert.deepEqual(merged, { a: { b: 1, c: 3 } });
  assert.equal({}.polluted, undefined);
});

test('styles become CSS declarations that cannot break out of their rule', () => {
  const css = core.stylesheet({ fontColor: 'red', fontFamily: 'Open Sans', padding: '2px', invalid: { fontColor: '#f00' }, placeholder: { color: 'gray' } }, '.field');
  assert.match(css, /^\.field \{ color: red; font-family: "Open Sans", sans-serif; padding: 2px \}/);
  assert.match(css, /\.field\.invalid \{ color: #f00 \}/);
  assert.match(css, /\.field::placeholder \{ color: gray \}/);
  assert.equal(core.declarations({ fontColor: 'red} body { display: none' }), 'color: red body  display: none');
  assert.equal(core.declarations({ fontFamily: 'Georgia, serif' }), 'font-family: Georgia, serif');
  assert.equal(core.declarations({ fontFamily: 'inherit' }), 'font-family: inherit');
  assert.equal(core.fontUrl('Open Sans'), 'https://fonts.googleapis.com/css?family=Open+Sans&display=swap');
  assert.equal(core.fontUrl('"Open Sans", Arial'), 'https://fonts.googleapis.com/css?family=Open+Sans&display=swap');
  assert.equal(core.fontUrl('Helvetica'), '');
  assert.equal(core.fontUrl('sans-serif'), '');
});

test('a web font falls back to the next font of its stack', () => {
  assert.deepEqual(core.fontFamilies('"Open Sans", Segoe UI ,sans-serif'), ['Open Sans', 'Segoe UI', 'sans-serif']);
  assert.equal(core.webFont('Lato, Arial'), 'Lato');
  assert.equal(core.webFont('Arial, Lato'), '');
  assert.equal(core.fontFallback('"Open Sans", Segoe UI, sans-serif'), '"Segoe UI", sans-serif');
  assert.equal(core.fontFallback('Lato, Arial'), 'Arial');
  assert.equal(core.fontFallback('Lato'), 'sans-serif', 'nothing left: the generic family');
  assert.ok(core.FONT_TIMEOUT > 0 && core.FONT_TIMEOUT <= 5000, 'a bound a person waits through');
  assert.match(core.declarations({ fontFamily: core.fontFallback('Lato, Segoe UI') }), /^font-family: "Segoe UI", sans-serif$/);
});

test('the individual expiry advances once a part is complete', () => {
  for (const v of ['01', '09', '10', '12', '2', '9']) assert.equal(core.partComplete('month', v), true, v);
  for (const v of ['', '0', '1', '13', '00', 'a']) assert.equal(core.partComplete('month', v), false, v);
  for (const v of ['2031', '31', '29', '99']) assert.equal(core.partComplete('year', v), true, v);
  for (const v of ['', '2', '20', '203', 'ab']) assert.equal(core.partComplete('year', v), false, `${v}: may still become a four-digit year`);
  assert.equal(core.partComplete('cvv', '123'), false, 'only month and year advance');
});

test('bus messages are read from the object and the JSON-string forms', () => {
  assert.deepEqual(core.readMessage({ event: 'hostedField:ready', body: { type: 'cvv' }, groupId: 'g' }), { event: 'hostedField:ready', body: { type: 'cvv' }, groupId: 'g', string: false });
  assert.deepEqual(core.readMessage({ event: 'destroy', groupId: 'g' }).body, {}, 'a missing body is empty');
  assert.deepEqual(core.readMessage(JSON.stringify({ recurly_event: 'hostedField:number:focus!', recurly_message: {} })), { event: 'hostedField:number:focus!', body: {}, groupId: undefined, string: true });
  assert.deepEqual(core.readMessage(JSON.stringify({ service_event: 'token:done:1', service_message: { err: null } })).body, { err: null });
  for (const junk of [null, 'x', '[]', '{"recurly_event":5}', { body: {} }, { event: '' }, 42]) assert.equal(core.readMessage(junk), null, JSON.stringify(junk));
});

test('a field style sits over the defaults of its kind', () => {
  const card = core.fieldStyle('card', { fontColor: 'red' });
  assert.equal(card.fontColor, 'red');
  assert.equal(card.fontFamily, 'Source Sans Pro');
  assert.deepEqual(card.placeholder.content, { number: 'Card number', expiry: 'MM / YY', cvv: 'CVV' });
  const number = core.fieldStyle('number', undefined);
  assert.equal(number.fontFamily, 'Helvetica');
  assert.equal(number.placeholder.content, '');
});

test('errors carry code, message, fields and details; server errors override', () => {
  const e = core.errorObject('not-configured');
  assert.equal(e.code, 'not-configured');
  assert.equal(e.name, 'not-configured');
  assert.match(e.message, /configure/);
  assert.ok(e.help);
  const parsed = core.parseAnswer('{"error":{"code":"declined","message":"no","fields":["number"],"details":[{"field":"number","messages":["x"]}]}}');
  assert.equal(parsed.err.name, 'api-error');
  assert.equal(parsed.err.code, 'declined');
  assert.deepEqual(parsed.err.fields, ['number']);
  assert.deepEqual(core.parseAnswer('{"id":"abc","type":"credit_card"}'), { token: { id: 'abc', type: 'credit_card' } });
  assert.match(core.parseAnswer('<html>').err.message, /^There was a problem parsing the API response with: <html>/);
});

test('parameters encode nested objects as a[b]', () => {
  assert.equal(core.encodeParams({ key: 'k 1', browser: { user_agent: 'x&y' }, skip: undefined }), 'key=k%201&browser%5Buser_agent%5D=x%26y');
});

test('a number is complete at its brand\'s longest length, not at a prefix that passes Luhn', () => {
  assert.equal(core.validate.cardNumber('5555555555554'), true, 'a 13-digit prefix of a Mastercard passes Luhn');
  assert.equal(core.numberComplete('5555555555554'), false);
  assert.equal(core.numberComplete('5555555555554444'), true);
  assert.equal(core.numberComplete('4222222222222'), false, 'visa goes on to 16');
  assert.equal(core.numberComplete('4111 1111 1111 1111'), true);
  assert.equal(core.numberComplete('378282246310005'), true, 'American Express ends at 15');
  assert.equal(core.numberComplete('4111111111111112'), false, 'Luhn fails');
});
