//! Notices and links: an open wait's notice is due until one attempt is
//! delivered (a failed one is due again after its retry time), and never
//! once the wait closed; a link is found by its digest, used once, and not
//! at all once expired.

use std::time::Duration;

use cairn_checkpoint::{NewLink, NoticeAttempt};
use cairn_core::{Actor, Answer, Origin, Via, WaitId};
use cairn_testkit::{both, Kind};

use super::votes::{finance_two, waiting, waiting_until};
use super::Db;
use crate::fresh;

both!(
    a_notice_is_due_until_delivered_and_not_once_its_wait_closed,
    a_link_is_used_once_and_not_after_it_expired,
    a_reminder_is_due_within_its_lead_of_the_deadline_once,
);

fn attempt(wait: WaitId, delivered: bool, retry_in: Duration) -> NoticeAttempt {
    NoticeAttempt {
        wait,
        channel: "webhook",
        delivered,
        status: Some(if delivered { 204 } else { 503 }),
        error: (!delivered).then(|| "the receiver is down".to_owned()),
        retry_in,
    }
}

async fn due(store: &Db) -> Vec<WaitId> {
    store
        .due_notices("webhook", 10)
        .await
        .unwrap()
        .iter()
        .map(|w| w.id)
        .collect()
}

async fn a_notice_is_due_until_delivered_and_not_once_its_wait_closed(kind: Kind) {
    let (_db, store) = fresh(kind).await;
    let (a, b) = (
        waiting(&store, "sam", finance_two()).await,
        waiting(&store, "sam", finance_two()).await,
    );
    assert_eq!(due(&store).await, [a, b], "oldest first");
    store
        .record_notice(&attempt(a, false, Duration::from_secs(3600)))
        .await
        .unwrap();
    assert_eq!(
        due(&store).await,
        [b],
        "a failed notice waits for its retry"
    );
    store
        .record_notice(&attempt(b, false, Duration::ZERO))
        .await
        .unwrap();
    assert_eq!(due(&store).await, [b], "due again at its retry time");
    store
        .record_notice(&attempt(b, true, Duration::ZERO))
        .await
        .unwrap();
    assert!(due(&store).await.is_empty(), "delivered");
    let mail = store.due_notices("mail", 10).await.unwrap();
    assert_eq!(mail.len(), 2, "each channel is its own: {mail:?}");

    let c = waiting(&store, "sam", finance_two()).await;
    let local = Actor::new("root").from(Origin {
        via: Some(Via::Local),
        ..Origin::default()
    });
    store
        .answer_wait(c, &Answer::Approve, &local)
        .await
        .unwrap();
    assert!(
        due(&store).await.is_empty(),
        "a closed wait needs no notice"
    );
}

async fn a_link_is_used_once_and_not_after_it_expired(kind: Kind) {
    let (_db, store) = fresh(kind).await;
    let wait = waiting(&store, "sam", finance_two()).await;
    let link = |hash: &str, ttl| NewLink {
        hash: hash.to_owned(),
        principal: "ana".into(),
        wait,
        ttl,
    };
    let day = Duration::from_secs(86_400);
    store
        .issue_links(&[link("h1", day), link("h2", Duration::from_millis(1))])
        .await
        .unwrap();
    store
        .issue_links(&[link("h1", Duration::from_millis(1))])
        .await
        .unwrap();
    let audit = store.audit(&Default::default()).await.unwrap();
    let issued: Vec<_> = audit.iter().filter(|e| e.action == "link_issued").collect();
    assert_eq!(
        issued.len(),
        2,
        "each link audited once, not again: {issued:?}"
    );
    assert_eq!(
        (
            issued[0].principal.as_str(),
            issued[0].via,
            issued[0].wait_id
        ),
        ("ana", Via::Link, Some(wait))
    );
    let found = store.link("h1").await.unwrap().expect("issued");
    assert_eq!((found.principal.as_str(), found.wait), ("ana", wait));
    let run = store.list_waits(&Default::default()).await.unwrap()[0].run_id;
    assert_eq!(found.run, run, "the wait's run");
    assert!(
        !found.expired && found.consumed_at.is_none(),
        "issued again: kept its expiry"
    );
    assert_eq!(store.link("nope").await.unwrap(), None);

    let used = store.consume_link("h1").await.unwrap().expect("first use");
    assert_eq!(used.principal, "ana");
    assert_eq!(store.consume_link("h1").await.unwrap(), None, "single use");
    assert!(store
        .link("h1")
        .await
        .unwrap()
        .unwrap()
        .consumed_at
        .is_some());

    tokio::time::sleep(Duration::from_millis(20)).await;
    assert_eq!(store.consume_link("h2").await.unwrap(), None, "expired");
    let expired = store.link("h2").await.unwrap().unwrap();
    assert!(
        expired.expired && expired.consumed_at.is_none(),
        "{expired:?}"
    );
}

async fn a_reminder_is_due_within_its_lead_of_the_deadline_once(kind: Kind) {
    let (_db, store) = fresh(kind).await;
    let lead = Duration::from_secs(2);
    let reminders = || async {
        let due = store.due_reminders("webhook-reminder", lead, 10).await;
        due.unwrap().iter().map(|w| w.id).collect::<Vec<_>>()
    };
    let soon = waiting_until(&store, "sam", finance_two(), Some(4_000)).await;
    let later = waiting_until(&store, "sam", finance_two(), Some(3_600_000)).await;
    waiting(&store, "sam", finance_two()).await;
    assert!(
        reminders().await.is_empty(),
        "opened less than its lead ago: none yet"
    );
    tokio::time::sleep(Duration::from_millis(2_100)).await;
    assert_eq!(
        reminders().await,
        [soon],
        "within its lead of the deadline; the hour-long wait and the one without a deadline are not"
    );
    let mut sent = attempt(soon, true, Duration::ZERO);
    sent.channel = "webhook-reminder";
    store.record_notice(&sent).await.unwrap();
    assert!(reminders().await.is_empty(), "delivered once");
    assert_eq!(
        due(&store).await.len(),
        3,
        "a reminder is not the wait's first notice"
    );
    assert!(!reminders().await.contains(&later));
}
