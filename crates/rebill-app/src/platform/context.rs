//! The context of a business operation: the site it runs for and "now" on the site's clock (a
//! request's `RequestContext::now`, or a scheduled job's due time). No HTTP or wire type.

use rebill_store::Site;

/// Who a business operation runs for and when.
#[derive(Debug, Clone)]
pub struct Context {
    pub site: Site,
    /// UTC epoch seconds on the site's clock.
    pub now: i64,
}
