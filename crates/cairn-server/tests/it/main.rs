//! Integration tests of the HTTP API: router-level tests through `oneshot`
//! (every route and error, auth, limits, pagination, SSE) and tests through
//! a real socket with the embedded runner, on SQLite and PostgreSQL.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod api;
mod approvals;
mod auth;
mod browser;
mod conformance;
mod console;
mod crews_dir;
mod events;
mod foreign;
mod guide;
mod hardening;
mod operators;
mod people;
mod runs;
mod sessions;
mod socket;
mod support;
mod threads;
mod waits;
mod walkthrough;
mod workers;
