//! The files a CLI process reads its configuration from, named by
//! environment variables and read when a command opens its engine:
//! `CAIRN_PRICES` (`cairn::PriceTable`) and `CAIRN_LIMITS`
//! (`cairn::LimitTable`). One that does not read is a usage error (exit 2),
//! so a process never runs unpriced or unlimited by mistake.

use std::sync::Arc;

use cairn::{LimitTable, PriceTable};

use crate::input::usage;

/// The price table `CAIRN_PRICES` names, if it names one.
pub fn prices() -> anyhow::Result<Option<Arc<PriceTable>>> {
    from_env("CAIRN_PRICES", |text| {
        PriceTable::parse(text).map_err(|e| e.to_string())
    })
}

/// The limits per provider key `CAIRN_LIMITS` names, if it names one.
pub fn key_limits() -> anyhow::Result<Option<Arc<LimitTable>>> {
    from_env("CAIRN_LIMITS", |text| {
        LimitTable::parse(text).map_err(|e| e.to_string())
    })
}

/// Notices of open waits (`cairn serve`): `CAIRN_NOTIFY_URL`, the
/// receiver, and `CAIRN_NOTIFY_SECRET`, its Standard Webhooks secret
/// (`whsec_` and base64); both or neither. `CAIRN_NOTIFY_LINK_TTL` (an
/// age, default 3d): how long a link answers.
pub fn notify() -> anyhow::Result<Option<cairn_server::NotifyOptions>> {
    let var = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
    let (url, secret) =
        match (var("CAIRN_NOTIFY_URL"), var("CAIRN_NOTIFY_SECRET")) {
            (None, None) => return Ok(None),
            (Some(url), Some(secret)) => (url, secret),
            _ => return Err(usage(
                "set both CAIRN_NOTIFY_URL and CAIRN_NOTIFY_SECRET (whsec_ and base64), or neither",
            )),
        };
    let url =
        reqwest::Url::parse(url.trim()).map_err(|e| usage(format!("CAIRN_NOTIFY_URL: {e}")))?;
    let link_ttl = match var("CAIRN_NOTIFY_LINK_TTL") {
        Some(age) => {
            cairn::parse_age(&age).map_err(|e| usage(format!("CAIRN_NOTIFY_LINK_TTL: {e}")))?
        }
        None => std::time::Duration::from_secs(3 * 86_400),
    };
    Ok(Some(cairn_server::NotifyOptions {
        url,
        secret: secret.trim().to_owned(),
        link_ttl,
    }))
}

/// The file environment variable `var` names, parsed; `None` when it is
/// unset or empty.
fn from_env<T>(
    var: &str,
    parse: impl FnOnce(&str) -> Result<T, String>,
) -> anyhow::Result<Option<Arc<T>>> {
    let Some(path) = std::env::var_os(var).filter(|p| !p.is_empty()) else {
        return Ok(None);
    };
    let shown = std::path::Path::new(&path).display().to_string();
    let text = std::fs::read_to_string(&path).map_err(|e| usage(format!("{var}={shown}: {e}")))?;
    let table = parse(&text).map_err(|e| usage(format!("{var}={shown}: {e}")))?;
    Ok(Some(Arc::new(table)))
}
