//! The request path's security checks: who is asking (client certificate, static token,
//! bootstrap token, ServiceAccount token, impersonation, or no one: anonymous), whether RBAC
//! allows the request, and the extra checks on RBAC and CSR writes (escalation,
//! `approve`/`sign` on signers).
//!
//! Reads roles, bindings and bootstrap Secrets from the store; never logs a credential.

use http::{HeaderMap, header};
use serde_json::{Value, json};

use super::authn::{self, StaticTokens};
use super::rbac::{Attributes, Binding, Policy, PolicyRule, SYSTEM_MASTERS, Target};
use super::tls::PeerIdentity;
use super::tokens::{self, SigningKey};
use crate::error::{ApiError, Subject};
use crate::request_info::RequestInfo;
use crate::storage::{EventType, Store};
use crate::user::UserInfo;

const RBAC_GROUP: &str = "rbac.authorization.k8s.io";
const CSR_GROUP: &str = "certificates.k8s.io";

/// Establishes who sent a request, as kube-apiserver's authenticators do: a trusted client
/// certificate first, then a bearer token (static, bootstrap, ServiceAccount). A request with
/// no credentials at all is `system:anonymous` (what it may do is RBAC's to say); a certificate
/// this control plane did not issue, or a bearer token that authenticates nobody, is 401.
pub fn authenticate(
    store: &Store,
    tokens: &StaticTokens,
    service_accounts: &SigningKey,
    headers: &HeaderMap,
    peer: &PeerIdentity,
) -> Result<UserInfo, ApiError> {
    if let PeerIdentity::Verified(u) = peer {
        return Ok(u.clone());
    }
    let bearer = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| {
            v.strip_prefix("Bearer ")
                .or_else(|| v.strip_prefix("bearer "))
        })
        .map(str::trim);
    match bearer {
        Some(token) if !token.is_empty() => {
            token_user(store, Some(tokens), service_accounts, token, &[])
                .map(|(user, _)| user)
                .ok_or(ApiError::Unauthorized)
        }
        _ if *peer == PeerIdentity::Untrusted => {
            tracing::debug!("client certificate not issued by this control plane's CA, or expired");
            Err(ApiError::Unauthorized)
        }
        _ => Ok(authn::anonymous()),
    }
}

/// Who a bearer token is (static, bootstrap or ServiceAccount token) when presented for
/// `audiences` (none: this API server's), and which of them it is for. Static and bootstrap
/// tokens are for this API server only.
pub fn token_user(
    store: &Store,
    static_tokens: Option<&StaticTokens>,
    service_accounts: &SigningKey,
    token: &str,
    audiences: &[String],
) -> Option<(UserInfo, Vec<String>)> {
    let audiences = if audiences.is_empty() {
        vec![tokens::ISSUER.to_string()]
    } else {
        audiences.to_vec()
    };
    let for_api: Vec<String> = audiences
        .iter()
        .filter(|a| *a == tokens::ISSUER)
        .cloned()
        .collect();
    let lookup = |key: &str, ns: &str, name: &str| store.get(key, ns, name);
    let found = if let Some(u) = static_tokens.and_then(|t| t.authenticate(token)) {
        Some(u)
    } else if let Some((id, secret)) = authn::parse_bootstrap_token(token) {
        bootstrap_user(store, id, secret)
    } else {
        return match tokens::authenticate(
            service_accounts,
            token,
            &audiences,
            jiff::Timestamp::now().as_second(),
            &lookup,
        ) {
            Ok(found) => Some(found),
            Err(why) => {
                tracing::debug!(reason = %why, "bearer token matches no user");
                None
            }
        };
    };
    let user = found?;
    (!for_api.is_empty()).then_some((user, for_api))
}

/// The user of bootstrap token `id`.`secret`, if its Secret says it is one.
fn bootstrap_user(store: &Store, id: &str, secret: &str) -> Option<UserInfo> {
    let Some(stored) = store.get("/secrets", "kube-system", &authn::bootstrap_secret_name(id))
    else {
        tracing::debug!(token_id = id, "no secret for bootstrap token");
        return None;
    };
    authn::bootstrap_user(id, secret, &stored, jiff::Timestamp::now())
        .map_err(|why| tracing::debug!(token_id = id, reason = %why, "bootstrap token rejected"))
        .ok()
}

/// The RBAC resources a policy is built from, by their store keys, with their kinds.
const RBAC_RESOURCES: [(&str, &str); 4] = [
    ("rbac.authorization.k8s.io/clusterroles", "ClusterRole"),
    ("rbac.authorization.k8s.io/roles", "Role"),
    ("rbac.authorization.k8s.io/rolebindings", "RoleBinding"),
    (
        "rbac.authorization.k8s.io/clusterrolebindings",
        "ClusterRoleBinding",
    ),
];

/// The policy every request is authorized against, kept in step with the stored roles and
/// bindings: a write to one of them updates the policy in place by that one object (from the
/// store's history), so a request costs what it checks, not the size of the RBAC set, which
/// grows with a hub's clusters. Requests read it under a lock for as long as a check takes; it
/// is never copied. Rebuilt in full only when the history no longer reaches back far enough.
#[derive(Default)]
pub struct PolicyCache(std::sync::RwLock<Option<CachedPolicy>>);

struct CachedPolicy {
    /// The resourceVersion up to which RBAC writes are in `policy`.
    applied: i64,
    policy: Policy,
}

impl PolicyCache {
    /// Runs `check` against the current policy.
    pub fn check<R>(&self, store: &Store, check: impl FnOnce(&Policy) -> R) -> R {
        let last_write = RBAC_RESOURCES
            .iter()
            .map(|(key, _)| store.last_write(key))
            .max()
            .unwrap_or(0);
        {
            let cached = self
                .0
                .read()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if let Some(current) = cached.as_ref()
                && current.applied >= last_write
            {
                return check(&current.policy);
            }
        }
        let mut cached = self
            .0
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(current) = cached.as_mut() {
            if current.applied >= last_write {
                // Another request caught up while this one waited.
                return check(&current.policy);
            }
            if let Some(applied) = catch_up(store, current.applied, &mut current.policy) {
                current.applied = applied;
                return check(&current.policy);
            }
        }
        // Stamped before reading: a write racing the build is applied again next time, which
        // is harmless (objects replace themselves).
        let applied = store.current_rv();
        let current = cached.insert(CachedPolicy {
            applied,
            policy: policy(store),
        });
        check(&current.policy)
    }
}

/// Applies the RBAC writes after `applied` to `policy`; returns the resourceVersion it is now
/// up to, `None` when the history has been compacted past them.
fn catch_up(store: &Store, applied: i64, policy: &mut Policy) -> Option<i64> {
    let mut events = Vec::new();
    for (key, kind) in RBAC_RESOURCES {
        let written = store.replay(key, applied).ok()?;
        events.extend(written.into_iter().map(|event| (kind, event)));
    }
    events.sort_by_key(|(_, event)| event.rv);
    let mut applied = applied;
    for (kind, event) in events {
        if event.kind == EventType::Deleted {
            policy.remove_object(kind, &event.namespace, &event.name);
        } else {
            let mut object = event.decode();
            object["kind"] = json!(kind);
            policy.add_object(&object);
        }
        applied = applied.max(event.rv);
    }
    Some(applied)
}

/// Every stored role and binding plus the defaults.
pub fn policy(store: &Store) -> Policy {
    let mut p = Policy::with_defaults();
    for (key, kind) in RBAC_RESOURCES {
        let (_, objs) = store.list(key, None, None);
        for o in objs {
            let mut o = (*o).clone();
            o["kind"] = json!(kind);
            p.add_object(&o);
        }
    }
    p
}

/// What `request` asks of `user`'s rights, in RBAC's terms: a view of the request, so RBAC
/// checks exactly what the handler is routed by.
pub fn attributes<'a>(request: &'a RequestInfo, user: &'a UserInfo) -> Attributes<'a> {
    let target = if request.is_resource_request {
        Target::Resource {
            namespace: &request.namespace,
            group: &request.api_group,
            resource: &request.resource,
            subresource: &request.subresource,
            name: &request.name,
        }
    } else {
        Target::NonResource {
            path: &request.path,
        }
    };
    Attributes {
        user,
        verb: request.verb.as_str(),
        target,
    }
}

/// 403 with kube-apiserver's Status for a denied request.
pub fn forbidden(a: &Attributes<'_>) -> ApiError {
    let subject = match a.target {
        Target::Resource {
            group,
            resource,
            name,
            ..
        } => Subject {
            group: group.to_string(),
            kind: resource.to_string(),
            name: name.to_string(),
        },
        Target::NonResource { .. } => Subject::default(),
    };
    ApiError::Forbidden {
        subject,
        message: a.forbidden_message(),
        cause: None,
    }
}

/// Allows or refuses with 403.
pub fn authorize(policy: &Policy, a: &Attributes<'_>) -> Result<(), ApiError> {
    if policy.authorize(a) {
        Ok(())
    } else {
        Err(forbidden(a))
    }
}

/// Applies `Impersonate-User`/`Impersonate-Group` headers: the requester needs `impersonate`
/// on `users` (or `serviceaccounts`) and on each `groups` entry.
pub fn impersonate(
    policy: &Policy,
    user: UserInfo,
    headers: &HeaderMap,
) -> Result<UserInfo, ApiError> {
    let Some(target) = headers
        .get("impersonate-user")
        .and_then(|v| v.to_str().ok())
    else {
        if headers.contains_key("impersonate-group") {
            return Err(ApiError::BadRequest(
                "requested impersonation of groups without impersonating a user".into(),
            ));
        }
        return Ok(user);
    };
    let groups: Vec<String> = headers
        .get_all("impersonate-group")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .map(str::to_string)
        .collect();
    let check = |namespace: &str, resource: &str, name: &str| {
        authorize(
            policy,
            &Attributes {
                user: &user,
                verb: "impersonate",
                target: Target::Resource {
                    namespace,
                    group: "",
                    resource,
                    subresource: "",
                    name,
                },
            },
        )
    };
    let mut as_groups = Vec::new();
    match target
        .strip_prefix("system:serviceaccount:")
        .and_then(|r| r.split_once(':'))
    {
        Some((ns, name)) => {
            check(ns, "serviceaccounts", name)?;
            as_groups.extend([
                "system:serviceaccounts".to_string(),
                format!("system:serviceaccounts:{ns}"),
            ]);
        }
        None => check("", "users", target)?,
    }
    for g in &groups {
        check("", "groups", g)?;
        as_groups.push(g.clone());
    }
    if target != authn::ANONYMOUS {
        return Ok(authn::authenticated(target.into(), as_groups));
    }
    Ok(UserInfo {
        name: target.into(),
        groups: as_groups,
        ..Default::default()
    })
}

/// Checks `approve` (approval) or `sign` (status) on a CSR's signer, as kube-apiserver's
/// admission does: on `signers` named the signer, or `<domain>/*`.
pub fn check_signer(
    policy: &Policy,
    user: &UserInfo,
    verb: &str,
    signer: &str,
    csr: &str,
) -> Result<(), ApiError> {
    let mut names = vec![signer.to_string()];
    if let Some((domain, _)) = signer.split_once('/') {
        names.push(format!("{domain}/*"));
    }
    let allowed = names.iter().any(|name| {
        policy.authorize(&Attributes {
            user,
            verb,
            target: Target::Resource {
                namespace: "",
                group: CSR_GROUP,
                resource: "signers",
                subresource: "",
                name,
            },
        })
    });
    if allowed {
        return Ok(());
    }
    let what = if verb == "approve" { "approve" } else { "sign" };
    Err(ApiError::Forbidden {
        subject: Subject {
            group: CSR_GROUP.into(),
            kind: "certificatesigningrequests".into(),
            name: csr.into(),
        },
        message: format!(
            "certificatesigningrequests.{CSR_GROUP} {csr:?} is forbidden: user not permitted to {what} requests with signerName {signer:?}"
        ),
        cause: None,
    })
}

/// Refuses a Role/ClusterRole/RoleBinding/ClusterRoleBinding (as it would be stored) that
/// grants more than `user` holds.
pub fn check_escalation(
    policy: &Policy,
    user: &UserInfo,
    plural: &str,
    obj: &Value,
) -> Result<(), ApiError> {
    if user.groups.iter().any(|g| g == SYSTEM_MASTERS) {
        return Ok(());
    }
    let name = obj
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    let ns = obj
        .pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .unwrap_or("");
    let result = match plural {
        "roles" | "clusterroles" => {
            let rules: Vec<PolicyRule> = obj
                .get("rules")
                .and_then(Value::as_array)
                .map(|r| r.iter().map(PolicyRule::from_json).collect())
                .unwrap_or_default();
            policy.check_role_escalation(user, ns, plural, name, &rules)
        }
        "rolebindings" | "clusterrolebindings" => match Binding::from_json(obj) {
            Some(b) => policy.check_binding_escalation(user, &b),
            None => Ok(()),
        },
        _ => Ok(()),
    };
    result.map_err(|e| ApiError::Forbidden {
        subject: Subject {
            group: RBAC_GROUP.into(),
            kind: plural.into(),
            name: name.into(),
        },
        message: format!("{plural}.{RBAC_GROUP} {name:?} is forbidden: {e}"),
        cause: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn u() -> UserInfo {
        UserInfo {
            name: "bob".into(),
            ..Default::default()
        }
    }

    fn request(method: http::Method, url: &str) -> RequestInfo {
        let (path, query) = url.split_once('?').unwrap_or((url, ""));
        RequestInfo::new(
            &method,
            path,
            &crate::request_info::Query::parse(Some(query)),
        )
    }

    #[test]
    fn rbac_sees_the_request_as_it_was_read() {
        use http::Method;
        let user = u();
        let list = request(
            Method::GET,
            "/apis/cluster.open-cluster-management.io/v1/managedclusters?fieldSelector=metadata.name%3Dc1",
        );
        assert_eq!(
            attributes(&list, &user),
            Attributes {
                user: &user,
                verb: "list",
                target: Target::Resource {
                    namespace: "",
                    group: "cluster.open-cluster-management.io",
                    resource: "managedclusters",
                    subresource: "",
                    name: "c1",
                },
            }
        );
        let discovery = request(Method::GET, "/apis/apps/v1");
        assert_eq!(
            attributes(&discovery, &user).target,
            Target::NonResource {
                path: "/apis/apps/v1"
            }
        );
        assert_eq!(
            attributes(&request(Method::POST, "/metrics"), &user).verb,
            "post"
        );
    }

    #[test]
    fn impersonation_needs_the_impersonate_verb() {
        let p = Policy::with_defaults();
        let mut h = HeaderMap::new();
        h.insert("impersonate-user", "alice".parse().unwrap());
        let err = impersonate(&p, u(), &h).unwrap_err();
        assert_eq!(
            err.to_string(),
            r#"users "alice" is forbidden: User "bob" cannot impersonate resource "users" in API group "" at the cluster scope"#
        );
        let admin = UserInfo {
            name: "root".into(),
            groups: vec![SYSTEM_MASTERS.into()],
            ..Default::default()
        };
        h.append("impersonate-group", "team".parse().unwrap());
        let as_alice = impersonate(&p, admin, &h).unwrap();
        assert_eq!(as_alice.name, "alice");
        assert_eq!(as_alice.groups, ["team", "system:authenticated"]);
    }

    #[test]
    fn approving_needs_approve_on_the_signer() {
        let p = Policy::with_defaults();
        let err = check_signer(
            &p,
            &u(),
            "approve",
            "kubernetes.io/kube-apiserver-client",
            "c",
        )
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            r#"certificatesigningrequests.certificates.k8s.io "c" is forbidden: user not permitted to approve requests with signerName "kubernetes.io/kube-apiserver-client""#
        );
    }
}
