//! RBAC authorization with Kubernetes' semantics: rule matching, binding resolution, the
//! built-in roles, escalation prevention and the wording of 403 answers.
//!
//! Pure: a [`Policy`] is a snapshot of roles and bindings (stored objects plus the defaults);
//! reading them from storage and answering HTTP are the caller's job.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, LazyLock, Mutex, PoisonError};

use serde_json::Value;

use crate::user::UserInfo;

/// The group whose members may do everything, whatever the bindings say.
pub const SYSTEM_MASTERS: &str = "system:masters";

/// One string of a rule.
pub type Word = Arc<str>;

/// One `rules[]` entry of a Role or ClusterRole.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct PolicyRule {
    pub verbs: Vec<Word>,
    pub api_groups: Vec<Word>,
    pub resources: Vec<Word>,
    pub resource_names: Vec<Word>,
    pub non_resource_urls: Vec<Word>,
}

/// The words rules share (verbs, API groups, resources, URLs), one copy of each however many
/// rules name it: a hub's per-cluster Roles, tens of thousands at 10,000 clusters, repeat the
/// same few dozen. Words no rule holds any more go when the set has doubled since the last
/// time it was swept.
#[derive(Default)]
struct Words {
    words: HashSet<Word>,
    swept_at: usize,
}

/// Below this many words the set is never swept.
const WORDS_SWEPT_FROM: usize = 1024;

impl Words {
    fn get(&mut self, word: &str) -> Word {
        if let Some(known) = self.words.get(word) {
            return known.clone();
        }
        if self.words.len() >= 2 * self.swept_at.max(WORDS_SWEPT_FROM) {
            self.words.retain(|word| Arc::strong_count(word) > 1);
            self.swept_at = self.words.len();
        }
        let word: Word = Arc::from(word);
        self.words.insert(word.clone());
        word
    }
}

fn shared(word: &str) -> Word {
    static WORDS: LazyLock<Mutex<Words>> = LazyLock::new(Mutex::default);
    WORDS
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .get(word)
}

/// The strings of a rule's list, each made by `word`.
fn strings(v: Option<&Value>, word: fn(&str) -> Word) -> Vec<Word> {
    v.and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).map(word).collect())
        .unwrap_or_default()
}

fn list(items: &[&str]) -> Vec<Word> {
    items.iter().map(|word| shared(word)).collect()
}

impl PolicyRule {
    /// Reads a rule from its JSON form; missing lists are empty.
    pub fn from_json(v: &Value) -> Self {
        PolicyRule {
            verbs: strings(v.get("verbs"), shared),
            api_groups: strings(v.get("apiGroups"), shared),
            resources: strings(v.get("resources"), shared),
            // Names of objects, which few rules repeat, are each their own.
            resource_names: strings(v.get("resourceNames"), |name| Word::from(name)),
            non_resource_urls: strings(v.get("nonResourceURLs"), shared),
        }
    }

    /// A resource rule.
    pub fn resource(verbs: &[&str], groups: &[&str], resources: &[&str]) -> Self {
        PolicyRule {
            verbs: list(verbs),
            api_groups: list(groups),
            resources: list(resources),
            ..Default::default()
        }
    }

    /// A non-resource URL rule.
    pub fn urls(verbs: &[&str], urls: &[&str]) -> Self {
        PolicyRule {
            verbs: list(verbs),
            non_resource_urls: list(urls),
            ..Default::default()
        }
    }

    /// Restricts the rule to these object names.
    pub fn names(mut self, names: &[&str]) -> Self {
        self.resource_names = list(names);
        self
    }

    /// Whether this rule allows the request.
    pub fn allows(&self, a: &Attributes<'_>) -> bool {
        if !has(&self.verbs, a.verb) {
            return false;
        }
        match &a.target {
            Target::Resource {
                group,
                resource,
                subresource,
                name,
                ..
            } => {
                has(&self.api_groups, group)
                    && resource_matches(&self.resources, resource, subresource)
                    && (self.resource_names.is_empty()
                        || (!name.is_empty() && self.resource_names.iter().any(|n| &**n == *name)))
            }
            Target::NonResource { path } => self.non_resource_urls.iter().any(|u| {
                let u: &str = u;
                u == "*" || u == *path || u.strip_suffix('*').is_some_and(|p| path.starts_with(p))
            }),
        }
    }
}

fn has(list: &[Word], want: &str) -> bool {
    list.iter().any(|v| &**v == "*" || &**v == want)
}

/// Whether a rule's resource names `resource`, or `resource/subresource` when a subresource is
/// asked for (`*/subresource` names that subresource of every resource).
fn resource_matches(rule: &[Word], resource: &str, subresource: &str) -> bool {
    rule.iter().any(|r| {
        let r: &str = r;
        r == "*"
            || if subresource.is_empty() {
                r == resource
            } else {
                r.strip_prefix(resource).and_then(|s| s.strip_prefix('/')) == Some(subresource)
                    || r.strip_prefix("*/") == Some(subresource)
            }
    })
}

/// What a request does, as the authorizer sees it: a view of the request (or review) it is
/// about, so authorizing copies nothing.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Attributes<'a> {
    pub user: &'a UserInfo,
    pub verb: &'a str,
    pub target: Target<'a>,
}

/// A resource (possibly namespaced, possibly named) or a non-resource path.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Target<'a> {
    Resource {
        namespace: &'a str,
        group: &'a str,
        resource: &'a str,
        subresource: &'a str,
        name: &'a str,
    },
    NonResource {
        path: &'a str,
    },
}

impl Attributes<'_> {
    /// The namespace the request is in ("" for cluster scope and non-resource paths).
    pub fn namespace(&self) -> &str {
        match &self.target {
            Target::Resource { namespace, .. } => namespace,
            Target::NonResource { .. } => "",
        }
    }

    /// kube-apiserver's reason for a denied request, e.g. `User "bob" cannot get resource
    /// "configmaps" in API group "" in the namespace "default"`.
    pub fn denial(&self) -> String {
        let user = &self.user.name;
        let verb = &self.verb;
        match &self.target {
            Target::NonResource { path } => format!("User {user:?} cannot {verb} path {path:?}"),
            Target::Resource {
                namespace,
                group,
                resource,
                subresource,
                ..
            } => {
                let resource = if subresource.is_empty() {
                    resource.to_string()
                } else {
                    format!("{resource}/{subresource}")
                };
                if namespace.is_empty() {
                    format!(
                        "User {user:?} cannot {verb} resource {resource:?} in API group {group:?} at the cluster scope"
                    )
                } else {
                    format!(
                        "User {user:?} cannot {verb} resource {resource:?} in API group {group:?} in the namespace {namespace:?}"
                    )
                }
            }
        }
    }

    /// The whole message of the 403 Status, as `NewForbidden` words it:
    /// `configmaps "x" is forbidden: User ...`, `deployments.apps is forbidden: ...` or
    /// `forbidden: ...` for paths.
    pub fn forbidden_message(&self) -> String {
        match &self.target {
            Target::NonResource { .. } => format!("forbidden: {}", self.denial()),
            Target::Resource {
                group,
                resource,
                name,
                ..
            } => {
                let qualified = if group.is_empty() {
                    resource.to_string()
                } else {
                    format!("{resource}.{group}")
                };
                if name.is_empty() {
                    format!("{qualified} is forbidden: {}", self.denial())
                } else {
                    format!("{qualified} {name:?} is forbidden: {}", self.denial())
                }
            }
        }
    }
}

/// Who a binding grants to.
#[derive(Debug, Clone, PartialEq)]
pub enum Subject {
    User(String),
    Group(String),
    /// `system:serviceaccount:<namespace>:<name>`
    ServiceAccount {
        namespace: String,
        name: String,
    },
}

/// Who a subject grants to, as requests name themselves: a user (a service account by its
/// `system:serviceaccount:<namespace>:<name>` user name) or a group.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
enum Principal {
    User(String),
    Group(String),
}

impl Subject {
    /// The principal this subject of a binding in `binding_namespace` names.
    fn principal(&self, binding_namespace: &str) -> Principal {
        match self {
            Subject::User(n) => Principal::User(n.clone()),
            Subject::Group(g) => Principal::Group(g.clone()),
            Subject::ServiceAccount { namespace, name } => {
                let ns = if namespace.is_empty() {
                    binding_namespace
                } else {
                    namespace
                };
                Principal::User(format!("system:serviceaccount:{ns}:{name}"))
            }
        }
    }

    fn from_json(v: &Value) -> Option<Self> {
        let name = v.get("name")?.as_str()?.to_string();
        match v.get("kind")?.as_str()? {
            "User" => Some(Subject::User(name)),
            "Group" => Some(Subject::Group(name)),
            "ServiceAccount" => Some(Subject::ServiceAccount {
                namespace: v
                    .get("namespace")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string(),
                name,
            }),
            _ => None,
        }
    }
}

/// A RoleBinding (namespace set) or ClusterRoleBinding (namespace empty).
#[derive(Debug, Clone, PartialEq)]
pub struct Binding {
    pub name: String,
    pub namespace: String,
    /// `Role` or `ClusterRole`.
    pub role_kind: String,
    pub role_name: String,
    pub subjects: Vec<Subject>,
}

impl Binding {
    /// Reads a RoleBinding or ClusterRoleBinding; None when its roleRef is unusable.
    pub fn from_json(v: &Value) -> Option<Self> {
        let role_ref = v.get("roleRef")?;
        Some(Binding {
            name: v
                .pointer("/metadata/name")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string(),
            namespace: v
                .pointer("/metadata/namespace")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string(),
            role_kind: role_ref.get("kind")?.as_str()?.to_string(),
            role_name: role_ref.get("name")?.as_str()?.to_string(),
            subjects: v
                .get("subjects")
                .and_then(Value::as_array)
                .map(|s| s.iter().filter_map(Subject::from_json).collect())
                .unwrap_or_default(),
        })
    }

    /// A built-in ClusterRoleBinding, named as its role (as kube-apiserver bootstraps them).
    fn cluster(role: &str, subjects: Vec<Subject>) -> Self {
        Binding {
            name: role.into(),
            namespace: String::new(),
            role_kind: "ClusterRole".into(),
            role_name: role.into(),
            subjects,
        }
    }

    /// Everyone this binding grants to (each once).
    fn principals(&self) -> Vec<Principal> {
        let mut principals: Vec<Principal> = self
            .subjects
            .iter()
            .map(|s| s.principal(&self.namespace))
            .collect();
        principals.sort();
        principals.dedup();
        principals
    }

    /// How kube-apiserver's RBAC names this binding granting to `user` in the reason of an
    /// access review: `RoleBinding "name/namespace" of Role "r" to ServiceAccount "sa/ns"`.
    fn describe(&self, user: &UserInfo) -> String {
        let binding = if self.namespace.is_empty() {
            format!("ClusterRoleBinding {:?}", self.name)
        } else {
            format!(
                "RoleBinding {:?}",
                format!("{}/{}", self.name, self.namespace)
            )
        };
        let names = |principal: &Principal| match principal {
            Principal::User(name) => *name == user.name,
            Principal::Group(group) => user.groups.contains(group),
        };
        let subject = self
            .subjects
            .iter()
            .find(|s| names(&s.principal(&self.namespace)))
            .map(|s| match s {
                Subject::User(name) => format!("User {name:?}"),
                Subject::Group(name) => format!("Group {name:?}"),
                Subject::ServiceAccount { namespace, name } => {
                    let ns = if namespace.is_empty() {
                        &self.namespace
                    } else {
                        namespace
                    };
                    format!("ServiceAccount {:?}", format!("{name}/{ns}"))
                }
            })
            .unwrap_or_default();
        format!(
            "{binding} of {} {:?} to {subject}",
            self.role_kind, self.role_name
        )
    }
}

/// A binding's identity: (kind, namespace, name) for a stored one; a built-in one is named by
/// its place among the defaults, with an empty kind.
type BindingKey = (String, String, String);

fn rules_of(v: &Value) -> Vec<PolicyRule> {
    v.get("rules")
        .and_then(Value::as_array)
        .map(|r| r.iter().map(PolicyRule::from_json).collect())
        .unwrap_or_default()
}

/// A snapshot of every role and binding the authorizer consults.
///
/// Bindings are found by whom they grant to, so authorizing a request costs the bindings of its
/// user and groups, not every binding stored (which grows with a hub's clusters).
#[derive(Debug, Clone, Default)]
pub struct Policy {
    // Entries are shared, so that a policy is copied cheaply when one object changes.
    cluster_roles: HashMap<String, Arc<Vec<PolicyRule>>>,
    /// (namespace, name) → rules
    roles: HashMap<(String, String), Arc<Vec<PolicyRule>>>,
    /// Every binding, built-in and stored.
    bindings: HashMap<BindingKey, Arc<Binding>>,
    /// The bindings granting to each principal.
    grants: HashMap<Principal, HashMap<BindingKey, Arc<Binding>>>,
}

impl Policy {
    /// The built-in roles and bindings only (what a fresh kube-apiserver bootstraps).
    pub fn with_defaults() -> Self {
        let mut p = Policy::default();
        for (name, rules) in default_cluster_roles() {
            p.cluster_roles.insert(name.into(), Arc::new(rules));
        }
        for (i, binding) in default_bindings().into_iter().enumerate() {
            p.put_binding((String::new(), String::new(), i.to_string()), binding);
        }
        p
    }

    fn put_binding(&mut self, key: BindingKey, binding: Binding) {
        self.drop_binding(&key);
        let binding = Arc::new(binding);
        for principal in binding.principals() {
            self.grants
                .entry(principal)
                .or_default()
                .insert(key.clone(), binding.clone());
        }
        self.bindings.insert(key, binding);
    }

    fn drop_binding(&mut self, key: &BindingKey) {
        let Some(old) = self.bindings.remove(key) else {
            return;
        };
        for principal in old.principals() {
            if let Some(granted) = self.grants.get_mut(&principal) {
                granted.remove(key);
                if granted.is_empty() {
                    self.grants.remove(&principal);
                }
            }
        }
    }

    /// Adds stored objects (Role, ClusterRole, RoleBinding, ClusterRoleBinding, by `kind`),
    /// replacing an earlier version of the same object. A stored ClusterRole replaces a default
    /// of the same name.
    pub fn add_object(&mut self, v: &Value) {
        let name = v
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let ns = v
            .pointer("/metadata/namespace")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        match v.get("kind").and_then(Value::as_str) {
            Some("ClusterRole") => {
                self.cluster_roles.insert(name, Arc::new(rules_of(v)));
            }
            Some("Role") => {
                self.roles.insert((ns, name), Arc::new(rules_of(v)));
            }
            Some(kind @ ("RoleBinding" | "ClusterRoleBinding")) => {
                let key = (kind.to_string(), ns, name);
                match Binding::from_json(v) {
                    Some(b) => self.put_binding(key, b),
                    None => self.drop_binding(&key),
                }
            }
            _ => {}
        }
    }

    /// Removes a stored object (of `kind`); a deleted ClusterRole that shadowed a default
    /// brings the default back.
    pub fn remove_object(&mut self, kind: &str, ns: &str, name: &str) {
        match kind {
            "ClusterRole" => {
                self.cluster_roles.remove(name);
                if let Some((_, rules)) = default_cluster_roles()
                    .into_iter()
                    .find(|(n, _)| *n == name)
                {
                    self.cluster_roles.insert(name.to_string(), Arc::new(rules));
                }
            }
            "Role" => {
                self.roles.remove(&(ns.to_string(), name.to_string()));
            }
            "RoleBinding" | "ClusterRoleBinding" => {
                self.drop_binding(&(kind.to_string(), ns.to_string(), name.to_string()));
            }
            _ => {}
        }
    }

    fn role_rules(&self, binding: &Binding) -> &[PolicyRule] {
        let found = match binding.role_kind.as_str() {
            "ClusterRole" => self.cluster_roles.get(&binding.role_name),
            // A RoleBinding may only name a Role of its own namespace.
            "Role" if !binding.namespace.is_empty() => self
                .roles
                .get(&(binding.namespace.clone(), binding.role_name.clone())),
            _ => None,
        };
        found.map(|rules| rules.as_slice()).unwrap_or(&[])
    }

    /// The rules granted to `user` in `namespace` (cluster-wide rules always; rules of
    /// RoleBindings only in their namespace), a binding's rules once however many of the
    /// user's names it grants to.
    fn held<'a>(
        &'a self,
        user: &UserInfo,
        namespace: &str,
    ) -> impl Iterator<Item = &'a PolicyRule> {
        self.bindings_for(user, namespace)
            .into_iter()
            .flat_map(|binding| self.role_rules(binding).iter())
    }

    /// The bindings granting to `user` in `namespace`, each once.
    fn bindings_for<'a>(&'a self, user: &UserInfo, namespace: &str) -> Vec<&'a Arc<Binding>> {
        let principals = std::iter::once(Principal::User(user.name.clone()))
            .chain(user.groups.iter().cloned().map(Principal::Group));
        let mut seen = std::collections::HashSet::new();
        let mut bindings = Vec::new();
        for principal in principals {
            for (key, binding) in self.grants.get(&principal).into_iter().flatten() {
                let in_scope = binding.namespace.is_empty()
                    || (!namespace.is_empty() && binding.namespace == namespace);
                if in_scope && seen.insert(key) {
                    bindings.push(binding);
                }
            }
        }
        bindings
    }

    /// Why RBAC allows the request, as kube-apiserver's access reviews give it: the first
    /// binding (ClusterRoleBindings, then the namespace's RoleBindings, each by name) with a
    /// rule that allows it. None when RBAC does not allow it. `system:masters` is allowed before
    /// RBAC is asked, with no reason; this is RBAC's answer alone.
    pub fn allowed_by(&self, a: &Attributes<'_>) -> Option<String> {
        let mut bindings = self.bindings_for(a.user, a.namespace());
        bindings.sort_by(|x, y| {
            (!x.namespace.is_empty(), &x.name).cmp(&(!y.namespace.is_empty(), &y.name))
        });
        bindings
            .into_iter()
            .find(|b| self.role_rules(b).iter().any(|r| r.allows(a)))
            .map(|b| format!("RBAC: allowed by {}", b.describe(a.user)))
    }

    /// The rules RBAC grants `user` in `namespace` (a SelfSubjectRulesReview), in the order of
    /// their bindings: ClusterRoleBindings, then the namespace's RoleBindings, each by name.
    pub fn rules_review(&self, user: &UserInfo, namespace: &str) -> Vec<PolicyRule> {
        let mut bindings = self.bindings_for(user, namespace);
        bindings.sort_by(|x, y| {
            (!x.namespace.is_empty(), &x.name).cmp(&(!y.namespace.is_empty(), &y.name))
        });
        bindings
            .into_iter()
            .flat_map(|b| self.role_rules(b).iter().cloned())
            .collect()
    }

    /// Every rule that applies to `user` in `namespace` (cluster-wide rules always; rules of
    /// RoleBindings only in their namespace).
    pub fn rules_for(&self, user: &UserInfo, namespace: &str) -> Vec<PolicyRule> {
        let mut out = Vec::new();
        if user.groups.iter().any(|g| g == SYSTEM_MASTERS) {
            out.push(PolicyRule {
                verbs: list(&["*"]),
                api_groups: list(&["*"]),
                resources: list(&["*"]),
                non_resource_urls: list(&["*"]),
                ..Default::default()
            });
        }
        out.extend(self.held(user, namespace).cloned());
        out
    }

    /// Whether the request is allowed.
    pub fn authorize(&self, a: &Attributes<'_>) -> bool {
        if a.user.groups.iter().any(|g| g == SYSTEM_MASTERS) {
            return true;
        }
        self.held(a.user, a.namespace()).any(|r| r.allows(a))
    }

    /// Checks that `user` may create or update a role with these rules in `namespace` (""
    /// for a ClusterRole): they must hold every permission it grants, or have `escalate` on
    /// the role's resource.
    pub fn check_role_escalation(
        &self,
        user: &UserInfo,
        namespace: &str,
        role_resource: &str,
        role_name: &str,
        rules: &[PolicyRule],
    ) -> Result<(), Escalation> {
        if self.may(user, "escalate", namespace, role_resource, role_name) {
            return Ok(());
        }
        self.check_covers(user, namespace, rules)
    }

    /// Checks that `user` may create or update a binding in `namespace` ("" for a
    /// ClusterRoleBinding) to the role it names: they must hold every permission of that role,
    /// or have `bind` on it.
    pub fn check_binding_escalation(
        &self,
        user: &UserInfo,
        binding: &Binding,
    ) -> Result<(), Escalation> {
        let resource = if binding.role_kind == "ClusterRole" {
            "clusterroles"
        } else {
            "roles"
        };
        if self.may(
            user,
            "bind",
            &binding.namespace,
            resource,
            &binding.role_name,
        ) {
            return Ok(());
        }
        let rules = self.role_rules(binding).to_vec();
        self.check_covers(user, &binding.namespace, &rules)
    }

    fn may(
        &self,
        user: &UserInfo,
        verb: &str,
        namespace: &str,
        resource: &str,
        name: &str,
    ) -> bool {
        self.authorize(&Attributes {
            user,
            verb,
            target: Target::Resource {
                namespace,
                group: "rbac.authorization.k8s.io",
                resource,
                subresource: "",
                name,
            },
        })
    }

    fn check_covers(
        &self,
        user: &UserInfo,
        namespace: &str,
        rules: &[PolicyRule],
    ) -> Result<(), Escalation> {
        let held = self.rules_for(user, namespace);
        let missing: Vec<PolicyRule> = rules
            .iter()
            .flat_map(atomic)
            .filter(|want| !held.iter().any(|h| covers(h, want)))
            .collect();
        if missing.is_empty() {
            Ok(())
        } else {
            Err(Escalation {
                user: user.name.clone(),
                groups: user.groups.clone(),
                missing,
            })
        }
    }
}

/// A role or binding would grant permissions its requester does not hold.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error(
    "user {user:?} (groups={}) is attempting to grant RBAC permissions not currently held:\n{}",
    go_quote(groups),
    self.missing.iter().map(describe).collect::<Vec<_>>().join("\n")
)]
pub struct Escalation {
    pub user: String,
    pub groups: Vec<String>,
    pub missing: Vec<PolicyRule>,
}

/// A string list as Go's `%q` prints it: `["a" "b"]`.
fn go_quote<S: std::fmt::Debug>(list: &[S]) -> String {
    let items: Vec<String> = list.iter().map(|s| format!("{s:?}")).collect();
    format!("[{}]", items.join(" "))
}

/// A rule as kube-apiserver's escalation message lists it.
fn describe(r: &PolicyRule) -> String {
    if !r.non_resource_urls.is_empty() {
        return format!(
            "{{NonResourceURLs:{}, Verbs:{}}}",
            go_quote(&r.non_resource_urls),
            go_quote(&r.verbs)
        );
    }
    let names = if r.resource_names.is_empty() {
        String::new()
    } else {
        format!(", ResourceNames:{}", go_quote(&r.resource_names))
    };
    format!(
        "{{APIGroups:{}, Resources:{}{names}, Verbs:{}}}",
        go_quote(&r.api_groups),
        go_quote(&r.resources),
        go_quote(&r.verbs)
    )
}

/// Splits a rule into rules of one verb, group, resource and name (or one URL and verb).
fn atomic(r: &PolicyRule) -> Vec<PolicyRule> {
    let mut out = Vec::new();
    for verb in &r.verbs {
        for url in &r.non_resource_urls {
            out.push(PolicyRule {
                verbs: vec![verb.clone()],
                non_resource_urls: vec![url.clone()],
                ..Default::default()
            });
        }
        for group in &r.api_groups {
            for resource in &r.resources {
                let one = |names: Vec<Word>| PolicyRule {
                    verbs: vec![verb.clone()],
                    api_groups: vec![group.clone()],
                    resources: vec![resource.clone()],
                    resource_names: names,
                    non_resource_urls: Vec::new(),
                };
                if r.resource_names.is_empty() {
                    out.push(one(Vec::new()));
                } else {
                    out.extend(r.resource_names.iter().map(|n| one(vec![n.clone()])));
                }
            }
        }
    }
    out
}

/// Whether the held rule grants everything the atomic rule `want` does. Wildcards in `want`
/// are only covered by the same wildcard (or `*`) in `held`.
fn covers(held: &PolicyRule, want: &PolicyRule) -> bool {
    let has_all =
        |list: &[Word], w: &[Word]| w.iter().all(|x| list.iter().any(|l| &**l == "*" || l == x));
    if !has_all(&held.verbs, &want.verbs) {
        return false;
    }
    if !want.non_resource_urls.is_empty() {
        return want.non_resource_urls.iter().all(|u| {
            held.non_resource_urls.iter().any(|h| {
                &**h == "*" || h == u || h.strip_suffix('*').is_some_and(|p| u.starts_with(p))
            })
        });
    }
    has_all(&held.api_groups, &want.api_groups)
        && want.resources.iter().all(|res| {
            held.resources.iter().any(|h| {
                &**h == "*"
                    || h == res
                    || h.strip_prefix("*/")
                        .is_some_and(|sub| res.split_once('/').is_some_and(|(_, s)| s == sub))
            })
        })
        && (held.resource_names.is_empty()
            || (!want.resource_names.is_empty()
                && want
                    .resource_names
                    .iter()
                    .all(|n| held.resource_names.contains(n))))
}

const READ: &[&str] = &["get", "list", "watch"];
const WRITE: &[&str] = &["create", "delete", "deletecollection", "patch", "update"];

fn default_cluster_roles() -> Vec<(&'static str, Vec<PolicyRule>)> {
    let core_view = &[
        "configmaps",
        "endpoints",
        "events",
        "namespaces",
        "namespaces/status",
        "persistentvolumeclaims",
        "pods",
        "pods/log",
        "pods/status",
        "replicationcontrollers",
        "resourcequotas",
        "serviceaccounts",
        "services",
        "services/status",
    ];
    let core_edit = &[
        "configmaps",
        "endpoints",
        "events",
        "persistentvolumeclaims",
        "pods",
        "replicationcontrollers",
        "secrets",
        "serviceaccounts",
        "services",
    ];
    let apps = &[
        "daemonsets",
        "deployments",
        "deployments/scale",
        "deployments/status",
        "replicasets",
        "statefulsets",
    ];
    let view = vec![
        PolicyRule::resource(READ, &[""], core_view),
        PolicyRule::resource(READ, &["apps"], apps),
        PolicyRule::resource(READ, &["coordination.k8s.io"], &["leases"]),
        PolicyRule::resource(READ, &["events.k8s.io"], &["events"]),
    ];
    let mut edit = view.clone();
    edit.extend([
        PolicyRule::resource(READ, &[""], &["secrets"]),
        PolicyRule::resource(WRITE, &[""], core_edit),
        PolicyRule::resource(WRITE, &["apps"], apps),
        PolicyRule::resource(WRITE, &["coordination.k8s.io"], &["leases"]),
        PolicyRule::resource(&["impersonate"], &[""], &["serviceaccounts"]),
        // Tokens for the namespace's ServiceAccounts (TokenRequest), as kube-apiserver's edit.
        PolicyRule::resource(&["create"], &[""], &["serviceaccounts/token"]),
    ]);
    let mut admin = edit.clone();
    admin.extend([
        PolicyRule::resource(
            &[
                "create",
                "delete",
                "deletecollection",
                "get",
                "list",
                "patch",
                "update",
                "watch",
            ],
            &["rbac.authorization.k8s.io"],
            &["roles", "rolebindings"],
        ),
        PolicyRule::resource(
            &["create"],
            &["authorization.k8s.io"],
            &["localsubjectaccessreviews"],
        ),
    ]);
    let health = &["/healthz", "/livez", "/readyz", "/version", "/version/"];
    vec![
        (
            "cluster-admin",
            vec![
                PolicyRule::resource(&["*"], &["*"], &["*"]),
                PolicyRule::urls(&["*"], &["*"]),
            ],
        ),
        ("admin", admin),
        ("edit", edit),
        ("view", view),
        (
            "system:basic-user",
            vec![
                PolicyRule::resource(
                    &["create"],
                    &["authorization.k8s.io"],
                    &["selfsubjectaccessreviews", "selfsubjectrulesreviews"],
                ),
                PolicyRule::resource(
                    &["create"],
                    &["authentication.k8s.io"],
                    &["selfsubjectreviews"],
                ),
            ],
        ),
        (
            "system:discovery",
            vec![PolicyRule::urls(
                &["get"],
                &[
                    "/api",
                    "/api/*",
                    "/apis",
                    "/apis/*",
                    "/healthz",
                    "/livez",
                    "/openapi",
                    "/openapi/*",
                    "/readyz",
                    "/version",
                    "/version/",
                ],
            )],
        ),
        (
            "system:public-info-viewer",
            vec![PolicyRule::urls(&["get"], health)],
        ),
        // kube-apiserver v1.36 grants every authenticated user these paths (the corpus's
        // SelfSubjectRulesReview shows the rule; the role's name is this server's).
        (
            WELL_KNOWN_VIEWER,
            vec![PolicyRule::urls(
                &["get"],
                &["/.well-known", "/.well-known/*"],
            )],
        ),
        (
            "system:node-bootstrapper",
            vec![PolicyRule::resource(
                &["create", "get", "list", "watch"],
                &["certificates.k8s.io"],
                &["certificatesigningrequests"],
            )],
        ),
    ]
}

fn default_bindings() -> Vec<Binding> {
    let group = |g: &str| Subject::Group(g.into());
    vec![
        Binding::cluster("cluster-admin", vec![group(SYSTEM_MASTERS)]),
        Binding::cluster("system:basic-user", vec![group("system:authenticated")]),
        Binding::cluster("system:discovery", vec![group("system:authenticated")]),
        Binding::cluster(
            "system:public-info-viewer",
            vec![
                group("system:authenticated"),
                group("system:unauthenticated"),
            ],
        ),
        Binding::cluster(WELL_KNOWN_VIEWER, vec![group("system:authenticated")]),
    ]
}

const WELL_KNOWN_VIEWER: &str = "system:well-known-viewer";

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn rules_share_their_words_but_not_object_names() {
        let rule = |name: &str| {
            PolicyRule::from_json(&json!({
                "verbs": ["get", "update"], "apiGroups": ["coordination.k8s.io"],
                "resources": ["leases"], "resourceNames": [name],
            }))
        };
        let (a, b) = (rule("cluster-a"), rule("cluster-b"));
        assert!(Arc::ptr_eq(&a.verbs[0], &b.verbs[0]));
        assert!(Arc::ptr_eq(&a.api_groups[0], &b.api_groups[0]));
        assert!(Arc::ptr_eq(&a.resources[0], &b.resources[0]));
        assert_eq!(&*a.resource_names[0], "cluster-a");
        assert!(!Arc::ptr_eq(
            &a.resource_names[0],
            &rule("cluster-a").resource_names[0]
        ));
    }

    #[test]
    fn words_no_rule_holds_go_once_the_set_has_doubled() {
        let mut words = Words::default();
        let kept = words.get("kept");
        for i in 0..WORDS_SWEPT_FROM * 2 - 1 {
            drop(words.get(&format!("gone-{i}")));
        }
        assert_eq!(words.words.len(), WORDS_SWEPT_FROM * 2);
        let again = words.get("again");
        assert_eq!(
            words.words.len(),
            2,
            "only the words still held, and the new one"
        );
        assert!(Arc::ptr_eq(&words.get("kept"), &kept));
        assert!(Arc::ptr_eq(&words.get("again"), &again));
    }

    fn user(name: &str, groups: &[&str]) -> UserInfo {
        UserInfo {
            name: name.into(),
            groups: groups.iter().map(|g| g.to_string()).collect(),
            ..Default::default()
        }
    }

    fn res<'a>(
        user: &'a UserInfo,
        verb: &'a str,
        namespace: &'a str,
        group: &'a str,
        resource: &'a str,
        subresource: &'a str,
        name: &'a str,
    ) -> Attributes<'a> {
        Attributes {
            user,
            verb,
            target: Target::Resource {
                namespace,
                group,
                resource,
                subresource,
                name,
            },
        }
    }

    fn path<'a>(user: &'a UserInfo, path: &'a str) -> Attributes<'a> {
        Attributes {
            user,
            verb: "get",
            target: Target::NonResource { path },
        }
    }

    fn policy(objects: &[Value]) -> Policy {
        let mut p = Policy::with_defaults();
        for o in objects {
            p.add_object(o);
        }
        p
    }

    fn role(ns: &str, name: &str, rules: Value) -> Value {
        json!({"kind": "Role", "metadata": {"namespace": ns, "name": name}, "rules": rules})
    }

    fn cluster_role(name: &str, rules: Value) -> Value {
        json!({"kind": "ClusterRole", "metadata": {"name": name}, "rules": rules})
    }

    fn role_binding(ns: &str, kind: &str, role: &str, user: &str) -> Value {
        json!({"kind": "RoleBinding", "metadata": {"namespace": ns, "name": format!("{role}-{user}")},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": role},
            "subjects": [{"kind": "User", "name": user}]})
    }

    fn cluster_binding(role: &str, subject: Value) -> Value {
        json!({"kind": "ClusterRoleBinding", "metadata": {"name": role},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
            "subjects": [subject]})
    }

    #[test]
    fn system_masters_may_do_anything() {
        let p = Policy::with_defaults();
        let admin = user("root", &[SYSTEM_MASTERS]);
        assert!(p.authorize(&res(&admin, "delete", "x", "apps", "deployments", "", "d")));
        assert!(p.authorize(&path(&admin, "/metrics")));
    }

    #[test]
    fn users_without_bindings_are_denied_resources_but_may_discover() {
        let p = Policy::with_defaults();
        let bob = user("bob", &["system:authenticated"]);
        assert!(!p.authorize(&res(&bob, "get", "default", "", "configmaps", "", "c")));
        assert!(p.authorize(&path(&bob, "/apis/apps/v1")));
        assert!(p.authorize(&path(&bob, "/version")));
        assert!(!p.authorize(&path(&bob, "/metrics")));
        assert!(p.authorize(&res(
            &bob,
            "create",
            "",
            "authorization.k8s.io",
            "selfsubjectaccessreviews",
            "",
            ""
        )));
    }

    #[test]
    fn objects_replace_and_remove_themselves_and_a_removed_override_restores_the_default() {
        let mut p = policy(&[
            role(
                "a",
                "reader",
                json!([{"verbs": ["get"], "apiGroups": [""], "resources": ["configmaps"]}]),
            ),
            role_binding("a", "Role", "reader", "bob"),
        ]);
        let bob = user("bob", &[]);
        assert!(p.authorize(&res(&bob, "get", "a", "", "configmaps", "", "x")));
        // A new version of the role replaces the old one.
        p.add_object(&role(
            "a",
            "reader",
            json!([{"verbs": ["list"], "apiGroups": [""], "resources": ["configmaps"]}]),
        ));
        assert!(!p.authorize(&res(&bob, "get", "a", "", "configmaps", "", "x")));
        assert!(p.authorize(&res(&bob, "list", "a", "", "configmaps", "", "")));
        p.remove_object("RoleBinding", "a", "reader-bob");
        assert!(!p.authorize(&res(&bob, "list", "a", "", "configmaps", "", "")));
        // A stored `view` shadows the built-in one until it is deleted.
        p.add_object(&role_binding("a", "ClusterRole", "view", "bob"));
        assert!(p.authorize(&res(&bob, "get", "a", "", "configmaps", "", "x")));
        p.add_object(&json!({"kind": "ClusterRole", "metadata": {"name": "view"}, "rules": []}));
        assert!(!p.authorize(&res(&bob, "get", "a", "", "configmaps", "", "x")));
        p.remove_object("ClusterRole", "", "view");
        assert!(p.authorize(&res(&bob, "get", "a", "", "configmaps", "", "x")));
    }

    #[test]
    fn a_binding_changed_to_other_subjects_stops_granting_to_the_old_ones() {
        let mut p = policy(&[role_binding("a", "ClusterRole", "view", "bob")]);
        let bob = user("bob", &[]);
        let eve = user("eve", &["auditors"]);
        assert!(p.authorize(&res(&bob, "list", "a", "", "pods", "", "")));
        // The same binding now names a group (and a service account) instead of bob.
        p.add_object(
            &json!({"kind": "RoleBinding", "metadata": {"namespace": "a", "name": "view-bob"},
            "roleRef": {"kind": "ClusterRole", "name": "view"},
            "subjects": [{"kind": "Group", "name": "auditors"},
                         {"kind": "ServiceAccount", "name": "robot"}]}),
        );
        assert!(!p.authorize(&res(&bob, "list", "a", "", "pods", "", "")));
        assert!(p.authorize(&res(&eve, "list", "a", "", "pods", "", "")));
        let robot = user("system:serviceaccount:a:robot", &[]);
        assert!(p.authorize(&res(&robot, "list", "a", "", "pods", "", "")));
        // A binding whose roleRef is unusable grants nothing any more.
        p.add_object(
            &json!({"kind": "RoleBinding", "metadata": {"namespace": "a", "name": "view-bob"},
            "subjects": [{"kind": "Group", "name": "auditors"}]}),
        );
        assert!(!p.authorize(&res(&eve, "list", "a", "", "pods", "", "")));
        assert!(!p.authorize(&res(&robot, "list", "a", "", "pods", "", "")));
    }

    #[test]
    fn role_binding_grants_only_in_its_namespace() {
        let p = policy(&[
            role(
                "a",
                "reader",
                json!([{"verbs": ["get", "list"], "apiGroups": [""], "resources": ["configmaps"]}]),
            ),
            role_binding("a", "Role", "reader", "bob"),
        ]);
        let bob = user("bob", &[]);
        assert!(p.authorize(&res(&bob, "get", "a", "", "configmaps", "", "x")));
        assert!(p.authorize(&res(&bob, "list", "a", "", "configmaps", "", "")));
        assert!(!p.authorize(&res(&bob, "delete", "a", "", "configmaps", "", "x")));
        assert!(!p.authorize(&res(&bob, "get", "b", "", "configmaps", "", "x")));
        assert!(!p.authorize(&res(&bob, "list", "", "", "configmaps", "", "")));
        assert!(!p.authorize(&res(&bob, "get", "a", "", "secrets", "", "x")));
    }

    #[test]
    fn role_binding_to_cluster_role_is_namespace_limited() {
        let p = policy(&[role_binding("a", "ClusterRole", "edit", "bob")]);
        let bob = user("bob", &[]);
        assert!(p.authorize(&res(&bob, "create", "a", "apps", "deployments", "", "")));
        assert!(!p.authorize(&res(&bob, "create", "b", "apps", "deployments", "", "")));
    }

    #[test]
    fn role_binding_cannot_use_a_role_of_another_namespace() {
        let p = policy(&[
            role(
                "b",
                "reader",
                json!([{"verbs": ["get"], "apiGroups": [""], "resources": ["configmaps"]}]),
            ),
            role_binding("a", "Role", "reader", "bob"),
        ]);
        assert!(!p.authorize(&res(
            &user("bob", &[]),
            "get",
            "a",
            "",
            "configmaps",
            "",
            "x"
        )));
    }

    #[test]
    fn subresources_need_their_own_rule_or_a_star_slash_rule() {
        let p = policy(&[
            cluster_role(
                "status-writer",
                json!([{"verbs": ["update"], "apiGroups": ["cluster.example.io"], "resources": ["managedclusters/status"]}]),
            ),
            cluster_binding("status-writer", json!({"kind": "User", "name": "bob"})),
            cluster_role(
                "any-status",
                json!([{"verbs": ["get"], "apiGroups": ["*"], "resources": ["*/status"]}]),
            ),
            cluster_binding("any-status", json!({"kind": "User", "name": "eve"})),
        ]);
        let bob = user("bob", &[]);
        assert!(p.authorize(&res(
            &bob,
            "update",
            "",
            "cluster.example.io",
            "managedclusters",
            "status",
            "c1"
        )));
        assert!(!p.authorize(&res(
            &bob,
            "update",
            "",
            "cluster.example.io",
            "managedclusters",
            "",
            "c1"
        )));
        let eve = user("eve", &[]);
        assert!(p.authorize(&res(&eve, "get", "", "apps", "deployments", "status", "d")));
        assert!(!p.authorize(&res(&eve, "get", "", "apps", "deployments", "", "d")));
    }

    #[test]
    fn resource_names_limit_named_requests_and_exclude_lists() {
        let p = policy(&[
            cluster_role(
                "one",
                json!([{"verbs": ["get", "list"], "apiGroups": [""], "resources": ["secrets"], "resourceNames": ["mine"]}]),
            ),
            cluster_binding("one", json!({"kind": "Group", "name": "team"})),
        ]);
        let u = user("x", &["team"]);
        assert!(p.authorize(&res(&u, "get", "ns", "", "secrets", "", "mine")));
        assert!(!p.authorize(&res(&u, "get", "ns", "", "secrets", "", "other")));
        assert!(!p.authorize(&res(&u, "list", "ns", "", "secrets", "", "")));
    }

    #[test]
    fn non_resource_urls_match_exactly_or_by_star_prefix() {
        let r = PolicyRule::urls(&["get"], &["/metrics", "/logs/*"]);
        let u = user("u", &[]);
        assert!(r.allows(&path(&u, "/metrics")));
        assert!(!r.allows(&path(&u, "/metrics/x")));
        assert!(r.allows(&path(&u, "/logs/a/b")));
        assert!(!r.allows(&res(&u, "get", "", "", "metrics", "", "")));
    }

    #[test]
    fn service_account_subjects_match_their_user_name() {
        let p = policy(&[
            json!({"kind": "RoleBinding", "metadata": {"namespace": "a", "name": "b"},
            "roleRef": {"kind": "ClusterRole", "name": "view"},
            "subjects": [{"kind": "ServiceAccount", "name": "robot", "namespace": "a"}]}),
        ]);
        let sa = user("system:serviceaccount:a:robot", &[]);
        assert!(p.authorize(&res(&sa, "list", "a", "", "pods", "", "")));
        assert!(!p.authorize(&res(&user("robot", &[]), "list", "a", "", "pods", "", "")));
    }

    #[test]
    fn bootstrappers_get_no_csr_rights_unless_bound_as_kube_apiserver_gives_none() {
        let p = Policy::with_defaults();
        let b = user(
            "system:bootstrap:abcdef",
            &["system:bootstrappers", "system:authenticated"],
        );
        let csrs = |verb| {
            res(
                &b,
                verb,
                "",
                "certificates.k8s.io",
                "certificatesigningrequests",
                "",
                "",
            )
        };
        assert!(!p.authorize(&csrs("create")));
        assert!(!p.authorize(&csrs("list")));
        assert!(!p.authorize(&res(&b, "list", "default", "", "secrets", "", "")));
    }

    #[test]
    fn forbidden_messages_are_worded_as_kube_apiserver_words_them() {
        let bob = user("bob", &[]);
        assert_eq!(
            res(&bob, "get", "default", "", "configmaps", "", "cm").forbidden_message(),
            r#"configmaps "cm" is forbidden: User "bob" cannot get resource "configmaps" in API group "" in the namespace "default""#
        );
        assert_eq!(
            res(&bob, "list", "", "apps", "deployments", "", "").forbidden_message(),
            r#"deployments.apps is forbidden: User "bob" cannot list resource "deployments" in API group "apps" at the cluster scope"#
        );
        assert_eq!(
            res(
                &bob,
                "update",
                "",
                "certificates.k8s.io",
                "certificatesigningrequests",
                "approval",
                "c"
            )
            .denial(),
            r#"User "bob" cannot update resource "certificatesigningrequests/approval" in API group "certificates.k8s.io" at the cluster scope"#
        );
        assert_eq!(
            path(&bob, "/metrics").forbidden_message(),
            r#"forbidden: User "bob" cannot get path "/metrics""#
        );
    }

    #[test]
    fn roles_granting_more_than_the_requester_holds_are_escalation() {
        let p = policy(&[role_binding("a", "ClusterRole", "edit", "bob")]);
        let bob = user("bob", &[]);
        let within = [PolicyRule::resource(&["get"], &[""], &["configmaps"])];
        assert_eq!(
            p.check_role_escalation(&bob, "a", "roles", "r", &within),
            Ok(())
        );
        let beyond = [PolicyRule::resource(&["get"], &[""], &["nodes"])];
        let err = p
            .check_role_escalation(&bob, "a", "roles", "r", &beyond)
            .unwrap_err();
        assert_eq!(err.missing, beyond.to_vec());
        assert_eq!(
            err.to_string(),
            "user \"bob\" (groups=[]) is attempting to grant RBAC permissions not currently held:\n{APIGroups:[\"\"], Resources:[\"nodes\"], Verbs:[\"get\"]}"
        );
        let wildcard = [PolicyRule::resource(&["*"], &[""], &["configmaps"])];
        assert!(
            p.check_role_escalation(&bob, "a", "roles", "r", &wildcard)
                .is_err()
        );
        assert!(
            p.check_role_escalation(&bob, "", "clusterroles", "r", &within)
                .is_err()
        );
    }

    #[test]
    fn escalate_verb_allows_granting_anything() {
        let p = policy(&[
            cluster_role(
                "escalator",
                json!([{"verbs": ["escalate"], "apiGroups": ["rbac.authorization.k8s.io"], "resources": ["clusterroles"]}]),
            ),
            cluster_binding("escalator", json!({"kind": "User", "name": "bob"})),
        ]);
        let rules = [PolicyRule::resource(&["*"], &["*"], &["*"])];
        assert_eq!(
            p.check_role_escalation(&user("bob", &[]), "", "clusterroles", "r", &rules),
            Ok(())
        );
    }

    #[test]
    fn bindings_need_the_roles_permissions_or_bind() {
        let p = policy(&[
            role_binding("a", "ClusterRole", "view", "bob"),
            cluster_role(
                "binder",
                json!([{"verbs": ["bind"], "apiGroups": ["rbac.authorization.k8s.io"], "resources": ["clusterroles"], "resourceNames": ["admin"]}]),
            ),
            cluster_binding("binder", json!({"kind": "User", "name": "carol"})),
        ]);
        let b = |role: &str| Binding {
            name: "b".into(),
            namespace: "a".into(),
            role_kind: "ClusterRole".into(),
            role_name: role.into(),
            subjects: vec![Subject::User("x".into())],
        };
        let bob = user("bob", &[]);
        assert_eq!(p.check_binding_escalation(&bob, &b("view")), Ok(()));
        assert!(p.check_binding_escalation(&bob, &b("edit")).is_err());
        let carol = user("carol", &[]);
        assert_eq!(p.check_binding_escalation(&carol, &b("admin")), Ok(()));
        assert!(
            p.check_binding_escalation(&carol, &b("cluster-admin"))
                .is_err()
        );
        assert_eq!(
            p.check_binding_escalation(&user("root", &[SYSTEM_MASTERS]), &b("cluster-admin")),
            Ok(())
        );
    }
}
