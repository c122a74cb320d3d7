//! Inbound webhooks: `POST /v1/hooks/NAME` checked by the hook's scheme
//! (`cairn_core::hook`), then mapped to a signal by its templates (over
//! `body`, the delivery's JSON, and `headers`, by lower-case name) and
//! sent as any signal is, by `hook:NAME`. A refused delivery stores
//! nothing; a delivery sent again (the same id) is a no-op.

use base64::Engine as _;
use serde_json::Value;

use cairn_checkpoint::{NewHook, Sent};
use cairn_core::hook::{token_digest, verify};
use cairn_core::{Actor, Hook, Scheme};

use crate::{Engine, Error, Result, SignalRequest, StartRequest};

/// The work a hook's templates may do on one delivery (minijinja fuel).
const FUEL: u64 = 100_000;

/// A hook to create, but its secret (Cairn makes it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HookSpec {
    pub name: String,
    pub scheme: Scheme,
    /// A template: the signal's name (`paid`, `{{ body.type }}`).
    pub signal: String,
    /// A template: its target (`key:{{ body.order }}`).
    pub target: String,
    /// An expression: its payload (default: `body`).
    pub payload: Option<String>,
    /// A template: its idempotency id (default: the scheme's delivery
    /// header).
    pub id: Option<String>,
    /// A crew name: start a run of it when the target has none.
    pub start: Option<String>,
}

/// A created hook and its secret, shown this once: the token (`ch_…`) or
/// the signing secret (`whsec_…` for `standard`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct HookIssued {
    pub hook: Hook,
    pub secret: String,
}

/// One delivery to a hook: its headers (names lower case), raw body and
/// the sender's address as the server saw it.
#[derive(Debug, Clone, Copy)]
pub struct Delivery<'a> {
    pub headers: &'a [(String, String)],
    pub body: &'a [u8],
    pub client: Option<std::net::IpAddr>,
}

impl Delivery<'_> {
    fn header(&self, name: &str) -> Option<String> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
    }
}

fn environment() -> minijinja::Environment<'static> {
    let mut env = minijinja::Environment::new();
    env.set_fuel(Some(FUEL));
    env.set_undefined_behavior(minijinja::UndefinedBehavior::Strict);
    env
}

/// A fresh secret for `scheme`, and what is stored of it.
fn secret(scheme: Scheme) -> (String, String) {
    let bytes: Vec<u8> = [uuid::Uuid::new_v4(), uuid::Uuid::new_v4()]
        .iter()
        .flat_map(|u| u.as_bytes().to_vec())
        .collect();
    match scheme {
        Scheme::Token => {
            let token = format!(
                "ch_{}",
                bytes.iter().map(|b| format!("{b:02x}")).collect::<String>()
            );
            let digest = token_digest(&token);
            (token, digest)
        }
        Scheme::Standard => {
            let s = format!(
                "whsec_{}",
                base64::engine::general_purpose::STANDARD.encode(&bytes)
            );
            (s.clone(), s)
        }
        Scheme::Github => {
            let s = bytes.iter().map(|b| format!("{b:02x}")).collect::<String>();
            (s.clone(), s)
        }
    }
}

impl Engine {
    /// Stores a hook (its templates must compile) and issues its secret.
    pub async fn create_hook(&self, spec: &HookSpec, by: &Actor) -> Result<HookIssued> {
        let env = environment();
        let bad = |what: &str, e: minijinja::Error| {
            Error::Store(cairn_checkpoint::Error::BadHook(format!(
                "its `{what}`: {e}"
            )))
        };
        for (what, t) in [
            ("signal", Some(&spec.signal)),
            ("target", Some(&spec.target)),
            ("id", spec.id.as_ref()),
        ] {
            if let Some(t) = t {
                env.template_from_str(t).map_err(|e| bad(what, e))?;
            }
        }
        if let Some(p) = &spec.payload {
            env.compile_expression(p).map_err(|e| bad("payload", e))?;
        }
        let (shown, stored) = secret(spec.scheme);
        let new = NewHook {
            name: spec.name.clone(),
            scheme: spec.scheme,
            secret: stored,
            signal: spec.signal.clone(),
            target: spec.target.clone(),
            payload: spec.payload.clone(),
            id: spec.id.clone(),
            start: spec.start.clone(),
            by: Some(by.by.clone()),
        };
        let hook = self.store().create_hook(&new).await?;
        Ok(HookIssued {
            hook,
            secret: shown,
        })
    }

    /// Every hook, by name (never a secret).
    pub async fn hooks(&self) -> Result<Vec<Hook>> {
        Ok(self.store().hooks().await?)
    }

    /// Deletes `name`; its token or secret stops working at once.
    pub async fn delete_hook(&self, name: &str) -> Result<()> {
        Ok(self.store().delete_hook(name).await?)
    }

    /// Checks a delivery to hook `name` and sends the signal it maps to.
    /// A signal-with-submit starts `loaded(crew)` when the caller has that
    /// crew loaded (a server's `--crews`), else its newest stored version.
    pub async fn deliver(
        &self,
        name: &str,
        delivery: Delivery<'_>,
        loaded: impl Fn(&str) -> Option<crate::Crew>,
    ) -> Result<Sent> {
        let (hook, secret) = self.store().hook_secret(name).await?;
        verify(
            hook.scheme,
            &secret,
            |h| delivery.header(h),
            delivery.body,
            chrono::Utc::now(),
        )
        .map_err(Error::HookRefused)?;
        let req = mapped(&hook, delivery)?;
        // Recorded `via: hook`, so every delivery is in the audit.
        let by = Actor::new(format!("hook:{}", hook.name)).from(cairn_core::Origin {
            via: Some(cairn_core::people::Via::Hook),
            client: delivery.client.map(|c| c.to_string()),
            ..Default::default()
        });
        let crew = hook.start.as_deref().and_then(loaded);
        self.send_signal(&req, crew.as_ref(), &by).await
    }
}

/// The signal a verified delivery maps to.
fn mapped(hook: &Hook, delivery: Delivery<'_>) -> Result<SignalRequest> {
    let refuse =
        |what: &str, e: String| Error::BadDelivery(format!("hook `{}`: {what}: {e}", hook.name));
    let body: Value = serde_json::from_slice(delivery.body)
        .map_err(|e| refuse("the body is not JSON", e.to_string()))?;
    let headers: serde_json::Map<String, Value> = delivery
        .headers
        .iter()
        .map(|(k, v)| (k.clone(), Value::String(v.clone())))
        .collect();
    let ctx = minijinja::context! { body => body.clone(), headers => headers };
    let env = environment();
    let render = |what: &str, t: &str| {
        env.render_str(t, &ctx)
            .map(|s| s.trim().to_owned())
            .map_err(|e| refuse(what, e.to_string()))
    };
    let payload = match &hook.payload {
        None => body.clone(),
        Some(expr) => {
            let compiled = env
                .compile_expression(expr)
                .map_err(|e| refuse("payload", e.to_string()))?;
            let v = compiled
                .eval(&ctx)
                .map_err(|e| refuse("payload", e.to_string()))?;
            serde_json::to_value(&v).map_err(|e| refuse("payload", e.to_string()))?
        }
    };
    let id = match &hook.id {
        Some(t) => Some(render("id", t)?),
        None => delivery.header(hook.scheme.delivery_header()),
    };
    Ok(SignalRequest {
        target: render("target", &hook.target)?,
        name: render("signal", &hook.signal)?,
        payload,
        id: id.filter(|i| !i.is_empty()),
        start: hook.start.as_ref().map(|crew| StartRequest {
            crew: crew.clone(),
            version: None,
            input: None,
        }),
        traceparent: delivery.header("traceparent"),
    })
}
