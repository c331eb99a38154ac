//! The SnapshotStore conformance suite.
//!
//! Each case takes a fresh, empty store. Run them all with
//! [`snapshot_store_tck!`](crate::snapshot_store_tck).

use std::sync::Arc;

use wow_core::eventsourcing::SnapshotStore;

use crate::fixtures::{aggregate, snapshot};

/// The store under test.
pub type Store = Arc<dyn SnapshotStore>;

/// A saved snapshot loads back equal; an unknown aggregate has none.
pub async fn saves_and_loads_snapshot(store: Store) {
    let order = aggregate();
    assert!(store.load(&order).await.unwrap().is_none());
    assert!(store.version(&order).await.unwrap().is_none());
    let s = snapshot(&order, 3);
    assert!(store.save(&s).await.unwrap());
    assert_eq!(store.load(&order).await.unwrap(), Some(s));
    assert_eq!(store.version(&order).await.unwrap(), Some(3));
    assert!(store.load(&aggregate()).await.unwrap().is_none());
}

/// A snapshot keeps the version of the state's shape it was taken with, and a newer snapshot
/// of another shape replaces it whole.
pub async fn keeps_the_state_version(store: Store) {
    let order = aggregate();
    let old_shape = snapshot(&order, 2);
    assert_eq!(old_shape.state_version, 1);
    assert!(store.save(&old_shape).await.unwrap());
    assert_eq!(store.load(&order).await.unwrap().unwrap().state_version, 1);
    let new_shape = wow_core::eventsourcing::Snapshot {
        state_version: 2,
        ..snapshot(&order, 3)
    };
    assert!(store.save(&new_shape).await.unwrap());
    assert_eq!(store.load(&order).await.unwrap(), Some(new_shape));
}

/// A higher version replaces, an equal version replaces, an older one is ignored.
pub async fn keeps_the_highest_version(store: Store) {
    let order = aggregate();
    assert!(store.save(&snapshot(&order, 2)).await.unwrap());
    assert!(
        store.save(&snapshot(&order, 5)).await.unwrap(),
        "a newer snapshot replaces"
    );
    assert!(
        !store.save(&snapshot(&order, 4)).await.unwrap(),
        "an older snapshot is ignored"
    );
    assert_eq!(store.version(&order).await.unwrap(), Some(5));
    let mut equal = snapshot(&order, 5);
    equal.state = serde_json::json!({"replaced": true});
    assert!(
        store.save(&equal).await.unwrap(),
        "an equal version replaces"
    );
    assert_eq!(store.load(&order).await.unwrap(), Some(equal));
}

/// 8 concurrent saves of versions 1..=8 leave version 8, whatever order they land in.
pub async fn concurrent_saves_keep_the_highest_version(store: Store) {
    for _ in 0..5 {
        let order = aggregate();
        let tasks: Vec<_> = (1..=8u64)
            .rev()
            .map(|version| {
                let (store, order) = (store.clone(), order.clone());
                tokio::spawn(async move { store.save(&snapshot(&order, version)).await })
            })
            .collect();
        for task in tasks {
            task.await.expect("task runs").expect("save succeeds");
        }
        let kept = store
            .load(&order)
            .await
            .unwrap()
            .expect("a snapshot is kept");
        assert_eq!(kept.version, 8);
        assert_eq!(
            kept.state["version"], 8,
            "the state belongs to the kept version"
        );
    }
}

/// Two tenants' aggregates with one id keep a snapshot each (SPEC TN-1).
pub async fn snapshots_are_per_tenant(store: Store) {
    let a = aggregate();
    let mut b = a.clone();
    b.tenant_id = "tenant-b".to_owned();
    let (a5, b2) = (snapshot(&a, 5), snapshot(&b, 2));
    assert!(store.save(&a5).await.unwrap());
    assert!(
        store.load(&b).await.unwrap().is_none(),
        "a's snapshot is not b's"
    );
    assert!(store.version(&b).await.unwrap().is_none());
    assert!(
        store.save(&b2).await.unwrap(),
        "b's first snapshot is not older than a's"
    );
    assert_eq!(store.load(&b).await.unwrap(), Some(b2));
    assert_eq!(store.load(&a).await.unwrap(), Some(a5));
}
