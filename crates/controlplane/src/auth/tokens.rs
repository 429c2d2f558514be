//! ServiceAccount tokens: the JWTs a TokenRequest issues (for audiences, for a while, optionally
//! bound to a Secret, Pod or Node) and the legacy ones the token controller writes into
//! `kubernetes.io/service-account-token` Secrets, all signed with the control plane's key
//! (ES256); and who a presented token names, once its signature, issuer, audience and lifetime
//! hold and the objects it names still exist with the uids it names, as kube-apiserver's
//! ServiceAccount authenticator decides.
//!
//! Pure: the key is given and stored objects are looked up through the caller. Errors and logs
//! never carry a token.

use std::sync::Arc;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use ring::rand::SystemRandom;
use ring::signature::{self, EcdsaKeyPair, KeyPair};
use serde_json::{Value, json};

use super::authn::{self, CREDENTIAL_ID};
use crate::meta::ObjectMeta;
use crate::user::UserInfo;

/// The issuer of the tokens TokenRequest makes, and the audience API requests' tokens must name
/// (kube-apiserver's `--service-account-issuer` and `--api-audiences` as the corpus recorded).
pub const ISSUER: &str = "https://kubernetes.default.svc";
/// The issuer of legacy token Secrets' tokens.
pub const LEGACY_ISSUER: &str = "kubernetes/serviceaccount";
/// Every ServiceAccount is in this group.
pub const SERVICE_ACCOUNTS: &str = "system:serviceaccounts";
/// How far past `exp` (or before `nbf`) a token is still accepted, as go-jose's default leeway.
const LEEWAY_SECONDS: i64 = 60;

/// Where the objects a token names are stored.
pub const SERVICE_ACCOUNTS_KEY: &str = "/serviceaccounts";
pub const SECRETS_KEY: &str = "/secrets";
const PODS_KEY: &str = "/pods";
const NODES_KEY: &str = "/nodes";

/// The user name of ServiceAccount `namespace`/`name`.
pub fn user_name(namespace: &str, name: &str) -> String {
    format!("system:serviceaccount:{namespace}:{name}")
}

/// The key could not be read or made.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("unusable ServiceAccount signing key: {0}")]
pub struct KeyError(String);

/// The control plane's ServiceAccount token key: an ECDSA P-256 key pair.
pub struct SigningKey {
    pair: EcdsaKeyPair,
    /// `kid` of the tokens it signs: the SHA-256 of its public key (PKIX DER), as kube-apiserver
    /// names its keys.
    key_id: String,
}

impl std::fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the key.
        f.debug_struct("SigningKey")
            .field("key_id", &self.key_id)
            .finish_non_exhaustive()
    }
}

/// The DER prefix of a P-256 public key's SubjectPublicKeyInfo, before its uncompressed point.
const P256_SPKI_PREFIX: [u8; 26] = [
    0x30, 0x59, 0x30, 0x13, 0x06, 0x07, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01, 0x06, 0x08, 0x2a,
    0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07, 0x03, 0x42, 0x00,
];

impl SigningKey {
    /// A new key and its PKCS#8 document (to keep it across restarts).
    pub fn generate() -> Result<(Self, Vec<u8>), KeyError> {
        let pkcs8 = EcdsaKeyPair::generate_pkcs8(
            &signature::ECDSA_P256_SHA256_FIXED_SIGNING,
            &SystemRandom::new(),
        )
        .map_err(|e| KeyError(e.to_string()))?;
        let key = Self::from_pkcs8(pkcs8.as_ref())?;
        Ok((key, pkcs8.as_ref().to_vec()))
    }

    /// A key from its PKCS#8 document.
    pub fn from_pkcs8(der: &[u8]) -> Result<Self, KeyError> {
        let pair = EcdsaKeyPair::from_pkcs8(
            &signature::ECDSA_P256_SHA256_FIXED_SIGNING,
            der,
            &SystemRandom::new(),
        )
        .map_err(|e| KeyError(e.to_string()))?;
        let mut spki = P256_SPKI_PREFIX.to_vec();
        spki.extend_from_slice(pair.public_key().as_ref());
        let key_id = URL_SAFE_NO_PAD.encode(ring::digest::digest(&ring::digest::SHA256, &spki));
        Ok(SigningKey { pair, key_id })
    }

    /// A signed JWT carrying `claims`.
    fn sign(&self, claims: &Value) -> Result<String, KeyError> {
        let header = json!({"alg": "ES256", "kid": self.key_id});
        let mut token = format!(
            "{}.{}",
            URL_SAFE_NO_PAD.encode(header.to_string()),
            URL_SAFE_NO_PAD.encode(claims.to_string())
        );
        let signature = self
            .pair
            .sign(&SystemRandom::new(), token.as_bytes())
            .map_err(|e| KeyError(e.to_string()))?;
        token.push('.');
        token.push_str(&URL_SAFE_NO_PAD.encode(signature.as_ref()));
        Ok(token)
    }

    /// The claims of `token` if this key signed it (ES256, nothing else).
    fn verified_claims(&self, token: &str) -> Result<Value, TokenRejection> {
        let mut parts = token.split('.');
        let (Some(header), Some(claims), Some(sig), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(TokenRejection::Malformed);
        };
        let decode = |part: &str| {
            URL_SAFE_NO_PAD
                .decode(part)
                .map_err(|_| TokenRejection::Malformed)
        };
        let header: Value =
            serde_json::from_slice(&decode(header)?).map_err(|_| TokenRejection::Malformed)?;
        if header.get("alg").and_then(Value::as_str) != Some("ES256") {
            return Err(TokenRejection::BadSignature);
        }
        let signed = &token[..token.len() - sig.len() - 1];
        signature::UnparsedPublicKey::new(
            &signature::ECDSA_P256_SHA256_FIXED,
            self.pair.public_key().as_ref(),
        )
        .verify(signed.as_bytes(), &decode(sig)?)
        .map_err(|_| TokenRejection::BadSignature)?;
        serde_json::from_slice(&decode(claims)?).map_err(|_| TokenRejection::Malformed)
    }
}

/// An object a token is bound to.
#[derive(Debug, Clone, PartialEq)]
pub struct BoundObject {
    /// `Secret`, `Pod` or `Node`.
    pub kind: String,
    pub name: String,
    pub uid: String,
}

impl BoundObject {
    fn claim(&self) -> &'static str {
        match self.kind.as_str() {
            "Pod" => "pod",
            "Node" => "node",
            _ => "secret",
        }
    }
}

/// Where objects of `kind` (one a token names) are stored.
fn store_key(kind: &str) -> &'static str {
    match kind {
        "ServiceAccount" => SERVICE_ACCOUNTS_KEY,
        "Pod" => PODS_KEY,
        "Node" => NODES_KEY,
        _ => SECRETS_KEY,
    }
}

/// What a TokenRequest asks for, once checked against the stored objects.
#[derive(Debug, Clone, PartialEq)]
pub struct TokenGrant<'a> {
    pub namespace: &'a str,
    pub service_account: &'a str,
    pub service_account_uid: &'a str,
    pub audiences: &'a [String],
    pub expiration_seconds: i64,
    pub bound: Option<BoundObject>,
}

/// Issues the token `grant` describes at `now` (Unix seconds): its text and when it expires.
pub fn issue(
    key: &SigningKey,
    grant: &TokenGrant<'_>,
    now: i64,
) -> Result<(String, i64), KeyError> {
    let expires = now.saturating_add(grant.expiration_seconds);
    let mut private = json!({
        "namespace": grant.namespace,
        "serviceaccount": {"name": grant.service_account, "uid": grant.service_account_uid},
    });
    if let Some(bound) = &grant.bound {
        private[bound.claim()] = json!({"name": bound.name, "uid": bound.uid});
    }
    let claims = json!({
        "aud": grant.audiences,
        "exp": expires,
        "iat": now,
        "iss": ISSUER,
        "jti": crate::meta::new_uid(),
        "kubernetes.io": private,
        "nbf": now,
        "sub": user_name(grant.namespace, grant.service_account),
    });
    Ok((key.sign(&claims)?, expires))
}

/// The token of a legacy token Secret: no audience, no expiry, valid while the Secret holds it.
pub fn issue_legacy(
    key: &SigningKey,
    namespace: &str,
    service_account: &str,
    service_account_uid: &str,
    secret: &str,
) -> Result<String, KeyError> {
    key.sign(&json!({
        "iss": LEGACY_ISSUER,
        "kubernetes.io/serviceaccount/namespace": namespace,
        "kubernetes.io/serviceaccount/secret.name": secret,
        "kubernetes.io/serviceaccount/service-account.name": service_account,
        "kubernetes.io/serviceaccount/service-account.uid": service_account_uid,
        "sub": user_name(namespace, service_account),
    }))
}

/// Why a token authenticates nobody (for debug logs).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum TokenRejection {
    #[error("not a JWT")]
    Malformed,
    #[error("not signed by this control plane's ServiceAccount key")]
    BadSignature,
    #[error("issued by {0:?}, not by this control plane")]
    Issuer(String),
    #[error("not for this API server's audience")]
    Audience,
    #[error("expired")]
    Expired,
    #[error("not valid yet")]
    NotYetValid,
    #[error("claims incomplete: {0} missing")]
    Claims(&'static str),
    #[error("{kind} {namespace}/{name} no longer exists")]
    Gone {
        kind: &'static str,
        namespace: String,
        name: String,
    },
    #[error(
        "{kind} {namespace}/{name} was deleted and made again (uid {found}, token names {named})"
    )]
    Recreated {
        kind: &'static str,
        namespace: String,
        name: String,
        found: String,
        named: String,
    },
    #[error("the Secret no longer holds this token")]
    Revoked,
}

/// Looks up a stored object: (store key, namespace, name).
pub type Lookup<'a> = dyn Fn(&str, &str, &str) -> Option<Arc<Value>> + 'a;

/// Who `token` is, if it is a ServiceAccount token of this control plane for one of
/// `audiences` that still holds at `now` (Unix seconds), and which of the audiences it is for.
/// The ServiceAccount (and what the token is bound to) must exist with the uid the token names
/// and not be being deleted, so that deleting a ServiceAccount, or the Secret or Pod a token is
/// bound to, revokes its tokens at once. A legacy token is for this API server only.
pub fn authenticate(
    key: &SigningKey,
    token: &str,
    audiences: &[String],
    now: i64,
    lookup: &Lookup<'_>,
) -> Result<(UserInfo, Vec<String>), TokenRejection> {
    let claims = key.verified_claims(token)?;
    let named: Vec<&str> = match (claims.get("iss").and_then(Value::as_str), claims.get("aud")) {
        (Some(LEGACY_ISSUER), _) => vec![ISSUER],
        (Some(ISSUER), Some(Value::String(aud))) => vec![aud.as_str()],
        (Some(ISSUER), Some(Value::Array(auds))) => auds.iter().filter_map(Value::as_str).collect(),
        (Some(ISSUER), _) => Vec::new(),
        (other, _) => return Err(TokenRejection::Issuer(other.unwrap_or("").to_string())),
    };
    let for_us: Vec<String> = audiences
        .iter()
        .filter(|a| named.contains(&a.as_str()))
        .cloned()
        .collect();
    if for_us.is_empty() {
        return Err(TokenRejection::Audience);
    }
    let user = if claims.get("iss").and_then(Value::as_str) == Some(LEGACY_ISSUER) {
        legacy_user(&claims, token, lookup)?
    } else {
        bound_user(&claims, now, lookup)?
    };
    Ok((user, for_us))
}

fn text<'a>(v: &'a Value, pointer: &str, what: &'static str) -> Result<&'a str, TokenRejection> {
    v.pointer(pointer)
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .ok_or(TokenRejection::Claims(what))
}

fn bound_user(claims: &Value, now: i64, lookup: &Lookup<'_>) -> Result<UserInfo, TokenRejection> {
    let exp = claims
        .get("exp")
        .and_then(Value::as_i64)
        .ok_or(TokenRejection::Claims("exp"))?;
    if now > exp.saturating_add(LEEWAY_SECONDS) {
        return Err(TokenRejection::Expired);
    }
    if let Some(nbf) = claims.get("nbf").and_then(Value::as_i64)
        && now < nbf.saturating_sub(LEEWAY_SECONDS)
    {
        return Err(TokenRejection::NotYetValid);
    }
    let namespace = text(claims, "/kubernetes.io/namespace", "namespace")?;
    let name = text(
        claims,
        "/kubernetes.io/serviceaccount/name",
        "serviceaccount",
    )?;
    let uid = text(
        claims,
        "/kubernetes.io/serviceaccount/uid",
        "serviceaccount uid",
    )?;
    let account = current(lookup, "ServiceAccount", namespace, name, uid)?;
    let mut user = service_account_user(namespace, name, account.uid());
    for (claim, kind) in [("secret", "Secret"), ("pod", "Pod"), ("node", "Node")] {
        let Some(object) = claims.pointer(&format!("/kubernetes.io/{claim}")) else {
            continue;
        };
        let bound = BoundObject {
            kind: kind.into(),
            name: text(object, "/name", "bound object name")?.into(),
            uid: text(object, "/uid", "bound object uid")?.into(),
        };
        let scope = if kind == "Node" { "" } else { namespace };
        current(lookup, kind, scope, &bound.name, &bound.uid)?;
        if kind != "Secret" {
            let attribute = format!("authentication.kubernetes.io/{claim}");
            user.extra
                .insert(format!("{attribute}-name"), vec![bound.name.clone()]);
            user.extra
                .insert(format!("{attribute}-uid"), vec![bound.uid]);
        }
    }
    if let Some(jti) = claims.get("jti").and_then(Value::as_str) {
        user.extra
            .insert(CREDENTIAL_ID.into(), vec![format!("JTI={jti}")]);
    }
    Ok(user)
}

fn legacy_user(
    claims: &Value,
    token: &str,
    lookup: &Lookup<'_>,
) -> Result<UserInfo, TokenRejection> {
    let prefix = "/kubernetes.io~1serviceaccount~1";
    let namespace = text(claims, &format!("{prefix}namespace"), "namespace")?;
    let secret_name = text(claims, &format!("{prefix}secret.name"), "secret.name")?;
    let name = text(
        claims,
        &format!("{prefix}service-account.name"),
        "service-account.name",
    )?;
    let uid = text(
        claims,
        &format!("{prefix}service-account.uid"),
        "service-account.uid",
    )?;
    let secret = lookup(SECRETS_KEY, namespace, secret_name).ok_or(TokenRejection::Gone {
        kind: "Secret",
        namespace: namespace.into(),
        name: secret_name.into(),
    })?;
    let held = secret
        .pointer("/data/token")
        .and_then(Value::as_str)
        .and_then(|b64| base64::engine::general_purpose::STANDARD.decode(b64).ok());
    if secret.is_deleting() || held.as_deref() != Some(token.as_bytes()) {
        return Err(TokenRejection::Revoked);
    }
    let account = current(lookup, "ServiceAccount", namespace, name, uid)?;
    Ok(service_account_user(namespace, name, account.uid()))
}

/// The stored `kind` `namespace`/`name`, if it exists with `uid` and is not being deleted.
fn current(
    lookup: &Lookup<'_>,
    kind: &'static str,
    namespace: &str,
    name: &str,
    uid: &str,
) -> Result<Arc<Value>, TokenRejection> {
    let key = store_key(kind);
    let gone = || TokenRejection::Gone {
        kind,
        namespace: namespace.into(),
        name: name.into(),
    };
    let object = lookup(key, namespace, name).ok_or_else(gone)?;
    if object.uid() != uid {
        return Err(TokenRejection::Recreated {
            kind,
            namespace: namespace.into(),
            name: name.into(),
            found: object.uid().into(),
            named: uid.into(),
        });
    }
    if object.is_deleting() {
        return Err(gone());
    }
    Ok(object)
}

/// ServiceAccount `namespace`/`name` (of `uid`) as a user: its groups are every ServiceAccount's
/// and its namespace's.
pub fn service_account_user(namespace: &str, name: &str, uid: &str) -> UserInfo {
    let mut user = authn::authenticated(
        user_name(namespace, name),
        vec![
            SERVICE_ACCOUNTS.to_string(),
            format!("{SERVICE_ACCOUNTS}:{namespace}"),
        ],
    );
    user.uid = uid.to_string();
    user
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    const NOW: i64 = 1_800_000_000;

    fn key() -> SigningKey {
        SigningKey::generate().unwrap().0
    }

    struct Objects(HashMap<(String, String, String), Arc<Value>>);

    impl Objects {
        fn new() -> Self {
            Objects(HashMap::new())
        }
        fn with(mut self, key: &str, ns: &str, name: &str, object: Value) -> Self {
            self.0
                .insert((key.into(), ns.into(), name.into()), Arc::new(object));
            self
        }
        fn lookup(&self) -> impl Fn(&str, &str, &str) -> Option<Arc<Value>> + '_ {
            |k, ns, n| self.0.get(&(k.into(), ns.into(), n.into())).cloned()
        }
    }

    fn account(uid: &str) -> Value {
        json!({"metadata": {"name": "agent", "namespace": "ns", "uid": uid}})
    }

    fn audiences() -> Vec<String> {
        vec![ISSUER.to_string()]
    }

    /// The audiences an API request's token must be for.
    fn api() -> Vec<String> {
        audiences()
    }

    fn grant<'a>(audiences: &'a [String], bound: Option<BoundObject>) -> TokenGrant<'a> {
        TokenGrant {
            namespace: "ns",
            service_account: "agent",
            service_account_uid: "sa-1",
            audiences,
            expiration_seconds: 3600,
            bound,
        }
    }

    #[test]
    fn an_issued_token_is_its_service_account_with_its_jti_as_credential_id() {
        let key = key();
        let auds = audiences();
        let (token, expires) = issue(&key, &grant(&auds, None), NOW).unwrap();
        assert_eq!(expires, NOW + 3600);
        let objects = Objects::new().with(SERVICE_ACCOUNTS_KEY, "ns", "agent", account("sa-1"));
        let user = authenticate(&key, &token, &api(), NOW + 10, &objects.lookup())
            .unwrap()
            .0;
        assert_eq!(user.name, "system:serviceaccount:ns:agent");
        assert_eq!(user.uid, "sa-1");
        assert_eq!(
            user.groups,
            [
                "system:serviceaccounts",
                "system:serviceaccounts:ns",
                "system:authenticated"
            ]
        );
        let ids = &user.extra[CREDENTIAL_ID];
        assert_eq!(ids.len(), 1);
        assert!(ids[0].starts_with("JTI=") && ids[0].len() > 4, "{ids:?}");
    }

    #[test]
    fn a_deleted_or_recreated_service_account_revokes_its_tokens_at_once() {
        let key = key();
        let auds = audiences();
        let (token, _) = issue(&key, &grant(&auds, None), NOW).unwrap();
        let gone = Objects::new();
        assert!(matches!(
            authenticate(&key, &token, &api(), NOW, &gone.lookup()),
            Err(TokenRejection::Gone {
                kind: "ServiceAccount",
                ..
            })
        ));
        let recreated = Objects::new().with(SERVICE_ACCOUNTS_KEY, "ns", "agent", account("sa-2"));
        assert!(matches!(
            authenticate(&key, &token, &api(), NOW, &recreated.lookup()),
            Err(TokenRejection::Recreated { .. })
        ));
        let mut deleting = account("sa-1");
        deleting["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
        let deleting = Objects::new().with(SERVICE_ACCOUNTS_KEY, "ns", "agent", deleting);
        assert!(authenticate(&key, &token, &api(), NOW, &deleting.lookup()).is_err());
    }

    #[test]
    fn expiry_audience_and_signature_are_checked() {
        let key = key();
        let auds = audiences();
        let objects = Objects::new().with(SERVICE_ACCOUNTS_KEY, "ns", "agent", account("sa-1"));
        let (token, _) = issue(&key, &grant(&auds, None), NOW).unwrap();
        assert_eq!(
            authenticate(
                &key,
                &token,
                &api(),
                NOW + 3600 + LEEWAY_SECONDS + 1,
                &objects.lookup()
            ),
            Err(TokenRejection::Expired)
        );
        assert!(
            authenticate(
                &key,
                &token,
                &api(),
                NOW + 3600 + LEEWAY_SECONDS,
                &objects.lookup()
            )
            .is_ok()
        );
        let other = vec!["https://vault.example.com".to_string()];
        let (for_vault, _) = issue(&key, &grant(&other, None), NOW).unwrap();
        assert_eq!(
            authenticate(&key, &for_vault, &api(), NOW, &objects.lookup()),
            Err(TokenRejection::Audience)
        );
        assert_eq!(
            authenticate(&self::key(), &token, &api(), NOW, &objects.lookup()),
            Err(TokenRejection::BadSignature),
            "another control plane's key"
        );
        let mut parts: Vec<&str> = token.split('.').collect();
        let forged = URL_SAFE_NO_PAD.encode(
            json!({"iss": ISSUER, "aud": [ISSUER], "exp": NOW + 10,
                "kubernetes.io": {"namespace": "ns", "serviceaccount": {"name": "agent", "uid": "sa-1"}}})
            .to_string(),
        );
        parts[1] = &forged;
        assert_eq!(
            authenticate(&key, &parts.join("."), &api(), NOW, &objects.lookup()),
            Err(TokenRejection::BadSignature)
        );
        let unsigned = format!(
            "{}.{}.",
            URL_SAFE_NO_PAD.encode(r#"{"alg":"none"}"#),
            forged
        );
        assert_eq!(
            authenticate(&key, &unsigned, &api(), NOW, &objects.lookup()),
            Err(TokenRejection::BadSignature)
        );
        assert_eq!(
            authenticate(&key, "not-a-token-at-all", &api(), NOW, &objects.lookup()),
            Err(TokenRejection::Malformed)
        );
    }

    #[test]
    fn a_token_bound_to_an_object_lives_as_long_as_that_object() {
        let key = key();
        let auds = audiences();
        let secret = BoundObject {
            kind: "Secret".into(),
            name: "s".into(),
            uid: "secret-1".into(),
        };
        let (token, _) = issue(&key, &grant(&auds, Some(secret)), NOW).unwrap();
        let with_secret = Objects::new()
            .with(SERVICE_ACCOUNTS_KEY, "ns", "agent", account("sa-1"))
            .with(
                SECRETS_KEY,
                "ns",
                "s",
                json!({"metadata": {"name": "s", "namespace": "ns", "uid": "secret-1"}}),
            );
        assert!(authenticate(&key, &token, &api(), NOW, &with_secret.lookup()).is_ok());
        let without = Objects::new().with(SERVICE_ACCOUNTS_KEY, "ns", "agent", account("sa-1"));
        assert!(matches!(
            authenticate(&key, &token, &api(), NOW, &without.lookup()),
            Err(TokenRejection::Gone { kind: "Secret", .. })
        ));
    }

    #[test]
    fn a_legacy_token_holds_while_its_secret_holds_it() {
        let key = key();
        let token = issue_legacy(&key, "ns", "agent", "sa-1", "agent-token").unwrap();
        let secret = |held: &str| {
            json!({"metadata": {"name": "agent-token", "namespace": "ns", "uid": "x"},
                "data": {"token": base64::engine::general_purpose::STANDARD.encode(held)}})
        };
        let objects = Objects::new()
            .with(SERVICE_ACCOUNTS_KEY, "ns", "agent", account("sa-1"))
            .with(SECRETS_KEY, "ns", "agent-token", secret(&token));
        let user = authenticate(&key, &token, &api(), NOW, &objects.lookup())
            .unwrap()
            .0;
        assert_eq!(user.name, "system:serviceaccount:ns:agent");
        assert!(user.extra.is_empty(), "a legacy token has no id");
        let replaced = Objects::new()
            .with(SERVICE_ACCOUNTS_KEY, "ns", "agent", account("sa-1"))
            .with(SECRETS_KEY, "ns", "agent-token", secret("another"));
        assert_eq!(
            authenticate(&key, &token, &api(), NOW, &replaced.lookup()),
            Err(TokenRejection::Revoked)
        );
        let no_account = Objects::new().with(SECRETS_KEY, "ns", "agent-token", secret(&token));
        assert!(authenticate(&key, &token, &api(), NOW, &no_account.lookup()).is_err());
    }
}
