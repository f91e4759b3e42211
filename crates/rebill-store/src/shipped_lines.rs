//! The shipping addresses of invoice lines: a subscription's new lines shipped to the address
//! it names, a one-off charge shipped to a chosen address, and lines read with their addresses
//! (one query for all the lines shown). Addresses themselves are [`crate::shipping_addresses`];
//! lines are [`crate::invoices`].

use std::collections::{BTreeMap, BTreeSet};

use crate::invoices::rows::{ADJUSTMENT_COLUMNS, adjustment_from_row, insert_adjustment};
use crate::invoices::{Adjustment, NewAdjustment};
use crate::shipping_addresses::{ShippingAddress, addresses_by_id, details_shipping_address};
use crate::work::Work;
use crate::{Store, StoreError};

/// Shows on each of `lines` the address it was shipped to, out of `addresses`.
fn show_addresses(lines: &mut [Adjustment], addresses: &[ShippingAddress]) {
    for line in lines {
        line.shipping_address = line.shipping_address_id.and_then(|id| addresses.iter().find(|a| a.id == id)).cloned();
    }
}

/// The distinct addresses `lines` were shipped to.
fn shipped_ids(lines: &[Adjustment]) -> Vec<i64> {
    let ids: BTreeSet<i64> = lines.iter().filter_map(|l| l.shipping_address_id).collect();
    ids.into_iter().collect()
}

impl Store {
    /// `lines` with the addresses they were shipped to, read in one query on `pool` (none when
    /// no line was shipped).
    pub(crate) async fn with_addresses<'e, E>(
        &self,
        pool: E,
        mut lines: Vec<Adjustment>,
    ) -> Result<Vec<Adjustment>, StoreError>
    where
        E: Into<crate::db::Exec<'e>>,
    {
        let addresses = addresses_by_id(pool, self.backend, &shipped_ids(&lines)).await?;
        show_addresses(&mut lines, &addresses);
        Ok(lines)
    }
}

impl Store {
    /// Adds a pending adjustment shipped to the account's address `shipping_address_id` (the
    /// caller checked it), in one transaction.
    pub async fn create_shipped_adjustment(
        &self,
        site_id: i64,
        new: &NewAdjustment,
        shipping_address_id: i64,
        now: i64,
    ) -> Result<Adjustment, StoreError> {
        let mut work = self.begin_work().await?;
        let id = insert_adjustment(work.tx.exec(), site_id, None, new, now).await?;
        crate::db::query("UPDATE adjustments SET shipping_address_id = $1 WHERE id = $2")
            .bind(shipping_address_id)
            .bind(id)
            .execute(work.tx.exec())
            .await?;
        let row = crate::db::query(&format!("SELECT {ADJUSTMENT_COLUMNS} FROM adjustments WHERE id = $1"))
            .bind(id)
            .fetch_one(work.tx.exec())
            .await?;
        let made = work.with_addresses(vec![adjustment_from_row(&row)?]).await?;
        work.commit().await?;
        made.into_iter().next().ok_or_else(|| StoreError::Invalid("the shipped adjustment was not read".into()))
    }
}

impl Work {
    /// Ships the new lines of subscriptions to the address each subscription names now, in the
    /// work's transaction, and shows it on `made`: one query reads the subscriptions' details,
    /// one their addresses, and one update per address ships its lines (none when no
    /// subscription ships anywhere, as in most renewals).
    pub(crate) async fn ship_subscription_lines(&mut self, made: &mut [Adjustment]) -> Result<(), StoreError> {
        let uuids: BTreeSet<&str> = made.iter().filter_map(|l| l.line.subscription_uuid.as_deref()).collect();
        if uuids.is_empty() {
            return Ok(());
        }
        let sql =
            format!("SELECT uuid, details FROM subscriptions WHERE uuid IN ({})", self.backend.params(uuids.len(), 1));
        let mut query = crate::db::counted(&sql, uuids.len());
        for uuid in &uuids {
            query = query.bind(uuid.to_string());
        }
        let mut ship_to: BTreeMap<String, i64> = BTreeMap::new();
        for row in query.fetch_all(self.tx.exec()).await? {
            if let Some(id) = details_shipping_address(&crate::document::read(row.try_get("details")?)?) {
                ship_to.insert(row.try_get("uuid")?, id);
            }
        }
        if ship_to.is_empty() {
            return Ok(());
        }
        let ids: BTreeSet<i64> = ship_to.values().copied().collect();
        let ids: Vec<i64> = ids.into_iter().collect();
        let addresses = addresses_by_id(self.tx.exec(), self.backend, &ids).await?;
        for address in &addresses {
            let lines: Vec<i64> = made
                .iter()
                .filter(|l| l.line.subscription_uuid.as_ref().and_then(|u| ship_to.get(u)) == Some(&address.id))
                .map(|l| l.id)
                .collect();
            let sql = format!(
                "UPDATE adjustments SET shipping_address_id = {} WHERE id IN ({})",
                self.backend.params(1, 1),
                self.backend.params(lines.len(), 2)
            );
            let mut query = crate::db::counted(&sql, lines.len()).bind(address.id);
            for id in &lines {
                query = query.bind(*id);
            }
            query.execute(self.tx.exec()).await?;
        }
        for line in made.iter_mut() {
            let id = line.line.subscription_uuid.as_ref().and_then(|u| ship_to.get(u)).copied();
            if id.is_some_and(|id| addresses.iter().any(|a| a.id == id)) {
                line.shipping_address_id = id;
            }
        }
        show_addresses(made, &addresses);
        Ok(())
    }

    /// `lines` (read in this work) with the addresses they were shipped to.
    pub(crate) async fn with_addresses(&mut self, mut lines: Vec<Adjustment>) -> Result<Vec<Adjustment>, StoreError> {
        let addresses = addresses_by_id(self.tx.exec(), self.backend, &shipped_ids(&lines)).await?;
        show_addresses(&mut lines, &addresses);
        Ok(lines)
    }
}
