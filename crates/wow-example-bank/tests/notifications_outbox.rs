//! The notifications outbox, given events: which rows it owes.
use wow_core::outbox::OutboxSpec;

use wow_example_bank::account::{AccountEvent, Moved};
use wow_example_bank::notifications::{NotificationOutbox, OutboxRow};

#[test]
fn a_withdrawal_owes_one_notification_and_nothing_else_owes_any() {
    OutboxSpec::<NotificationOutbox>::new()
        .of("tenant-a", "acc-1")
        .given([
            AccountEvent::Deposited(Moved { amount: 9 }),
            AccountEvent::Withdrawn(Moved { amount: 4 }),
            AccountEvent::AccountFrozen,
        ])
        .expect_ids(["event-2"])
        .expect_rows([OutboxRow {
            event_id: "event-2".into(),
            tenant_id: "tenant-a".into(),
            account_id: "acc-1".into(),
            amount: 4,
        }]);
}

#[test]
fn a_row_keeps_the_json_fields_of_earlier_builds() {
    let row = OutboxRow {
        event_id: "e".into(),
        tenant_id: "t".into(),
        account_id: "a".into(),
        amount: 1,
    };
    assert_eq!(
        serde_json::to_value(&row).ok(),
        Some(
            serde_json::json!({"event_id": "e", "tenant_id": "t", "account_id": "a", "amount": 1})
        )
    );
}
