//! Hooks (`HookStore`): one row each, its secret beside it.

use async_trait::async_trait;
use cairn_core::{Hook, Scheme};

use crate::contract::{HookStore, NewHook};
use crate::raw::nil_run;
use crate::sql::{query, Conn, Row};
use crate::{Error, Result};

use super::boundary::{bounded, placed};
use super::storable::text_ok;
use super::{ScriptHost, TxKind};

fn decode(r: &Row) -> Result<(Hook, String)> {
    let name = r.text("name")?;
    let scheme: Scheme = r
        .text("scheme")?
        .parse()
        .map_err(|e: cairn_core::BadHook| {
            Error::Corruption(cairn_core::Corruption::new(
                nil_run(),
                format!("hook `{name}`: {e}"),
            ))
        })?;
    let hook = Hook {
        scheme,
        signal: r.text("signal")?,
        target: r.text("target")?,
        payload: r.opt_text("payload")?,
        id: r.opt_text("id_expr")?,
        start: r.opt_text("start_crew")?,
        created_at: r.time("created_at", nil_run(), "a hook's creation")?,
        created_by: r.opt_text("created_by")?,
        name,
    };
    Ok((hook, r.text("secret")?))
}

async fn find_in(c: &mut Conn<'_>, name: &str) -> Result<(Hook, String)> {
    let sql = "SELECT name, scheme, secret, signal, target, payload, id_expr, start_crew, \
               created_at, created_by FROM hooks WHERE name = :name";
    let row = c.fetch_optional(query(sql).bind("name", name)).await?;
    decode(&row.ok_or_else(|| Error::HookNotFound(name.to_owned()))?)
}

async fn create_in(c: &mut Conn<'_>, new: &NewHook) -> Result<Hook> {
    let inserted = c
        .execute(
            query(
                "INSERT INTO hooks (name, scheme, secret, signal, target, payload, id_expr, \
                 start_crew, created_at, created_by) VALUES (:name, :scheme, :secret, :signal, \
                 :target, :payload, :id, :start, {now}, :by) ON CONFLICT (name) DO NOTHING",
            )
            .bind("name", new.name.as_str())
            .bind("scheme", new.scheme.as_str())
            .bind("secret", new.secret.as_str())
            .bind("signal", new.signal.as_str())
            .bind("target", new.target.as_str())
            .bind("payload", new.payload.as_deref())
            .bind("id", new.id.as_deref())
            .bind("start", new.start.as_deref())
            .bind("by", new.by.as_deref()),
        )
        .await?;
    if inserted == 0 {
        return Err(Error::HookExists(new.name.clone()));
    }
    Ok(find_in(c, &new.name).await?.0)
}

#[async_trait]
impl<H: ScriptHost> HookStore for H {
    async fn create_hook(&self, new: &NewHook) -> Result<Hook> {
        cairn_core::hook::check_name(&new.name).map_err(|e| Error::BadHook(e.0))?;
        for (what, text) in [("signal", Some(&new.signal)), ("target", Some(&new.target))] {
            if text.is_none_or(|t| t.trim().is_empty()) {
                return Err(Error::BadHook(format!("the hook's `{what}` is empty")));
            }
        }
        for text in [&new.signal, &new.target, &new.secret] {
            text_ok("the hook", Some(text))?;
        }
        for text in [&new.payload, &new.id, &new.start, &new.by] {
            text_ok("the hook", text.as_deref())?;
        }
        let new = new.clone();
        let write = self.tx(TxKind::Write, script!(|c| create_in(c, &new).await));
        bounded("create_hook", self.target(), None, write).await
    }

    async fn hooks(&self) -> Result<Vec<Hook>> {
        let read = self.tx(
            TxKind::Single,
            script!(|c| {
                let sql = "SELECT name, scheme, secret, signal, target, payload, id_expr, \
                           start_crew, created_at, created_by FROM hooks ORDER BY name";
                let rows = c.fetch_all(query(sql)).await?;
                rows.iter()
                    .map(|r| decode(r).map(|(h, _)| h))
                    .collect::<Result<Vec<_>>>()
            }),
        );
        placed(self.target(), None, read).await
    }

    async fn hook_secret(&self, name: &str) -> Result<(Hook, String)> {
        let name = name.to_owned();
        let read = self.tx(TxKind::Single, script!(|c| find_in(c, &name).await));
        placed(self.target(), None, read).await
    }

    async fn delete_hook(&self, name: &str) -> Result<()> {
        let name = name.to_owned();
        let write = self.tx(
            TxKind::Write,
            script!(|c| {
                let gone = c
                    .execute(
                        query("DELETE FROM hooks WHERE name = :name").bind("name", name.as_str()),
                    )
                    .await?;
                match gone {
                    0 => Err(Error::HookNotFound(name.clone())),
                    _ => Ok(()),
                }
            }),
        );
        bounded("delete_hook", self.target(), None, write).await
    }
}
