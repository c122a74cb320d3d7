//! Test fixtures: stored events as their writers store them. A case names
//! only the fields it is about; [`event`] fills in the rest
//! (`cairn_testkit::events`) and refuses a fixture that still does not
//! decode as its kind's payload (a shape no writer stores would test
//! nothing).

use chrono::{DateTime, Utc};
use serde_json::Value;

use cairn::{EventData, EventKind, EventRecord};

/// Event `seq` of kind `kind` at `at`: `data` over its kind's filler.
pub(crate) fn event(seq: i64, kind: EventKind, at: DateTime<Utc>, data: Value) -> EventRecord {
    let full = cairn_testkit::events::complete(kind.as_str(), data);
    if let Err(e) = EventData::decode(kind, &full) {
        panic!("fixture {full}: {e}");
    }
    EventRecord {
        run_id: cairn::RunId::new(),
        seq,
        at,
        kind,
        data: full,
    }
}
