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

/// Notices of open waits (`cairn serve`): `CAIRN_NOTIFY_URL`, a webhook
/// receiver, and/or `CAIRN_SMTP_URL` (`smtp://HOST:PORT`, a relay) with
/// `CAIRN_SMTP_FROM`; `CAIRN_NOTIFY_SECRET` (`whsec_` and base64) signs
/// the webhooks and the links, and is needed with either.
/// `CAIRN_NOTIFY_LINK_TTL` (an age, default 3d): how long a link answers.
/// `CAIRN_NOTIFY_REMIND` (an age, default 1h; `off`): how long before an
/// open wait's deadline a reminder goes out.
pub fn notify() -> anyhow::Result<Option<cairn_server::NotifyOptions>> {
    let var = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
    let (url, smtp) = (var("CAIRN_NOTIFY_URL"), var("CAIRN_SMTP_URL"));
    let secret = var("CAIRN_NOTIFY_SECRET");
    if url.is_none() && smtp.is_none() {
        return match secret {
            Some(_) => Err(usage(
                "CAIRN_NOTIFY_SECRET is set but neither CAIRN_NOTIFY_URL nor CAIRN_SMTP_URL: \
                 set where notices go, or unset the secret",
            )),
            None => Ok(None),
        };
    }
    let secret = secret.ok_or_else(|| {
        usage("set CAIRN_NOTIFY_SECRET (whsec_ and base64): it signs the notices and their links")
    })?;
    let url = url
        .map(|u| reqwest::Url::parse(u.trim()).map_err(|e| usage(format!("CAIRN_NOTIFY_URL: {e}"))))
        .transpose()?;
    let from = var("CAIRN_SMTP_FROM").unwrap_or_else(|| "cairn@localhost".to_owned());
    let mail = smtp
        .map(|s| cairn_server::MailOptions::parse(s.trim(), from.trim()).map_err(usage))
        .transpose()?;
    let link_ttl = match var("CAIRN_NOTIFY_LINK_TTL") {
        Some(age) => {
            cairn::parse_age(&age).map_err(|e| usage(format!("CAIRN_NOTIFY_LINK_TTL: {e}")))?
        }
        None => std::time::Duration::from_secs(3 * 86_400),
    };
    let remind = match var("CAIRN_NOTIFY_REMIND").as_deref().map(str::trim) {
        Some("off") => None,
        Some(age) => Some(
            cairn::parse_age(age)
                .map_err(|e| usage(format!("CAIRN_NOTIFY_REMIND: {e} (or `off`)")))?,
        ),
        None => Some(std::time::Duration::from_secs(3_600)),
    };
    Ok(Some(cairn_server::NotifyOptions {
        url,
        mail,
        secret: secret.trim().to_owned(),
        link_ttl,
        remind,
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
