//! Every metric the service exports, by name, kind, labels and meaning: one catalogue that the
//! recording sites name and the exposition describes (`rebill serve --metrics-listen`). Values
//! are recorded through the `metrics` facade, which does nothing until a process installs a
//! recorder, so the use cases record unconditionally. Labels take values from small fixed sets
//! (endpoint names of the API table, methods, status codes, outcomes, site names): never an id,
//! an account code or anything a request chooses freely.

/// What kind of value a metric is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Counter,
    Gauge,
    /// Seconds, in the buckets of [`BUCKETS`].
    Histogram,
}

/// One exported metric.
#[derive(Debug, Clone, Copy)]
pub struct Metric {
    pub name: &'static str,
    pub kind: Kind,
    pub labels: &'static [&'static str],
    pub help: &'static str,
}

/// Requests answered, by endpoint, method and status.
pub const HTTP_REQUESTS: &str = "rebill_http_requests_total";
/// Time to answer a request.
pub const HTTP_DURATION: &str = "rebill_http_request_duration_seconds";
/// Requests refused by a site's rate limit (429).
pub const RATE_LIMIT_REFUSALS: &str = "rebill_rate_limit_refusals_total";
/// Renewal jobs run by the scheduler.
pub const RENEWALS_RUN: &str = "rebill_renewals_run_total";
/// Renewal charges collected automatically, by outcome.
pub const RENEWAL_PAYMENTS: &str = "rebill_renewal_payments_total";
/// Calls to payment gateways, by gateway, operation and outcome.
pub const GATEWAY_CALLS: &str = "rebill_gateway_calls_total";
/// Time a gateway call took.
pub const GATEWAY_DURATION: &str = "rebill_gateway_call_duration_seconds";
/// Webhook delivery attempts, by outcome.
pub const WEBHOOK_DELIVERIES: &str = "rebill_webhook_deliveries_total";
/// Time a webhook delivery attempt took.
pub const WEBHOOK_DURATION: &str = "rebill_webhook_delivery_duration_seconds";
/// Webhook deliveries waiting to be sent.
pub const WEBHOOK_QUEUE: &str = "rebill_webhook_queue_depth";
/// How late the oldest unfinished due job is.
pub const SCHEDULER_LAG: &str = "rebill_scheduler_lag_seconds";
/// Database connections, by pool and state.
pub const DB_CONNECTIONS: &str = "rebill_db_connections";
/// Differences the last reconciliation of a site found between rebill and its gateway.
pub const RECONCILE_DIFFERENCES: &str = "rebill_reconcile_differences";
/// Periodic reconciliations run, by site and outcome.
pub const RECONCILE_RUNS: &str = "rebill_reconcile_runs_total";

/// Histogram buckets in seconds: 1 ms to 60 s (a gateway call may take up to its timeout).
pub const BUCKETS: &[f64] = &[0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0];

/// Every metric, in the order of the operations documentation.
pub const CATALOGUE: &[Metric] = &[
    Metric {
        name: HTTP_REQUESTS,
        kind: Kind::Counter,
        labels: &["endpoint", "method", "status"],
        help: "Requests answered. endpoint: the API table's endpoint name (list_accounts, …), or the route \
               outside the API (js, tokens, healthz, readyz, sandbox_clock, demo), or unrouted.",
    },
    Metric {
        name: HTTP_DURATION,
        kind: Kind::Histogram,
        labels: &["endpoint", "method"],
        help: "Seconds from a request's head to its answer's head.",
    },
    Metric {
        name: RATE_LIMIT_REFUSALS,
        kind: Kind::Counter,
        labels: &["site"],
        help: "API requests refused with 429 because the site's rate limit was reached.",
    },
    Metric {
        name: RENEWALS_RUN,
        kind: Kind::Counter,
        labels: &[],
        help: "Renewal jobs run by the scheduler, in batches or alone.",
    },
    Metric {
        name: RENEWAL_PAYMENTS,
        kind: Kind::Counter,
        labels: &["outcome"],
        help: "Automatic collections of renewal invoices (first attempts and dunning retries): outcome paid or \
               declined.",
    },
    Metric {
        name: GATEWAY_CALLS,
        kind: Kind::Counter,
        labels: &["gateway", "operation", "outcome"],
        help: "Payment gateway calls. outcome: approved, declined, error (the gateway could not be reached or \
               failed) or abandoned (no answer within the gateway timeout).",
    },
    Metric {
        name: GATEWAY_DURATION,
        kind: Kind::Histogram,
        labels: &["gateway", "operation", "outcome"],
        help: "Seconds a payment gateway call took.",
    },
    Metric {
        name: WEBHOOK_DELIVERIES,
        kind: Kind::Counter,
        labels: &["outcome"],
        help: "Webhook delivery attempts. outcome: delivered (a 2xx in time), retrying (another attempt is \
               scheduled) or failed (the last attempt of the schedule failed).",
    },
    Metric {
        name: WEBHOOK_DURATION,
        kind: Kind::Histogram,
        labels: &["outcome"],
        help: "Seconds a webhook delivery attempt took.",
    },
    Metric {
        name: WEBHOOK_QUEUE,
        kind: Kind::Gauge,
        labels: &[],
        help: "Webhook deliveries not sent yet or waiting for a retry, across every process (read from the \
               database when scraped).",
    },
    Metric {
        name: SCHEDULER_LAG,
        kind: Kind::Gauge,
        labels: &[],
        help: "Seconds by which the oldest due job (in its site's time) that is not done is late; 0 when none \
               is (read from the database when scraped).",
    },
    Metric {
        name: DB_CONNECTIONS,
        kind: Kind::Gauge,
        labels: &["pool", "state"],
        help: "This process's database connections. pool: main (every statement; on SQLite the writer) or \
               reads (SQLite's read-only connections); state: in_use or idle.",
    },
    Metric {
        name: RECONCILE_DIFFERENCES,
        kind: Kind::Gauge,
        labels: &["site"],
        help: "Differences between rebill's transactions and the gateway's records found by the last periodic \
               reconciliation of the site that this process ran (0: they agree).",
    },
    Metric {
        name: RECONCILE_RUNS,
        kind: Kind::Counter,
        labels: &["site", "outcome"],
        help: "Periodic reconciliations with the gateway. outcome: clean, differences, or failed (the \
               gateway's records could not be read).",
    },
];

/// Describes every metric of the catalogue to the installed recorder (its `# HELP` lines).
pub fn describe() {
    for metric in CATALOGUE {
        match metric.kind {
            Kind::Counter => metrics::describe_counter!(metric.name, metric.help),
            Kind::Gauge => metrics::describe_gauge!(metric.name, metric.help),
            Kind::Histogram => metrics::describe_histogram!(metric.name, metrics::Unit::Seconds, metric.help),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_follow_the_conventions() {
        let mut names: Vec<&str> = CATALOGUE.iter().map(|m| m.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), CATALOGUE.len());
        for metric in CATALOGUE {
            assert!(metric.name.starts_with("rebill_"), "{}", metric.name);
            match metric.kind {
                Kind::Counter => assert!(metric.name.ends_with("_total"), "{}", metric.name),
                Kind::Histogram => assert!(metric.name.ends_with("_seconds"), "{}", metric.name),
                Kind::Gauge => assert!(!metric.name.ends_with("_total"), "{}", metric.name),
            }
        }
        assert!(BUCKETS.windows(2).all(|w| w[0] < w[1]));
    }

    /// docs/metrics.md lists every metric of the catalogue with its kind and labels, and no other.
    #[test]
    fn the_documentation_lists_the_catalogue() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/metrics.md");
        let text = std::fs::read_to_string(&path).expect("docs/metrics.md");
        let rows: Vec<&str> = text.lines().filter(|l| l.starts_with("| `rebill_")).collect();
        assert_eq!(rows.len(), CATALOGUE.len(), "{rows:#?}");
        for metric in CATALOGUE {
            let row = rows
                .iter()
                .find(|r| r.starts_with(&format!("| `{}` |", metric.name)))
                .unwrap_or_else(|| panic!("{} is not in docs/metrics.md", metric.name));
            let kind = match metric.kind {
                Kind::Counter => "counter",
                Kind::Gauge => "gauge",
                Kind::Histogram => "histogram",
            };
            let labels: Vec<String> = metric.labels.iter().map(|l| format!("`{l}`")).collect();
            let labels = if labels.is_empty() { "—".to_owned() } else { labels.join(", ") };
            assert!(row.contains(&format!("| {kind} | {labels} |")), "{}: {row}", metric.name);
        }
    }
}
