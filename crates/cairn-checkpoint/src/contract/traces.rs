//! Trace export: the runs whose events are past their export cursor.

use async_trait::async_trait;

use crate::{Result, TraceAdvance, TraceWork};

/// Trace export: the runs whose events are past their export cursor.
#[async_trait]
pub trait TraceStore: Send + Sync + 'static {
    /// Up to `limit` sampled runs with events past their export cursor.
    async fn trace_pending(&self, limit: usize) -> Result<Vec<TraceWork>>;

    /// Moves a run's export cursor after its spans were sent; `false` if
    /// another exporter moved it first (both sent that batch).
    async fn trace_advance(&self, advance: &TraceAdvance) -> Result<bool>;
}
