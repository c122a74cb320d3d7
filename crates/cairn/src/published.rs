//! Values a run published for its callers (`cairn_core::published`): the
//! newest `value_published` event of each key, read from the run's events.

use std::collections::BTreeMap;

use cairn_core::event::payload::ValuePublished;
use cairn_core::{EventData, EventKind, Published, RunId};

use crate::{Engine, Result};

impl Engine {
    /// The newest value of each key run `id` published, by key.
    pub async fn published(&self, id: RunId) -> Result<Vec<Published>> {
        let events = self
            .store()
            .events_of_kind(id, EventKind::ValuePublished)
            .await?;
        let mut newest: BTreeMap<String, Published> = BTreeMap::new();
        for e in events {
            let Ok(EventData::ValuePublished(ValuePublished {
                key,
                value,
                idx,
                attempt,
            })) = e.payload()
            else {
                continue;
            };
            let p = Published {
                key: key.clone(),
                value,
                idx,
                attempt,
                at: e.at,
            };
            newest.insert(key, p);
        }
        Ok(newest.into_values().collect())
    }

    /// The newest value run `id` published under `key`, if any.
    pub async fn published_value(&self, id: RunId, key: &str) -> Result<Option<Published>> {
        let all = self.published(id).await?;
        Ok(all.into_iter().find(|p| p.key == key))
    }
}
