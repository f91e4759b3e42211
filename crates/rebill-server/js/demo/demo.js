// The demo checkout page: plans from the sandbox site, card or bank account through the
// client-side library, a subscription made by rebill's demo endpoint (which holds the site's
// rights; the page only ever has the public key and a token id).
'use strict';
(function () {
  const publicKey = document.querySelector('meta[name=service-public-key]').content;
  const form = document.getElementById('checkout');
  const button = document.getElementById('subscribe');
  const errors = document.getElementById('errors');
  const result = document.getElementById('result');
  let method = 'card';
  let selected = null;

  service.configure({
    publicKey,
    fields: { card: { style: { fontFamily: 'Helvetica', fontSize: '15px', fontColor: '#1f2330', placeholder: { color: '#9a9ca5' } } } },
  });
  service.on('ready', () => updateButton());

  const text = (node, name) => {
    const el = node.getElementsByTagName(name)[0];
    return el ? el.textContent : '';
  };
  const money = (cents, currency) =>
    new Intl.NumberFormat('en-US', { style: 'currency', currency: currency || 'USD' }).format(Number(cents || 0) / 100);
  const el = (tag, props, ...children) => {
    const node = document.createElement(tag);
    Object.assign(node, props || {});
    for (const child of children) node.append(child);
    return node;
  };

  function updateButton() {
    button.disabled = !selected || (method === 'card' && service.readyState < 2);
  }

  async function loadPlans() {
    const box = document.getElementById('plans');
    const response = await fetch('demo/plans');
    const xml = new DOMParser().parseFromString(await response.text(), 'application/xml');
    const plans = [...xml.getElementsByTagName('plan')].filter((p) => p.parentNode.nodeName === 'plans');
    box.replaceChildren();
    if (plans.length === 0) {
      box.append(el('p', { className: 'muted', textContent: 'This sandbox site has no plans yet: create one with POST /v2/plans.' }));
      return;
    }
    for (const plan of plans) {
      const amounts = plan.getElementsByTagName('unit_amount_in_cents')[0];
      const first = amounts && [...amounts.children][0];
      const currency = first ? first.nodeName : 'USD';
      const length = text(plan, 'plan_interval_length') || '1';
      const unit = text(plan, 'plan_interval_unit') || 'months';
      const radio = el('input', { type: 'radio', name: 'plan', value: text(plan, 'plan_code') });
      const label = el(
        'label',
        { className: 'plan' },
        radio,
        el('span', {}, el('div', { className: 'name', textContent: text(plan, 'name') }), el('div', { className: 'per', textContent: text(plan, 'plan_code') })),
        el('span', { className: 'price' }, money(first ? first.textContent : 0, currency), el('span', { className: 'per', textContent: ` / ${length === '1' ? unit.replace(/s$/, '') : `${length} ${unit}`}` })),
      );
      radio.addEventListener('change', () => {
        selected = { code: radio.value, currency };
        for (const p of box.querySelectorAll('.plan')) p.classList.toggle('selected', p === label);
        updateButton();
      });
      box.append(label);
    }
    box.querySelector('input').click();
  }

  for (const tab of document.querySelectorAll('.tab')) {
    tab.addEventListener('click', () => {
      method = tab.dataset.method;
      for (const t of document.querySelectorAll('.tab')) {
        t.classList.toggle('active', t === tab);
        t.setAttribute('aria-selected', String(t === tab));
      }
      document.getElementById('method-card').hidden = method !== 'card';
      document.getElementById('method-bank').hidden = method !== 'bank';
      updateButton();
    });
  }

  function showErrors(lines) {
    errors.replaceChildren(...lines.map((line) => el('div', { textContent: line })));
    errors.hidden = lines.length === 0;
  }

  function describe(err) {
    if (err.details && err.details.length) return err.details.map((d) => `${d.field.replace(/_/g, ' ')} ${d.messages.join(', ')}`);
    return [err.message || err.code];
  }

  form.addEventListener('submit', (event) => {
    event.preventDefault();
    showErrors([]);
    button.disabled = true;
    button.textContent = 'Processing…';
    const done = (err, token) => {
      if (err) {
        showErrors(describe(err));
        reset();
        return;
      }
      subscribe(token.id).finally(reset);
    };
    try {
      if (method === 'card') service.token(form, done);
      else {
        form.querySelector('[data-service=name_on_account]').value ||= `${form.first_name.value} ${form.last_name.value}`.trim();
        service.bankAccount.token(form, done);
      }
    } catch (e) {
      showErrors([e.message]);
      reset();
    }
  });

  function reset() {
    button.textContent = 'Subscribe';
    updateButton();
  }

  async function subscribe(tokenId) {
    const body = new URLSearchParams({
      plan_code: selected.code,
      currency: selected.currency,
      token_id: tokenId,
      first_name: form.first_name.value,
      last_name: form.last_name.value,
      email: form.email.value,
    });
    const response = await fetch('demo/subscribe', { method: 'POST', body });
    const answer = await response.json();
    const parser = new DOMParser();
    const subscription = parser.parseFromString(answer.subscription, 'application/xml');
    if (answer.status !== 201) {
      const messages = [...subscription.getElementsByTagName('error')].map((e) => e.textContent.trim()).filter(Boolean);
      const customer = text(subscription, 'customer_message');
      showErrors(customer ? [customer] : messages.length ? messages : [`The subscription was refused (${answer.status}).`]);
      return;
    }
    const invoices = parser.parseFromString(answer.invoices || '<invoices/>', 'application/xml');
    const invoice = invoices.getElementsByTagName('invoice')[0];
    const currency = text(subscription, 'currency');
    result.replaceChildren(
      el('h2', { textContent: '✓ You are subscribed' }),
      el(
        'div',
        { className: 'cols' },
        el(
          'dl',
          {},
          el('dt', { textContent: 'Plan' }), el('dd', { textContent: text(subscription.getElementsByTagName('plan')[0] || subscription, 'name') }),
          el('dt', { textContent: 'State' }), el('dd', { textContent: text(subscription, 'state'), id: 'subscription-state' }),
          el('dt', { textContent: 'Price' }), el('dd', { textContent: money(text(subscription, 'unit_amount_in_cents'), currency) }),
          el('dt', { textContent: 'Renews' }), el('dd', { textContent: (text(subscription, 'current_period_ends_at') || '').slice(0, 10) }),
          el('dt', { textContent: 'Subscription' }), el('dd', {}, el('code', { textContent: text(subscription, 'uuid') })),
        ),
        invoice
          ? el(
              'dl',
              {},
              el('dt', { textContent: 'Invoice' }), el('dd', { textContent: `#${text(invoice, 'invoice_number')}`, id: 'invoice-number' }),
              el('dt', { textContent: 'Invoice state' }), el('dd', { textContent: text(invoice, 'state') }),
              el('dt', { textContent: 'Total' }), el('dd', { textContent: money(text(invoice, 'total_in_cents'), text(invoice, 'currency')) }),
              el('dt', { textContent: 'Paid with' }), el('dd', { textContent: method === 'card' ? 'card' : 'bank account' }),
            )
          : el('p', { className: 'muted', textContent: 'No invoice yet (a trial?).' }),
      ),
    );
    result.hidden = false;
    document.getElementById('pay-panel').hidden = true;
    document.querySelector('.plans-panel').hidden = true;
    result.scrollIntoView({ block: 'start' });
  }

  loadPlans().catch((e) => showErrors([`The plans could not be loaded: ${e.message}`]));
})();
