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
