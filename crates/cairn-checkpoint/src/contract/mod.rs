//! The durability contract, split by concern: one trait per part of what
//! the executor may ask of storage, each implemented once over the storage
//! script (`script/<concern>.rs`). [`Store`] is every part at once, with a
//! blanket implementation, so a caller holds one `Arc<dyn Store>` and
//! brings the parts' methods into scope with `use
//! cairn_checkpoint::prelude::*`.
//!
//! Implementations must be safe to share between tasks and processes;
//! every method is one transaction.

mod audit;
mod budgets;
mod children;
mod crews;
mod hooks;
mod journal;
mod keys;
mod leases;
mod maintenance;
mod notices;
mod operator;
mod people;
mod runs;
mod schedules;
mod signals;
mod threads;
mod traces;
mod waits;
mod workers;

pub use audit::AuditStore;
pub use budgets::BudgetStore;
pub use children::ChildStore;
pub use crews::CrewStore;
pub use hooks::{HookStore, NewHook};
pub use journal::JournalStore;
pub use keys::KeyStore;
pub use leases::LeaseStore;
pub use maintenance::MaintenanceStore;
pub use notices::{LinkRecord, NewLink, NoticeAttempt, NoticeStore};
pub use operator::OperatorStore;
pub use people::{Credential, NewSession, PeopleStore, SessionRecord, TokenDigest};
pub use runs::RunStore;
pub use schedules::{NewSchedule, ScheduleStore, Slot};
pub use signals::{Listening, NewSignal, Sent, SignalStore, StartWith};
pub use threads::ThreadStore;
pub use traces::TraceStore;
pub use waits::WaitStore;
pub use workers::{BlockedRun, Offered, ProcessBeat, ProcessRecord, WorkerStore};

/// `Store`, the whole contract: every concern's trait, and implemented for
/// whatever implements them all (the trait and its blanket implementation
/// name the parts once).
macro_rules! whole_contract {
    ($($part:ident),+) => {
        /// The whole contract: every concern's trait, the workers' registry
        /// among them. Implemented for whatever implements them all
        /// (Cairn's two backends).
        pub trait Store: $($part +)+ Send + Sync + 'static {}

        impl<T> Store for T where T: $($part +)+ Send + Sync + 'static {}
    };
}

whole_contract!(
    RunStore,
    LeaseStore,
    WaitStore,
    OperatorStore,
    JournalStore,
    ThreadStore,
    ChildStore,
    KeyStore,
    BudgetStore,
    CrewStore,
    TraceStore,
    MaintenanceStore,
    WorkerStore,
    PeopleStore,
    AuditStore,
    NoticeStore,
    ScheduleStore,
    SignalStore,
    HookStore
);
