//! Hooks: created once per name (a taken or bad name stores nothing),
//! listed without secrets, read with their secret, deleted.

use cairn_checkpoint::{Error, NewHook};
use cairn_core::Scheme;
use cairn_testkit::{both, Kind};

use crate::{each, fresh};

both!(a_hook_is_stored_once_read_with_its_secret_and_deleted);

fn hook(name: &str) -> NewHook {
    NewHook {
        name: name.to_owned(),
        scheme: Scheme::Github,
        secret: "s3cret".into(),
        signal: "{{ body.type }}".into(),
        target: "key:{{ body.order }}".into(),
        payload: Some("body.data".into()),
        id: None,
        start: Some("payment".into()),
        by: Some("ops".into()),
    }
}

async fn a_hook_is_stored_once_read_with_its_secret_and_deleted(kind: Kind) {
    let (_db, store) = fresh(kind).await;
    let made = store.create_hook(&hook("pay")).await.unwrap();
    assert_eq!(
        (made.scheme, made.payload.as_deref(), made.start.as_deref()),
        (Scheme::Github, Some("body.data"), Some("payment"))
    );
    let taken = store
        .create_hook(&NewHook {
            secret: "other".into(),
            ..hook("pay")
        })
        .await;
    assert!(matches!(taken, Err(Error::HookExists(_))), "{taken:?}");
    for bad in [
        hook("a b"),
        NewHook {
            target: " ".into(),
            ..hook("t")
        },
    ] {
        let refused = store.create_hook(&bad).await;
        assert!(matches!(refused, Err(Error::BadHook(_))), "{refused:?}");
    }
    store.create_hook(&hook("b-second")).await.unwrap();
    let names: Vec<String> = each(store.hooks().await.unwrap(), |h| h.name);
    assert_eq!(names, ["b-second", "pay"]);
    let (read, secret) = store.hook_secret("pay").await.unwrap();
    assert_eq!(
        (read, secret.as_str()),
        (made, "s3cret"),
        "the first secret stands"
    );
    store.delete_hook("pay").await.unwrap();
    assert_gone!(
        Error::HookNotFound(_),
        store.hook_secret("pay"),
        store.delete_hook("pay"),
    );
}
