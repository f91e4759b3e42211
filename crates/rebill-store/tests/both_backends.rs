//! Sites, keys and alerts on SQLite and on PostgreSQL (a fresh database per test run). A missing
//! PostgreSQL fails these tests: it is never skipped.

use rebill_store::testing::both_backends;
use rebill_store::{KEY_GRACE_SECONDS, Mode, NewSite, OldKey, Plan, SiteUpdate, Store, StoreError};

const NOW: i64 = 1_800_000_000;

fn sandbox(name: &str) -> NewSite {
    NewSite {
        name: name.into(),
        mode: Mode::Sandbox,
        plan: Plan::Core,
        credit_memos: false,
        contact: Some("tech@example.com".into()),
    }
}

#[tokio::test]
async fn sites_are_created_listed_and_updated() {
    for store in both_backends("sites").await {
        let (site, key) = store.create_site(&sandbox("acme"), NOW).await.expect("create");
        assert_eq!(
            (site.name.as_str(), site.mode, site.plan, site.good_standing),
            ("acme", Mode::Sandbox, Plan::Core, true)
        );
        assert!(site.public_key.starts_with("pk-"));
        let (found, k) = store.authenticate(&key, NOW).await.expect("auth").expect("valid key");
        assert_eq!((found.id, k.read_only), (site.id, false));
        assert!(matches!(store.create_site(&sandbox("acme"), NOW).await, Err(StoreError::DuplicateSite(_))));
        let updated = store
            .update_site(
                "acme",
                &SiteUpdate {
                    mode: Some(Mode::Production),
                    credit_memos: Some(true),
                    good_standing: Some(false),
                    ..SiteUpdate::default()
                },
            )
            .await
            .expect("update");
        assert_eq!(
            (updated.mode, updated.credit_memos, updated.good_standing, updated.plan),
            (Mode::Production, true, false, Plan::Core)
        );
        assert_eq!(store.sites().await.expect("list").len(), 1);
        assert!(matches!(store.site("nope").await, Err(StoreError::UnknownSite(_))));
    }
}

#[tokio::test]
async fn keys_are_hashed_limited_and_read_only_when_asked() {
    for store in both_backends("keys").await {
        let (site, first) = store.create_site(&sandbox("acme"), NOW).await.expect("create");
        let (ro, ro_key) = store.create_key(&site, true, NOW).await.expect("read-only key");
        assert!(ro.read_only);
        assert_eq!(ro.hint, ro_key[ro_key.len() - 4..]);
        for _ in 0..3 {
            store.create_key(&site, false, NOW).await.expect("within the limit");
        }
        let err = store.create_key(&site, false, NOW).await.expect_err("sixth key");
        assert_eq!(err.to_string(), "site `acme` already has 5 active private keys, its plan's limit");
        assert!(store.authenticate("0123456789abcdef0123456789abcdef", NOW).await.expect("auth").is_none());
        assert!(store.authenticate(&first, NOW).await.expect("auth").is_some());
        let pro = store
            .update_site(
                "acme",
                &SiteUpdate { mode: Some(Mode::Production), plan: Some(Plan::Professional), ..SiteUpdate::default() },
            )
            .await
            .expect("professional");
        assert_eq!(pro.key_limit(), 10);
        store.create_key(&pro, false, NOW).await.expect("professional sites have 10");
        let alerts = store.alerts().await.expect("alerts");
        assert_eq!(alerts.iter().filter(|a| a.kind == "key_created").count(), 5);
        assert!(alerts.iter().all(|a| a.recipient.as_deref() == Some("tech@example.com")));
        assert!(
            alerts.iter().all(|a| !a.body.contains(&first) && !a.body.contains(&ro_key)),
            "alerts never carry keys"
        );
    }
}

#[tokio::test]
async fn regeneration_blocks_or_keeps_the_old_key_for_12_hours() {
    for store in both_backends("regen").await {
        let (site, old) = store.create_site(&sandbox("acme"), NOW).await.expect("create");
        let old_id = store.keys(&site).await.expect("keys")[0].id;
        let (_, kept_new) = store.regenerate_key(&site, old_id, OldKey::Keep12h, NOW).await.expect("keep");
        assert!(
            store.authenticate(&old, NOW + KEY_GRACE_SECONDS - 1).await.expect("auth").is_some(),
            "old key in grace"
        );
        assert!(store.authenticate(&old, NOW + KEY_GRACE_SECONDS).await.expect("auth").is_none(), "old key after 12 h");
        assert!(store.authenticate(&kept_new, NOW + KEY_GRACE_SECONDS).await.expect("auth").is_some());

        let new_id = store.keys(&site).await.expect("keys").iter().find(|k| k.expires_at.is_none()).expect("active").id;
        let (_, blocked_new) = store.regenerate_key(&site, new_id, OldKey::Block, NOW + 10).await.expect("block");
        assert!(store.authenticate(&kept_new, NOW + 10).await.expect("auth").is_none(), "blocked at once");
        assert!(store.authenticate(&blocked_new, NOW + 10).await.expect("auth").is_some());
        assert!(matches!(
            store.regenerate_key(&site, new_id, OldKey::Block, NOW + 11).await,
            Err(StoreError::UnknownKey(..))
        ));
        let kinds: Vec<_> = store.alerts().await.expect("alerts").into_iter().map(|a| a.kind).collect();
        assert_eq!(kinds, ["key_regenerated", "key_regenerated"]);

        let before = store.site("acme").await.expect("site").public_key;
        let after = store.regenerate_public_key(&site, NOW).await.expect("public key").public_key;
        assert_ne!(before, after);
    }
}

#[tokio::test]
async fn unsupported_urls_are_refused() {
    let err = Store::connect("mysql://localhost/x").await.expect_err("mysql");
    assert_eq!(err.to_string(), "unsupported database URL `mysql://localhost/x` (use sqlite://PATH or postgres://…)");
}
