//! The price table of the CLI's processes: `CAIRN_PRICES` names a TOML
//! file (`cairn::PriceTable`), read when a command opens its engine; one
//! that does not read is a usage error (exit 2), so a process never runs
//! unpriced by mistake.

use std::sync::Arc;

use cairn::PriceTable;

use crate::input::usage;

/// The table `CAIRN_PRICES` names, if it names one.
pub fn table() -> anyhow::Result<Option<Arc<PriceTable>>> {
    let Some(path) = std::env::var_os("CAIRN_PRICES").filter(|p| !p.is_empty()) else {
        return Ok(None);
    };
    let shown = std::path::Path::new(&path).display().to_string();
    let text =
        std::fs::read_to_string(&path).map_err(|e| usage(format!("CAIRN_PRICES={shown}: {e}")))?;
    let table =
        PriceTable::parse(&text).map_err(|e| usage(format!("CAIRN_PRICES={shown}: {e}")))?;
    Ok(Some(Arc::new(table)))
}
