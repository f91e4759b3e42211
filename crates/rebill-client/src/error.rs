//! The client's errors, decoded from the error documents rebill answers with.

use chrono::{DateTime, Utc};
use rebill_models::{ApiError, Errors, Transaction};
use rebill_xml::{ApiVersion, DecodeError, Mode, WireContext, from_xml};

/// Everything a call can fail with.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// 404: the record (or the route at this API version) does not exist.
    #[error("not found ({symbol}): {description}")]
    NotFound {
        /// The error's symbol (`not_found`).
        symbol: String,
        /// What was not found.
        description: String,
    },
    /// 422 with an `<errors>` document of field errors.
    #[error("validation failed: {}", field_list(.0))]
    Validation(Vec<FieldError>),
    /// 422 with a declined payment: the transaction error and the declined transaction.
    #[error("transaction declined: {}", .0.error.merchant_message.as_deref().unwrap_or("(no message)"))]
    Transaction(Box<TransactionError>),
    /// 422 `simultaneous_request`: another change of the same record is in progress; retrying
    /// later is safe.
    #[error("a change of the same record is already in progress")]
    SimultaneousRequest,
    /// 429: the site's rate limit is used up until `reset_at`.
    #[error("rate limit exceeded{}", .reset_at.map(|t| format!(" until {t}")).unwrap_or_default())]
    RateLimited {
        /// When the window frees up again (`X-RateLimit-Reset`).
        reset_at: Option<DateTime<Utc>>,
    },
    /// 401: the API key is missing, unknown or revoked.
    #[error("unauthorized: the API key was not accepted")]
    Unauthorized,
    /// 403: the key may not do this (a read-only key writing).
    #[error("forbidden: the API key may not make this request")]
    Forbidden,
    /// 412: a precondition of the request is not met.
    #[error("precondition failed")]
    PreconditionFailed,
    /// Any other error answer (400, 402, 405, 406, 415, 422 with a single `<error>`, 5xx, …).
    #[error("API error {status} ({symbol}): {description}")]
    Api {
        /// HTTP status.
        status: u16,
        /// The error's symbol (empty when the answer was not an error document).
        symbol: String,
        /// The error's description (or the start of the body).
        description: String,
    },
    /// The request could not be sent or its answer not read (connection, timeout, TLS).
    #[error("transport: {0}")]
    Transport(#[from] reqwest::Error),
    /// A success answer whose document could not be read.
    #[error("cannot decode the response at {path}: {source}")]
    Decode {
        /// Element path of the failure (`account.billing_info.year`).
        path: String,
        /// What was wrong there.
        #[source]
        source: DecodeError,
    },
    /// The call does not exist at the client's API version (raised before sending).
    #[error("{what} needs API version {since} or later; this client uses {version}")]
    Unavailable {
        /// What was asked for.
        what: &'static str,
        /// The client's version.
        version: ApiVersion,
        /// The first version that has it.
        since: ApiVersion,
    },
}

fn field_list(errors: &[FieldError]) -> String {
    errors.iter().map(|e| format!("{} {}", e.field, e.message)).collect::<Vec<_>>().join("; ")
}

/// One field error of a 422 `<errors>` document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldError {
    /// The field path (`account.email`, `subscription.account.billing_info.number`).
    pub field: String,
    /// Machine-readable symbol (`invalid_email`, `blank`, `too_long`, …).
    pub symbol: String,
    /// Human-readable message (`is not a valid email address`).
    pub message: String,
}

/// A declined payment: why, and the declined transaction.
#[derive(Debug, Clone, PartialEq)]
pub struct TransactionError {
    /// The transaction error (`error_code`, `error_category`, messages).
    pub error: rebill_models::TransactionError,
    /// The declined transaction, when the answer carried it.
    pub transaction: Option<Transaction>,
}

impl Error {
    /// Whether retrying the same call later can succeed (rate limits, a simultaneous change,
    /// 502/503, connection errors).
    pub fn is_retryable(&self) -> bool {
        match self {
            Error::SimultaneousRequest | Error::RateLimited { .. } => true,
            Error::Api { status, .. } => matches!(status, 502..=504),
            Error::Transport(e) => e.is_connect() || e.is_timeout(),
            _ => false,
        }
    }

    pub(crate) fn decode(source: DecodeError) -> Self {
        Error::Decode { path: source.path(), source }
    }
}

/// The error an answer with a status outside 2xx stands for.
pub(crate) fn from_response(status: u16, body: &[u8], reset_at: Option<DateTime<Utc>>, ctx: &WireContext) -> Error {
    match status {
        401 => return Error::Unauthorized,
        403 => return Error::Forbidden,
        412 => return Error::PreconditionFailed,
        429 => return Error::RateLimited { reset_at },
        _ => {}
    }
    if status == 422
        && let Ok(errors) = from_xml::<Errors>(body, ctx, Mode::Response)
    {
        if let Some(error) = errors.transaction_error {
            return Error::Transaction(Box::new(TransactionError {
                error: *error,
                transaction: errors.transaction.map(|t| *t),
            }));
        }
        let fields = errors.errors.unwrap_or_default();
        return Error::Validation(
            fields
                .into_iter()
                .map(|e| FieldError {
                    field: e.field.unwrap_or_default(),
                    symbol: e.symbol.unwrap_or_default(),
                    message: e.message.unwrap_or_default(),
                })
                .collect(),
        );
    }
    let (symbol, description) = match from_xml::<ApiError>(body, ctx, Mode::Response) {
        Ok(e) => (e.symbol.unwrap_or_default(), e.description.unwrap_or_default()),
        Err(_) => (String::new(), String::from_utf8_lossy(body).chars().take(200).collect()),
    };
    match (status, symbol.as_str()) {
        (404, _) => Error::NotFound { symbol, description },
        (422, "simultaneous_request") => Error::SimultaneousRequest,
        _ => Error::Api { status, symbol, description },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rebill_xml::Features;

    fn ctx() -> WireContext {
        WireContext::new(ApiVersion::V2_11, Features::none(), "http://localhost")
    }

    #[test]
    fn field_errors_are_read_with_their_paths() {
        let body = br#"<?xml version="1.0" encoding="UTF-8"?>
<errors>
  <error field="account.email" symbol="invalid_email" lang="en-US">is not a valid email address</error>
  <error field="account.account_code" symbol="blank" lang="en-US">can't be blank</error>
</errors>"#;
        let Error::Validation(fields) = from_response(422, body, None, &ctx()) else {
            panic!("not a validation error")
        };
        assert_eq!(
            fields,
            vec![
                FieldError {
                    field: "account.email".into(),
                    symbol: "invalid_email".into(),
                    message: "is not a valid email address".into()
                },
                FieldError {
                    field: "account.account_code".into(),
                    symbol: "blank".into(),
                    message: "can't be blank".into()
                },
            ]
        );
    }

    #[test]
    fn single_errors_map_by_status_and_symbol() {
        let doc = |symbol: &str| format!("<error><symbol>{symbol}</symbol><description>d</description></error>");
        assert!(matches!(
            from_response(404, doc("not_found").as_bytes(), None, &ctx()),
            Error::NotFound { symbol, description } if symbol == "not_found" && description == "d"
        ));
        assert!(matches!(
            from_response(422, doc("simultaneous_request").as_bytes(), None, &ctx()),
            Error::SimultaneousRequest
        ));
        assert!(matches!(
            from_response(400, doc("invalid_parameter").as_bytes(), None, &ctx()),
            Error::Api { status: 400, symbol, .. } if symbol == "invalid_parameter"
        ));
        assert!(matches!(from_response(412, b"", None, &ctx()), Error::PreconditionFailed));
        assert!(matches!(from_response(401, b"HTTP Basic: Access denied.", None, &ctx()), Error::Unauthorized));
        assert!(matches!(
            from_response(500, b"<html>oops</html>", None, &ctx()),
            Error::Api { status: 500, symbol, description } if symbol.is_empty() && description.contains("oops")
        ));
    }
}
