//! The words of the invoice PDF in each language. A template's `{}` is where its value goes.

use crate::Locale;

/// Every label the page shows.
pub(crate) struct Labels {
    pub invoice: &'static str,
    pub credit_invoice: &'static str,
    pub refund_invoice: &'static str,
    /// `{}`: a charge invoice's number (`#1001`).
    pub credit_for: &'static str,
    /// `{}`: the refunded invoice's number.
    pub refund_for: &'static str,
    pub invoice_date: &'static str,
    pub state: &'static str,
    pub due_date: &'static str,
    pub payment_terms: &'static str,
    /// `{}`: days.
    pub net_terms: &'static str,
    pub po_number: &'static str,
    pub currency: &'static str,
    pub bill_to: &'static str,
    pub date: &'static str,
    pub description: &'static str,
    pub quantity: &'static str,
    pub price: &'static str,
    pub total: &'static str,
    /// `{}`: how many line items are not shown.
    pub more_lines: &'static str,
    pub subtotal: &'static str,
    pub discount: &'static str,
    pub tax: &'static str,
    pub paid: &'static str,
    pub credit_applied: &'static str,
    pub payment_refund: &'static str,
    pub credit_voided: &'static str,
    pub write_off: &'static str,
    pub balance: &'static str,
    pub payments: &'static str,
    pub amount: &'static str,
    /// `{}`: the credit invoice's number.
    pub credit_from: &'static str,
    /// `{}`: the number of the invoice the credit paid.
    pub credit_used: &'static str,
    /// `{}`: a payment method (`Visa`), then its last four digits.
    pub ending_in: &'static str,
    pub card: &'static str,
    pub bank_account: &'static str,
    pub customer_notes: &'static str,
    pub terms_and_conditions: &'static str,
    pub vat_reverse_charge_notes: &'static str,
    /// `{}`: the page, then the count of pages.
    pub page: &'static str,
    /// The states, as [`crate::InvoiceState`] lists them.
    pub states: [&'static str; 8],
}

impl Labels {
    pub(crate) fn of(locale: Locale) -> &'static Labels {
        match locale {
            Locale::EnUs => &EN_US,
            Locale::DeDe => &DE_DE,
            Locale::FrFr => &FR_FR,
            Locale::EsEs => &ES_ES,
        }
    }
}

/// `template` with its `{}` replaced by `values`, in order.
pub(crate) fn fill(template: &str, values: &[&str]) -> String {
    let mut out = String::with_capacity(template.len() + 16);
    let mut values = values.iter();
    let mut rest = template;
    while let Some(at) = rest.find("{}") {
        out.push_str(&rest[..at]);
        out.push_str(values.next().copied().unwrap_or_default());
        rest = &rest[at + 2..];
    }
    out.push_str(rest);
    out
}

static EN_US: Labels = Labels {
    invoice: "Invoice",
    credit_invoice: "Credit Invoice",
    refund_invoice: "Refund Invoice",
    credit_for: "Credit for invoice {}",
    refund_for: "Refund for invoice {}",
    invoice_date: "Invoice date",
    state: "State",
    due_date: "Due date",
    payment_terms: "Payment terms",
    net_terms: "Net {}",
    po_number: "PO number",
    currency: "Currency",
    bill_to: "Bill to",
    date: "Date",
    description: "Description",
    quantity: "Quantity",
    price: "Price",
    total: "Total",
    more_lines: "… and {} more line items (see the invoice online)",
    subtotal: "Subtotal",
    discount: "Discount",
    tax: "Tax",
    paid: "Paid",
    credit_applied: "Credit Applied",
    payment_refund: "Payment Refund",
    credit_voided: "Credit Voided",
    write_off: "Write-Off",
    balance: "Balance",
    payments: "Payments",
    amount: "Amount",
    credit_from: "Credit from invoice {}",
    credit_used: "Credit applied to invoice {}",
    ending_in: "{} ending in {}",
    card: "Card",
    bank_account: "Bank account",
    customer_notes: "Customer notes",
    terms_and_conditions: "Terms and conditions",
    vat_reverse_charge_notes: "VAT reverse charge notes",
    page: "Page {} of {}",
    states: ["Pending", "Processing", "Past due", "Paid", "Failed", "Open", "Closed", "Voided"],
};

static DE_DE: Labels = Labels {
    invoice: "Rechnung",
    credit_invoice: "Gutschrift",
    refund_invoice: "Erstattungsrechnung",
    credit_for: "Gutschrift für Rechnung {}",
    refund_for: "Erstattung für Rechnung {}",
    invoice_date: "Rechnungsdatum",
    state: "Status",
    due_date: "Fälligkeitsdatum",
    payment_terms: "Zahlungsziel",
    net_terms: "{} Tage netto",
    po_number: "Bestellnummer",
    currency: "Währung",
    bill_to: "Rechnungsempfänger",
    date: "Datum",
    description: "Beschreibung",
    quantity: "Menge",
    price: "Preis",
    total: "Gesamt",
    more_lines: "… und {} weitere Positionen (siehe Rechnung online)",
    subtotal: "Zwischensumme",
    discount: "Rabatt",
    tax: "Steuer",
    paid: "Bezahlt",
    credit_applied: "Angerechnetes Guthaben",
    payment_refund: "Zahlungserstattung",
    credit_voided: "Storniertes Guthaben",
    write_off: "Abschreibung",
    balance: "Saldo",
    payments: "Zahlungen",
    amount: "Betrag",
    credit_from: "Guthaben aus Rechnung {}",
    credit_used: "Guthaben angerechnet auf Rechnung {}",
    ending_in: "{} mit Endziffern {}",
    card: "Karte",
    bank_account: "Bankkonto",
    customer_notes: "Hinweise für den Kunden",
    terms_and_conditions: "Geschäftsbedingungen",
    vat_reverse_charge_notes: "Hinweise zur Umkehr der Steuerschuld",
    page: "Seite {} von {}",
    states: [
        "Ausstehend",
        "In Bearbeitung",
        "Überfällig",
        "Bezahlt",
        "Fehlgeschlagen",
        "Offen",
        "Geschlossen",
        "Storniert",
    ],
};

static FR_FR: Labels = Labels {
    invoice: "Facture",
    credit_invoice: "Avoir",
    refund_invoice: "Facture de remboursement",
    credit_for: "Avoir sur la facture {}",
    refund_for: "Remboursement de la facture {}",
    invoice_date: "Date de facture",
    state: "Statut",
    due_date: "Date d'échéance",
    payment_terms: "Conditions de paiement",
    net_terms: "Net à {} jours",
    po_number: "Bon de commande",
    currency: "Devise",
    bill_to: "Facturer à",
    date: "Date",
    description: "Description",
    quantity: "Quantité",
    price: "Prix",
    total: "Total",
    more_lines: "… et {} lignes de plus (voir la facture en ligne)",
    subtotal: "Sous-total",
    discount: "Remise",
    tax: "Taxe",
    paid: "Payé",
    credit_applied: "Crédit appliqué",
    payment_refund: "Remboursement",
    credit_voided: "Crédit annulé",
    write_off: "Passage en perte",
    balance: "Solde",
    payments: "Paiements",
    amount: "Montant",
    credit_from: "Crédit de la facture {}",
    credit_used: "Crédit appliqué à la facture {}",
    ending_in: "{} se terminant par {}",
    card: "Carte",
    bank_account: "Compte bancaire",
    customer_notes: "Notes pour le client",
    terms_and_conditions: "Conditions générales",
    vat_reverse_charge_notes: "Autoliquidation de la TVA",
    page: "Page {} sur {}",
    states: ["En attente", "En cours", "En retard", "Payée", "Échouée", "Ouverte", "Clôturée", "Annulée"],
};

static ES_ES: Labels = Labels {
    invoice: "Factura",
    credit_invoice: "Factura de abono",
    refund_invoice: "Factura de reembolso",
    credit_for: "Abono de la factura {}",
    refund_for: "Reembolso de la factura {}",
    invoice_date: "Fecha de factura",
    state: "Estado",
    due_date: "Fecha de vencimiento",
    payment_terms: "Condiciones de pago",
    net_terms: "Neto a {} días",
    po_number: "Número de pedido",
    currency: "Moneda",
    bill_to: "Facturar a",
    date: "Fecha",
    description: "Descripción",
    quantity: "Cantidad",
    price: "Precio",
    total: "Total",
    more_lines: "… y {} líneas más (consulte la factura en línea)",
    subtotal: "Subtotal",
    discount: "Descuento",
    tax: "Impuesto",
    paid: "Pagado",
    credit_applied: "Crédito aplicado",
    payment_refund: "Reembolso del pago",
    credit_voided: "Crédito anulado",
    write_off: "Cancelación de deuda",
    balance: "Saldo",
    payments: "Pagos",
    amount: "Importe",
    credit_from: "Crédito de la factura {}",
    credit_used: "Crédito aplicado a la factura {}",
    ending_in: "{} terminada en {}",
    card: "Tarjeta",
    bank_account: "Cuenta bancaria",
    customer_notes: "Notas para el cliente",
    terms_and_conditions: "Términos y condiciones",
    vat_reverse_charge_notes: "Inversión del sujeto pasivo del IVA",
    page: "Página {} de {}",
    states: ["Pendiente", "En proceso", "Vencida", "Pagada", "Fallida", "Abierta", "Cerrada", "Anulada"],
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn templates_take_their_values_in_order() {
        assert_eq!(fill("Page {} of {}", &["2", "3"]), "Page 2 of 3");
        assert_eq!(fill("{} Tage netto", &["30"]), "30 Tage netto");
        assert_eq!(fill("no value", &["x"]), "no value");
        assert_eq!(fill("{} and {}", &["one"]), "one and ");
    }

    #[test]
    fn every_language_fills_every_label_and_keeps_the_placeholders() {
        let placeholders = |l: &Labels| {
            [l.credit_for, l.refund_for, l.net_terms, l.more_lines, l.credit_from, l.credit_used, l.ending_in, l.page]
                .map(|t| t.matches("{}").count())
        };
        let english = placeholders(&EN_US);
        for locale in Locale::ALL {
            let labels = Labels::of(locale);
            assert_eq!(placeholders(labels), english, "{locale:?}");
            let all = [
                labels.invoice,
                labels.credit_invoice,
                labels.refund_invoice,
                labels.invoice_date,
                labels.state,
                labels.due_date,
                labels.payment_terms,
                labels.po_number,
                labels.currency,
                labels.bill_to,
                labels.date,
                labels.description,
                labels.quantity,
                labels.price,
                labels.total,
                labels.subtotal,
                labels.discount,
                labels.tax,
                labels.paid,
                labels.credit_applied,
                labels.payment_refund,
                labels.credit_voided,
                labels.write_off,
                labels.balance,
                labels.payments,
                labels.amount,
                labels.card,
                labels.bank_account,
                labels.customer_notes,
                labels.terms_and_conditions,
                labels.vat_reverse_charge_notes,
            ];
            for label in all.iter().chain(labels.states.iter()) {
                assert!(!label.trim().is_empty(), "{locale:?}: an empty label");
                assert!(
                    crate::text::encode(label).iter().all(|b| *b != b'?'),
                    "{locale:?}: {label:?} has a character the base fonts cannot show"
                );
            }
        }
    }
}
