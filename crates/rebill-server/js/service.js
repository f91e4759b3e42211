// The client-side library (`service` global): hosted card fields in iframes served by rebill,
// card tokens requested by the fields themselves, bank-account tokens from the page.
//
// Invariants:
// - Card data (number, expiry, cvv) lives only in the field iframes (rebill's origin). The page
//   sends `token:init` with the form's other inputs; the broker field answers `token:done:<id>`
//   with the token id or an error. The page never reads a card value.
// - The bus pins origins: messages are posted to the frames with rebill's origin as target,
//   and accepted only from rebill's origin, from one of this instance's frames, with this
//   instance's `groupId`.

const script = typeof document !== 'undefined' ? document.currentScript : null;

/** rebill's `/js/v1` beside the `/js/v4/service.js` this script was loaded from. */
function defaultApi() {
  if (!script || !script.src) return '';
  const url = new URL(script.src, location.href);
  return url.origin + url.pathname.replace(/\/v4\/[^/]*$/, '/v1');
}

class ServiceError extends Error {
  constructor(code, context) {
    const plain = core.errorObject(code, context);
    super(plain.message);
    Object.assign(this, plain);
  }
}

const NON_CARD_FIELDS = [
  'first_name', 'last_name', 'address1', 'address2', 'company', 'country', 'city', 'state', 'postal_code', 'zip',
  'phone', 'vat_number', 'tax_identifier', 'tax_identifier_type', 'token',
];
const BANK_FIELDS = [
  'routing_number', 'account_number', 'account_number_confirmation', 'account_type', 'name_on_account',
  'address1', 'address2', 'city', 'state', 'postal_code', 'country', 'phone', 'vat_number', 'company',
];

function uid() {
  const bytes = crypto.getRandomValues(new Uint8Array(9));
  return Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join('');
}

/** The `[data-service=…]` values of a form (or the whitelisted keys of a plain object). */
function readInputs(source, names) {
  const out = {};
  if (source && typeof source.querySelectorAll === 'function') {
    for (const el of source.querySelectorAll('[data-service]')) {
      const name = el.getAttribute('data-service');
      if (!names.includes(name) || !('value' in el)) continue;
      if ((el.type === 'radio' || el.type === 'checkbox') && !el.checked) continue;
      out[name] = el.value;
    }
  } else if (source && typeof source === 'object') {
    for (const name of names) if (source[name] !== undefined) out[name] = source[name];
  }
  return out;
}

/** The page's tabbable elements in tab order (positive `tabindex` first, then document order). */
function tabbable(root) {
  const candidates = root.querySelectorAll('a[href], area[href], button, input, select, textarea, iframe, [tabindex], [contenteditable=""], [contenteditable="true"]');
  const items = [...candidates].filter((el) => {
    if (el.tabIndex < 0 || el.disabled || (el.tagName === 'INPUT' && el.type === 'hidden')) return false;
    if (el.closest('[inert]')) return false;
    const style = getComputedStyle(el);
    return style.visibility !== 'hidden' && style.display !== 'none' && el.getClientRects().length > 0;
  });
  const positive = items.filter((el) => el.tabIndex > 0).sort((a, b) => a.tabIndex - b.tabIndex);
  return positive.concat(items.filter((el) => el.tabIndex === 0));
}

let jsonpCounter = 0;

class Service {
  constructor() {
    this.Service = Service;
    this.ServiceError = ServiceError;
    this.version = core.VERSION;
    this.validate = core.validate;
    this.configured = false;
    this.readyState = 0;
    this.config = null;
    this.listeners = {};
    this.fields = {}; // type → {container, iframe, config, ready, state}
    this.pending = {};
    this.groupId = `service-${uid()}`;
    this.onMessage = (event) => this.receive(event);
    this.bankAccount = {
      token: (form, callback) => this.bankToken(form, callback),
      bankInfo: (options, callback) => this.bankInfo(options, callback),
    };
    this.callbacks = {};
  }

  // ---- events ----------------------------------------------------------------------------------

  on(name, fn) {
    (this.listeners[name] = this.listeners[name] || []).push(fn);
    return this;
  }

  off(name, fn) {
    if (!name) this.listeners = {};
    else if (!fn) delete this.listeners[name];
    else this.listeners[name] = (this.listeners[name] || []).filter((f) => f !== fn);
    return this;
  }

  once(name, fn) {
    const wrapped = (...args) => {
      this.off(name, wrapped);
      fn(...args);
    };
    return this.on(name, wrapped);
  }

  emit(name, ...args) {
    for (const fn of (this.listeners[name] || []).slice()) fn(...args);
  }

  /** Calls `fn` once the hosted fields are ready (at once if they are). */
  ready(fn) {
    if (this.readyState > 1) fn();
    else this.once('ready', fn);
  }

  // ---- configure -------------------------------------------------------------------------------

  configure(options) {
    if (options === undefined || options === null || (typeof options !== 'string' && typeof options !== 'object')) {
      throw new ServiceError('config-missing-public-key');
    }
    const config = core.normalizeConfig(options, { api: defaultApi() });
    if (!config.publicKey || typeof config.publicKey !== 'string') throw new ServiceError('config-missing-public-key');
    if (!config.api) throw new ServiceError('invalid-option', { name: 'api', expect: 'the URL of /js/v1' });
    const changedApi = this.config && this.config.api !== config.api;
    if (changedApi) this.destroy();
    this.config = config;
    this.apiOrigin = new URL(config.api, typeof location !== 'undefined' ? location.href : undefined).origin;
    if (!this.configured) window.addEventListener('message', this.onMessage);
    this.configured = true;
    this.injectFields();
    this.emit('configured');
  }

  /** Injects a field per placeholder present; restyles fields already in place. */
  injectFields() {
    const config = this.config;
    for (const type of core.CARD_TYPES) {
      const fieldConfig = core.fieldConfig(config, type);
      const existing = this.fields[type];
      const target = document.querySelector(fieldConfig.selector);
      if (existing && existing.config.selector === fieldConfig.selector && existing.container.isConnected && target && target.contains(existing.container)) {
        existing.config = fieldConfig;
        existing.iframe.tabIndex = Number(fieldConfig.tabIndex) || 0;
        this.sendTo(existing, 'hostedField:configure', { type, config: this.frameConfig(fieldConfig) });
        continue;
      }
      if (existing) this.removeField(type);
      if (target) this.fields[type] = this.injectField(type, target, fieldConfig);
    }
    const types = Object.keys(this.fields);
    if (types.length === 0) return;
    this.readyState = 1;
    clearTimeout(this.readyTimer);
    this.readyTimer = setTimeout(() => {
      if (this.readyState === 1) this.emit('error', new ServiceError('hosted-fields-timeout', { fields: types.filter((t) => !this.fields[t] || !this.fields[t].ready) }));
    }, config.timeout);
  }

  frameConfig(fieldConfig) {
    const c = this.config;
    return Object.assign({}, fieldConfig, {
      busGroupId: this.groupId,
      service: { publicKey: c.publicKey, api: c.api, required: c.required, timeout: c.timeout, cors: c.cors, parentVersion: core.VERSION },
    });
  }

  injectField(type, target, fieldConfig) {
    const container = document.createElement('div');
    container.className = 'service-hosted-field';
    const iframe = document.createElement('iframe');
    iframe.src = `${this.config.api}/field.html#config=${encodeURIComponent(JSON.stringify(this.frameConfig(fieldConfig)))}`;
    iframe.title = type === 'card' ? 'Secure card payment input' : `Secure card ${type === 'cvv' ? 'security code' : type} input`;
    iframe.setAttribute('allowtransparency', 'true');
    iframe.setAttribute('frameborder', '0');
    iframe.setAttribute('scrolling', 'no');
    iframe.setAttribute('name', `service-hosted-field-${type}`);
    iframe.setAttribute('allow', 'payment');
    iframe.tabIndex = Number(fieldConfig.tabIndex) || 0;
    iframe.style.cssText = 'background: transparent; width: 100%; height: 100%; border: 0; display: block;';
    container.append(iframe);
    target.replaceChildren(container);
    const field = { type, target, container, iframe, config: fieldConfig, ready: false, state: { valid: false, empty: true, focus: false } };
    // A click on the container or on a label naming the placeholder focuses the field.
    field.focus = () => this.sendTo(field, `hostedField:${type}:focus!`, {});
    container.addEventListener('click', (e) => {
      if (e.target === container) field.focus();
    });
    field.labelClick = (e) => {
      const label = e.target.closest && e.target.closest('label');
      if (label && target.id && label.htmlFor === target.id) field.focus();
    };
    document.addEventListener('click', field.labelClick);
    return field;
  }

  removeField(type) {
    const field = this.fields[type];
    if (!field) return;
    document.removeEventListener('click', field.labelClick);
    field.container.remove();
    delete this.fields[type];
  }

  /** Tears down the fields, the bus listener and the configuration; configure may follow. */
  destroy() {
    this.send('destroy', {});
    for (const type of Object.keys(this.fields)) this.removeField(type);
    window.removeEventListener('message', this.onMessage);
    clearTimeout(this.readyTimer);
    for (const pending of Object.values(this.pending)) clearTimeout(pending.timer);
    this.pending = {};
    this.configured = false;
    this.readyState = 0;
    this.config = null;
    this.groupId = `service-${uid()}`;
    this.emit('destroyed');
  }

  // ---- bus -------------------------------------------------------------------------------------

  sendTo(field, event, body) {
    if (field.iframe.contentWindow) field.iframe.contentWindow.postMessage({ event, body, groupId: this.groupId }, this.apiOrigin);
  }

  send(event, body) {
    for (const field of Object.values(this.fields)) this.sendTo(field, event, body);
  }

  receive(event) {
    if (event.origin !== this.apiOrigin) return;
    // The object form with this instance's group, or the JSON-string form (`service_event`,
    // `service_message`), which has no group; either only from one of this instance's frames.
    const message = core.readMessage(event.data);
    if (!message || (!message.string && message.groupId !== this.groupId)) return;
    const field = Object.values(this.fields).find((f) => f.iframe.contentWindow === event.source);
    if (!field) return;
    const body = message.body;
    const name = message.event;
    if (name === 'hostedField:ready') {
      field.ready = true;
      field.container.classList.add(`service-hosted-field-${field.type}`);
      if (this.readyState === 1 && Object.values(this.fields).every((f) => f.ready)) {
        this.readyState = 2;
        clearTimeout(this.readyTimer);
        this.send('hostedFields:ready', {});
        this.emit('ready');
      }
    } else if (name === 'hostedField:state:change') {
      field.state = Object.assign({}, body);
      delete field.state.type;
      this.updateClasses(field);
      const fields = this.state();
      // Like the original library, the fields get the state by type.
      this.send('hostedFields:state:change', fields);
      this.emit('change', { fields });
    } else if (name === 'hostedField:tab:next' || name === 'hostedField:tab:previous') {
      this.tab(field, name.endsWith(':next') ? 1 : -1);
    } else if (name === 'hostedField:submit') {
      this.emit('field:submit', { type: field.type });
    } else if (name === 'hostedField:focus' || name === 'hostedField:blur') {
      this.emit(name === 'hostedField:focus' ? 'focus' : 'blur', { type: field.type });
    } else if (name.startsWith('token:done:')) {
      const pending = this.pending[name.slice('token:done:'.length)];
      if (pending && field === this.broker()) pending.finish(body.err || null, body.token || null);
    }
  }

  /**
   * Tab or Shift-Tab leaving a field's frame: focus moves to the next (or previous) tabbable
   * element of the page in tab order; a field's frame is entered through its `focus!` message.
   */
  tab(field, step) {
    const items = tabbable(document);
    const at = items.indexOf(field.iframe);
    const next = at < 0 ? null : items[at + step];
    if (!next) return;
    const target = Object.values(this.fields).find((f) => f.iframe === next);
    next.focus();
    if (target) target.focus();
  }

  /** The field state by type (what `change` carries). */
  state() {
    const out = {};
    for (const [type, field] of Object.entries(this.fields)) out[type] = Object.assign({}, field.state);
    return out;
  }

  updateClasses(field) {
    const s = field.state;
    const t = field.type;
    const list = field.container.classList;
    const invalid = !s.valid && !s.focus && !s.empty;
    list.toggle('service-hosted-field-focus', !!s.focus);
    list.toggle(`service-hosted-field-${t}-focus`, !!s.focus);
    list.toggle('service-hosted-field-valid', !!s.valid);
    list.toggle(`service-hosted-field-${t}-valid`, !!s.valid);
    list.toggle('service-hosted-field-invalid', invalid);
    list.toggle(`service-hosted-field-${t}-invalid`, invalid);
    list.toggle('service-hosted-field-empty', !!s.empty);
    field.iframe.setAttribute('aria-invalid', invalid ? 'true' : 'false');
  }

  /** The field that requests card tokens: `card`, else `number`. */
  broker() {
    return this.fields.card || this.fields.number || null;
  }

  // ---- card tokens -----------------------------------------------------------------------------

  token(form, callback) {
    if (!this.configured) throw new ServiceError('not-configured');
    if (typeof callback !== 'function') throw new ServiceError('missing-callback');
    const missing = this.missingTarget();
    if (missing) throw new ServiceError('missing-hosted-field-target', missing);
    const inputs = readInputs(form, NON_CARD_FIELDS);
    delete inputs.token;
    if (typeof navigator !== 'undefined') {
      inputs.browser = {
        color_depth: screen.colorDepth,
        java_enabled: false,
        language: navigator.language,
        referrer_url: location.href,
        screen_height: screen.height,
        screen_width: screen.width,
        time_zone_offset: new Date().getTimezoneOffset(),
        user_agent: navigator.userAgent,
      };
    }
    const id = uid();
    const finish = (err, token) => {
      const pending = this.pending[id];
      if (!pending) return;
      clearTimeout(pending.timer);
      delete this.pending[id];
      if (err) return callback(err instanceof ServiceError ? err : new ServiceError(err.code || 'api-error', err));
      const result = { id: token.id, type: token.type };
      const receiver = form && typeof form.querySelector === 'function' ? form.querySelector('[data-service=token]') : null;
      if (receiver) receiver.value = result.id;
      callback(null, result);
    };
    this.pending[id] = { finish, timer: setTimeout(() => finish(new ServiceError('api-timeout')), this.config.timeout) };
    this.sendTo(this.broker(), 'token:init', { id, inputs });
  }

  /** The `missing-hosted-field-target` context, or null when the card can be read. */
  missingTarget() {
    if (this.fields.card) return null;
    for (const type of ['number', 'month', 'year']) {
      if (!this.fields[type]) {
        const selector = core.fieldConfig(this.config, type).selector;
        return { type, selector, message: `Hosted field target not found: ${type} (${selector}).` };
      }
    }
    return null;
  }

  // ---- bank accounts (no iframe) ---------------------------------------------------------------

  bankToken(source, callback) {
    if (!this.configured) throw new ServiceError('not-configured');
    if (typeof callback !== 'function') throw new ServiceError('missing-callback');
    const inputs = readInputs(source, BANK_FIELDS);
    for (const [k, v] of Object.entries(inputs)) if (typeof v === 'string') inputs[k] = v.trim();
    const invalid = core.validateBank(inputs);
    if (invalid) return void setTimeout(() => callback(new ServiceError('validation', invalid)), 0);
    this.request('POST', 'tokens', inputs, (err, body) => {
      if (err) return callback(err);
      const receiver = source && typeof source.querySelector === 'function' ? source.querySelector('[data-service=token]') : null;
      if (receiver) receiver.value = body.id;
      callback(null, { id: body.id, type: body.type });
    });
  }

  bankInfo(options, callback) {
    if (!this.configured) throw new ServiceError('not-configured');
    if (typeof callback !== 'function') throw new ServiceError('missing-callback');
    const routing = options && (options.routingNumber || options.routing_number);
    if (!routing) return void setTimeout(() => callback(new ServiceError('validation', { fields: ['routing_number'], details: [{ field: 'routing_number', messages: ["can't be blank"] }] })), 0);
    this.request('GET', 'bank', { routing_number: routing }, callback);
  }

  /** A call to `{api}/<route>` over CORS, or JSONP when `cors: false`; same timeout either way. */
  request(method, route, params, callback) {
    const all = Object.assign({}, params, { key: this.config.publicKey, version: core.VERSION, instanceId: this.groupId });
    const url = `${this.config.api}/${route}`;
    let done = false;
    const finish = (text) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      if (text instanceof ServiceError) return callback(text);
      const answer = core.parseAnswer(text);
      if (answer.err) callback(new ServiceError(answer.err.code, answer.err));
      else callback(null, answer.token);
    };
    const timer = setTimeout(() => finish(new ServiceError('api-timeout')), this.config.timeout);
    if (this.config.cors) {
      const xhr = new XMLHttpRequest();
      const query = core.encodeParams(all);
      xhr.open(method, method === 'GET' ? `${url}?${query}` : url);
      if (method !== 'GET') xhr.setRequestHeader('Content-Type', 'application/x-www-form-urlencoded');
      xhr.onload = () => finish(xhr.responseText);
      xhr.onerror = () => finish(new ServiceError('api-error'));
      xhr.send(method === 'GET' ? null : query);
      return;
    }
    const name = `__serviceJsonp${Date.now().toString(36)}${jsonpCounter++}`;
    const tag = document.createElement('script');
    window[name] = (body) => finish(body);
    const cleanup = () => {
      delete window[name];
      tag.remove();
    };
    const callbackParams = Object.assign({}, all, method === 'GET' ? {} : { _method: 'post' }, { callback: name });
    tag.src = `${url}?${core.encodeParams(callbackParams)}`;
    tag.onerror = () => finish(new ServiceError('api-error'));
    tag.onload = () => setTimeout(cleanup, 0);
    const original = callback;
    callback = (...args) => {
      cleanup();
      original(...args);
    };
    document.head.append(tag);
  }
}

if (typeof window !== 'undefined') {
  const service = new Service();
  window.service = service;
  window.ServiceError = ServiceError;
}
