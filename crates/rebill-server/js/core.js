// The pure parts of the client-side library, shared by the merchant page (service.js) and the
// hosted field (field.js): card brands, Luhn, formatting, validation, option merging, styles and
// the error directory. No DOM here, so Node's test runner loads this file directly
// (`require('…/core.js')`); rebill serves it wrapped, with the page or field script, in one
// function scope.
'use strict';

const core = (() => {
  // rebill.2: Tab out of a field frame travels on the bus (`hostedField:tab:*`).
  const VERSION = '4.10.0-rebill.2';

  // Brand table: first match wins; `lengths` is skipped when `partial`.
  const BRANDS = [
    { type: 'discover', pattern: /^(6011|622|64[4-9]|65)/, lengths: [16], groups: [4, 4, 4, 4] },
    { type: 'master', pattern: /^(5[1-5]|222[1-9]|22[3-9]\d|2[3-6]\d\d|27[01]\d|2720)/, lengths: [16], groups: [4, 4, 4, 4] },
    { type: 'american_express', pattern: /^3[47]/, lengths: [15], groups: [4, 6, 5] },
    { type: 'visa', pattern: /^4/, lengths: [13, 16], groups: [4, 4, 4, 4] },
    { type: 'jcb', pattern: /^35(2[89]|[3-8]\d)/, lengths: [16], groups: [4, 4, 4, 4] },
    { type: 'diners_club', pattern: /^(30[0-5]|309|36|38|39|54|55|2014|2149)/, lengths: [14], groups: [4, 6, 4] },
  ];

  /** Digits of a card number as typed: spaces and dashes removed, nothing else. */
  function cleanNumber(number) {
    return String(number == null ? '' : number).replace(/[-\s]/g, '');
  }

  /** Luhn over a string of digits: the sum % 10 is 0 and the sum is not 0. */
  function luhn(digits) {
    if (!/^\d+$/.test(digits)) return false;
    let sum = 0;
    for (let i = 0; i < digits.length; i++) {
      let d = digits.charCodeAt(digits.length - 1 - i) - 48;
      if (i % 2 === 1) {
        d *= 2;
        if (d > 9) d -= 9;
      }
      sum += d;
    }
    return sum % 10 === 0 && sum > 0;
  }

  function brandOf(number, partial) {
    const digits = cleanNumber(number);
    return BRANDS.find((b) => b.pattern.test(digits) && (partial || b.lengths.includes(digits.length)));
  }

  /** The brand code of a (possibly partial) number, or 'unknown'. */
  function cardType(number, partial) {
    const brand = brandOf(number, partial);
    return brand ? brand.type : 'unknown';
  }

  function cardNumber(number) {
    const digits = cleanNumber(number);
    return digits.length >= 12 && digits.length <= 19 && luhn(digits);
  }

  /** Whether an expiry is still valid at `now`: until 00:00 local time on the 1st of the next month. */
  function expiry(month, year, now) {
    const m = Number(month);
    let y = Number(year);
    if (!Number.isInteger(m) || m < 1 || m > 12 || !Number.isInteger(y) || String(year).trim() === '') return false;
    if (y < 100) y += 2000;
    const end = new Date(y, m, 1);
    return (now || new Date()) < end;
  }

  function cvv(value) {
    return /^\d{3,4}$/.test(String(value == null ? '' : value).trim());
  }

  /** Why a number is not (yet) valid: 'empty', 'too_short', 'too_long', 'luhn' or '' when valid. */
  function numberReason(number) {
    const digits = cleanNumber(number);
    if (digits === '') return 'empty';
    if (!/^\d+$/.test(digits)) return 'invalid';
    if (digits.length < 12) return 'too_short';
    if (digits.length > 19) return 'too_long';
    if (!luhn(digits)) return 'luhn';
    return '';
  }

  /** A number grouped for display by its brand (4-4-4-4, 4-6-5, 4-6-4); non-digits dropped. */
  function formatNumber(input) {
    const digits = String(input == null ? '' : input).replace(/\D/g, '').slice(0, 19);
    const brand = brandOf(digits, true);
    const groups = brand ? brand.groups : [4, 4, 4, 4];
    const parts = [];
    let at = 0;
    for (const size of groups) {
      if (at >= digits.length) break;
      parts.push(digits.slice(at, at + size));
      at += size;
    }
    if (at < digits.length) parts.push(digits.slice(at));
    return parts.join(' ');
  }

  /** Expiry typed as MMYY shown as `MM / YY` (a leading 2-9 means 0M). */
  function formatExpiry(input) {
    let digits = String(input == null ? '' : input).replace(/\D/g, '');
    if (/^[2-9]/.test(digits)) digits = '0' + digits;
    digits = digits.slice(0, 4);
    return digits.length > 2 ? digits.slice(0, 2) + ' / ' + digits.slice(2) : digits;
  }

  /** `{month, year}` of a displayed or typed expiry (`10 / 28`, `1028`, `10/2028`). */
  function parseExpiry(value) {
    const text = String(value == null ? '' : value).trim();
    const split = text.match(/^(\d{1,2})\s*\/\s*(\d{2}|\d{4})$/);
    if (split) return { month: split[1], year: split[2] };
    const digits = text.replace(/\D/g, '');
    if (digits.length === 4 || digits.length === 6) return { month: digits.slice(0, 2), year: digits.slice(2) };
    return { month: '', year: '' };
  }

  /**
   * Whether a number is typed to its end, so the combined field moves on to the expiry: valid and
   * as long as its brand's longest number (16 digits for an unknown brand, or 19). A shorter
   * prefix that happens to pass Luhn does not move the cursor away mid-number.
   */
  function numberComplete(number) {
    const digits = cleanNumber(number);
    if (!cardNumber(digits)) return false;
    const brand = brandOf(digits, true);
    const longest = brand ? Math.max(...brand.lengths) : 16;
    return digits.length >= longest;
  }

  /** The state a number field reports: never the number itself. */
  function numberState(number) {
    const digits = cleanNumber(number);
    const valid = cardNumber(digits);
    return {
      valid,
      empty: digits.length === 0,
      brand: digits.length ? cardType(digits, true) : 'unknown',
      firstSix: valid ? digits.slice(0, 6) : '',
      lastFour: valid ? digits.slice(-4) : '',
      length: digits.length,
      reason: numberReason(digits),
    };
  }

  const BLANK = "can't be blank";
  const INVALID = 'is invalid';

  function blank(v) {
    return v == null || String(v).trim() === '';
  }

  /** Adds a message to `details` (one entry per field, in order of first mention). */
  function addDetail(details, field, message) {
    const entry = details.find((d) => d.field === field);
    if (entry) entry.messages.push(message);
    else details.push({ field, messages: [message] });
  }

  function validationError(details) {
    return {
      code: 'validation',
      message: 'There was an error validating your request.',
      fields: details.map((d) => d.field),
      details,
    };
  }

  /** The card checks of the library before a token request; `null` when they pass. */
  function validateCard(inputs, required, now) {
    const details = [];
    const req = Array.isArray(required) ? required : [];
    if (!cardNumber(inputs.number)) addDetail(details, 'number', INVALID);
    if (!expiry(inputs.month, inputs.year, now)) {
      addDetail(details, 'month', INVALID);
      addDetail(details, 'year', INVALID);
    }
    if (blank(inputs.first_name)) addDetail(details, 'first_name', BLANK);
    if (blank(inputs.last_name)) addDetail(details, 'last_name', BLANK);
    if (blank(inputs.cvv)) {
      if (req.includes('cvv')) addDetail(details, 'cvv', BLANK);
    } else if (!cvv(inputs.cvv)) {
      addDetail(details, 'cvv', INVALID);
    }
    for (const field of req) {
      if (['cvv', 'number', 'month', 'year', 'first_name', 'last_name'].includes(field)) continue;
      if (blank(inputs[field])) addDetail(details, field, BLANK);
    }
    return details.length ? validationError(details) : null;
  }

  const BANK_REQUIRED = ['routing_number', 'account_number', 'account_number_confirmation', 'account_type', 'name_on_account', 'country'];

  /** The bank-account checks before a token request; `null` when they pass. */
  function validateBank(inputs) {
    const details = [];
    for (const field of BANK_REQUIRED) {
      const v = inputs[field];
      if (v == null || (typeof v === 'string' && v.trim() === '')) addDetail(details, field, BLANK);
      else if (typeof v !== 'string') addDetail(details, field, INVALID);
    }
    if (
      typeof inputs.account_number === 'string' &&
      typeof inputs.account_number_confirmation === 'string' &&
      inputs.account_number_confirmation.trim() !== '' &&
      inputs.account_number.trim() !== inputs.account_number_confirmation.trim()
    ) {
      addDetail(details, 'account_number_confirmation', 'does not match');
    }
    if (typeof inputs.account_type === 'string' && inputs.account_type.trim() !== '' && !['checking', 'savings'].includes(inputs.account_type)) {
      addDetail(details, 'account_type', INVALID);
    }
    return details.length ? validationError(details) : null;
  }

  function isPlainObject(v) {
    return v !== null && typeof v === 'object' && !Array.isArray(v);
  }

  /** A deep merge of plain objects (later wins); arrays and other values are replaced. */
  function merge(...objects) {
    const out = {};
    for (const object of objects) {
      if (!isPlainObject(object)) continue;
      for (const [key, value] of Object.entries(object)) {
        if (key === '__proto__' || key === 'constructor' || key === 'prototype') continue;
        out[key] = isPlainObject(value) && isPlainObject(out[key]) ? merge(out[key], value) : isPlainObject(value) ? merge(value) : value;
      }
    }
    return out;
  }

  const CARD_TYPES = ['card', 'number', 'month', 'year', 'cvv'];

  /** Defaults of the common style properties (distinct fields). */
  const COMMON_STYLE = {
    fontColor: 'black',
    fontFamily: 'Helvetica',
    fontFeatureSettings: 'normal',
    fontKerning: 'auto',
    fontSize: 'inherit',
    fontSmoothing: 'auto',
    fontStretch: 'normal',
    fontStyle: 'normal',
    fontVariant: 'normal',
    fontWeight: 'normal',
    letterSpacing: 'normal',
    lineHeight: 'normal',
    textRendering: 'auto',
    textShadow: 'none',
    textTransform: 'none',
  };

  /** Defaults of the combined card field. */
  const CARD_STYLE = {
    fontColor: '#545457',
    fontFamily: 'Source Sans Pro',
    fontSize: '16px',
    placeholder: { color: '#a3a3a7', content: { number: 'Card number', expiry: 'MM / YY', cvv: 'CVV' } },
    invalid: { fontColor: '#a3a3a7' },
  };

  /**
   * The library's configuration from `configure()`'s argument: a public key, or an object with
   * `publicKey`, `api`, `fields`, `required`, `timeout`, `cors`. Legacy forms are normalised:
   * `fields.<type>: '<selector>'` and `style.<type>` / `style.all`.
   */
  function normalizeConfig(options, defaults) {
    const given = typeof options === 'string' ? { publicKey: options } : isPlainObject(options) ? options : {};
    const base = merge({ api: '', timeout: 60000, cors: true, required: [], fields: {} }, defaults || {});
    const config = merge(base, given);
    if (Array.isArray(given.required)) config.required = given.required.slice();
    const fields = {};
    const rawFields = isPlainObject(given.fields) ? given.fields : {};
    for (const key of ['all', ...CARD_TYPES]) {
      const value = rawFields[key];
      fields[key] = typeof value === 'string' ? { selector: value } : isPlainObject(value) ? merge(value) : {};
    }
    if (isPlainObject(given.style)) {
      for (const key of ['all', ...CARD_TYPES]) {
        if (isPlainObject(given.style[key])) fields[key].style = merge(given.style[key], fields[key].style);
      }
    }
    config.fields = fields;
    config.api = String(config.api || '').replace(/\/+$/, '');
    config.timeout = Number(config.timeout) > 0 ? Number(config.timeout) : 60000;
    config.cors = config.cors !== false;
    return config;
  }

  /**
   * A field's style over its defaults: the combined card field's (Source Sans Pro, #545457, 16px,
   * its three placeholders) or the individual fields' (Helvetica, black). The field page applies
   * it too, so a page whose library sends only what the merchant set still gets the defaults.
   */
  function fieldStyle(type, style) {
    return type === 'card' ? merge(COMMON_STYLE, CARD_STYLE, style) : merge(COMMON_STYLE, { placeholder: { content: '' } }, style);
  }

  /** The configuration one hosted field gets: selector, style with defaults, format, etc. */
  function fieldConfig(config, type) {
    const all = type === 'card' ? {} : config.fields.all || {};
    const own = config.fields[type] || {};
    const style = fieldStyle(type, merge(all.style, own.style));
    const pick = (name, fallback) => (own[name] !== undefined ? own[name] : all[name] !== undefined ? all[name] : fallback);
    const out = {
      type,
      selector: own.selector || `[data-service=${type}]`,
      style,
      format: pick('format', true) !== false,
      tabIndex: pick('tabIndex', 0),
      inputType: ['text', 'mobileSelect', 'select'].includes(pick('inputType', 'text')) ? pick('inputType', 'text') : 'text',
    };
    if (type === 'card') out.displayIcon = own.displayIcon !== false;
    return out;
  }

  const STYLE_PROPERTIES = {
    fontColor: 'color',
    fontFamily: 'font-family',
    fontFeatureSettings: 'font-feature-settings',
    fontKerning: 'font-kerning',
    fontSize: 'font-size',
    fontSmoothing: '-webkit-font-smoothing',
    fontStretch: 'font-stretch',
    fontStyle: 'font-style',
    fontVariant: 'font-variant',
    fontWeight: 'font-weight',
    letterSpacing: 'letter-spacing',
    lineHeight: 'line-height',
    padding: 'padding',
    textAlign: 'text-align',
    textDecoration: 'text-decoration',
    textRendering: 'text-rendering',
    textShadow: 'text-shadow',
    textTransform: 'text-transform',
  };

  /** A CSS value safe to place in a declaration (nothing that ends it or a rule). */
  function cssValue(value) {
    return String(value).replace(/[{}<>;\\]/g, '').trim();
  }

  const GENERIC_FONTS = ['serif', 'sans-serif', 'monospace', 'cursive', 'fantasy', 'system-ui', 'inherit', 'initial', 'unset'];

  function declarations(style) {
    const out = [];
    for (const [key, property] of Object.entries(STYLE_PROPERTIES)) {
      const value = style && style[key];
      if (value === undefined || value === null || value === '' || isPlainObject(value)) continue;
      let css = cssValue(value);
      // A named font without a fallback falls back to a sans-serif (the catalogue may be unreachable).
      if (key === 'fontFamily' && !/[,]/.test(css) && !GENERIC_FONTS.includes(css.toLowerCase())) {
        css = `${/["']/.test(css) || !/\s/.test(css) ? css : `"${css}"`}, sans-serif`;
      }
      out.push(`${property}: ${css}`);
    }
    return out.join('; ');
  }

  /** The field's stylesheet: `selector` styled, its invalid state, its placeholder colour. */
  function stylesheet(style, selector) {
    const rules = [`${selector} { ${declarations(style)} }`];
    if (isPlainObject(style.invalid)) rules.push(`${selector}.invalid { ${declarations(style.invalid)} }`);
    if (isPlainObject(style.placeholder)) {
      const p = style.placeholder;
      const decl = [];
      if (p.color) decl.push(`color: ${cssValue(p.color)}`);
      if (p.fontWeight) decl.push(`font-weight: ${cssValue(p.fontWeight)}`);
      if (decl.length) rules.push(`${selector}::placeholder { ${decl.join('; ')} }`);
    }
    return rules.join('\n');
  }

  const SYSTEM_FONTS = ['helvetica', 'arial', 'sans-serif', 'serif', 'monospace', 'inherit', 'system-ui', 'times new roman', 'courier new', 'georgia', 'verdana'];

  /** The families of a CSS font stack, unquoted, in order (`'"Open Sans", Arial'` → two). */
  function fontFamilies(stack) {
    return String(stack == null ? '' : stack)
      .split(',')
      .map((f) => f.replace(/["']/g, '').trim())
      .filter(Boolean);
  }

  /** The family a field loads from the public web-font catalogue: the stack's first, unless a system or generic font. */
  function webFont(stack) {
    const first = fontFamilies(stack)[0];
    if (!first || SYSTEM_FONTS.includes(first.toLowerCase()) || GENERIC_FONTS.includes(first.toLowerCase())) return '';
    return first;
  }

  /**
   * The catalogue's stylesheet for the stack's first family, or '' for system fonts. `display=swap`:
   * text shows at once in the next font of the stack while the web font loads.
   */
  function fontUrl(stack) {
    const family = webFont(stack);
    if (!family) return '';
    return 'https://fonts.googleapis.com/css?family=' + encodeURIComponent(family).replace(/%20/g, '+') + '&display=swap';
  }

  /** The stack without its first family (the fallback when the catalogue does not answer in time); `sans-serif` when nothing is left. */
  function fontFallback(stack) {
    const rest = fontFamilies(stack).slice(1);
    return rest.length ? rest.map((f) => (/\s/.test(f) && !GENERIC_FONTS.includes(f.toLowerCase()) ? `"${f}"` : f)).join(', ') : 'sans-serif';
  }

  /** How long a field waits for a web font before it falls back to the next font of the stack. */
  const FONT_TIMEOUT = 3000;

  /**
   * Whether a part of an individual expiry is complete, so the field moves on (month → year →
   * cvv): a month of two digits, or one digit 2–9; a year of four digits, or two that cannot
   * begin a four-digit year (anything but `20`).
   */
  function partComplete(name, value) {
    const v = String(value == null ? '' : value).trim();
    if (name === 'month') return /^(0[1-9]|1[0-2]|[2-9])$/.test(v);
    if (name === 'year') return /^\d{4}$/.test(v) || (/^\d{2}$/.test(v) && v !== '20');
    return false;
  }

  /**
   * A bus message as `{event, body, groupId}`, from the object form or the JSON-string form
   * (`{service_event, service_message}`, or `{recurly_event, recurly_message}` from pages running
   * the original library); `null` when it is neither. A string message has no group.
   */
  function readMessage(data) {
    if (typeof data === 'string') {
      let parsed;
      try {
        parsed = JSON.parse(data);
      } catch (_) {
        return null;
      }
      if (!isPlainObject(parsed)) return null;
      const event = parsed.service_event !== undefined ? parsed.service_event : parsed.recurly_event;
      const body = parsed.service_event !== undefined ? parsed.service_message : parsed.recurly_message;
      if (typeof event !== 'string' || !event) return null;
      return { event, body: isPlainObject(body) ? body : {}, groupId: undefined, string: true };
    }
    if (!isPlainObject(data) || typeof data.event !== 'string' || !data.event) return null;
    return { event: data.event, body: isPlainObject(data.body) ? data.body : {}, groupId: data.groupId, string: false };
  }

  const HELP = 'https://docs.rebill.dev/js#';

  /** Messages of the client error directory. */
  const ERRORS = {
    'not-configured': 'Not configured. You must first call service.configure().',
    'config-missing-public-key': 'The publicKey setting is required.',
    'config-missing-fields': 'The fields setting is required.',
    'missing-hosted-field-target': 'Hosted field target not found.',
    'invalid-options': 'Options must be an object.',
    'invalid-option': 'An option has an invalid value.',
    'missing-callback': 'Missing callback.',
    validation: 'There was an error validating your request.',
    'api-error': 'There was an error with your request.',
    'api-timeout': 'The API request timed out.',
    'hosted-fields-timeout': 'The hosted fields did not load in time.',
  };

  /** A plain error object `{name, code, message, fields?, details?, …}`; `context` overrides. */
  function errorObject(code, context) {
    const out = { name: code, code, message: ERRORS[code] || code };
    if (code === 'not-configured' || code === 'config-missing-public-key') {
      out.help = HELP + code;
      out.message += ' (' + out.help + ')';
    }
    return Object.assign(out, context || {});
  }

  /** Form parameters `application/x-www-form-urlencoded`, nested objects as `a[b]=…`. */
  function encodeParams(params, prefix) {
    const parts = [];
    for (const [key, value] of Object.entries(params)) {
      if (value === undefined || value === null) continue;
      const name = prefix ? `${prefix}[${key}]` : key;
      if (typeof value === 'object') parts.push(encodeParams(value, name));
      else parts.push(encodeURIComponent(name) + '=' + encodeURIComponent(String(value)));
    }
    return parts.filter(Boolean).join('&');
  }

  /** A token endpoint answer: `{err}` (a plain error object) or `{token}`. */
  function parseAnswer(text) {
    let body;
    try {
      body = typeof text === 'string' ? JSON.parse(text) : text;
    } catch (_) {
      return { err: errorObject('api-error', { message: 'There was a problem parsing the API response with: ' + String(text).slice(0, 200) }) };
    }
    if (body && body.error) {
      const e = body.error;
      return { err: errorObject('api-error', { code: e.code || 'api-error', message: e.message || ERRORS['api-error'], fields: e.fields, details: e.details }) };
    }
    return { token: body };
  }

  return {
    VERSION,
    BRANDS,
    CARD_TYPES,
    COMMON_STYLE,
    CARD_STYLE,
    cleanNumber,
    luhn,
    cardType,
    validate: { cardNumber, expiry, cvv, cardType },
    numberReason,
    numberState,
    numberComplete,
    formatNumber,
    formatExpiry,
    parseExpiry,
    validateCard,
    validateBank,
    merge,
    normalizeConfig,
    fieldConfig,
    fieldStyle,
    declarations,
    stylesheet,
    fontFamilies,
    webFont,
    fontUrl,
    fontFallback,
    FONT_TIMEOUT,
    partComplete,
    readMessage,
    errorObject,
    encodeParams,
    parseAnswer,
  };
})();

if (typeof module === 'object' && module && module.exports) module.exports = core;
