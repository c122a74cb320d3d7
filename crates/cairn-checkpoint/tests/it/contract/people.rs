//! Principals, sessions and the audit: `add_principal` stores a principal
//! once (a second of the same name is refused, nothing changed) and audits
//! it; `credential` finds it by its token's id; `disable_principal` and
//! `rotate_token` end its sessions; an operator action whose actor names a
//! channel is an audit entry in its transaction, one without is not, and
//! `record` stores a refusal.

use std::time::Duration;

use cairn_checkpoint::{Action, Error, NewSession, TokenDigest};
use cairn_core::{Access, Actor, AuditFilter, NewPrincipal, Origin, Tenant, Via};
use cairn_testkit::{both, Kind};

use super::Db;
use crate::{each, fresh, new_run};

both!(
    a_principal_is_stored_once_found_by_its_token_and_audited,
    disabling_or_rotating_ends_sessions_and_old_tokens,
    an_action_through_a_channel_is_audited_and_one_without_is_not,
);

fn token(id: &str) -> TokenDigest {
    TokenDigest {
        id: id.to_owned(),
        hash: format!("hash-of-{id}"),
    }
}

fn admin() -> Actor {
    Actor::new("root").from(Origin {
        via: Some(Via::Api),
        token: Some("t-root".into()),
        client: Some("127.0.0.1".into()),
        note: None,
    })
}

fn ana() -> NewPrincipal {
    NewPrincipal {
        name: "ana".into(),
        role: Access::Operator,
        groups: vec!["finance".into()],
        tenants: vec![Tenant::new("acme").unwrap()],
        email: Some("ana@example.com".into()),
    }
}

async fn a_principal_is_stored_once_found_by_its_token_and_audited(kind: Kind) {
    let (_db, store) = fresh(kind).await;
    let added = store
        .add_principal(&ana(), &token("t1"), &admin())
        .await
        .unwrap();
    assert_eq!((added.name.as_str(), added.role), ("ana", Access::Operator));
    assert_eq!(added.groups, ["finance"]);
    assert_eq!(added.email.as_deref(), Some("ana@example.com"));
    assert_eq!(added.tenants, [Tenant::new("acme").unwrap()]);
    assert_eq!(
        (added.token_id.as_str(), added.created_by.as_str()),
        ("t1", "root")
    );
    assert!(!added.is_disabled());

    let again = NewPrincipal {
        role: Access::Admin,
        ..ana()
    };
    match store.add_principal(&again, &token("t2"), &admin()).await {
        Err(Error::PrincipalExists(name)) => assert_eq!(name, "ana"),
        other => panic!("a second `ana`: {other:?}"),
    }
    assert_eq!(
        store.principals().await.unwrap(),
        std::slice::from_ref(&added),
        "unchanged"
    );
    let found = store.credential("t1").await.unwrap().expect("found by id");
    assert_eq!(
        (&found.principal, found.hash.as_str()),
        (&added, "hash-of-t1")
    );
    assert_eq!(store.credential("t2").await.unwrap(), None);
    assert_eq!(
        store.principal("ana").await.unwrap(),
        Some(found.principal.clone())
    );
    assert_eq!(store.principal("bob").await.unwrap(), None);

    let audit = store.audit(&AuditFilter::default()).await.unwrap();
    assert_eq!(audit.len(), 1, "{audit:?}");
    let entry = &audit[0];
    assert_eq!((entry.principal.as_str(), entry.via), ("root", Via::Api));
    assert_eq!(entry.action, "principal_added");
    assert_eq!(entry.token.as_deref(), Some("t-root"));
    assert_eq!(entry.client.as_deref(), Some("127.0.0.1"));
    assert_eq!(entry.detail["name"], "ana");
}

async fn session_for(store: &Db, id: &str) -> Option<String> {
    store.session(id).await.unwrap().map(|s| s.principal)
}

async fn open(store: &Db, id: &str, ttl: Duration) {
    let session = NewSession {
        id_hash: id.to_owned(),
        principal: "ana".into(),
        token_id: Some("t1".into()),
        csrf: format!("csrf-{id}"),
        ttl,
    };
    store.open_session(&session).await.unwrap();
}

async fn disabling_or_rotating_ends_sessions_and_old_tokens(kind: Kind) {
    let (_db, store) = fresh(kind).await;
    store
        .add_principal(&ana(), &token("t1"), &admin())
        .await
        .unwrap();
    open(&store, "s1", Duration::from_secs(600)).await;
    open(&store, "gone", Duration::from_millis(1)).await;
    tokio::time::sleep(Duration::from_millis(20)).await;
    let s1 = store.session("s1").await.unwrap().expect("open");
    assert_eq!(
        (s1.principal.as_str(), s1.csrf.as_str()),
        ("ana", "csrf-s1")
    );
    assert_eq!(s1.token_id.as_deref(), Some("t1"));
    assert_eq!(session_for(&store, "gone").await, None, "expired");
    store.close_session("s1").await.unwrap();
    assert_eq!(session_for(&store, "s1").await, None, "closed");

    open(&store, "s2", Duration::from_secs(600)).await;
    let rotated = store
        .rotate_token("ana", &token("t3"), &admin())
        .await
        .unwrap();
    assert_eq!(rotated.token_id, "t3");
    assert_eq!(
        store.credential("t1").await.unwrap(),
        None,
        "old token gone"
    );
    assert!(store.credential("t3").await.unwrap().is_some());
    assert_eq!(
        session_for(&store, "s2").await,
        None,
        "rotating ends sessions"
    );

    open(&store, "s3", Duration::from_secs(600)).await;
    let disabled = store.disable_principal("ana", &admin()).await.unwrap();
    assert!(disabled.is_disabled());
    assert_eq!(
        session_for(&store, "s3").await,
        None,
        "disabling ends sessions"
    );
    let again = store.disable_principal("ana", &admin()).await.unwrap();
    assert_eq!(
        again.disabled_at, disabled.disabled_at,
        "disabling twice changes nothing"
    );
    match store.disable_principal("bob", &admin()).await {
        Err(Error::PrincipalNotFound(name)) => assert_eq!(name, "bob"),
        other => panic!("an unknown principal: {other:?}"),
    }
    let actions: Vec<_> = each(store.audit(&AuditFilter::default()).await.unwrap(), |e| {
        e.action
    });
    assert_eq!(
        actions,
        ["principal_added", "token_rotated", "principal_disabled"]
    );
}

async fn an_action_through_a_channel_is_audited_and_one_without_is_not(kind: Kind) {
    let (_db, store) = fresh(kind).await;
    let (a, b) = (
        store.submit(new_run(2, None)).await.unwrap().run.id,
        store.submit(new_run(2, None)).await.unwrap().run.id,
    );
    store
        .act(a, Action::Cancel, &Actor::new("engine"))
        .await
        .unwrap();
    assert!(store
        .audit(&AuditFilter::default())
        .await
        .unwrap()
        .is_empty());

    let by = admin().because("wrong input");
    store.act(b, Action::Cancel, &by).await.unwrap();
    let audit = store.audit(&AuditFilter::default()).await.unwrap();
    assert_eq!(audit.len(), 1, "{audit:?}");
    assert_eq!(
        (audit[0].action.as_str(), audit[0].run_id),
        ("run_cancelled", Some(b))
    );
    assert_eq!(audit[0].detail["reason"], "wrong input");

    let only = |principal: &str| AuditFilter {
        principal: Some(principal.into()),
        ..AuditFilter::default()
    };
    assert_eq!(store.audit(&only("root")).await.unwrap(), audit);
    assert!(store.audit(&only("ana")).await.unwrap().is_empty());
    let later = AuditFilter {
        since: Some(audit[0].at + chrono::Duration::seconds(5)),
        ..AuditFilter::default()
    };
    assert!(store.audit(&later).await.unwrap().is_empty(), "--since");
    let after = AuditFilter {
        after: Some(audit[0].id),
        ..AuditFilter::default()
    };
    assert!(
        store.audit(&after).await.unwrap().is_empty(),
        "a page after the last"
    );

    let refusal = cairn_core::AuditEntry {
        action: "refused".into(),
        detail: serde_json::json!({"why": "not an approver"}),
        ..audit[0].clone()
    };
    store.record(&refusal).await.unwrap();
    let page = store.audit(&after).await.unwrap();
    assert_eq!(page.len(), 1, "{page:?}");
    assert!(page[0].id > audit[0].id, "the store numbers entries");
    assert_eq!(
        (page[0].action.as_str(), &page[0].detail),
        ("refused", &refusal.detail)
    );
}
