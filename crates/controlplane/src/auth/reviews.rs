//! The reviews kube-apiserver answers without storing anything, as it answers them: who the
//! requester is (SelfSubjectReview, `kubectl auth whoami`), whether RBAC allows an access
//! (SelfSubjectAccessReview, SubjectAccessReview, LocalSubjectAccessReview, `kubectl auth
//! can-i`), what RBAC grants in a namespace (SelfSubjectRulesReview, `kubectl auth can-i
//! --list`) and who a token is (TokenReview).
//!
//! Pure: each takes the policy or the authenticated user and the request body, and answers the
//! review object (or the Status refusing it).

use serde_json::{Map, Value, json};

use super::rbac::{Attributes, Policy, PolicyRule, SYSTEM_MASTERS, Target};
use crate::error::{ApiError, FieldError, Subject};
use crate::user::UserInfo;

const AUTHORIZATION: &str = "authorization.k8s.io/v1";
const AUTHENTICATION: &str = "authentication.k8s.io/v1";

/// Which access review a request is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AccessReview<'a> {
    /// About the requester.
    OwnAccess,
    /// About the user its spec names, anywhere.
    Subject,
    /// About the user its spec names, in the namespace of the request's path.
    Local { namespace: &'a str },
}

impl AccessReview<'_> {
    fn kind(self) -> &'static str {
        match self {
            AccessReview::OwnAccess => "SelfSubjectAccessReview",
            AccessReview::Subject => "SubjectAccessReview",
            AccessReview::Local { .. } => "LocalSubjectAccessReview",
        }
    }
}

/// What an access review asks about: a resource or a non-resource path (their attributes).
enum Asked<'a> {
    Resource(&'a Value),
    Path(&'a Value),
}

fn subject(group_version: &str, kind: &str) -> Subject {
    Subject {
        group: group_version
            .split_once('/')
            .map(|(g, _)| g)
            .unwrap_or("")
            .into(),
        kind: kind.into(),
        name: String::new(),
    }
}

fn text<'a>(v: &'a Value, key: &str) -> &'a str {
    v.get(key).and_then(Value::as_str).unwrap_or("")
}

fn strings(v: Option<&Value>) -> Vec<String> {
    v.and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

/// `fields` of `from` in this order, the empty ones left out (Go's omitempty), others as sent.
fn kept(from: &Value, fields: &[&str]) -> Map<String, Value> {
    let mut out = Map::new();
    for field in fields {
        match from.get(*field) {
            None | Some(Value::Null) => {}
            Some(Value::String(s)) if s.is_empty() => {}
            Some(Value::Array(a)) if a.is_empty() => {}
            Some(Value::Object(o)) if o.is_empty() => {}
            Some(v) => {
                out.insert((*field).to_string(), v.clone());
            }
        }
    }
    out
}

/// The review's spec as kube-apiserver decodes and answers it: known fields, empty ones left out.
fn access_spec(spec: &Value) -> Value {
    let mut out = Map::new();
    if let Some(r) = spec.get("resourceAttributes").filter(|v| v.is_object()) {
        let fields = [
            "namespace",
            "verb",
            "group",
            "version",
            "resource",
            "subresource",
            "name",
            "fieldSelector",
            "labelSelector",
        ];
        out.insert("resourceAttributes".into(), Value::Object(kept(r, &fields)));
    }
    if let Some(n) = spec.get("nonResourceAttributes").filter(|v| v.is_object()) {
        out.insert(
            "nonResourceAttributes".into(),
            Value::Object(kept(n, &["path", "verb"])),
        );
    }
    out.extend(kept(spec, &["user", "groups", "extra", "uid"]));
    Value::Object(out)
}

/// Answers an access review asked by `requester`: the request with `spec` as decoded and
/// `status` filled in. `system:masters` is allowed with no reason (kube-apiserver allows that
/// group before RBAC is asked); RBAC names the binding that allows; a denial has no reason.
pub fn access_review(
    policy: &Policy,
    requester: &UserInfo,
    review: AccessReview<'_>,
    body: &Value,
) -> Result<Value, ApiError> {
    let kind = review.kind();
    let invalid = |errors| ApiError::invalid(subject(AUTHORIZATION, kind), errors);
    let mut metadata = body
        .get("metadata")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let spec = access_spec(body.get("spec").unwrap_or(&Value::Null));
    let user = match review {
        AccessReview::OwnAccess => requester.clone(),
        AccessReview::Subject | AccessReview::Local { .. } => {
            let user = UserInfo {
                name: text(&spec, "user").into(),
                uid: text(&spec, "uid").into(),
                groups: strings(spec.get("groups")),
                extra: spec
                    .get("extra")
                    .and_then(|e| serde_json::from_value(e.clone()).ok())
                    .unwrap_or_default(),
            };
            if user.name.is_empty() && user.groups.is_empty() {
                return Err(invalid(vec![FieldError::invalid(
                    "spec.user",
                    &json!(""),
                    "at least one of user or group must be specified",
                )]));
            }
            user
        }
    };
    // Exactly one of the two is asked about.
    let asked = match (
        spec.get("resourceAttributes"),
        spec.get("nonResourceAttributes"),
    ) {
        (Some(_), Some(n)) => {
            return Err(invalid(vec![FieldError::invalid(
                "spec.nonResourceAttributes",
                n,
                "cannot be specified in combination with resourceAttributes",
            )]));
        }
        (None, None) => {
            return Err(invalid(vec![FieldError::required(
                "spec.resourceAttributes",
                "exactly one of nonResourceAttributes or resourceAttributes must be specified",
            )]));
        }
        (Some(r), None) => Asked::Resource(r),
        (None, Some(n)) => Asked::Path(n),
    };
    if let AccessReview::Local { namespace } = review {
        match metadata.get("namespace").and_then(Value::as_str) {
            None | Some("") => {
                metadata.insert("namespace".into(), json!(namespace));
            }
            Some(ns) if ns != namespace => {
                return Err(ApiError::BadRequest(
                    "the namespace of the provided object does not match the namespace sent on the request"
                        .into(),
                ));
            }
            Some(_) => {}
        }
        let in_namespace = match asked {
            Asked::Path(n) => Err(FieldError::invalid(
                "spec.nonResourceAttributes",
                n,
                "disallowed on this kind of request",
            )),
            Asked::Resource(r) if text(r, "namespace") != namespace => Err(FieldError::invalid(
                "spec.resourceAttributes.namespace",
                &json!(text(r, "namespace")),
                "must match metadata.namespace",
            )),
            Asked::Resource(_) => Ok(()),
        };
        in_namespace.map_err(|e| invalid(vec![e]))?;
    }
    let attributes = match asked {
        Asked::Resource(r) => Attributes {
            user: &user,
            verb: text(r, "verb"),
            target: Target::Resource {
                namespace: text(r, "namespace"),
                group: text(r, "group"),
                resource: text(r, "resource"),
                subresource: text(r, "subresource"),
                name: text(r, "name"),
            },
        },
        Asked::Path(n) => Attributes {
            user: &user,
            verb: text(n, "verb"),
            target: Target::NonResource {
                path: text(n, "path"),
            },
        },
    };
    let status = if user.groups.iter().any(|g| g == SYSTEM_MASTERS) {
        json!({"allowed": true})
    } else {
        match policy.allowed_by(&attributes) {
            Some(reason) => json!({"allowed": true, "reason": reason}),
            None => json!({"allowed": false}),
        }
    };
    Ok(json!({
        "kind": kind,
        "apiVersion": AUTHORIZATION,
        "metadata": metadata,
        "spec": spec,
        "status": status,
    }))
}

/// Answers a SelfSubjectRulesReview: what RBAC grants `requester` in `spec.namespace`.
pub fn rules_review(
    policy: &Policy,
    requester: &UserInfo,
    body: &Value,
) -> Result<Value, ApiError> {
    let namespace = body
        .pointer("/spec/namespace")
        .and_then(Value::as_str)
        .unwrap_or("");
    if namespace.is_empty() {
        return Err(ApiError::BadRequest("no namespace on request".into()));
    }
    let mut resource_rules = Vec::new();
    let mut non_resource_rules = Vec::new();
    for rule in policy.rules_review(requester, namespace) {
        if rule.non_resource_urls.is_empty() {
            resource_rules.push(resource_rule(&rule));
        } else {
            non_resource_rules.push(json!({
                "verbs": words(&rule.verbs),
                "nonResourceURLs": words(&rule.non_resource_urls),
            }));
        }
    }
    Ok(json!({
        "kind": "SelfSubjectRulesReview",
        "apiVersion": AUTHORIZATION,
        "metadata": {},
        "spec": {},
        "status": {
            "resourceRules": resource_rules,
            "nonResourceRules": non_resource_rules,
            "incomplete": false,
        },
    }))
}

fn words(list: &[super::rbac::Word]) -> Value {
    Value::Array(list.iter().map(|w| json!(&**w)).collect())
}

/// A rule as a rules review lists it (empty lists left out, verbs always there).
fn resource_rule(rule: &PolicyRule) -> Value {
    let mut out = Map::new();
    out.insert("verbs".into(), words(&rule.verbs));
    for (field, list) in [
        ("apiGroups", &rule.api_groups),
        ("resources", &rule.resources),
        ("resourceNames", &rule.resource_names),
    ] {
        if !list.is_empty() {
            out.insert(field.into(), words(list));
        }
    }
    Value::Object(out)
}

/// `user` as a review's `userInfo` (empty fields left out, as Kubernetes' omitempty does).
fn user_info(user: &UserInfo) -> Value {
    let mut info = json!({"username": user.name});
    if !user.uid.is_empty() {
        info["uid"] = json!(user.uid);
    }
    if !user.groups.is_empty() {
        info["groups"] = json!(user.groups);
    }
    if !user.extra.is_empty() {
        info["extra"] = json!(user.extra);
    }
    info
}

/// Answers a SelfSubjectReview (`kubectl auth whoami`): the requester as authenticated, or as
/// impersonated, at `now`.
pub fn self_subject_review(user: &UserInfo, now: &str) -> Value {
    json!({
        "kind": "SelfSubjectReview",
        "apiVersion": AUTHENTICATION,
        "metadata": {"creationTimestamp": now},
        "status": {"userInfo": user_info(user)},
    })
}

/// Answers a TokenReview: who `spec.token` is (`authenticate` says, for the audiences asked,
/// and which of them the token is for), or why it is nobody.
pub fn token_review(
    body: &Value,
    authenticate: impl FnOnce(&str, &[String]) -> Option<(UserInfo, Vec<String>)>,
) -> Result<Value, ApiError> {
    let spec = body.get("spec").cloned().unwrap_or_else(|| json!({}));
    let token = text(&spec, "token");
    if token.is_empty() {
        return Err(ApiError::BadRequest(
            "token is required for TokenReview in authentication".into(),
        ));
    }
    let audiences = strings(spec.get("audiences"));
    let status = match authenticate(token, &audiences) {
        Some((user, audiences)) => json!({
            "authenticated": true,
            "user": user_info(&user),
            "audiences": audiences,
        }),
        None => json!({"user": {}, "error": "invalid bearer token"}),
    };
    let metadata = body.get("metadata").cloned().unwrap_or_else(|| json!({}));
    Ok(json!({
        "kind": "TokenReview",
        "apiVersion": AUTHENTICATION,
        "metadata": metadata,
        "spec": spec,
        "status": status,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(name: &str, groups: &[&str]) -> UserInfo {
        UserInfo {
            name: name.into(),
            groups: groups.iter().map(|g| g.to_string()).collect(),
            ..Default::default()
        }
    }

    fn policy(objects: &[Value]) -> Policy {
        let mut p = Policy::with_defaults();
        for o in objects {
            p.add_object(o);
        }
        p
    }

    fn can_i(verb: &str, resource: &str, namespace: &str) -> Value {
        json!({"apiVersion": AUTHORIZATION, "kind": "SelfSubjectAccessReview",
            "spec": {"resourceAttributes": {"verb": verb, "resource": resource, "group": "",
                "namespace": namespace}}})
    }

    #[test]
    fn an_access_review_names_the_binding_that_allows_and_nothing_for_masters_or_denials() {
        let p = policy(&[
            json!({"kind": "Role", "metadata": {"namespace": "ns", "name": "agent"},
                "rules": [{"verbs": ["list"], "apiGroups": [""], "resources": ["configmaps"]}]}),
            json!({"kind": "RoleBinding", "metadata": {"namespace": "ns", "name": "agent"},
                "roleRef": {"kind": "Role", "name": "agent"},
                "subjects": [{"kind": "ServiceAccount", "name": "agent", "namespace": "ns"}]}),
        ]);
        let agent = user(
            "system:serviceaccount:ns:agent",
            &["system:serviceaccounts", "system:authenticated"],
        );
        let out = access_review(
            &p,
            &agent,
            AccessReview::OwnAccess,
            &can_i("list", "configmaps", "ns"),
        )
        .unwrap();
        assert_eq!(
            out["status"],
            json!({"allowed": true, "reason": "RBAC: allowed by RoleBinding \"agent/ns\" of Role \"agent\" to ServiceAccount \"agent/ns\""})
        );
        assert_eq!(
            out["spec"],
            json!({"resourceAttributes": {"namespace": "ns", "verb": "list", "resource": "configmaps"}}),
            "empty fields are left out, as kube-apiserver answers"
        );
        let denied = access_review(
            &p,
            &agent,
            AccessReview::OwnAccess,
            &can_i("list", "secrets", "ns"),
        )
        .unwrap();
        assert_eq!(denied["status"], json!({"allowed": false}));
        let admin = user("admin", &[SYSTEM_MASTERS, "system:authenticated"]);
        let out = access_review(
            &p,
            &admin,
            AccessReview::OwnAccess,
            &can_i("list", "secrets", "x"),
        )
        .unwrap();
        assert_eq!(out["status"], json!({"allowed": true}));
        let discover = json!({"spec": {"nonResourceAttributes": {"verb": "get", "path": "/apis"}}});
        assert_eq!(
            access_review(&p, &agent, AccessReview::OwnAccess, &discover).unwrap()["status"]["reason"],
            json!(
                "RBAC: allowed by ClusterRoleBinding \"system:discovery\" of ClusterRole \"system:discovery\" to Group \"system:authenticated\""
            )
        );
    }

    #[test]
    fn an_access_review_asks_exactly_one_thing() {
        let p = Policy::with_defaults();
        let me = user("bob", &["system:authenticated"]);
        let none =
            access_review(&p, &me, AccessReview::OwnAccess, &json!({"spec": {}})).unwrap_err();
        assert_eq!(
            none.to_string(),
            "SelfSubjectAccessReview.authorization.k8s.io \"\" is invalid: spec.resourceAttributes: Required value: exactly one of nonResourceAttributes or resourceAttributes must be specified"
        );
        let both = json!({"spec": {"resourceAttributes": {"verb": "get"},
            "nonResourceAttributes": {"verb": "get", "path": "/x"}}});
        assert!(access_review(&p, &me, AccessReview::OwnAccess, &both).is_err());
        let nobody = json!({"spec": {"resourceAttributes": {"verb": "get"}}});
        assert!(access_review(&p, &me, AccessReview::Subject, &nobody).is_err());
    }

    #[test]
    fn a_local_access_review_stays_in_its_namespace() {
        let p = policy(&[
            json!({"kind": "RoleBinding", "metadata": {"namespace": "a", "name": "v"},
            "roleRef": {"kind": "ClusterRole", "name": "view"},
            "subjects": [{"kind": "User", "name": "eve"}]}),
        ]);
        let admin = user("admin", &[SYSTEM_MASTERS]);
        let review = |ns: &str| json!({"spec": {"user": "eve", "resourceAttributes": {"verb": "list", "resource": "pods", "namespace": ns}}});
        let out = access_review(
            &p,
            &admin,
            AccessReview::Local { namespace: "a" },
            &review("a"),
        )
        .unwrap();
        assert_eq!(out["status"]["allowed"], json!(true));
        assert_eq!(out["metadata"]["namespace"], json!("a"));
        let elsewhere = access_review(
            &p,
            &admin,
            AccessReview::Local { namespace: "a" },
            &review("b"),
        )
        .unwrap_err();
        assert_eq!(elsewhere.code(), 422);
    }

    #[test]
    fn a_rules_review_lists_what_the_default_roles_give_an_authenticated_user() {
        let p = Policy::with_defaults();
        let token = user(
            "system:bootstrap:abcdef",
            &["system:bootstrappers", "system:authenticated"],
        );
        let out = rules_review(&p, &token, &json!({"spec": {"namespace": "default"}})).unwrap();
        assert_eq!(out["spec"], json!({}));
        assert_eq!(out["status"]["incomplete"], json!(false));
        let resource = out["status"]["resourceRules"].as_array().unwrap();
        assert!(resource.contains(
            &json!({"verbs": ["create"], "apiGroups": ["authentication.k8s.io"],
            "resources": ["selfsubjectreviews"]})
        ));
        let urls: Vec<&Value> = out["status"]["nonResourceRules"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|r| r["nonResourceURLs"].as_array().unwrap())
            .collect();
        assert!(urls.contains(&&json!("/apis/*")) && urls.contains(&&json!("/.well-known/*")));
        let anonymous = user("system:anonymous", &["system:unauthenticated"]);
        let out = rules_review(&p, &anonymous, &json!({"spec": {"namespace": "default"}})).unwrap();
        assert_eq!(out["status"]["resourceRules"], json!([]));
        assert_eq!(
            out["status"]["nonResourceRules"],
            json!([{"verbs": ["get"], "nonResourceURLs": ["/healthz", "/livez", "/readyz", "/version", "/version/"]}]),
            "without credentials, only the health and version paths"
        );
        assert!(rules_review(&p, &token, &json!({"spec": {}})).is_err());
    }

    #[test]
    fn a_token_review_names_the_tokens_user_or_nobody() {
        let known = |token: &str, _: &[String]| {
            (token == "good")
                .then(|| (user("alice", &["system:authenticated"]), vec!["api".into()]))
        };
        let out = token_review(&json!({"spec": {"token": "good"}}), known).unwrap();
        assert_eq!(
            out["status"],
            json!({"authenticated": true, "user": {"username": "alice", "groups": ["system:authenticated"]}, "audiences": ["api"]})
        );
        let out = token_review(&json!({"spec": {"token": "bad"}}), known).unwrap();
        assert_eq!(out["status"]["authenticated"], Value::Null);
        assert_eq!(out["status"]["user"], json!({}));
        assert!(token_review(&json!({"spec": {}}), known).is_err());
    }
}
