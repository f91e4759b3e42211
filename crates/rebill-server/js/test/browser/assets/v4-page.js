// A stand-in for the page side of the original v4 library, written for the drop-in tests: what a
// merchant page running that library unchanged does on the bus, with `api` pointed at rebill's
// `/js/v1` (token-library reference §9). It is deliberately the original's protocol, not
// rebill's: `data-recurly` placeholders, iframes of `{api}/field.html#config=<JSON>` whose config
// carries the page configuration under `recurly`, messages `{event, body, groupId}` posted to
// the frames with target `*`, every accepted message fanned out to every frame of the group, a
// hidden tabbing proxy before each iframe, `token:init {id, inputs}` with `fraud` and `browser`
// inside `inputs`, and Elements on a bus of their own. Exposed as `window.recurlyV4`.
(function () {
  'use strict';

  function uid() {
    return Array.from(crypto.getRandomValues(new Uint8Array(8)), (b) => b.toString(16).padStart(2, '0')).join('');
  }

  class Emitter {
    constructor() {
      this.handlers = {};
    }
    on(name, fn) {
      (this.handlers[name] = this.handlers[name] || []).push(fn);
      return this;
    }
    once(name, fn) {
      const wrapped = (...args) => {
        this.off(name, wrapped);
        fn(...args);
      };
      return this.on(name, wrapped);
    }
    off(name, fn) {
      if (!name) this.handlers = {};
      else if (!fn) delete this.handlers[name];
      else this.handlers[name] = (this.handlers[name] || []).filter((f) => f !== fn);
      return this;
    }
    emit(name, ...args) {
      for (const fn of (this.handlers[name] || []).slice()) fn(...args);
    }
  }

  /** The original bus: drops other origins and other groups, fans every message out. */
  class Bus {
    constructor(api) {
      this.apiOrigin = new URL(api, location.href).origin;
      this.groupId = uid();
      this.recipients = [];
      this.receive = this.receive.bind(this);
      window.addEventListener('message', this.receive);
    }
    receive(event) {
      if (event.origin !== this.apiOrigin) return;
      let data = event.data;
      if (typeof data === 'string') {
        try {
          const parsed = JSON.parse(data);
          data = { event: parsed.recurly_event, body: parsed.recurly_message };
        } catch (_) {
          return;
        }
      }
      if (!data || !data.event) return;
      if (data.groupId && data.groupId !== this.groupId) return;
      this.send(data.event, data.body);
    }
    add(recipient) {
      if (!this.recipients.includes(recipient)) this.recipients.push(recipient);
    }
    remove(recipient) {
      this.recipients = this.recipients.filter((r) => r !== recipient);
    }
    send(event, body) {
      const message = { event, body: body === undefined ? {} : body, groupId: this.groupId };
      for (const r of this.recipients.slice()) {
        if (r instanceof Emitter) r.emit(event, message.body);
        else r.postMessage(message, '*');
      }
    }
    destroy() {
      this.recipients = [];
      window.removeEventListener('message', this.receive);
    }
  }

  function hiddenInput() {
    const input = document.createElement('input');
    input.type = 'text';
    input.setAttribute('aria-hidden', 'true');
    input.style.cssText = 'position:absolute;width:1px;height:1px;padding:0;border:0;margin:0;opacity:0;pointer-events:none;';
    return input;
  }

  function tabbableItems(exclude) {
    const all = [...document.body.querySelectorAll('a[href], button, input, select, textarea, iframe, [tabindex]')];
    return all.filter((el) => el.tabIndex >= 0 && !el.disabled && el.type !== 'hidden' && el.getClientRects().length > 0 && !exclude.includes(el));
  }

  function moveTab(proxy, direction, exclude) {
    const items = tabbableItems(exclude);
    const pos = items.indexOf(proxy);
    const dest = direction === 'previous' ? items[pos - 1] : items[pos + 1];
    if (pos >= 0 && dest) dest.focus();
  }

  const FIELD_TYPES = ['number', 'month', 'year', 'cvv', 'card'];
  const FIELDS = ['first_name', 'last_name', 'address1', 'address2', 'company', 'country', 'city', 'state', 'postal_code', 'phone', 'vat_number', 'fraud_session_id', 'token'];

  function browserInfo() {
    return {
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

  function readForm(form) {
    const values = {};
    let tokenInput = null;
    for (const el of form.querySelectorAll('[data-recurly]')) {
      const name = el.getAttribute('data-recurly');
      if (!FIELDS.includes(name)) continue;
      values[name] = el.value;
      if (name === 'token') tokenInput = el;
    }
    return { values, tokenInput };
  }

  class Recurly extends Emitter {
    constructor() {
      super();
      this.configured = false;
      this.deviceId = uid();
      this.sessionId = uid();
    }

    configure(options) {
      const fields = {};
      for (const type of ['all', ...FIELD_TYPES]) fields[type] = Object.assign({ selector: `[data-recurly=${type}]` }, (options.fields || {})[type]);
      const next = { publicKey: options.publicKey, api: options.api, required: options.required || [], timeout: options.timeout || 60000, cors: true, fields, parentVersion: '4.43.0', risk: {} };
      if (this.configured && this.hostedFields && JSON.stringify(FIELD_TYPES.map((t) => fields[t].selector)) === JSON.stringify(FIELD_TYPES.map((t) => this.config.fields[t].selector))) {
        this.config = next;
        this.bus.send('hostedFields:configure', { recurlyConfig: this.sanitizedConfig });
        return;
      }
      this.config = next;
      if (!this.bus) {
        this.bus = new Bus(next.api);
        this.bus.add(this);
      }
      this.configured = true;
      this.hostedFields = new HostedFields(this);
      this.hostedFields.on('ready', () => this.emit('ready'));
      this.hostedFields.on('change', (state) => this.emit('change', state));
    }

    get sanitizedConfig() {
      return JSON.parse(JSON.stringify(this.config));
    }

    token(a, b, c) {
      const [elements, form, done] = a instanceof Elements ? [a, b, c] : [null, a, b];
      if (!this.configured) throw new Error('not-configured');
      const { values, tokenInput } = readForm(form);
      const inputs = Object.assign({}, values, { fraud: [], browser: browserInfo() });
      if (!elements && this.hostedFields.errors.length) throw this.hostedFields.errors[0];
      const bus = elements ? elements.bus : this.bus;
      const id = uid();
      this.once(`token:done:${id}`, (msg) => {
        if (msg.err) return done(msg.err);
        if (tokenInput && msg.token && msg.token.id) tokenInput.value = msg.token.id;
        done(null, msg.token);
      });
      bus.send('token:init', { id, inputs });
    }

    Elements() {
      return new Elements(this);
    }

    destroy() {
      if (this.bus) this.bus.send('destroy');
      if (this.hostedFields) this.hostedFields.destroy();
      if (this.bus) this.bus.destroy();
      this.bus = null;
      this.hostedFields = null;
      this.configured = false;
    }
  }

  class HostedFields extends Emitter {
    constructor(recurly) {
      super();
      this.recurly = recurly;
      this.bus = recurly.bus;
      this.fields = [];
      this.errors = [];
      this.state = {};
      this.initQueue = [];
      this.ready = false;
      for (const type of FIELD_TYPES) {
        const target = document.querySelector(recurly.config.fields[type].selector);
        if (!target) {
          if (['number', 'month', 'year', 'card'].includes(type)) this.errors.push(Object.assign(new Error('missing-hosted-field-target'), { name: 'missing-hosted-field-target', type }));
          continue;
        }
        this.fields.push(this.inject(type, target));
        this.initQueue.push(type);
      }
      if (this.errors.some((e) => e.type === 'card') && this.errors.length === 1) this.errors = [];
      else if (!this.errors.some((e) => e.type === 'card')) this.errors = [];
      this.bus.add(this);
      for (const f of this.fields) this.bus.add(f.window);
      this.on('hostedField:ready', (body) => this.onReady(body));
      this.on('hostedField:state:change', (body) => this.update(body));
      this.on('hostedField:focus', (body) => this.focusClass(body.type, true));
      this.on('hostedField:blur', (body) => this.focusClass(body.type, false));
      this.on('hostedField:tab:previous', (body) => this.onTab('previous', body));
      this.on('hostedField:tab:next', (body) => this.onTab('next', body));
      this.on('hostedField:submit', () => recurly.emit('field:submit'));
      this.on('hostedFields:configure', (opts) => {
        for (const f of this.fields) this.bus.send('hostedField:configure', this.fieldConfig(f.type, opts.recurlyConfig));
      });
    }

    fieldConfig(type, recurlyConfig) {
      const config = recurlyConfig || this.recurly.sanitizedConfig;
      const fields = config.fields;
      const field = fields[type];
      return {
        type,
        deviceId: this.recurly.deviceId,
        sessionId: this.recurly.sessionId,
        busGroupId: this.bus.groupId,
        displayIcon: field.displayIcon,
        inputType: field.inputType,
        selector: field.selector,
        format: typeof field.format === 'boolean' ? field.format : fields.all.format,
        recurly: config,
        style: Object.assign({}, fields.all.style, field.style),
        tabIndex: typeof fields.all.tabIndex === 'number' ? fields.all.tabIndex : field.tabIndex,
      };
    }

    inject(type, target) {
      const container = document.createElement('div');
      container.className = 'recurly-hosted-field';
      const proxy = hiddenInput();
      const iframe = document.createElement('iframe');
      iframe.setAttribute('frameborder', '0');
      iframe.setAttribute('allowtransparency', 'true');
      iframe.setAttribute('scrolling', 'no');
      iframe.style.cssText = 'height:100%;width:100%;background:transparent;border:0;';
      iframe.src = `${this.recurly.config.api}/field.html#config=${encodeURIComponent(JSON.stringify(this.fieldConfig(type)))}`;
      container.append(proxy, iframe);
      target.replaceChildren(container);
      const field = { type, target, container, proxy, iframe, window: iframe.contentWindow };
      const focus = () => this.bus.send(`hostedField:${type}:focus!`);
      container.addEventListener('click', focus);
      proxy.addEventListener('focus', focus);
      if (target.id) for (const label of document.querySelectorAll(`label[for=${target.id}]`)) label.addEventListener('click', focus);
      return field;
    }

    onReady(body) {
      this.initQueue = this.initQueue.filter((t) => t !== body.type);
      if (this.initQueue.length === 0 && !this.ready) {
        this.ready = true;
        this.bus.send('hostedFields:ready');
        this.emit('ready');
      }
      this.update(body);
    }

    update(body) {
      const state = Object.assign({}, body);
      delete state.type;
      this.state[body.type] = state;
      const field = this.fields.find((f) => f.type === body.type);
      if (field) field.container.classList.add(`recurly-hosted-field-${body.type}`);
      if (!this.ready) return;
      this.bus.send('hostedFields:state:change', this.state);
      this.emit('change', { fields: this.state });
    }

    focusClass(type, on) {
      const field = this.fields.find((f) => f.type === type);
      if (field) field.container.classList.toggle('recurly-hosted-field-focus', on);
    }

    onTab(direction, body) {
      const field = this.fields.find((f) => f.type === body.type);
      if (field) moveTab(field.proxy, direction, this.fields.map((f) => f.iframe));
    }

    destroy() {
      for (const f of this.fields) f.target.replaceChildren();
      this.fields = [];
      this.off();
    }
  }

  class Elements extends Emitter {
    constructor(recurly) {
      super();
      this.recurly = recurly;
      this.elements = [];
      this.bus = new Bus(recurly.config.api);
      this.bus.add(this);
      this.bus.add(recurly);
      const make = (type) => (options) => new Element(this, type, options || {});
      this.CardElement = make('card');
      this.CardNumberElement = make('number');
      this.CardMonthElement = make('month');
      this.CardYearElement = make('year');
      this.CardCvvElement = make('cvv');
    }
    add(element) {
      this.elements.push(element);
      element.on('attach', () => this.onAttach());
      this.peerAnnounce();
    }
    peerAnnounce() {
      this.bus.send('elements:peer-announce', { ids: this.elements.map((e) => e.id) });
    }
    onAttach() {
      if (this.elements.some((e) => e.attaching)) return;
      this.bus.send('elements:ready!');
      this.peerAnnounce();
    }
  }

  class Element extends Emitter {
    constructor(elements, type, options) {
      super();
      this.elements = elements;
      this.bus = elements.bus;
      this.recurly = elements.recurly;
      this.type = type;
      this.id = uid();
      this.options = options;
      this.state = {};
      this.attaching = false;
      this.bus.add(this);
      elements.add(this);
      this.on(this.name('state:change'), (body) => {
        const state = Object.assign({}, body);
        delete state.type;
        this.state = state;
        this.updateClasses();
        this.emit('change', state);
      });
      this.on(this.name('focus'), () => this.emit('focus'));
      this.on(this.name('blur'), () => this.emit('blur'));
      this.on(this.name('submit'), () => this.emit('submit'));
      this.on(this.name('tab:previous'), () => moveTab(this.proxy, 'previous', this.frames()));
      this.on(this.name('tab:next'), () => moveTab(this.proxy, 'next', this.frames()));
    }
    name(event) {
      return `element:${this.id}:${event}`;
    }
    frames() {
      return this.elements.elements.map((e) => e.iframe).filter(Boolean);
    }
    get config() {
      return Object.assign({}, this.options, {
        busGroupId: this.bus.groupId,
        deviceId: this.recurly.deviceId,
        elementId: this.id,
        recurly: this.recurly.sanitizedConfig,
        sessionId: this.recurly.sessionId,
        type: this.type,
      });
    }
    attach(parent) {
      this.container = document.createElement('div');
      this.container.className = 'recurly-element';
      this.proxy = hiddenInput();
      this.iframe = document.createElement('iframe');
      this.iframe.setAttribute('name', `recurly-element--${this.id}`);
      this.iframe.setAttribute('frameborder', '0');
      this.iframe.style.cssText = 'background:none;width:100%;height:100%;border:0;';
      this.iframe.src = `${this.recurly.config.api}/field.html#config=${encodeURIComponent(JSON.stringify(this.config))}`;
      this.container.append(this.proxy, this.iframe);
      this.container.addEventListener('click', () => this.focus());
      this.proxy.addEventListener('focus', () => this.focus());
      parent.append(this.container);
      this.attaching = true;
      this.bus.add(this.iframe.contentWindow);
      this.once(this.name('ready'), () => {
        this.attaching = false;
        this.container.classList.add(`recurly-element-${this.type}`);
        this.emit('attach', this);
      });
      return this;
    }
    configure(options) {
      this.options = Object.assign({}, this.options, options);
      this.bus.send(this.name('configure!'), this.config);
      return this;
    }
    focus() {
      this.bus.send(this.name('focus!'));
    }
    updateClasses() {
      const s = this.state;
      this.container.classList.toggle('recurly-element-focus', !!s.focus);
      this.container.classList.toggle('recurly-element-valid', !!s.valid);
      this.container.classList.toggle('recurly-element-invalid', !s.valid && !s.focus && !s.empty);
    }
  }

  window.recurlyV4 = new Recurly();
})();
