//! The dialect layer: what a storage script needs to run on either database
//! (named parameters, `{tokens}`, connections, rows), and nothing it decides.

mod conn;
mod lanes;
mod query;

pub(crate) use conn::{statement_pended, Conn, Pool, Prepare, Row, RUNNABLE};
pub(crate) use lanes::{lanes_for, Lane, Lanes, PING_AFTER_IDLE};
pub(crate) use query::{query, Dialect, Query};
