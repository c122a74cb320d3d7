//! The `cairn` binary as a user runs it: crash tests that SIGKILL real
//! processes, the JSON contracts, exit codes, bad input and step timeouts.
//! Every test spawns the real binary (built with the `failpoints` feature by
//! this crate's dev-dependency) against its own database and temp dir.
#![allow(clippy::unwrap_used, clippy::expect_used)]

/// Turns `fn name(kind: Kind)` helpers into a `name::sqlite` and a
/// `name::postgres` test.
macro_rules! both_backends {
    ($($name:ident),* $(,)?) => {
        $(
            mod $name {
                #[test]
                fn sqlite() {
                    super::$name(cairn_testkit::Kind::Sqlite)
                }
                #[test]
                fn postgres() {
                    super::$name(cairn_testkit::Kind::Postgres)
                }
            }
        )*
    };
}

/// Turns `fn name(setup: Setup)` helpers into four tests: `name::sqlite`,
/// `name::postgres`, and the same with `?durability=process`.
macro_rules! every_setup {
    ($($name:ident),* $(,)?) => {
        $(
            mod $name {
                use crate::support::Setup;
                use cairn_testkit::Kind;
                fn setup(kind: Kind, process_durability: bool) -> Setup {
                    Setup { kind, process_durability }
                }
                #[test]
                fn sqlite() {
                    super::$name(setup(Kind::Sqlite, false))
                }
                #[test]
                fn postgres() {
                    super::$name(setup(Kind::Postgres, false))
                }
                #[test]
                fn sqlite_process_durability() {
                    super::$name(setup(Kind::Sqlite, true))
                }
                #[test]
                fn postgres_process_durability() {
                    super::$name(setup(Kind::Postgres, true))
                }
            }
        )*
    };
}

mod agents;
mod backoff;
mod bad_input;
mod both_ways;
mod boundaries;
mod browser;
mod campaign;
mod children;
mod client;
mod compact;
mod contract;
mod crash;
mod crash_blame;
mod delegate;
mod failover;
mod failures;
mod fanout;
mod fingerprints;
mod first_hour;
mod guides;
mod help;
mod hooks;
mod limits;
mod limits_guard;
mod live;
mod lost_ack;
mod lost_call;
mod mismatch;
mod notices;
mod operators;
mod pooler;
mod schedules;
mod signals;
mod soak;
mod support;
mod tables;
mod terminal;
mod threads;
mod timeout;
mod traces;
mod tree_soak;
mod tree_soak_combined;
mod upgrade;
mod versions;
mod waits;
mod workers;
