//! The meter: what a run's model use may spend and how fast it may go.
//! Budgets ([`budget`]), provider keys with their pauses and limits
//! ([`keys`], [`declared`]), prices ([`price`]) and tenants ([`tenant`])
//! live here, with the one port through which a step asks storage about
//! them ([`Meter`], implemented by the executor) and what the executor
//! tells a step about its run ([`StepMeter`]).

pub mod budget;
pub mod declared;
pub mod keys;
mod port;
pub mod price;
pub mod tenant;

pub use port::{CallEstimate, Meter, MeterHandle, SentCall, StepMeter};
