// The hosted field: runs inside `{api}/field.html#config=<JSON>`, framed by a merchant page.
// It renders one card input (or, for the combined `card` field, number, expiry and cvv), reports
// its state to the page, and — for the broker field (`card`, or `number`) — reads its sibling
// fields (same origin as this one) and asks the token endpoint for a token. Card data never
// leaves the rebill origin: the page receives states (brand, length, validity, first six and last
// four once valid), and the token id.
//
// One page, two page libraries: rebill's `service.js` (config key `service`) and pages running
// the original v4 library unchanged (config key `recurly`) speak the same bus (token-library
// reference §2 and §9). A field framed as a hosted field names its messages `hostedField:…`; a
// field framed by Elements (its config has an `elementId`) names them `element:<elementId>:…`.
//
// Origins are pinned: messages are accepted only from the window that framed this page
// (`window.parent`) and, once its origin is known (from `location.ancestorOrigins` where the
// browser has it, else from the first message of the field's bus group), only from that origin;
// messages go to the page with that origin as target. The ready announcement is the one message
// that may leave before the origin is known (it carries the type and the empty initial state).

const config = readConfig();
const groupId = config.busGroupId || '';
const type = core.CARD_TYPES.includes(config.type) ? config.type : 'number';
const elementId = typeof config.elementId === 'string' && config.elementId ? config.elementId : null;
let serviceConfig = pageConfig(config);
let pageOrigin = location.ancestorOrigins && location.ancestorOrigins.length ? location.ancestorOrigins[0] : null;
const queued = [];
const inputs = {};
let focused = false;
let lastState = null;
let peers = null; // Elements: the element ids of this field's set (`elements:peer-announce`)

/** The page library's configuration the field config carries: `service`, or `recurly` from the original library. */
function pageConfig(c) {
  const given = c && typeof c === 'object' ? c.service || c.recurly : null;
  return given && typeof given === 'object' ? given : {};
}

/** A message name of this field: `hostedField:<name>`, or `element:<id>:<name>` inside Elements. */
function own(name) {
  return elementId ? `element:${elementId}:${name}` : `hostedField:${name}`;
}

function readConfig() {
  const match = location.hash.match(/config=([^&]*)/);
  if (!match) return {};
  try {
    return JSON.parse(decodeURIComponent(match[1]));
  } catch (_) {
    return {};
  }
}

function post(event, body) {
  const message = { event, body, groupId };
  if (pageOrigin) window.parent.postMessage(message, pageOrigin);
  else if (event === own('ready')) window.parent.postMessage(message, '*');
  else queued.push(message);
}

window.addEventListener('message', (event) => {
  if (event.source !== window.parent) return;
  const message = core.readMessage(event.data);
  if (!message) return;
  if (message.string) {
    // The JSON-string form carries no group: taken only once the page's origin is pinned.
    if (!pageOrigin || event.origin !== pageOrigin) return;
  } else {
    if (message.groupId !== groupId) return;
    if (!pageOrigin) {
      pageOrigin = event.origin;
      while (queued.length) window.parent.postMessage(queued.shift(), pageOrigin);
    } else if (event.origin !== pageOrigin) {
      return;
    }
  }
  receive(message.event, message.body);
});

function receive(name, body) {
  if (name === `hostedField:${type}:focus!` || (elementId && name === own('focus!'))) {
    firstInput().focus();
  } else if (name === 'hostedField:configure' && !elementId) {
    // The original library sends every field's config to every frame: each takes its own type's.
    const next = body.config || body;
    if (!next.type || next.type === type) reconfigure(next);
  } else if (elementId && name === own('configure!')) {
    reconfigure(body);
  } else if (name === 'hostedFields:configure') {
    // The original library's new page configuration (its restyles follow as hostedField:configure).
    if (body.recurlyConfig && typeof body.recurlyConfig === 'object') serviceConfig = body.recurlyConfig;
  } else if (name === 'hostedFields:state:change') {
    // The state by type (as the original library sends it; a `service.js` of before sends `{fields}`).
    const fields = body.fields && typeof body.fields === 'object' ? body.fields : body;
    if (fields.number && typeof fields.number.brand === 'string') cvvLength(fields.number.brand);
  } else if (elementId && name === 'elements:peer-announce') {
    if (Array.isArray(body.ids)) peers = body.ids.filter((id) => typeof id === 'string');
  } else if (elementId && /^element:[^:]+:state:change$/.test(name) && name !== own('state:change')) {
    // A number element of the same set tells the cvv element its brand.
    const from = name.split(':')[1];
    if ((!peers || peers.includes(from)) && body.type === 'number' && typeof body.brand === 'string') cvvLength(body.brand);
  } else if (name === 'hostedFields:ready' || (elementId && name === 'elements:ready!')) {
    // Every field of the page is ready: the page's state starts from this field's current one.
    lastState = null;
    report();
  } else if (name === 'token:init' && isBroker()) {
    tokenize(body).then((result) => post(`token:done:${body.id}`, result));
  } else if (name === 'destroy') {
    for (const input of Object.values(inputs)) input.value = '';
  }
}

/** The cvv's length follows the number's brand: four digits for American Express. */
function cvvLength(brand) {
  if (type !== 'cvv' || !inputs.cvv) return;
  inputs.cvv.maxLength = brand === 'american_express' ? 4 : 3;
}

/** A `configure` from the page: style, format, icon and the page library's configuration. */
function reconfigure(next) {
  if (!next || typeof next !== 'object') return;
  if (next.style && typeof next.style === 'object') config.style = next.style;
  if (typeof next.format === 'boolean') config.format = next.format;
  if (typeof next.displayIcon === 'boolean') {
    config.displayIcon = next.displayIcon;
    const icon = document.querySelector('.brand');
    if (icon) icon.hidden = next.displayIcon === false;
  }
  const given = pageConfig(next);
  if (Object.keys(given).length) serviceConfig = given;
  applyStyle(core.fieldStyle(type, config.style));
}

function isBroker() {
  return type === 'card' || type === 'number';
}

function firstInput() {
  return inputs.number || inputs.expiry || inputs.month || inputs.year || inputs.cvv;
}

// ---- rendering -------------------------------------------------------------------------------

const LABELS = { number: 'Card number', month: 'Expiration month', year: 'Expiration year', cvv: 'Security code (CVV)', expiry: 'Expiration date (MM / YY)' };
const AUTOCOMPLETE = { number: 'cc-number', month: 'cc-exp-month', year: 'cc-exp-year', cvv: 'cc-csc', expiry: 'cc-exp' };

function textInput(name) {
  const input = document.createElement('input');
  input.type = 'text';
  input.id = `service-${name}`;
  input.name = name;
  input.className = 'field';
  input.inputMode = 'numeric';
  input.autocomplete = AUTOCOMPLETE[name];
  input.spellcheck = false;
  input.setAttribute('aria-label', LABELS[name]);
  input.setAttribute('aria-invalid', 'false');
  if (name === 'cvv') input.maxLength = 4;
  if (name === 'month' || name === 'year') input.maxLength = name === 'month' ? 2 : 4;
  return input;
}

function selectInput(name) {
  const select = document.createElement('select');
  select.id = `service-${name}`;
  select.name = name;
  select.className = 'field';
  select.autocomplete = AUTOCOMPLETE[name];
  select.setAttribute('aria-label', LABELS[name]);
  const blank = document.createElement('option');
  blank.value = '';
  blank.textContent = name === 'month' ? 'MM' : 'YYYY';
  select.append(blank);
  const now = new Date().getFullYear();
  const values = name === 'month' ? Array.from({ length: 12 }, (_, i) => String(i + 1).padStart(2, '0')) : Array.from({ length: 12 }, (_, i) => String(now + i));
  for (const v of values) {
    const option = document.createElement('option');
    option.value = v;
    option.textContent = v;
    select.append(option);
  }
  return select;
}

function useSelect() {
  const inputType = config.inputType || 'text';
  if (inputType === 'select') return true;
  return inputType === 'mobileSelect' && /Mobi|Android|iPhone|iPad/.test(navigator.userAgent);
}

function render() {
  const root = document.getElementById('field');
  root.className = `service-field service-field-${type}`;
  const placeholder = core.fieldStyle(type, config.style).placeholder || {};
  const content = placeholder.content;
  if (type === 'card') {
    inputs.number = textInput('number');
    if (useSelect()) {
      const box = document.createElement('div');
      box.className = 'service-hosted-field-container-expiry';
      inputs.month = selectInput('month');
      inputs.year = selectInput('year');
      box.append(inputs.month, inputs.year);
      root.append(inputs.number, box);
    } else {
      inputs.expiry = textInput('expiry');
      root.append(inputs.number, inputs.expiry);
    }
    inputs.cvv = textInput('cvv');
    inputs.cvv.maxLength = 3;
    root.append(inputs.cvv);
    const icon = document.createElement('span');
    icon.className = 'brand';
    icon.setAttribute('aria-hidden', 'true');
    icon.hidden = config.displayIcon === false;
    root.prepend(icon);
    const texts = typeof content === 'object' && content ? content : {};
    inputs.number.placeholder = texts.number || 'Card number';
    if (inputs.expiry) inputs.expiry.placeholder = texts.expiry || 'MM / YY';
    inputs.cvv.placeholder = texts.cvv || 'CVV';
  } else {
    const input = (type === 'month' || type === 'year') && useSelect() ? selectInput(type) : textInput(type);
    if (input.tagName === 'INPUT') input.placeholder = typeof content === 'string' ? content : '';
    inputs[type] = input;
    root.append(input);
  }
  applyStyle(core.fieldStyle(type, config.style));
  for (const [name, input] of Object.entries(inputs)) wire(name, input);
}

let styleElement = null;
let fontLink = null;
let fontWait = null;

/**
 * The field's stylesheet from `style`. A font by name from the public web-font catalogue is
 * loaded beside it; text shows at once in the next font of the stack meanwhile, and when the
 * catalogue fails or does not deliver the font within `core.FONT_TIMEOUT` (offline machines,
 * blocked networks), the field drops the font and keeps the rest of the stack. Nothing waits for
 * the font: the field is ready, typed into and tokenized the same either way.
 */
function applyStyle(style) {
  if (!styleElement) {
    styleElement = document.createElement('style');
    document.head.append(styleElement);
  }
  styleElement.textContent = core.stylesheet(style, '.field');
  const family = core.webFont(style.fontFamily);
  const url = core.fontUrl(style.fontFamily);
  document.documentElement.removeAttribute('data-font');
  if (fontWait) fontWait.cancel();
  fontWait = null;
  if (!url) {
    if (fontLink) fontLink.remove();
    fontLink = null;
    return;
  }
  if (!fontLink || fontLink.href !== url) {
    if (fontLink) fontLink.remove();
    fontLink = document.createElement('link');
    fontLink.rel = 'stylesheet';
    fontLink.href = url;
    document.head.append(fontLink);
  }
  fontWait = awaitFont(fontLink, family, style, (loaded) => {
    if (loaded) {
      document.documentElement.setAttribute('data-font', 'loaded');
      return;
    }
    document.documentElement.setAttribute('data-font', 'fallback');
    if (fontLink) fontLink.remove(); // also ends a request that hangs
    fontLink = null;
    const fallback = core.merge(style, { fontFamily: core.fontFallback(style.fontFamily) });
    for (const part of ['invalid', 'placeholder']) {
      if (style[part] && style[part].fontFamily) fallback[part] = core.merge(style[part], { fontFamily: core.fontFallback(style[part].fontFamily) });
    }
    styleElement.textContent = core.stylesheet(fallback, '.field');
  });
}

/** Calls `done(true)` once `family` is usable, `done(false)` when the stylesheet fails or the bound passes first. */
function awaitFont(link, family, style, done) {
  let over = false;
  const finish = (loaded) => {
    if (over) return;
    over = true;
    clearTimeout(timer);
    done(loaded);
  };
  const timer = setTimeout(() => finish(false), core.FONT_TIMEOUT);
  const probe = () => {
    const size = style.fontSize && /^\d/.test(String(style.fontSize)) ? style.fontSize : '16px';
    document.fonts
      .load(`${size} "${family}"`)
      .then((faces) => finish(faces.length > 0))
      .catch(() => finish(false));
  };
  if (link.sheet) probe();
  else {
    link.addEventListener('load', probe, { once: true });
    link.addEventListener('error', () => finish(false), { once: true });
  }
  return {
    cancel() {
      over = true;
      clearTimeout(timer);
    },
  };
}

// ---- behaviour -------------------------------------------------------------------------------

function format(name, input) {
  if (config.format === false || input.tagName !== 'INPUT') return;
  const before = input.value;
  let after = before;
  if (name === 'number') after = core.formatNumber(before);
  else if (name === 'expiry') after = core.formatExpiry(before);
  else after = before.replace(/\D/g, '');
  if (after !== before) {
    const atEnd = input.selectionStart === before.length;
    input.value = after;
    if (atEnd) input.setSelectionRange(after.length, after.length);
  }
}

function complete(name) {
  const value = inputs[name].value;
  if (name === 'number') return core.numberComplete(value);
  if (name === 'expiry') return core.formatExpiry(value).length === 7;
  if (name === 'cvv') return value.length === inputs.cvv.maxLength;
  return false;
}

/**
 * Tab left to the browser: a `service.js` from before `4.10.0-rebill.2` (browsers keep it for a
 * day) does not move focus on `hostedField:tab:*`, and Tab crosses its frames natively.
 */
const nativeTab = !!config.service && serviceConfig.parentVersion === '4.10.0-rebill.1';

/** The next field of an individual expiry: month → year → cvv. */
const ADVANCE = { month: 'year', year: 'cvv' };

/** The same-origin sibling field of this bus group (and, inside Elements, of this set) with `wanted` type. */
function sibling(wanted) {
  const frames = window.parent.frames;
  for (let i = 0; i < frames.length; i++) {
    let field;
    try {
      field = frames[i].serviceField;
    } catch (_) {
      continue; // another origin's frame
    }
    if (!field || frames[i] === window || field.groupId !== groupId || field.type !== wanted) continue;
    if (elementId && peers && !peers.includes(field.elementId)) continue;
    return field;
  }
  return null;
}

/** Auto-advance on the individual fields: a complete month moves to the year, a complete year to the cvv. */
function advance(name, input) {
  if (type === 'card' || !ADVANCE[name]) return;
  if (input.tagName === 'INPUT' ? !core.partComplete(name, input.value) : input.value === '') return;
  const next = sibling(ADVANCE[name]);
  if (next) next.focus();
}

function wire(name, input) {
  input.addEventListener('input', () => {
    format(name, input);
    if (type === 'card' && name === 'number') {
      const brand = core.cardType(input.value, true);
      inputs.cvv.maxLength = brand === 'american_express' ? 4 : 3;
    }
    // Auto-advance inside the combined field: number → expiry → cvv.
    if (type === 'card' && complete(name)) {
      const next = name === 'number' ? inputs.expiry || inputs.month : name === 'expiry' ? inputs.cvv : null;
      if (next) next.focus();
    }
    report();
    if (input.tagName === 'INPUT') advance(name, input);
  });
  input.addEventListener('change', () => {
    report();
    if (input.tagName === 'SELECT') advance(name, input);
  });
  input.addEventListener('focus', () => {
    focused = true;
    post(own('focus'), { type });
    report();
  });
  input.addEventListener('blur', () => {
    focused = Object.values(inputs).some((i) => i === document.activeElement && i !== input);
    post(own('blur'), { type });
    report();
  });
  input.addEventListener('keydown', (e) => {
    if (e.key === 'Enter') {
      e.preventDefault();
      post(own('submit'), { type });
    } else if (e.key === 'Tab' && !nativeTab) {
      // Leaving the frame: the page moves focus to the page element before or after it.
      const order = Object.values(inputs);
      const leaving = e.shiftKey ? input === order[0] : input === order[order.length - 1];
      if (leaving) {
        e.preventDefault();
        post(own(e.shiftKey ? 'tab:previous' : 'tab:next'), { type });
      }
    }
  });
}

/** The card values this field holds (read by the broker; never posted to the page). */
function values() {
  const out = {};
  if (inputs.number) out.number = core.cleanNumber(inputs.number.value);
  if (inputs.expiry) Object.assign(out, core.parseExpiry(inputs.expiry.value));
  if (inputs.month) out.month = inputs.month.value.trim();
  if (inputs.year) out.year = inputs.year.value.trim();
  if (inputs.cvv) out.cvv = inputs.cvv.value.trim();
  return out;
}

function partState(name) {
  const v = values();
  const now = new Date();
  switch (name) {
    case 'number': {
      const s = core.numberState(v.number);
      return s;
    }
    case 'expiry':
    case 'month':
    case 'year': {
      const value = name === 'expiry' ? inputs.expiry.value : inputs[name].value;
      const empty = value.trim() === '';
      let valid;
      if (name === 'month') valid = /^\d{1,2}$/.test(v.month) && Number(v.month) >= 1 && Number(v.month) <= 12;
      else if (name === 'year') valid = /^(\d{2}|\d{4})$/.test(v.year) && (Number(v.year) < 100 ? Number(v.year) + 2000 : Number(v.year)) >= now.getFullYear();
      else valid = core.validate.expiry(v.month, v.year, now);
      return { valid, empty, reason: empty ? 'empty' : valid ? '' : 'invalid' };
    }
    case 'cvv': {
      const empty = v.cvv === '';
      const valid = core.validate.cvv(v.cvv);
      return { valid, empty, reason: empty ? 'empty' : valid ? '' : 'incomplete' };
    }
  }
  return { valid: false, empty: true };
}

function state() {
  if (type !== 'card') {
    const s = partState(type);
    return Object.assign({ type, focus: focused }, s);
  }
  const number = core.numberState(values().number);
  const expiry = inputs.expiry ? partState('expiry') : combineSelects();
  const cvv = partState('cvv');
  const part = (s, input) => ({ valid: s.valid, empty: s.empty, focus: Array.isArray(input) ? input.includes(document.activeElement) : document.activeElement === input });
  return {
    type,
    valid: number.valid && expiry.valid && cvv.valid,
    empty: number.empty && expiry.empty && cvv.empty,
    focus: focused,
    brand: number.brand,
    firstSix: number.firstSix,
    lastFour: number.lastFour,
    length: number.length,
    reason: number.reason || (expiry.valid ? '' : 'expiry') || (cvv.valid ? '' : 'cvv'),
    number: part(number, inputs.number),
    expiry: part(expiry, inputs.expiry || [inputs.month, inputs.year]),
    cvv: part(cvv, inputs.cvv),
  };
}

function combineSelects() {
  const v = values();
  const empty = v.month === '' && v.year === '';
  return { valid: core.validate.expiry(v.month, v.year), empty };
}

function report() {
  const s = state();
  // Mark invalid inputs (not while focused or empty) for the invalid style and assistive tech.
  for (const [name, input] of Object.entries(inputs)) {
    const part = name === 'number' ? core.numberState(values().number) : name === 'month' || name === 'year' ? (type === 'card' ? combineSelects() : partState(name)) : partState(name);
    const invalid = !part.valid && !part.empty && document.activeElement !== input;
    input.classList.toggle('invalid', invalid);
    input.setAttribute('aria-invalid', invalid ? 'true' : 'false');
  }
  const icon = document.querySelector('.brand');
  if (icon) {
    icon.dataset.brand = s.brand || 'unknown';
    icon.textContent = BRAND_LABELS[s.brand] || '';
  }
  const key = JSON.stringify(s);
  if (key === lastState) return;
  lastState = key;
  post(own('state:change'), s);
}

const BRAND_LABELS = { visa: 'VISA', master: 'MC', american_express: 'AMEX', discover: 'DISC', jcb: 'JCB', diners_club: 'DC' };

// ---- tokens (broker only) --------------------------------------------------------------------

/** The values of every field of this bus group (inside Elements, of this set): this one and its same-origin siblings. */
function groupValues() {
  const out = values();
  const frames = window.parent.frames;
  for (let i = 0; i < frames.length; i++) {
    let field;
    try {
      field = frames[i].serviceField;
    } catch (_) {
      continue; // another origin's frame
    }
    if (!field || frames[i] === window || field.groupId !== groupId) continue;
    if (elementId && peers && !peers.includes(field.elementId)) continue;
    Object.assign(out, field.values());
  }
  return out;
}

function randomId() {
  const bytes = crypto.getRandomValues(new Uint8Array(12));
  return Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join('');
}

function storedId(storage, name) {
  try {
    let id = storage.getItem(name);
    if (!id) {
      id = randomId();
      storage.setItem(name, id);
    }
    return id;
  } catch (_) {
    return randomId();
  }
}

/** A JSON answer of rebill's `/js/v1` beside this page. */
async function call(route, init, signal) {
  const response = await fetch(new URL(route, location.href), Object.assign({ signal, credentials: 'omit' }, init));
  return response.text();
}

/**
 * `token:init {id, inputs, fraud?, browser?}` (the original library puts `fraud` and `browser`
 * inside `inputs`): validate, ask `risk/preflights`, then `POST token`. Answers `{err, token}`
 * with `err` a plain object (an `Error` would lose its fields in `postMessage`).
 */
async function tokenize(body) {
  const given = body.inputs && typeof body.inputs === 'object' ? body.inputs : {};
  const card = groupValues();
  const inputsAll = Object.assign({}, given, card);
  delete inputsAll.token;
  for (const extra of ['fraud', 'browser']) if (body[extra] !== undefined && inputsAll[extra] === undefined) inputsAll[extra] = body[extra];
  const invalid = core.validateCard(inputsAll, serviceConfig.required);
  if (invalid) return { err: invalid };
  const always = {
    key: serviceConfig.publicKey,
    version: core.VERSION,
    parentVersion: serviceConfig.parentVersion || '',
    deviceId: config.deviceId || storedId(window.localStorage, 'service.deviceId'),
    sessionId: config.sessionId || storedId(window.sessionStorage, 'service.sessionId'),
    instanceId: groupId,
  };
  const params = Object.assign({}, inputsAll, always);
  const timeout = Number(serviceConfig.timeout) > 0 ? Number(serviceConfig.timeout) : 60000;
  const abort = new AbortController();
  const timer = setTimeout(() => abort.abort(), timeout);
  try {
    const risk = core.parseAnswer(await call(`risk/preflights?${core.encodeParams(always)}`, { method: 'GET' }, abort.signal));
    if (risk.err) return { err: risk.err };
    const text = await call(
      'token',
      { method: 'POST', headers: { 'Content-Type': 'application/x-www-form-urlencoded' }, body: core.encodeParams(params) },
      abort.signal,
    );
    const answer = core.parseAnswer(text);
    if (answer.token) return { err: null, token: { id: answer.token.id, type: answer.token.type } };
    return { err: answer.err };
  } catch (e) {
    return { err: core.errorObject(abort.signal.aborted ? 'api-timeout' : 'api-error') };
  } finally {
    clearTimeout(timer);
  }
}

// ---- start -----------------------------------------------------------------------------------

Object.defineProperty(window, 'serviceField', {
  value: Object.freeze({ groupId, type, elementId, values, focus: () => firstInput().focus() }),
  enumerable: false,
});
render();
const initial = state();
post(own('ready'), Object.assign({}, initial, { type }));
lastState = JSON.stringify(initial);
post(own('state:change'), initial);
