// The demo checkout page (`rebill serve --demo`) in headless Chromium: a person picks a plan,
// types a card into the hosted field and subscribes; a decline card shows the decline.
'use strict';
const test = require('node:test');
const assert = require('node:assert/strict');
const path = require('node:path');
const { REBILL, SCREENSHOTS, launch, api, eventually } = require('../browser/support.js');

let browser;

test.before(async () => {
  browser = await launch();
  for (const [code, name, cents] of [['coffee-monthly', 'Monthly beans', 1800], ['coffee-yearly', 'A year of beans', 18000]]) {
    const unit = code.endsWith('yearly') ? '<plan_interval_length>12</plan_interval_length>' : '';
    const created = await api('POST', '/v2/plans', `<plan><plan_code>${code}</plan_code><name>${name}</name><unit_amount_in_cents><USD>${cents}</USD></unit_amount_in_cents>${unit}</plan>`);
    assert.ok(created.status === 201 || created.body.includes('taken'), created.body);
  }
});

test.after(async () => {
  if (browser) await browser.close();
});

async function checkout(card) {
  const page = await browser.newPage({ viewport: { width: 1100, height: 1000 } });
  const problems = [];
  page.on('pageerror', (e) => problems.push(String(e)));
  await page.goto(`${REBILL}/demo`);
  await page.waitForSelector('.plan');
  assert.deepEqual(await page.locator('.plan .name').allTextContents(), ['A year of beans', 'Monthly beans']);
  await page.locator('.plan', { hasText: 'Monthly beans' }).click();
  await page.fill('[name=first_name]', 'Ada');
  await page.fill('[name=last_name]', 'Lovelace');
  await page.fill('[name=email]', 'ada@example.com');
  await page.fill('[data-service=postal_code]', '94105');
  const frame = await (await page.waitForSelector('[data-service=card] iframe')).contentFrame();
  await frame.waitForSelector('#service-number');
  await frame.locator('#service-number').pressSequentially(card);
  await frame.locator('#service-expiry').pressSequentially('1231');
  await frame.locator('#service-cvv').pressSequentially('123');
  await eventually(() => page.evaluate(() => !document.getElementById('subscribe').disabled));
  await page.click('#subscribe');
  return { page, problems };
}

test('a person subscribes on the demo page; the page shows the subscription and its invoice', async () => {
  const { page, problems } = await checkout('4111111111111111');
  await page.waitForSelector('#result:not([hidden])');
  assert.equal(await page.textContent('#subscription-state'), 'active');
  assert.match(await page.textContent('#invoice-number'), /^#\d+$/);
  assert.match(await page.textContent('#result'), /\$18\.00/);
  if (SCREENSHOTS) await page.screenshot({ path: path.join(SCREENSHOTS, 'demo-subscribed.png'), fullPage: true });
  assert.deepEqual(problems, []);
});

test('a decline card shows the decline and no subscription', async () => {
  const { page } = await checkout('4000000000000002');
  await page.waitForSelector('#errors:not([hidden])');
  assert.match(await page.textContent('#errors'), /declined/i);
  assert.equal(await page.isHidden('#result'), true);
  if (SCREENSHOTS) await page.screenshot({ path: path.join(SCREENSHOTS, 'demo-declined.png') });
});

test('a person subscribes with a bank account on the demo page', async () => {
  const page = await browser.newPage({ viewport: { width: 1100, height: 900 } });
  await page.goto(`${REBILL}/demo`);
  await page.waitForSelector('.plan');
  await page.locator('.plan', { hasText: 'A year of beans' }).click();
  await page.fill('[name=first_name]', 'Grace');
  await page.fill('[name=last_name]', 'Hopper');
  await page.fill('[name=email]', 'grace@example.com');
  await page.click('.tab[data-method=bank]');
  assert.equal(await page.isHidden('#method-card'), true);
  await page.fill('[data-service=account_number]', '111111111');
  await page.fill('[data-service=account_number_confirmation]', '111111112');
  await page.click('#subscribe');
  await page.waitForSelector('#errors:not([hidden])');
  assert.match(await page.textContent('#errors'), /account number confirmation does not match/);
  await page.fill('[data-service=account_number_confirmation]', '111111111');
  await page.click('#subscribe');
  await page.waitForSelector('#result:not([hidden])');
  assert.equal(await page.textContent('#subscription-state'), 'active');
  assert.match(await page.textContent('#result'), /\$180\.00/);
  assert.match(await page.textContent('#result'), /bank account/);
});
