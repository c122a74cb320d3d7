//! Principals and the console's sessions (`PeopleStore`): each change to a
//! principal writes its audit entry in its own transaction.

use async_trait::async_trait;
use cairn_core::{Access, Actor, AuditEntry, NewPrincipal, Principal, Tenant};
use serde_json::{json, Value};

use crate::contract::{Credential, NewSession, PeopleStore, SessionRecord, TokenDigest};
use crate::raw::nil_run;
use crate::sql::{query, Conn, Row};
use crate::{Error, Result};

use super::boundary::{bounded, placed};
use super::storable::text_ok;
use super::{ScriptHost, TxKind};

/// The columns [`decode`] reads.
macro_rules! cols {
    () => {
        "name, role, groups, tenants, email, token_id, token_hash, created_at, created_by, \
         disabled_at"
    };
}

fn decode(row: &Row) -> Result<Credential> {
    let nil = nil_run();
    let name = row.text("name")?;
    let bad = |what: String| Error::Corruption(cairn_core::Corruption::new(nil, what));
    let role = row.text("role")?;
    let role: Access = role
        .parse()
        .map_err(|_| bad(format!("principal `{name}`'s role `{role}` is not one")))?;
    let list = |col: &str| -> Result<Vec<String>> {
        serde_json::from_value(row.json(col, nil, "a principal's list")?)
            .map_err(|e| bad(format!("principal `{name}`'s {col} do not decode: {e}")))
    };
    let tenants = list("tenants")?
        .into_iter()
        .map(Tenant::new)
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(|e| bad(format!("principal `{name}`: {e}")))?;
    Ok(Credential {
        principal: Principal {
            groups: list("groups")?,
            tenants,
            email: row.opt_text("email")?,
            role,
            token_id: row.text("token_id")?,
            created_at: row.time("created_at", nil, "a principal's creation")?,
            created_by: row.text("created_by")?,
            disabled_at: row.opt_time("disabled_at", nil, "a principal's disabling")?,
            name,
        },
        hash: row.text("token_hash")?,
    })
}

async fn find_in(c: &mut Conn<'_>, name: &str) -> Result<Principal> {
    let sql = concat!("SELECT ", cols!(), " FROM principals WHERE name = :name");
    let row = c
        .fetch_found(query(sql).bind("name", name), || {
            Error::PrincipalNotFound(name.to_owned())
        })
        .await?;
    Ok(decode(&row)?.principal)
}

/// The audit entry of a change to principal `name` by `by`.
async fn audited(c: &mut Conn<'_>, by: &Actor, action: &str, detail: Value) -> Result<()> {
    super::audited::record_in(c, &AuditEntry::of(by, action, detail)).await
}

async fn add_in(
    c: &mut Conn<'_>,
    new: &NewPrincipal,
    token: &TokenDigest,
    by: &Actor,
) -> Result<Principal> {
    let inserted = c
        .execute(
            query(
                "INSERT INTO principals (name, role, groups, tenants, email, token_id, \
                 token_hash, created_at, created_by) VALUES (:name, :role, :groups, :tenants, \
                 :email, :token_id, :hash, {now}, :by) ON CONFLICT (name) DO NOTHING",
            )
            .bind("name", new.name.as_str())
            .bind("role", new.role.as_str())
            .bind("groups", json!(new.groups))
            .bind("tenants", json!(new.tenants))
            .bind("email", new.email.as_deref())
            .bind("token_id", token.id.as_str())
            .bind("hash", token.hash.as_str())
            .bind("by", by.by.as_str()),
        )
        .await?;
    if inserted == 0 {
        return Err(Error::PrincipalExists(new.name.clone()));
    }
    let detail = json!({"name": new.name, "role": new.role, "groups": new.groups,
        "tenants": new.tenants, "token_id": token.id});
    audited(c, by, "principal_added", detail).await?;
    find_in(c, &new.name).await
}

async fn disable_in(c: &mut Conn<'_>, name: &str, by: &Actor) -> Result<Principal> {
    let before = find_in(c, name).await?;
    if before.is_disabled() {
        return Ok(before);
    }
    c.execute(
        query("UPDATE principals SET disabled_at = {now} WHERE name = :name").bind("name", name),
    )
    .await?;
    end_sessions_in(c, name).await?;
    audited(c, by, "principal_disabled", json!({ "name": name })).await?;
    find_in(c, name).await
}

async fn rotate_in(
    c: &mut Conn<'_>,
    name: &str,
    token: &TokenDigest,
    by: &Actor,
) -> Result<Principal> {
    let before = find_in(c, name).await?;
    c.execute(
        query("UPDATE principals SET token_id = :id, token_hash = :hash WHERE name = :name")
            .bind("name", name)
            .bind("id", token.id.as_str())
            .bind("hash", token.hash.as_str()),
    )
    .await?;
    end_sessions_in(c, name).await?;
    let detail = json!({"name": name, "old_token_id": before.token_id, "token_id": token.id});
    audited(c, by, "token_rotated", detail).await?;
    find_in(c, name).await
}

async fn end_sessions_in(c: &mut Conn<'_>, name: &str) -> Result<()> {
    c.execute(query("DELETE FROM console_sessions WHERE principal = :name").bind("name", name))
        .await?;
    Ok(())
}

async fn principals_in(c: &mut Conn<'_>) -> Result<Vec<Principal>> {
    let rows = c
        .fetch_all(query(concat!(
            "SELECT ",
            cols!(),
            " FROM principals ORDER BY name"
        )))
        .await?;
    rows.iter()
        .map(|r| decode(r).map(|c| c.principal))
        .collect()
}

async fn credential_in(c: &mut Conn<'_>, token_id: &str) -> Result<Option<Credential>> {
    let sql = concat!("SELECT ", cols!(), " FROM principals WHERE token_id = :id");
    let row = c.fetch_optional(query(sql).bind("id", token_id)).await?;
    row.as_ref().map(decode).transpose()
}

/// Sessions one principal keeps at once: a sign-in beyond ends its oldest.
const MAX_SESSIONS: i64 = 1000;

async fn open_session_in(c: &mut Conn<'_>, s: &NewSession) -> Result<()> {
    c.execute(query(
        "DELETE FROM console_sessions WHERE expires_at < {now}",
    ))
    .await?;
    c.execute(
        query(
            "INSERT INTO console_sessions (id_hash, principal, token_id, csrf, created_at, \
             expires_at) VALUES (:id, :principal, :token, :csrf, {now}, {later:secs})",
        )
        .bind("id", s.id_hash.as_str())
        .bind("token", s.token_id.as_deref())
        .bind("principal", s.principal.as_str())
        .bind("csrf", s.csrf.as_str())
        .bind("secs", s.ttl.as_secs_f64()),
    )
    .await?;
    // The newest beyond the cap, if any: it and older ones end.
    let cut = c
        .fetch_optional(
            query(
                "SELECT created_at FROM console_sessions WHERE principal = :principal \
                 ORDER BY created_at DESC LIMIT 1 OFFSET :keep",
            )
            .bind("principal", s.principal.as_str())
            .bind("keep", MAX_SESSIONS),
        )
        .await?;
    if let Some(row) = cut {
        let at = row.time("created_at", nil_run(), "a session's start")?;
        c.execute(
            query(
                "DELETE FROM console_sessions WHERE principal = :principal \
                 AND created_at <= {time:at}",
            )
            .bind("principal", s.principal.as_str())
            .bind(
                "at",
                at.to_rfc3339_opts(chrono::SecondsFormat::Micros, true),
            ),
        )
        .await?;
    }
    Ok(())
}

async fn session_in(c: &mut Conn<'_>, id_hash: &str) -> Result<Option<SessionRecord>> {
    let row = c
        .fetch_optional(
            query(
                "SELECT principal, token_id, csrf, expires_at FROM console_sessions \
                 WHERE id_hash = :id AND expires_at > {now}",
            )
            .bind("id", id_hash),
        )
        .await?;
    row.map(|r| {
        Ok(SessionRecord {
            principal: r.text("principal")?,
            token_id: r.opt_text("token_id")?,
            csrf: r.text("csrf")?,
            expires_at: r.time("expires_at", nil_run(), "a session's expiry")?,
        })
    })
    .transpose()
}

fn actor_ok(by: &Actor) -> Result<()> {
    text_ok("`by`", Some(&by.by))?;
    text_ok("the client", by.origin.client.as_deref())
}

#[async_trait]
impl<H: ScriptHost> PeopleStore for H {
    async fn add_principal(
        &self,
        new: &NewPrincipal,
        token: &TokenDigest,
        by: &Actor,
    ) -> Result<Principal> {
        actor_ok(by)?;
        let (new, token, by) = (new.clone(), token.clone(), by.clone());
        let write = self.tx(
            TxKind::Write,
            script!(|c| add_in(c, &new, &token, &by).await),
        );
        bounded("add_principal", self.target(), None, write).await
    }

    async fn principals(&self) -> Result<Vec<Principal>> {
        let read = self.tx(TxKind::Single, script!(|c| principals_in(c).await));
        placed(self.target(), None, read).await
    }

    async fn principal(&self, name: &str) -> Result<Option<Principal>> {
        let name = name.to_owned();
        let read = self.tx(
            TxKind::Single,
            script!(|c| match find_in(c, &name).await {
                Err(Error::PrincipalNotFound(_)) => Ok(None),
                found => found.map(Some),
            }),
        );
        placed(self.target(), None, read).await
    }

    async fn credential(&self, token_id: &str) -> Result<Option<Credential>> {
        text_ok("the token id", Some(token_id))?;
        let id = token_id.to_owned();
        let read = self.tx(TxKind::Single, script!(|c| credential_in(c, &id).await));
        placed(self.target(), None, read).await
    }

    async fn disable_principal(&self, name: &str, by: &Actor) -> Result<Principal> {
        actor_ok(by)?;
        text_ok("the name", Some(name))?;
        let (name, by) = (name.to_owned(), by.clone());
        let write = self.tx(TxKind::Write, script!(|c| disable_in(c, &name, &by).await));
        bounded("disable_principal", self.target(), None, write).await
    }

    async fn rotate_token(&self, name: &str, token: &TokenDigest, by: &Actor) -> Result<Principal> {
        actor_ok(by)?;
        text_ok("the name", Some(name))?;
        let (name, token, by) = (name.to_owned(), token.clone(), by.clone());
        let write = self.tx(
            TxKind::Write,
            script!(|c| rotate_in(c, &name, &token, &by).await),
        );
        bounded("rotate_token", self.target(), None, write).await
    }

    async fn open_session(&self, session: &NewSession) -> Result<()> {
        let session = session.clone();
        let write = self.tx(
            TxKind::Write,
            script!(|c| open_session_in(c, &session).await),
        );
        bounded("open_session", self.target(), None, write).await
    }

    async fn session(&self, id_hash: &str) -> Result<Option<SessionRecord>> {
        let id = id_hash.to_owned();
        let read = self.tx(TxKind::Single, script!(|c| session_in(c, &id).await));
        placed(self.target(), None, read).await
    }

    async fn close_session(&self, id_hash: &str) -> Result<()> {
        let id = id_hash.to_owned();
        let write = self.tx(
            TxKind::Single,
            script!(|c| {
                c.execute(
                    query("DELETE FROM console_sessions WHERE id_hash = :id")
                        .bind("id", id.as_str()),
                )
                .await?;
                Ok(())
            }),
        );
        bounded("close_session", self.target(), None, write).await
    }
}
