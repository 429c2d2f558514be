//! Authentication: static bearer tokens (kube-apiserver's `--token-auth-file` CSV), bootstrap
//! tokens (Secrets of type `bootstrap.kubernetes.io/token` in kube-system), client certificates
//! (CN = user, O = groups; the chain is verified by TLS before this runs) and the anonymous user
//! a request without credentials is. ServiceAccount tokens are [`super::tokens`]'.
//!
//! Pure. Errors and logs never carry a token or a token secret: they name line numbers and
//! token ids only.

use std::collections::HashMap;

use base64::Engine;
use serde_json::Value;

use crate::user::UserInfo;

/// Added to every authenticated user.
pub const AUTHENTICATED: &str = "system:authenticated";
/// The user a request without credentials is.
pub const ANONYMOUS: &str = "system:anonymous";
/// The group of a request without credentials (and only of such a request).
pub const UNAUTHENTICATED: &str = "system:unauthenticated";
/// The `user.extra` key naming the credential a request was authenticated by: `X509SHA256=<hex>`
/// for a client certificate, `JTI=<id>` for a ServiceAccount token.
pub const CREDENTIAL_ID: &str = "authentication.kubernetes.io/credential-id";
/// Added to every bootstrap token user.
pub const BOOTSTRAPPERS: &str = "system:bootstrappers";
/// The Secret type bootstrap tokens are stored as.
pub const BOOTSTRAP_TOKEN_TYPE: &str = "bootstrap.kubernetes.io/token";

/// A static token file could not be read.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum TokenFileError {
    #[error("token file line {line}: need at least 3 columns (token,user,uid), found {found}")]
    TooFewColumns { line: usize, found: usize },
    #[error("token file line {line}: the {column} column is empty")]
    EmptyColumn { line: usize, column: &'static str },
    #[error("token file line {line}: unterminated quote")]
    UnterminatedQuote { line: usize },
}

/// Users of a static token file.
#[derive(Debug, Clone, Default)]
pub struct StaticTokens {
    users: HashMap<String, UserInfo>,
}

impl StaticTokens {
    /// Parses `token,user,uid[,"group1,group2"]` lines; blank lines are skipped. A later line
    /// with the same token replaces an earlier one (kube-apiserver warns and does the same).
    pub fn parse(csv: &str) -> Result<Self, TokenFileError> {
        let mut users = HashMap::new();
        for (i, raw) in csv.lines().enumerate() {
            let line = i + 1;
            if raw.trim().is_empty() {
                continue;
            }
            let cols = csv_fields(raw).ok_or(TokenFileError::UnterminatedQuote { line })?;
            if cols.len() < 3 {
                return Err(TokenFileError::TooFewColumns {
                    line,
                    found: cols.len(),
                });
            }
            for (idx, column) in [(0, "token"), (1, "user")] {
                if cols[idx].trim().is_empty() {
                    return Err(TokenFileError::EmptyColumn { line, column });
                }
            }
            let groups = cols
                .get(3)
                .map(|g| {
                    g.split(',')
                        .map(str::trim)
                        .filter(|g| !g.is_empty())
                        .map(str::to_string)
                        .collect()
                })
                .unwrap_or_default();
            let mut user = authenticated(cols[1].trim().to_string(), groups);
            user.uid = cols[2].trim().to_string();
            users.insert(cols[0].trim().to_string(), user);
        }
        Ok(StaticTokens { users })
    }

    /// The user a token belongs to.
    pub fn authenticate(&self, token: &str) -> Option<UserInfo> {
        self.users
            .iter()
            .find(|(t, _)| constant_time_eq(t.as_bytes(), token.as_bytes()))
            .map(|(_, u)| u.clone())
    }
}

/// Splits one CSV record (double quotes group commas; `""` is a literal quote).
fn csv_fields(line: &str) -> Option<Vec<String>> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut quoted = false;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match (c, quoted) {
            ('"', true) if chars.peek() == Some(&'"') => {
                chars.next();
                cur.push('"');
            }
            ('"', _) => quoted = !quoted,
            (',', false) => out.push(std::mem::take(&mut cur)),
            (c, _) => cur.push(c),
        }
    }
    if quoted {
        return None;
    }
    out.push(cur);
    Some(out)
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Who a request without credentials is, as kube-apiserver's anonymous authenticator says:
/// `system:anonymous` in `system:unauthenticated` only, so that RBAC gives it exactly what is
/// bound to that group (by default the health and version paths).
pub fn anonymous() -> UserInfo {
    UserInfo {
        name: ANONYMOUS.into(),
        groups: vec![UNAUTHENTICATED.into()],
        ..Default::default()
    }
}

/// A user with `system:authenticated` added.
pub fn authenticated(name: String, mut groups: Vec<String>) -> UserInfo {
    if !groups.iter().any(|g| g == AUTHENTICATED) {
        groups.push(AUTHENTICATED.into());
    }
    UserInfo {
        name,
        groups,
        ..Default::default()
    }
}

/// A bearer token split as a bootstrap token: `<6 [a-z0-9]>.<16 [a-z0-9]>`.
pub fn parse_bootstrap_token(token: &str) -> Option<(&str, &str)> {
    let (id, secret) = token.split_once('.')?;
    let ok = |s: &str, n: usize| {
        s.len() == n
            && s.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
    };
    (ok(id, 6) && ok(secret, 16)).then_some((id, secret))
}

/// The name of the Secret holding bootstrap token `id`.
pub fn bootstrap_secret_name(id: &str) -> String {
    format!("bootstrap-token-{id}")
}

/// Why a bootstrap token was not accepted (for debug logs; names the token id only).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum BootstrapRejection {
    #[error("secret is not of type {BOOTSTRAP_TOKEN_TYPE}")]
    WrongType,
    #[error("token id or secret does not match")]
    Mismatch,
    #[error("usage-bootstrap-authentication is not \"true\"")]
    NotForAuthentication,
    #[error("token expired at {0}")]
    Expired(String),
    #[error("unreadable expiration")]
    BadExpiration,
    #[error("secret is being deleted")]
    Deleting,
    #[error("auth-extra-groups entry {0:?} does not match system:bootstrappers:[a-z0-9:-]*")]
    BadGroup(String),
}

fn secret_data(secret: &Value, key: &str) -> Option<String> {
    let b64 = secret.get("data")?.get(key)?.as_str()?;
    let raw = base64::engine::general_purpose::STANDARD.decode(b64).ok()?;
    String::from_utf8(raw).ok()
}

/// Checks `token` (`id.secret`) against its Secret (as stored: `data` in base64) at `now`
/// and returns the user `system:bootstrap:<id>` with groups from `auth-extra-groups` plus
/// `system:bootstrappers`.
pub fn bootstrap_user(
    id: &str,
    token_secret: &str,
    secret: &Value,
    now: jiff::Timestamp,
) -> Result<UserInfo, BootstrapRejection> {
    if secret.get("type").and_then(Value::as_str) != Some(BOOTSTRAP_TOKEN_TYPE) {
        return Err(BootstrapRejection::WrongType);
    }
    if secret.pointer("/metadata/deletionTimestamp").is_some() {
        return Err(BootstrapRejection::Deleting);
    }
    let stored_id = secret_data(secret, "token-id").unwrap_or_default();
    let stored_secret = secret_data(secret, "token-secret").unwrap_or_default();
    if !constant_time_eq(stored_id.as_bytes(), id.as_bytes())
        || !constant_time_eq(stored_secret.as_bytes(), token_secret.as_bytes())
    {
        return Err(BootstrapRejection::Mismatch);
    }
    if let Some(exp) = secret_data(secret, "expiration") {
        let at: jiff::Timestamp = exp.parse().map_err(|_| BootstrapRejection::BadExpiration)?;
        if at <= now {
            return Err(BootstrapRejection::Expired(exp));
        }
    }
    if secret_data(secret, "usage-bootstrap-authentication").as_deref() != Some("true") {
        return Err(BootstrapRejection::NotForAuthentication);
    }
    // As kube-apiserver lists them: the bootstrappers' group, then the token's own.
    let mut groups = vec![BOOTSTRAPPERS.to_string()];
    if let Some(extra) = secret_data(secret, "auth-extra-groups") {
        for g in extra.split(',').map(str::trim).filter(|g| !g.is_empty()) {
            let rest = g.strip_prefix("system:bootstrappers:").unwrap_or("");
            let valid = !rest.is_empty()
                && rest.len() <= 256
                && rest.bytes().all(|b| {
                    b.is_ascii_lowercase() || b.is_ascii_digit() || b == b':' || b == b'-'
                })
                && rest
                    .bytes()
                    .last()
                    .is_some_and(|b| b.is_ascii_alphanumeric());
            if !valid {
                return Err(BootstrapRejection::BadGroup(g.to_string()));
            }
            groups.push(g.to_string());
        }
    }
    Ok(authenticated(format!("system:bootstrap:{id}"), groups))
}

/// The user a verified client certificate names: subject CN, groups from every O, and the
/// certificate's SHA-256 fingerprint as its credential id.
pub fn certificate_user(der: &[u8]) -> Option<UserInfo> {
    let (_, cert) = x509_parser::parse_x509_certificate(der).ok()?;
    let subject = cert.subject();
    let name = subject
        .iter_common_name()
        .next()?
        .as_str()
        .ok()?
        .to_string();
    if name.is_empty() {
        return None;
    }
    let groups = subject
        .iter_organization()
        .filter_map(|o| o.as_str().ok())
        .map(str::to_string)
        .collect();
    let mut user = authenticated(name, groups);
    let fingerprint = ring::digest::digest(&ring::digest::SHA256, der);
    user.extra.insert(
        CREDENTIAL_ID.into(),
        vec![format!("X509SHA256={}", hex(fingerprint.as_ref()))],
    );
    Some(user)
}

/// Lower-case hexadecimal, as Go's `hex.EncodeToString`.
fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn b64(s: &str) -> String {
        base64::engine::general_purpose::STANDARD.encode(s)
    }

    fn secret(extra: &[(&str, &str)]) -> Value {
        let mut data = serde_json::Map::new();
        for (k, v) in [
            ("token-id", "abcdef"),
            ("token-secret", "0123456789abcdef"),
            ("usage-bootstrap-authentication", "true"),
        ]
        .iter()
        .chain(extra)
        {
            data.insert(k.to_string(), json!(b64(v)));
        }
        json!({"type": BOOTSTRAP_TOKEN_TYPE, "metadata": {"name": "bootstrap-token-abcdef", "namespace": "kube-system"}, "data": data})
    }

    fn now() -> jiff::Timestamp {
        "2026-01-01T00:00:00Z".parse().unwrap()
    }

    #[test]
    fn static_tokens_parse_kube_apiserver_csv_with_quoted_groups() {
        let t = StaticTokens::parse("tok1,alice,1001,\"dev,ops\"\n\ntok2,bob,1002\n").unwrap();
        let alice = t.authenticate("tok1").unwrap();
        assert_eq!(alice.name, "alice");
        assert_eq!(alice.groups, ["dev", "ops", AUTHENTICATED]);
        assert_eq!(t.authenticate("tok2").unwrap().groups, [AUTHENTICATED]);
        assert_eq!(t.authenticate("tok3"), None);
        assert_eq!(t.authenticate("tok"), None);
    }

    #[test]
    fn static_token_file_errors_name_the_line_not_the_token() {
        let err = StaticTokens::parse("ok,alice,1\nsupersecret,bob\n").unwrap_err();
        assert_eq!(err, TokenFileError::TooFewColumns { line: 2, found: 2 });
        assert!(!err.to_string().contains("supersecret"));
        let err = StaticTokens::parse("s3cret,alice,1,\"dev\n").unwrap_err();
        assert_eq!(err, TokenFileError::UnterminatedQuote { line: 1 });
        assert!(matches!(
            StaticTokens::parse(",alice,1"),
            Err(TokenFileError::EmptyColumn {
                line: 1,
                column: "token"
            })
        ));
    }

    #[test]
    fn bootstrap_tokens_have_a_fixed_shape() {
        assert_eq!(
            parse_bootstrap_token("abcdef.0123456789abcdef"),
            Some(("abcdef", "0123456789abcdef"))
        );
        assert_eq!(parse_bootstrap_token("ABCDEF.0123456789abcdef"), None);
        assert_eq!(parse_bootstrap_token("abcdef.0123456789abcde"), None);
        assert_eq!(parse_bootstrap_token("abcdef0123456789abcdef"), None);
    }

    #[test]
    fn bootstrap_token_user_has_extra_groups_and_bootstrappers() {
        let s = secret(&[("auth-extra-groups", "system:bootstrappers:fleet")]);
        let u = bootstrap_user("abcdef", "0123456789abcdef", &s, now()).unwrap();
        assert_eq!(u.name, "system:bootstrap:abcdef");
        assert_eq!(
            u.groups,
            [BOOTSTRAPPERS, "system:bootstrappers:fleet", AUTHENTICATED]
        );
    }

    #[test]
    fn bootstrap_token_with_wrong_secret_is_rejected() {
        let s = secret(&[]);
        assert_eq!(
            bootstrap_user("abcdef", "0123456789abcdee", &s, now()),
            Err(BootstrapRejection::Mismatch)
        );
    }

    #[test]
    fn expired_bootstrap_token_is_rejected() {
        let s = secret(&[("expiration", "2025-12-31T23:59:59Z")]);
        assert!(matches!(
            bootstrap_user("abcdef", "0123456789abcdef", &s, now()),
            Err(BootstrapRejection::Expired(_))
        ));
        let s = secret(&[("expiration", "2026-01-01T00:00:01Z")]);
        assert!(bootstrap_user("abcdef", "0123456789abcdef", &s, now()).is_ok());
    }

    #[test]
    fn bootstrap_token_needs_authentication_usage_and_type() {
        let mut s = secret(&[]);
        s["data"]["usage-bootstrap-authentication"] = json!(b64("false"));
        assert_eq!(
            bootstrap_user("abcdef", "0123456789abcdef", &s, now()),
            Err(BootstrapRejection::NotForAuthentication)
        );
        let mut s = secret(&[]);
        s["type"] = json!("Opaque");
        assert_eq!(
            bootstrap_user("abcdef", "0123456789abcdef", &s, now()),
            Err(BootstrapRejection::WrongType)
        );
    }

    #[test]
    fn a_certificate_names_its_user_groups_and_fingerprint() {
        let issue = || {
            let key = rcgen::KeyPair::generate().unwrap();
            let mut params = rcgen::CertificateParams::default();
            params
                .distinguished_name
                .push(rcgen::DnType::CommonName, "alice");
            params
                .distinguished_name
                .push(rcgen::DnType::OrganizationName, "team");
            params.self_signed(&key).unwrap().der().to_vec()
        };
        let der = issue();
        let alice = certificate_user(&der).unwrap();
        assert_eq!(alice.name, "alice");
        assert_eq!(alice.groups, ["team", AUTHENTICATED]);
        let id = &alice.extra[CREDENTIAL_ID];
        let hex = id[0].strip_prefix("X509SHA256=").unwrap();
        assert!(
            hex.len() == 64
                && hex
                    .bytes()
                    .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)),
            "{id:?}"
        );
        assert_eq!(certificate_user(&der).unwrap().extra, alice.extra);
        assert_ne!(
            certificate_user(&issue()).unwrap().extra,
            alice.extra,
            "each certificate its own id"
        );
    }

    #[test]
    fn a_request_without_credentials_is_anonymous_and_unauthenticated_only() {
        let who = anonymous();
        assert_eq!(who.name, "system:anonymous");
        assert_eq!(who.groups, [UNAUTHENTICATED]);
    }

    #[test]
    fn bootstrap_extra_groups_must_be_bootstrapper_groups() {
        let s = secret(&[("auth-extra-groups", "system:masters")]);
        assert_eq!(
            bootstrap_user("abcdef", "0123456789abcdef", &s, now()),
            Err(BootstrapRejection::BadGroup("system:masters".into()))
        );
    }
}
