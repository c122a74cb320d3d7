//! A `command` step's permit on the key its `limit_key` names: taken before
//! the program starts, so every process on the database holds the key's
//! limits (calls in flight, per minute) across its programs; while none is
//! free the step is deferred at its attempt (`step_deferred`), holding
//! nothing, and a freed permit wakes it.

use cairn_core::Stop;
use cairn_core::{Admission, Deferral, ErrorInfo, Held, MeterHandle, Permit};

/// The permit for one run of the program, or why it must wait. A key
/// without limits gives none and costs a read.
pub(crate) async fn take(
    meter: &MeterHandle,
    key: &str,
    declared: Option<cairn_core::Declared>,
) -> Result<Option<Permit>, Stop> {
    let admission = meter
        .admit(key, 0, declared)
        .await
        .map_err(|e| ErrorInfo::new(cairn_core::ErrorKind::Agent, e.to_string(), true))?;
    match admission {
        Admission::Go(permit) => Ok(permit),
        Admission::Wait { after, why } => {
            let said = match why {
                Held::Paused => format!("{key} is paused"),
                other => format!("{key}: {}", other.as_str()),
            };
            Err(Stop::deferred(
                format!(
                    "{said}; the program was not started, looking again in at most {} ms",
                    after.as_millis()
                ),
                Deferral {
                    key: key.to_owned(),
                    after,
                    observed: false,
                },
            ))
        }
    }
}
