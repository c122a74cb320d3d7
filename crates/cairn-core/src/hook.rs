//! Inbound webhooks: a hook maps a POST from another system to a signal
//! (`crate::signal`). Each hook authenticates its caller by one
//! [`Scheme`]: a bearer token of its own (stored as a digest), the
//! Standard Webhooks signature, or GitHub's `X-Hub-Signature-256`. Pure:
//! the checks here take the secret, the headers and the body; storage
//! keeps hooks, the facade renders their mapping.

use std::fmt;
use std::str::FromStr;

use chrono::{DateTime, Utc};
use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// How far a Standard Webhooks timestamp may be from now, either way.
pub const TIMESTAMP_TOLERANCE_SECS: i64 = 300;

/// How a hook authenticates its caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Scheme {
    /// `Authorization: Bearer ch_…`: the hook's own token (only its
    /// SHA-256 is stored).
    Token,
    /// Standard Webhooks: `webhook-id`, `webhook-timestamp` and
    /// `webhook-signature: v1,BASE64(HMAC-SHA256(secret, id.timestamp.body))`,
    /// the secret given as `whsec_BASE64`.
    Standard,
    /// GitHub: `X-Hub-Signature-256: sha256=HEX(HMAC-SHA256(secret, body))`.
    Github,
}

impl Scheme {
    pub fn as_str(self) -> &'static str {
        match self {
            Scheme::Token => "token",
            Scheme::Standard => "standard",
            Scheme::Github => "github",
        }
    }

    /// The header that names a delivery (the default signal id: a
    /// delivery sent again is a no-op), lower case.
    pub fn delivery_header(self) -> &'static str {
        match self {
            Scheme::Token => "idempotency-key",
            Scheme::Standard => "webhook-id",
            Scheme::Github => "x-github-delivery",
        }
    }
}

impl FromStr for Scheme {
    type Err = BadHook;
    fn from_str(s: &str) -> Result<Scheme, BadHook> {
        match s {
            "token" => Ok(Scheme::Token),
            "standard" => Ok(Scheme::Standard),
            "github" => Ok(Scheme::Github),
            other => Err(BadHook(format!(
                "`{other}` is not a hook scheme: give token, standard or github"
            ))),
        }
    }
}

impl fmt::Display for Scheme {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A hook as stored (never its secret).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hook {
    pub name: String,
    pub scheme: Scheme,
    /// A template over `body` and `headers`: the signal's name.
    pub signal: String,
    /// A template: the signal's target (a run id, `key:K`, `thread:T`).
    pub target: String,
    /// An expression: the signal's payload (`None`: the whole body).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub payload: Option<String>,
    /// A template: the signal's idempotency id (`None`: the scheme's
    /// delivery header, when sent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// Signal-with-submit: the crew (by name) a target with no run starts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start: Option<String>,
    pub created_at: DateTime<Utc>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_by: Option<String>,
}

/// A hook definition that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct BadHook(pub String);

/// Why a delivery is refused before anything is read from its body.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Unverified(pub String);

/// A hook name: 1 to 64 letters, digits, `-`, `_` or `.`.
pub fn check_name(name: &str) -> Result<(), BadHook> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    match ok {
        true => Ok(()),
        false => Err(BadHook(format!(
            "hook name `{name}`: use 1 to 64 letters, digits, `-`, `_` or `.`"
        ))),
    }
}

/// What is stored of a token: its SHA-256, hex.
pub fn token_digest(token: &str) -> String {
    hex(&Sha256::digest(token.as_bytes()))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn mac(key: &[u8], parts: &[&[u8]]) -> Vec<u8> {
    // HMAC takes a key of any length.
    let Ok(mut m) = Hmac::<Sha256>::new_from_slice(key) else {
        return vec![];
    };
    for p in parts {
        m.update(p);
    }
    m.finalize().into_bytes().to_vec()
}

/// Equal in time independent of where they differ.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Checks a delivery to a hook of `scheme` whose stored secret is
/// `secret` (a token's digest, or the signing secret); `header` reads a
/// request header by its lower-case name.
pub fn verify(
    scheme: Scheme,
    secret: &str,
    header: impl Fn(&str) -> Option<String>,
    body: &[u8],
    now: DateTime<Utc>,
) -> Result<(), Unverified> {
    let missing = |h: &str| Unverified(format!("the `{h}` header is missing"));
    match scheme {
        Scheme::Token => {
            let auth = header("authorization").ok_or_else(|| missing("authorization"))?;
            let token = auth
                .trim()
                .split_once(' ')
                .filter(|(s, _)| s.eq_ignore_ascii_case("bearer"))
                .map(|(_, t)| t.trim().to_owned())
                .ok_or_else(|| Unverified("`authorization` is not `Bearer TOKEN`".into()))?;
            match same(token_digest(&token).as_bytes(), secret.as_bytes()) {
                true => Ok(()),
                false => Err(Unverified("the token is not this hook's".into())),
            }
        }
        Scheme::Github => {
            let sig =
                header("x-hub-signature-256").ok_or_else(|| missing("x-hub-signature-256"))?;
            let want = format!("sha256={}", hex(&mac(secret.as_bytes(), &[body])));
            match same(sig.trim().as_bytes(), want.as_bytes()) {
                true => Ok(()),
                false => Err(Unverified("the signature does not match the body".into())),
            }
        }
        Scheme::Standard => standard(secret, &header, body, now),
    }
}

/// The Standard Webhooks check: a fresh timestamp, and one of the
/// signature header's `v1,` signatures over `id.timestamp.body`.
fn standard(
    secret: &str,
    header: &impl Fn(&str) -> Option<String>,
    body: &[u8],
    now: DateTime<Utc>,
) -> Result<(), Unverified> {
    use base64::Engine as _;
    let get = |h: &str| header(h).ok_or_else(|| Unverified(format!("the `{h}` header is missing")));
    let (id, ts, sigs) = (
        get("webhook-id")?,
        get("webhook-timestamp")?,
        get("webhook-signature")?,
    );
    let at: i64 = ts
        .trim()
        .parse()
        .map_err(|_| Unverified("`webhook-timestamp` is not whole seconds".into()))?;
    if (now.timestamp() - at).abs() > TIMESTAMP_TOLERANCE_SECS {
        return Err(Unverified(format!(
            "`webhook-timestamp` is more than {TIMESTAMP_TOLERANCE_SECS} s from now"
        )));
    }
    let b64 = base64::engine::general_purpose::STANDARD;
    let key = b64
        .decode(secret.strip_prefix("whsec_").unwrap_or(secret))
        .map_err(|_| Unverified("the hook's secret is not base64".into()))?;
    let want = mac(
        &key,
        &[id.trim().as_bytes(), b".", ts.trim().as_bytes(), b".", body],
    );
    let matched = sigs
        .split_whitespace()
        .filter_map(|s| s.strip_prefix("v1,"))
        .filter_map(|s| b64.decode(s).ok())
        .any(|s| same(&s, &want));
    match matched {
        true => Ok(()),
        false => Err(Unverified("no `v1` signature matches the body".into())),
    }
}

/// Signs `body` as Standard Webhooks does (for senders and tests): the
/// `webhook-signature` value.
pub fn sign_standard(secret: &str, id: &str, timestamp: i64, body: &[u8]) -> String {
    use base64::Engine as _;
    let b64 = base64::engine::general_purpose::STANDARD;
    let key = b64
        .decode(secret.strip_prefix("whsec_").unwrap_or(secret))
        .unwrap_or_default();
    let ts = timestamp.to_string();
    let sig = mac(&key, &[id.as_bytes(), b".", ts.as_bytes(), b".", body]);
    format!("v1,{}", b64.encode(sig))
}

/// Signs `body` as GitHub does: the `X-Hub-Signature-256` value.
pub fn sign_github(secret: &str, body: &[u8]) -> String {
    format!("sha256={}", hex(&mac(secret.as_bytes(), &[body])))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn headers<'a>(pairs: &'a [(&str, String)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |h| pairs.iter().find(|(k, _)| *k == h).map(|(_, v)| v.clone())
    }

    #[test]
    fn a_standard_signature_is_checked_over_id_timestamp_and_body() {
        // The Standard Webhooks specification's example.
        let secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
        let body = br#"{"test": 2432232314}"#;
        let sig = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=";
        assert_eq!(
            sign_standard(secret, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, body),
            sig
        );
        let now = DateTime::from_timestamp(1614265330 + 10, 0).unwrap();
        let good = [
            ("webhook-id", "msg_p5jXN8AQM9LWM0D4loKWxJek".to_owned()),
            ("webhook-timestamp", "1614265330".to_owned()),
            ("webhook-signature", format!("v1,bm90IHRoaXM= {sig}")),
        ];
        assert_eq!(
            verify(Scheme::Standard, secret, headers(&good), body, now),
            Ok(())
        );
        let tampered = verify(Scheme::Standard, secret, headers(&good), b"{}", now);
        assert!(tampered.is_err());
        let late = DateTime::from_timestamp(1614265330 + 301, 0).unwrap();
        assert!(verify(Scheme::Standard, secret, headers(&good), body, late).is_err());
        assert!(verify(Scheme::Standard, secret, headers(&good[..2]), body, now).is_err());
    }

    #[test]
    fn a_github_signature_and_a_token_are_checked() {
        // GitHub's documented example: secret "It's a Secret to Everybody".
        let secret = "It's a Secret to Everybody";
        let body = b"Hello, World!";
        let sig = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17";
        assert_eq!(sign_github(secret, body), sig);
        let h = [("x-hub-signature-256", sig.to_owned())];
        let now = Utc::now();
        assert_eq!(
            verify(Scheme::Github, secret, headers(&h), body, now),
            Ok(())
        );
        assert!(verify(Scheme::Github, secret, headers(&h), b"Hello", now).is_err());
        let digest = token_digest("ch_abc");
        let auth = [("authorization", "Bearer ch_abc".to_owned())];
        assert_eq!(
            verify(Scheme::Token, &digest, headers(&auth), b"", now),
            Ok(())
        );
        let wrong = [("authorization", "Bearer ch_abd".to_owned())];
        assert!(verify(Scheme::Token, &digest, headers(&wrong), b"", now).is_err());
        assert!(verify(Scheme::Token, &digest, headers(&[]), b"", now).is_err());
    }

    #[test]
    fn names_and_schemes_are_checked() {
        assert!(check_name("stripe-payments.v1").is_ok());
        for bad in ["", "a b", "x/y", &"n".repeat(65)] {
            assert!(check_name(bad).is_err(), "{bad:?}");
        }
        assert_eq!("github".parse::<Scheme>().unwrap(), Scheme::Github);
        assert!("hmac".parse::<Scheme>().is_err());
    }
}
