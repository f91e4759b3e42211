//! What a gateway call records: the account as a transaction keeps it ([`snapshot`]), a
//! gateway's answer as a stored result ([`result_of`]) and the event of that result
//! ([`transaction_event`]). Every path that calls a gateway (collection, verification, refunds,
//! offline payments) records through these, so a transaction reads the same whoever made it.

use rebill_billing::gateway::Outcome;
use rebill_billing::states::TransactionStatus;
use rebill_store::accounts::Account;
use rebill_store::events::NewEvent;
use rebill_store::invoices::{AccountSnapshot, Check, Transaction, TransactionFailure, TransactionResult};
use serde_json::json;

use crate::Services;
use crate::platform::events;

/// The account as a transaction records it.
pub fn snapshot(account: &Account) -> AccountSnapshot {
    let f = &account.fields;
    AccountSnapshot {
        account_code: account.account_code.clone(),
        first_name: f.first_name.clone(),
        last_name: f.last_name.clone(),
        company: f.company_name.clone(),
        email: f.email.clone(),
    }
}

/// The stored result of a gateway outcome. An unknown outcome ([`Outcome::Pending`]) is still
/// `processing`: nothing of it is recorded as an answer, and callers leave such a transaction
/// as it is ([`is_settled`]) for the gateway's own record to settle later.
pub fn result_of(outcome: &Outcome, at: i64) -> TransactionResult {
    let check = |c: &Option<rebill_billing::gateway::CheckResult>| {
        c.as_ref().map(|c| Check { code: c.code.clone(), message: c.message.clone() })
    };
    match outcome {
        Outcome::Approved(a) => TransactionResult {
            status: TransactionStatus::Success,
            reference: Some(a.reference.clone()),
            approval_code: Some(a.reference.chars().rev().take(6).collect::<String>().to_ascii_uppercase()),
            message: Some("Successful test transaction".to_owned()),
            fraud_review: a.fraud_review(),
            failure: None,
            cvv: check(&a.cvv_result),
            avs: check(&a.avs_result),
            collected_at: Some(at),
        },
        Outcome::Declined(d) => {
            let row = d.error();
            TransactionResult {
                status: TransactionStatus::Declined,
                reference: d.reference.clone(),
                approval_code: None,
                message: Some(row.customer_message.clone()),
                fraud_review: false,
                failure: Some(TransactionFailure {
                    error_code: row.code.clone(),
                    error_category: row.category.clone(),
                    merchant_message: row.merchant_message.clone(),
                    customer_message: row.customer_message.clone(),
                    gateway_error_code: d.gateway_error_code.clone(),
                }),
                cvv: check(&d.cvv_result),
                avs: check(&d.avs_result),
                collected_at: None,
            }
        }
        Outcome::Pending(p) => TransactionResult {
            status: TransactionStatus::Processing,
            reference: p.reference.clone(),
            approval_code: None,
            message: None,
            fraud_review: false,
            failure: None,
            cvv: None,
            avs: None,
            collected_at: None,
        },
    }
}

/// Whether a result is a definite answer to record (not an unknown outcome still pending).
pub fn is_settled(result: &TransactionResult) -> bool {
    result.status != TransactionStatus::Processing
}

/// The event of a transaction's result (subject: its uuid): `transaction.approved` or
/// `transaction.declined`, with its account, action, amount, invoice and error code.
pub fn transaction_event(state: &Services, transaction: &Transaction, result: &TransactionResult, at: i64) -> NewEvent {
    let kind = if result.status == TransactionStatus::Success {
        events::TRANSACTION_APPROVED
    } else {
        events::TRANSACTION_DECLINED
    };
    let payload = json!({
        "account_code": transaction.new.account.account_code,
        "action": transaction.new.action,
        "amount_in_cents": transaction.new.amount,
        "currency": transaction.new.currency,
        "invoice_number": transaction.invoice_number,
        "status": result.status.as_str(),
        "error_code": result.failure.as_ref().map(|f| f.error_code.as_str()),
    });
    events::new(state, kind, at, payload)
}
