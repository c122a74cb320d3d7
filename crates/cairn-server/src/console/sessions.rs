//! The console's signed-in sessions: kept in memory by the digest of
//! their cookie value (never the value itself), each with its form token,
//! expiring after a fixed time, at most `MAX_SESSIONS` at once.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Instant;

use sha2::{Digest, Sha256};

use super::{MAX_SESSIONS, SESSION_TTL};

/// Signed-in sessions, by the digest of their cookie value, and the
/// development mode's form token.
pub(crate) struct Sessions {
    open: Mutex<HashMap<[u8; 32], Session>>,
    pub(super) dev_csrf: String,
}

impl Default for Sessions {
    fn default() -> Self {
        Sessions {
            open: Mutex::default(),
            dev_csrf: secret(),
        }
    }
}

#[derive(Clone)]
pub(super) struct Session {
    pub(super) expires: Instant,
    pub(super) csrf: String,
}

impl Sessions {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<[u8; 32], Session>> {
        self.open.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A new session: its cookie value (returned once, kept as a digest).
    /// Expired sessions are dropped, and the oldest beyond the cap.
    pub(super) fn open(&self) -> String {
        let id = secret();
        let now = Instant::now();
        let mut sessions = self.lock();
        sessions.retain(|_, s| s.expires > now);
        while sessions.len() >= MAX_SESSIONS {
            // Every session lasts as long: the first to expire is the oldest.
            let oldest = sessions
                .iter()
                .min_by_key(|(_, s)| s.expires)
                .map(|(k, _)| *k);
            match oldest {
                Some(key) => sessions.remove(&key),
                None => break,
            };
        }
        sessions.insert(
            digest(&id),
            Session {
                expires: now + SESSION_TTL,
                csrf: secret(),
            },
        );
        id
    }

    pub(super) fn find(&self, id: &str) -> Option<Session> {
        let mut sessions = self.lock();
        let key = digest(id);
        match sessions.get(&key) {
            Some(s) if s.expires > Instant::now() => Some(s.clone()),
            Some(_) => {
                sessions.remove(&key);
                None
            }
            None => None,
        }
    }

    pub(super) fn close(&self, id: &str) {
        self.lock().remove(&digest(id));
    }
}

/// 244 random bits (two UUID v4s), hex.
pub(super) fn secret() -> String {
    format!(
        "{}{}",
        uuid::Uuid::new_v4().simple(),
        uuid::Uuid::new_v4().simple()
    )
}

fn digest(id: &str) -> [u8; 32] {
    Sha256::digest(id.as_bytes()).into()
}
