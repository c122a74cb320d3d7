//! One function per property of issue 51, each over the paired operations
//! and the final state, each returning its violations. Pure: no I/O.

mod answers;
mod effects;
mod holder;
mod liveness;
mod reads;
mod submits;

pub use answers::answers_and_signals;
pub use effects::effects_per_attempt;
pub use holder::single_holder;
pub use liveness::{not_vacuous, nothing_stranded};
pub use reads::monotone_reads;
pub use submits::submits;
