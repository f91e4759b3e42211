//! Keyset paging shared by every list of records.
//!
//! Lists are read a page at a time by [`PageRequest`]: ordered by a sort attribute
//! (`created_at` or `updated_at`) and the row id, which breaks ties, so that a page continues
//! strictly after the [`Position`] of the previous page's last record. Records inserted or
//! updated between two page requests therefore never shift the position: nothing is returned
//! twice or skipped because of an insert, and an updated record moves to its new place. Every
//! listed table names its times `created_at` and `updated_at` and has an integer `id`.

use crate::db::DbQuery;

/// Attribute a list is ordered by (and the time range applies to).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Sort {
    #[default]
    CreatedAt,
    UpdatedAt,
}

impl Sort {
    pub fn as_str(self) -> &'static str {
        match self {
            Sort::CreatedAt => "created_at",
            Sort::UpdatedAt => "updated_at",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "created_at" => Some(Sort::CreatedAt),
            "updated_at" => Some(Sort::UpdatedAt),
            _ => None,
        }
    }

    /// The column (every listed table names its times `created_at` and `updated_at`).
    fn column(self) -> &'static str {
        self.as_str()
    }
}

/// Direction of a list.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Order {
    Asc,
    #[default]
    Desc,
}

impl Order {
    pub fn as_str(self) -> &'static str {
        match self {
            Order::Asc => "asc",
            Order::Desc => "desc",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "asc" => Some(Order::Asc),
            "desc" => Some(Order::Desc),
            _ => None,
        }
    }
}

/// Where a page ends: the sort attribute's value and the id of the last record returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Position {
    /// Epoch seconds of the sort attribute.
    pub value: i64,
    pub id: i64,
}

/// One page of a list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PageRequest {
    pub sort: Sort,
    pub order: Order,
    /// Continue strictly after this position (`None`: the first page).
    pub after: Option<Position>,
    /// Inclusive bounds on the sort attribute (epoch seconds).
    pub begin: Option<i64>,
    pub end: Option<i64>,
    /// Records per page (at least 1).
    pub limit: u32,
}

impl Default for PageRequest {
    fn default() -> Self {
        Self { sort: Sort::default(), order: Order::default(), after: None, begin: None, end: None, limit: 50 }
    }
}

/// A page of records.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Page<T> {
    pub items: Vec<T>,
    /// The position to continue from when more records remain.
    pub next: Option<Position>,
    /// Records matching the filters and time range (regardless of the position).
    pub total: i64,
}

/// A bound value of a dynamically built statement.
#[derive(Debug, Clone)]
pub(crate) enum Arg {
    Int(i64),
    Text(String),
}

impl Arg {
    /// Each of `values` as a text value.
    pub(crate) fn texts(values: &[impl AsRef<str>]) -> Vec<Arg> {
        values.iter().map(|v| Arg::Text(v.as_ref().to_owned())).collect()
    }

    /// Each of `values` as an integer value.
    pub(crate) fn ints(values: &[i64]) -> Vec<Arg> {
        values.iter().map(|v| Arg::Int(*v)).collect()
    }

    /// `query` with this value bound next.
    pub(crate) fn bind_to<'q>(&self, query: DbQuery<'q>) -> DbQuery<'q> {
        match self {
            Arg::Int(v) => query.bind(*v),
            Arg::Text(v) => query.bind(v.clone()),
        }
    }
}

/// Keys read by one statement of [`rows_with_keys`]: a longer list is read in several.
const KEYS_PER_STATEMENT: usize = 500;

/// Among which rows [`rows_with_keys`] looks its keys up, and so which index finds them.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Within {
    /// Every site's: the key is unique on its own (a row id) or has an index of its own.
    AllSites,
    /// One site's, the key being unique within the site only: the `(site_id, key)` index
    /// finds each row.
    Site(i64),
    /// One site's, the key being unique across all sites (a uuid): the key's own index finds
    /// each row and the site is only checked. SQLite would otherwise walk the site's index,
    /// every row of the site, for a list of more than a few keys.
    SiteOfUniqueKey(i64),
}

/// The rows of `select` (`SELECT … FROM …`) whose `column` is one of `keys`, among the rows
/// `within` names, in statements of at most [`KEYS_PER_STATEMENT`] keys, on the read pool. Rows
/// come in no particular order; a key with no row has none.
pub(crate) async fn rows_with_keys(
    store: &crate::Store,
    select: &str,
    within: Within,
    column: &str,
    keys: &[Arg],
) -> Result<Vec<crate::db::DbRow>, sqlx::Error> {
    let mut rows = Vec::new();
    for chunk in keys.chunks(KEYS_PER_STATEMENT) {
        let sql = keys_sql(store.backend, select, within, column, chunk.len());
        let query = with_keys(crate::db::counted(&sql, chunk.len()), within, chunk);
        rows.extend(query.fetch_all(&store.reads).await?);
    }
    Ok(rows)
}

/// `query` (a statement of [`keys_sql`]) with the site's value, when there is one, and the keys
/// bound.
fn with_keys<'q>(mut query: crate::db::DbQuery<'q>, within: Within, keys: &[Arg]) -> crate::db::DbQuery<'q> {
    if let Within::Site(site_id) | Within::SiteOfUniqueKey(site_id) = within {
        query = query.bind(site_id);
    }
    for key in keys {
        query = key.bind_to(query);
    }
    query
}

/// The statement of [`rows_with_keys`] for `n` keys: the site's value first, when there is one.
fn keys_sql(b: crate::Backend, select: &str, within: Within, column: &str, n: usize) -> String {
    let (scope, first) = match within {
        Within::AllSites => (String::new(), 1),
        Within::Site(_) => (format!("site_id = {} AND ", b.params(1, 1)), 2),
        Within::SiteOfUniqueKey(_) => (format!("{} = {} AND ", b.unindexed("site_id"), b.params(1, 1)), 2),
    };
    format!("{select} WHERE {scope}{column} IN ({})", b.params(n, first))
}

/// A `WHERE` clause built piece by piece, numbering its placeholders.
#[derive(Debug, Default)]
pub(crate) struct Conditions {
    parts: Vec<String>,
    args: Vec<Arg>,
}

impl Conditions {
    /// The placeholder of a new argument.
    pub(crate) fn arg(&mut self, value: Arg) -> String {
        self.args.push(value);
        format!("${}", self.args.len())
    }

    pub(crate) fn push(&mut self, condition: String) {
        self.parts.push(condition);
    }

    /// `column = value`.
    pub(crate) fn eq(&mut self, column: &str, value: Arg) {
        let p = self.arg(value);
        self.push(format!("{column} = {p}"));
    }

    pub(crate) fn sql(&self) -> String {
        if self.parts.is_empty() { String::new() } else { format!(" WHERE {}", self.parts.join(" AND ")) }
    }

    pub(crate) fn bind<'q>(&self, mut query: DbQuery<'q>) -> DbQuery<'q> {
        for a in &self.args {
            query = a.bind_to(query);
        }
        query
    }

    /// The time range of `page` on its sort column.
    pub(crate) fn time_range(&mut self, page: &PageRequest) {
        let column = page.sort.column();
        if let Some(begin) = page.begin {
            let p = self.arg(Arg::Int(begin));
            self.push(format!("{column} >= {p}"));
        }
        if let Some(end) = page.end {
            let p = self.arg(Arg::Int(end));
            self.push(format!("{column} <= {p}"));
        }
    }

    /// Records strictly after `page.after` in the page's order.
    pub(crate) fn after(&mut self, page: &PageRequest) {
        let Some(after) = page.after else { return };
        let column = page.sort.column();
        let cmp = match page.order {
            Order::Asc => ">",
            Order::Desc => "<",
        };
        let v1 = self.arg(Arg::Int(after.value));
        let v2 = self.arg(Arg::Int(after.value));
        let id = self.arg(Arg::Int(after.id));
        self.push(format!("({column} {cmp} {v1} OR ({column} = {v2} AND id {cmp} {id}))"));
    }
}

/// `ORDER BY … LIMIT …` of a page (one row more than the page, to learn whether more remain).
pub(crate) fn order_and_limit(page: &PageRequest) -> String {
    let column = page.sort.column();
    let dir = match page.order {
        Order::Asc => "ASC",
        Order::Desc => "DESC",
    };
    format!(" ORDER BY {column} {dir}, id {dir} LIMIT {}", u64::from(page.limit.max(1)) + 1)
}

/// Cuts the extra row of [`order_and_limit`] and finds the next position.
pub(crate) fn into_page<T>(
    mut items: Vec<T>,
    page: &PageRequest,
    total: i64,
    position: impl Fn(&T) -> Position,
) -> Page<T> {
    let limit = page.limit.max(1) as usize;
    let next = if items.len() > limit {
        items.truncate(limit);
        items.last().map(position)
    } else {
        None
    };
    Page { items, next, total }
}

#[cfg(test)]
mod tests {
    use super::{Arg, Within, keys_sql, with_keys};
    use crate::Store;
    use crate::testing::fresh_sqlite_url;

    /// Every read by a list of keys finds its rows through the key's index. SQLite, without
    /// statistics, otherwise prefers the site's index for more than a few keys and walks every
    /// row of the site (a batch of notifications read its subscriptions and transactions that
    /// way, at a cost growing with the site).
    #[tokio::test]
    async fn reads_by_keys_use_the_keys_index() {
        let store = Store::connect(&fresh_sqlite_url("keys_plan")).await.expect("store");
        let texts: Vec<Arg> = Arg::texts(&(0..50).map(|i| format!("k{i}")).collect::<Vec<_>>());
        let ints: Vec<Arg> = Arg::ints(&(0..50).collect::<Vec<_>>());
        let reads = [
            ("subscriptions", Within::SiteOfUniqueKey(1), "uuid", &texts),
            ("transactions", Within::SiteOfUniqueKey(1), "uuid", &texts),
            ("accounts", Within::Site(1), "account_code", &texts),
            ("invoices", Within::Site(1), "invoice_number", &ints),
            ("invoices", Within::AllSites, "id", &ints),
            ("adjustments", Within::AllSites, "invoice_id", &ints),
        ];
        for (table, within, column, keys) in reads {
            let select = format!("SELECT * FROM {table}");
            let sql = format!("EXPLAIN QUERY PLAN {}", keys_sql(store.backend, &select, within, column, keys.len()));
            let plan = crate::db::query_plan(&store.pool, with_keys(crate::db::query(&sql), within, keys)).await;
            let key = if column == "id" { "rowid=?".to_owned() } else { format!("{column}=?") };
            assert!(plan.starts_with("SEARCH") && plan.contains(&key), "{table}.{column} ({within:?}): {plan}");
        }
    }
}
