//! The checker's own tests: hand-written histories, one per violation, each
//! caught by the right property with the right events; and clean histories,
//! with unknown outcomes resolving either way, that pass.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod answers;
mod build;
mod clean;
mod effects;
mod holder;
mod liveness;
mod parse;
mod reads;
mod submits;
