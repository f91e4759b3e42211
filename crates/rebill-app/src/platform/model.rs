//! The domain values the use cases take and answer: sites and keys, accounts, billing info,
//! plans and add-ons, invoices with their lines and transactions, subscriptions, and the pages
//! and filters of lists. They are plain data kept by the store; an adapter names them from here,
//! so it depends on the use cases and never on storage.

pub use rebill_store::{ApiKey, Mode, Order, Page, PageRequest, Position, Site, Sort};

/// Accounts and their list filter.
pub mod accounts {
    pub use rebill_store::accounts::{
        Account, AccountActivity, AccountFields, AccountFilter, AccountState, AccountWithActivity, AddressFields,
    };
}

/// Stored billing info (no card number) and its payment kinds.
pub mod billing_info {
    pub use rebill_store::billing_info::{BillingFields, BillingInfo, PaymentKind};
}

/// Invoices, their lines (adjustments) and transactions.
pub mod invoicing {
    pub use rebill_billing::states::{InvoiceState, TransactionStatus};
    pub use rebill_store::invoices::{
        AccountSnapshot, Adjustment, AdjustmentFilter, AdjustmentKind, AdjustmentState, Check, CollectionMethod,
        Invoice, InvoiceAmounts, InvoiceFilter, InvoiceTerms, NewAdjustment, NewTransaction, Transaction,
        TransactionFailure, TransactionFilter, TransactionResult,
    };
}

/// Plans and add-ons.
pub mod plans {
    pub use rebill_store::plans::{
        AddOn, AddOnFields, AddOnType, Amounts, Interval, IntervalUnit, Percentage, Plan, PlanFields,
        RevenueScheduleType, UsageType,
    };
}

/// Stored subscriptions and their list filter.
pub mod subscriptions {
    pub use rebill_store::subscriptions::{StateFilter, SubscriptionFilter, SubscriptionRecord};
}

/// Credit: what an invoice is (charge, credit or legacy refund invoice) and the credit payments
/// that move credit, with their list filter.
pub mod credits {
    pub use rebill_store::credits::{CreditPayment, CreditPaymentAction, CreditPaymentFilter};
    pub use rebill_store::invoices::InvoiceKind;
}

/// Shipping addresses of accounts.
pub mod shipping_addresses {
    pub use rebill_store::shipping_addresses::{ShippingAddress, ShippingFields};
}
